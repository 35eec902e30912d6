#include "engine/nn/sequential.h"

namespace towers::engine {

std::string Sequential::describe() const
{
    return "sequence of " + std::to_string(m_layers.size()) + " layers";
}

Shape Sequential::outputShape(const Shape& input) const
{
    Shape s = input;
    for (const auto& l : m_layers) s = l->outputShape(s);
    return s;
}

double Sequential::forwardFlops(const Shape& input) const
{
    double f = 0;
    Shape s = input;
    for (const auto& l : m_layers) {
        f += l->forwardFlops(s);
        s = l->outputShape(s);
    }
    return f;
}

void Sequential::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    if (m_layers.empty()) {
        Tensor::ensure(y, x.shape(), x.dtype(), x.device());
        y.copyFrom(x);
        return;
    }
    const std::size_t n = m_layers.size();
    for (std::size_t i = 0; i < n; ++i) {
        const Tensor& in = i == 0 ? x : m_acts[i - 1];
        Tensor& out = i + 1 == n ? y : m_acts[i];
        if (ctx.profiler) ctx.profiler->begin(ctx, *m_layers[i], false);
        m_layers[i]->forward(ctx, in, out);
        if (ctx.profiler) ctx.profiler->end(ctx, *m_layers[i], false);
    }
}

void Sequential::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                          Tensor* dx)
{
    if (m_layers.empty()) {
        if (dx) {
            Tensor::ensure(*dx, dy.shape(), dy.dtype(), dy.device());
            dx->copyFrom(dy);
        }
        return;
    }
    const std::size_t n = m_layers.size();
    for (std::size_t i = n; i-- > 0;) {
        const Tensor& in = i == 0 ? x : m_acts[i - 1];
        const Tensor& out = i + 1 == n ? y : m_acts[i];
        const Tensor& g = i + 1 == n ? dy : m_grads[i];
        Tensor* gin = i == 0 ? dx : &m_grads[i - 1];
        if (ctx.profiler) ctx.profiler->begin(ctx, *m_layers[i], true);
        m_layers[i]->backward(ctx, in, out, g, gin);
        if (ctx.profiler) ctx.profiler->end(ctx, *m_layers[i], true);
        if (ctx.backwardDone) (*ctx.backwardDone)(*m_layers[i]);
    }
}

void Sequential::collectParameters(std::vector<Parameter*>& out)
{
    for (auto& l : m_layers) l->collectParameters(out);
}

void Sequential::initialize(Rng& rng)
{
    for (auto& l : m_layers) l->initialize(rng);
}

void Sequential::visit(const std::function<void(Layer&)>& f)
{
    f(*this);
    for (auto& l : m_layers) l->visit(f);
}

Residual::Residual(std::string name, std::unique_ptr<Sequential> body)
    : Layer(std::move(name)), m_body(std::move(body))
{
    if (!m_body) throw InvalidArgument("residual '" + this->name() + "' needs a body");
}

std::string Residual::describe() const
{
    return "residual: x + (" + std::to_string(m_body->layers().size()) + " layers)(x)";
}

Shape Residual::outputShape(const Shape& input) const
{
    const Shape out = m_body->outputShape(input);
    if (out != input)
        throw ShapeError("residual '" + name() + "': body maps " + input.str() + " to " +
                         out.str() + ", the shapes must match");
    return out;
}

double Residual::forwardFlops(const Shape& input) const
{
    return m_body->forwardFlops(input);
}

void Residual::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    m_body->forward(ctx, x, m_bodyOut);
    ctx.ops.add(x, m_bodyOut, y);
}

void Residual::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        Tensor* dx)
{
    (void)y;
    // The body needs every parameter gradient even when the caller needs no dx.
    m_body->backward(ctx, x, m_bodyOut, dy, &m_bodyDx);
    if (dx) ctx.ops.add(dy, m_bodyDx, *dx);
}

void Residual::collectParameters(std::vector<Parameter*>& out)
{
    m_body->collectParameters(out);
}
void Residual::initialize(Rng& rng)
{
    m_body->initialize(rng);
}

void Residual::visit(const std::function<void(Layer&)>& f)
{
    f(*this);
    m_body->visit(f);
}

} // namespace towers::engine
