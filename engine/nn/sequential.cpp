#include "engine/nn/sequential.h"

#include <algorithm>

#include "engine/nn/batch_norm.h"
#include "engine/nn/conv2d.h"

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
        ctx.ops.copy(x, y); // on the context's stream, as its layers' ops
        return;
    }
    if (ctx.chunkCacheBytes <= 0 || ctx.training || !x.device().isHost() || x.rank() == 0)
        return run(ctx, 0, m_layers.size(), x, y);
    if (x.shape() != m_chunkedFor || ctx.chunkCacheBytes != m_chunkedCache) {
        m_chunking = chunking(x.shape(), ctx.chunkCacheBytes);
        m_chunkedFor = x.shape();
        m_chunkedCache = ctx.chunkCacheBytes;
    }
    // The layers inside (a residual's body) run on what this one gives them, unchunked.
    ExecContext inner = ctx;
    inner.chunkCacheBytes = 0;
    if (m_chunking.layers == 0) return run(inner, 0, m_layers.size(), x, y);
    forwardInChunks(inner, m_chunking, x, y);
}

void Sequential::forwardInChunks(ExecContext& ctx, const Chunking& c, const Tensor& x, Tensor& y)
{
    const std::int64_t n = x.dim(0);
    const bool whole = c.layers == m_layers.size();
    Tensor& joined = whole ? y : m_acts[c.layers - 1];
    for (std::int64_t b = 0; b < n; b += c.images) {
        const std::int64_t e = std::min(n, b + c.images);
        run(ctx, 0, c.layers, x.slice(b, e), m_chunkOut);
        if (b == 0)
            Tensor::ensure(joined, m_chunkOut.shape().withBatch(n), m_chunkOut.dtype(),
                           m_chunkOut.device());
        joined.slice(b, e).copyFrom(m_chunkOut);
    }
    if (!whole) run(ctx, c.layers, m_layers.size(), joined, y);
}

void Sequential::run(ExecContext& ctx, std::size_t begin, std::size_t end, const Tensor& x,
                     Tensor& y)
{
    for (std::size_t i = begin; i < end; ++i) {
        const Tensor* in = i == begin ? &x : &m_acts[i - 1];
        if (in->dtype() == DType::BFloat16 && !m_layers[i]->takesBf16()) {
            ctx.ops.convertFloat(*in, DType::Float32, m_converted[i]);
            in = &m_converted[i];
        }
        if (ctx.foldBatchNorms && !ctx.training && i + 1 < end) {
            // A convolution and the batch norm after it as one convolution: the batch norm's
            // output is the pair's (the profiler sees the pair's time as the convolution's).
            if (const BatchNorm* bn = foldsAfter(i)) {
                auto* conv = static_cast<Conv2d*>(m_layers[i].get());
                Tensor& out = i + 2 == end ? y : m_acts[i + 1];
                if (ctx.profiler) ctx.profiler->begin(ctx, *conv, false);
                conv->forwardFolding(ctx, *in, *bn, out);
                if (ctx.profiler) {
                    ctx.profiler->end(ctx, *conv, false);
                    ctx.profiler->folded(ctx, *bn, *conv);
                }
                ++i;
                continue;
            }
        }
        Tensor& out = i + 1 == end ? y : m_acts[i];
        if (ctx.profiler) ctx.profiler->begin(ctx, *m_layers[i], false);
        m_layers[i]->forward(ctx, *in, out);
        if (ctx.profiler) ctx.profiler->end(ctx, *m_layers[i], false);
    }
}

BatchNorm* Sequential::foldsAfter(std::size_t i)
{
    if (i + 1 >= m_layers.size()) return nullptr;
    const auto* conv = dynamic_cast<const Conv2d*>(m_layers[i].get());
    auto* bn = dynamic_cast<BatchNorm*>(m_layers[i + 1].get());
    return conv && bn && conv->canFold(*bn) ? bn : nullptr;
}

Sequential::Chunking Sequential::chunking(const Shape& input, std::int64_t cacheBytes)
{
    // A chunk reads a layer's weights again, and folds a batch norm into them or transforms them
    // (a Winograd convolution's 36 / 9 as many): a few passes over them.
    constexpr std::int64_t kWeightPasses = 8;
    // Bytes of an image element: float32's. Bfloat16 activations take half, but chunks of twice
    // the images measured no faster (cifar10-resnet, fashion-wide, 2 Zen 4 cores).
    constexpr std::int64_t kElement = 4;
    const std::int64_t n = input.rank() ? input[0] : 0;
    Chunking best;
    if (cacheBytes <= 0 || n <= kMinChunk) return best;
    Shape shape = input;
    std::int64_t widest = 0;    // input and output bytes per image of the widest layer so far
    std::int64_t made = 0;      // output bytes per image of the layers so far
    std::int64_t bestSaves = 0; // bytes per image that best's end saves
    for (std::size_t i = 0; i < m_layers.size(); ++i) {
        Layer& layer = *m_layers[i];
        if (dynamic_cast<Sequential*>(&layer) || dynamic_cast<Residual*>(&layer) ||
            dynamic_cast<Concat*>(&layer))
            break;
        // A convolution and the batch norm folded into it are one layer: the convolution's
        // output is not made.
        BatchNorm* bn = foldsAfter(i);
        const Shape out = layer.outputShape(shape);
        const std::int64_t perImage = (shape.numel() + out.numel()) / n * kElement;
        widest = std::max(widest, perImage);
        const std::int64_t images = cacheBytes / std::max<std::int64_t>(widest, 1);
        if (images < kMinChunk) break;
        std::vector<Parameter*> params;
        layer.collectParameters(params);
        if (bn) bn->collectParameters(params);
        std::int64_t weights = 0;
        for (const Parameter* p : params) weights += static_cast<std::int64_t>(p->value.bytes());
        if (weights * kWeightPasses > images * perImage) break;
        shape = out;
        if (bn) ++i;
        // Ending here keeps the images of the layers before in the cache and copies this
        // layer's output (read in the cache, written to memory): what that saves.
        const std::int64_t outBytes = out.numel() / n * kElement;
        made += outBytes;
        const std::int64_t saves = made - 3 * outBytes;
        if (saves > 0 && saves >= bestSaves) {
            bestSaves = saves;
            best = {i + 1, images};
        }
    }
    // Two chunks of a batch that barely misses the cache save less than the second round of
    // calls costs.
    if (best.layers == 0 || n <= 2 * best.images) return {};
    const std::int64_t chunks = (n + best.images - 1) / best.images;
    best.images = (n + chunks - 1) / chunks;
    return best;
}

void Sequential::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                          Tensor* dx)
{
    if (m_layers.empty()) {
        if (dx) ctx.ops.copy(dy, *dx);
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
    if (x.dtype() == m_bodyOut.dtype()) return ctx.ops.add(x, m_bodyOut, y);
    // Evaluation's bfloat16 activations on one side only (a body that ends in a layer writing
    // float32): the sum in float32.
    const bool xIsBf16 = x.dtype() == DType::BFloat16;
    ctx.ops.convertFloat(xIsBf16 ? x : m_bodyOut, DType::Float32, m_converted);
    ctx.ops.add(xIsBf16 ? m_converted : x, xIsBf16 ? m_bodyOut : m_converted, y);
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

Concat::Concat(std::string name, std::vector<std::unique_ptr<Sequential>> branches)
    : Layer(std::move(name)), m_branches(std::move(branches))
{
    if (m_branches.empty())
        throw InvalidArgument("concat '" + this->name() + "' needs at least one branch");
    for (const auto& b : m_branches)
        if (!b) throw InvalidArgument("concat '" + this->name() + "': a branch is missing");
    m_outs.resize(m_branches.size());
    m_dys.resize(m_branches.size());
    m_converted.resize(m_branches.size());
}

std::string Concat::describe() const
{
    std::string sizes;
    for (const auto& b : m_branches)
        sizes += (sizes.empty() ? "" : " | ") + std::to_string(b->layers().size());
    return "concat of " + std::to_string(m_branches.size()) + " branches (" + sizes + " layers)";
}

std::vector<Shape> Concat::branchShapes(const Shape& input) const
{
    if (input.rank() != 4)
        throw ShapeError("concat '" + name() + "' expects NHWC input, got " + input.str());
    std::vector<Shape> shapes;
    for (std::size_t i = 0; i < m_branches.size(); ++i) {
        const Shape s = m_branches[i]->outputShape(input);
        if (s.rank() != 4 || s[0] != input[0] || s[1] != input[1] || s[2] != input[2])
            throw ShapeError("concat '" + name() + "': branch " + std::to_string(i + 1) + " maps " +
                             input.str() + " to " + s.str() +
                             ", and every branch must keep the height and width");
        shapes.push_back(s);
    }
    return shapes;
}

Shape Concat::outputShape(const Shape& input) const
{
    std::int64_t channels = 0;
    for (const Shape& s : branchShapes(input)) channels += s[3];
    return {input[0], input[1], input[2], channels};
}

double Concat::forwardFlops(const Shape& input) const
{
    double f = 0;
    for (const auto& b : m_branches) f += b->forwardFlops(input);
    return f;
}

const Tensor& Concat::part(std::size_t i, const Tensor& x) const
{
    return m_branches[i]->layers().empty() ? x : m_outs[i];
}

void Concat::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    // y's channels are the parts'; copyChannels refuses a part of another height or width.
    std::int64_t channels = 0;
    std::vector<const Tensor*> parts;
    for (std::size_t i = 0; i < m_branches.size(); ++i) {
        if (!m_branches[i]->layers().empty()) m_branches[i]->forward(ctx, x, m_outs[i]);
        parts.push_back(&part(i, x));
        if (parts.back()->dtype() == DType::BFloat16) { // evaluation's, and y is x's float32
            ctx.ops.convertFloat(*parts.back(), DType::Float32, m_converted[i]);
            parts.back() = &m_converted[i];
        }
        channels += parts.back()->dim(3);
    }
    Tensor::ensure(y, {x.dim(0), x.dim(1), x.dim(2), channels}, x.dtype(), x.device());
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < m_branches.size(); ++i) {
        const Tensor& p = *parts[i];
        ctx.ops.copyChannels(p, 0, p.dim(3), y, offset);
        offset += p.dim(3);
    }
}

void Concat::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                      Tensor* dx)
{
    (void)y;
    std::vector<std::int64_t> offsets; // each branch's first channel in y
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < m_branches.size(); ++i) {
        offsets.push_back(offset);
        offset += part(i, x).dim(3);
    }
    // dx is the sum of the branches' dx: the first one computed is written into it, the others
    // are added.
    bool dxHeld = false;
    for (std::size_t i = m_branches.size(); i-- > 0;) {
        Sequential& branch = *m_branches[i];
        const bool passThrough = branch.layers().empty();
        const Shape shape = part(i, x).shape();
        if (passThrough && !dx) continue;
        if (passThrough && !dxHeld) { // its dx is its part of dy
            Tensor::ensure(*dx, shape, dy.dtype(), dy.device());
            ctx.ops.copyChannels(dy, offsets[i], shape[3], *dx, 0);
            dxHeld = true;
            continue;
        }
        Tensor::ensure(m_dys[i], shape, dy.dtype(), dy.device());
        ctx.ops.copyChannels(dy, offsets[i], shape[3], m_dys[i], 0);
        if (passThrough) {
            ctx.ops.add(*dx, m_dys[i], *dx);
        } else if (dx && !dxHeld) {
            branch.backward(ctx, x, m_outs[i], m_dys[i], dx);
            dxHeld = true;
        } else {
            // A branch's parameters get their gradients even when the caller needs no dx.
            branch.backward(ctx, x, m_outs[i], m_dys[i], dx ? &m_dx : nullptr);
            if (dx) ctx.ops.add(*dx, m_dx, *dx);
        }
    }
}

void Concat::collectParameters(std::vector<Parameter*>& out)
{
    for (auto& b : m_branches) b->collectParameters(out);
}

void Concat::initialize(Rng& rng)
{
    for (auto& b : m_branches) b->initialize(rng);
}

void Concat::visit(const std::function<void(Layer&)>& f)
{
    f(*this);
    for (auto& b : m_branches) b->visit(f);
}

} // namespace towers::engine
