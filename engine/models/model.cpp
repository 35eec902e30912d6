#include "engine/models/model.h"

#include <cstring>

#include <cmath>

#include "engine/nn/dropout.h"

namespace towers::engine {

Model::Model(std::string name, Shape inputShape, int numClasses, std::unique_ptr<Sequential> net)
    : m_name(std::move(name)), m_inputShape(std::move(inputShape)), m_numClasses(numClasses),
      m_net(std::move(net))
{
    if (m_inputShape.rank() != 3 || m_inputShape.numel() == 0)
        throw ShapeError("model '" + m_name + "': input shape must be [H, W, C], got " +
                         m_inputShape.str());
    if (numClasses < 2) throw InvalidArgument("model '" + m_name + "' needs at least two classes");
    m_net->collectParameters(m_params);
    std::unordered_map<const Parameter*, std::size_t> index;
    for (std::size_t i = 0; i < m_params.size(); ++i) index[m_params[i]] = i;
    m_net->visit([&](Layer& layer) {
        std::vector<Parameter*> ps;
        layer.collectParameters(ps);
        auto& mine = m_paramsOfLayer[&layer];
        for (auto* p : ps) mine.push_back(index.at(p));
    });
    const Shape out = m_net->outputShape({1, m_inputShape[0], m_inputShape[1], m_inputShape[2]});
    if (out != Shape{1, numClasses})
        throw ShapeError("model '" + m_name + "' produces " + out.str() +
                         " per example, expected [1, " + std::to_string(numClasses) + "]");
}

std::vector<Parameter*> Model::classifierParameters() const
{
    const auto& layers = m_net->layers();
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
        const auto found = m_paramsOfLayer.find(it->get());
        if (found == m_paramsOfLayer.end() || found->second.empty()) continue;
        std::vector<Parameter*> out;
        for (const std::size_t i : found->second) out.push_back(m_params[i]);
        return out;
    }
    return {};
}

Parameter& Model::parameter(const std::string& name) const
{
    for (auto* p : m_params)
        if (p->name == name) return *p;
    throw UnknownName("model '" + m_name + "' has no parameter '" + name + "'");
}

std::int64_t Model::parameterCount() const
{
    std::int64_t n = 0;
    for (auto* p : m_params)
        if (p->trainable) n += p->value.numel();
    return n;
}

namespace {

std::vector<LayerRow> rowsOf(const Sequential& layers, Shape s);

std::int64_t trainableElements(Layer& layer)
{
    std::vector<Parameter*> ps;
    layer.collectParameters(ps);
    std::int64_t n = 0;
    for (auto* p : ps)
        if (p->trainable) n += p->value.numel();
    return n;
}

// The row of `layer` taking `in`, with its block's layers or branches under it.
LayerRow rowOf(Layer& layer, const Shape& in)
{
    LayerRow row{layer.name(),
                 layer.kind(),
                 layer.describe(),
                 layer.outputShape(in),
                 trainableElements(layer),
                 layer.forwardFlops(in),
                 {}};
    if (const auto* res = dynamic_cast<const Residual*>(&layer)) {
        row.children = rowsOf(res->body(), in);
    } else if (const auto* cat = dynamic_cast<const Concat*>(&layer)) {
        int n = 0;
        for (const auto& branch : cat->branches()) {
            const std::size_t size = branch->layers().size();
            row.children.push_back({"branch " + std::to_string(++n), "branch",
                                    size ? std::to_string(size) + " layer" + (size > 1 ? "s" : "")
                                         : std::string("the input itself"),
                                    branch->outputShape(in), trainableElements(*branch),
                                    branch->forwardFlops(in), rowsOf(*branch, in)});
        }
    }
    return row;
}

std::vector<LayerRow> rowsOf(const Sequential& layers, Shape s)
{
    std::vector<LayerRow> rows;
    for (const auto& layer : layers.layers()) {
        rows.push_back(rowOf(*layer, s));
        s = rows.back().outputShape;
    }
    return rows;
}

} // namespace

std::vector<ShownLayerRow> shownLayerRows(const std::vector<LayerRow>& rows)
{
    std::vector<ShownLayerRow> out;
    const std::function<void(const std::vector<LayerRow>&, int)> add =
        [&](const std::vector<LayerRow>& list, int depth) {
            for (const auto& r : list) {
                out.push_back({&r, depth});
                add(r.children, depth + 1);
            }
        };
    add(rows, 0);
    return out;
}

std::vector<LayerRow> Model::layerTable() const
{
    return rowsOf(*m_net, Shape{1, m_inputShape[0], m_inputShape[1], m_inputShape[2]});
}

double Model::trainingFlopsPerExample() const
{
    double total = 0;
    bool first = true;
    for (const auto& row : layerTable()) {
        if (row.forwardFlops == 0) continue;
        total += (first ? 2.0 : 3.0) * row.forwardFlops;
        first = false;
    }
    return total;
}

double Model::inferenceFlopsPerExample() const
{
    double total = 0;
    for (const auto& row : layerTable()) total += row.forwardFlops;
    return total;
}

void Model::initialize(std::uint64_t seed)
{
    Rng rng(seed);
    m_net->initialize(rng);
}

void Model::convertTo(DType dtype)
{
    if (dtype != DType::Float32 && dtype != DType::Float64)
        throw Unsupported("models run in float32 or float64, not " + std::string(dtypeName(dtype)));
    for (auto* p : m_params) {
        if (p->value.dtype() == DType::Float32 || p->value.dtype() == DType::Float64) {
            p->value = p->value.to(dtype);
            p->grad = Tensor();
        }
    }
    m_dtype = dtype;
}

void Model::moveTo(const Device& device)
{
    for (auto* p : m_params) {
        if (p->value.dtype() != DType::Float32 && p->value.dtype() != DType::Float64) continue;
        if (p->value.device() != device) p->value = p->value.copyTo(device);
        p->grad = Tensor();
    }
    m_logits = m_probs = m_dlogits = m_netOutput = Tensor();
    m_device = device;
}

void Model::overrideWeightDecay(double coefficient)
{
    if (std::isnan(coefficient) || std::isinf(coefficient))
        throw InvalidArgument("weight decay must be a finite number, got " +
                              std::to_string(coefficient));
    if (coefficient < 0) return;
    m_net->visit([&](Layer& layer) {
        if (layer.kind() != "conv2d" && layer.kind() != "linear") return;
        std::vector<Parameter*> ps;
        layer.collectParameters(ps);
        for (auto* p : ps)
            if (p->trainable && p->name == layer.name() + ".weight") p->weightDecay = coefficient;
    });
}

void Model::setLabelSmoothing(double smoothing)
{
    if (!(smoothing >= 0 && smoothing < 1))
        throw InvalidArgument("label smoothing must be in [0, 1), got " +
                              std::to_string(smoothing));
    m_labelSmoothing = smoothing;
}

void Model::setDropoutEnabled(bool enabled)
{
    m_net->visit([&](Layer& layer) {
        if (auto* d = dynamic_cast<Dropout*>(&layer)) d->setEnabled(enabled);
    });
}

const Tensor& Model::forward(ExecContext& ctx, const Tensor& images)
{
    const Shape& s = images.shape();
    if (s.rank() != 4 || s[0] <= 0 || s[1] != m_inputShape[0] || s[2] != m_inputShape[1] ||
        s[3] != m_inputShape[2])
        throw ShapeError("model '" + m_name + "' expects images [N, " +
                         std::to_string(m_inputShape[0]) + ", " + std::to_string(m_inputShape[1]) +
                         ", " + std::to_string(m_inputShape[2]) + "] (NHWC), got " + s.str());
    requireDType(images, m_dtype, "model input");
    if (images.device() != m_device)
        throw InvalidArgument("model '" + m_name + "' is on " + m_device.str() +
                              ", its input images on " + images.device().str());
    m_images = images;
    m_net->forward(ctx, images, m_netOutput);
    if (m_netOutput.dtype() == DType::BFloat16) // evaluation's activations, up to the last
        ctx.ops.convertFloat(m_netOutput, DType::Float32, m_logits);
    else
        m_logits = m_netOutput;
    return m_logits;
}

const Tensor& Model::layerOutput(std::size_t i) const
{
    const std::size_t n = m_net->layers().size();
    if (i >= n)
        throw InvalidArgument("model '" + m_name + "' has " + std::to_string(n) +
                              " layers, no layer " + std::to_string(i));
    return i + 1 == n ? m_logits : m_net->output(i);
}

LossValue Model::loss(ExecContext& ctx, const Tensor& labels)
{
    computeLoss(ctx, labels);
    return readLoss();
}

void Model::computeLoss(ExecContext& ctx, const Tensor& labels)
{
    if (m_logits.empty()) throw InvalidArgument("model '" + m_name + "': loss() before forward()");
    requireShape(labels, Shape{m_logits.dim(0)}, "labels");
    requireDType(labels, DType::Int32, "labels");
    if (labels.device() != m_device)
        throw InvalidArgument("model '" + m_name + "' is on " + m_device.str() +
                              ", its labels on " + labels.device().str());
    m_labels = labels;
    ctx.ops.softmaxCrossEntropyForward(m_logits, labels, m_labelSmoothing, m_probs, m_crossEntropy);
    if (m_zero.empty()) { // page-locked, so that a GPU's copy of it does not wait
        m_zero = Tensor::pinned({1}, DType::Float64);
        std::memset(m_zero.raw(), 0, m_zero.bytes());
    }
    ctx.ops.upload(m_zero, m_weightDecay);
    for (auto* p : m_params)
        if (p->trainable && p->weightDecay > 0 && !m_decayInOptimizer)
            ctx.ops.sumSquares(p->value, p->weightDecay * 0.5, m_weightDecay);
}

LossValue Model::readLoss() const
{
    if (m_crossEntropy.empty())
        throw InvalidArgument("model '" + m_name + "': readLoss() before loss");
    LossValue v;
    v.crossEntropy = m_crossEntropy.onHost().at(0);
    v.weightDecay = m_weightDecay.onHost().at(0);
    return v;
}

void Model::copyLoss(Ops& ops, LossCopy& to) const
{
    if (m_crossEntropy.empty())
        throw InvalidArgument("model '" + m_name + "': copyLoss() before loss");
    for (Tensor* t : {&to.crossEntropy, &to.weightDecay})
        if (t->empty()) *t = Tensor::pinned({1}, DType::Float64);
    ops.download(m_crossEntropy, to.crossEntropy);
    ops.download(m_weightDecay, to.weightDecay);
}

LossValue LossCopy::value() const
{
    LossValue v;
    v.crossEntropy = crossEntropy.at(0);
    v.weightDecay = weightDecay.at(0);
    return v;
}

void Model::backward(ExecContext& ctx, const std::function<void(Parameter&)>& ready)
{
    backwardPart(ctx, 0, 1, ready);
}

void Model::backwardPart(ExecContext& ctx, int part, int parts,
                         const std::function<void(Parameter&)>& ready)
{
    if (m_probs.empty() || m_labels.empty())
        throw InvalidArgument("model '" + m_name + "': backward() before loss()");
    if (parts < 1 || part < 0 || part >= parts)
        throw InvalidArgument("model '" + m_name + "': backward of part " + std::to_string(part) +
                              " of " + std::to_string(parts) + " parts");
    const bool last = part == parts - 1;
    ctx.ops.softmaxCrossEntropyBackward(
        m_probs, m_labels, m_labelSmoothing,
        1.0 / (static_cast<double>(m_logits.dim(0)) * static_cast<double>(parts)), m_dlogits);
    if (parts > 1) m_gradSums.resize(m_params.size());
    // Each parameter is finished (the earlier parts' sum and its weight decay added) right after
    // its layer's backward, and reported then; the same ops as after the whole backward, so
    // bitwise the same gradients. A part before the last only adds its gradients to the sum.
    std::vector<char> done(m_params.size(), 0);
    auto finish = [&](std::size_t i) {
        if (done[i]) return;
        done[i] = 1;
        Parameter& p = *m_params[i];
        if (!last) {
            if (!p.trainable) return;
            if (part == 0)
                ctx.ops.copy(p.grad, m_gradSums[i]);
            else
                ctx.ops.axpy(1.0, p.grad, m_gradSums[i]);
            return;
        }
        if (parts > 1 && p.trainable) ctx.ops.axpy(1.0, m_gradSums[i], p.grad);
        if (p.trainable && p.weightDecay > 0 && !m_decayInOptimizer)
            ctx.ops.axpy(p.weightDecay, p.value, p.grad);
        if (ready) ready(p);
    };
    const std::function<void(Layer&)> layerDone = [&](Layer& layer) {
        const auto it = m_paramsOfLayer.find(&layer);
        if (it != m_paramsOfLayer.end())
            for (std::size_t i : it->second) finish(i);
    };
    const auto* outer = ctx.backwardDone;
    ctx.backwardDone = &layerDone;
    try {
        m_net->backward(ctx, m_images, m_logits, m_dlogits, nullptr);
    } catch (...) {
        ctx.backwardDone = outer;
        throw;
    }
    ctx.backwardDone = outer;
    for (std::size_t i = m_params.size(); i-- > 0;) finish(i); // any a layer did not report
}

} // namespace towers::engine
