// A model's layers as an ONNX graph: each leaf layer's inference forward runs through
// RecordingOps, whose calls become ONNX nodes; then batch norms are folded into the convolutions
// before them.
//
// Layouts: the engine's image tensors are NHWC, ONNX's Conv, MaxPool, AveragePool, LRN and
// BatchNormalization want NCHW. Each traced value remembers whether its ONNX tensor is the
// engine's tensor as it is or, for a 4-D tensor, its NCHW permutation; transposes are inserted
// only where an op needs the other form (the NHWC input's first one, none where the engine's
// Flatten turns NHWC into C, H, W order, which is what the NCHW graph already holds).
#include "engine/export/onnx_graph.h"

#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "engine/errors.h"
#include "engine/nn/sequential.h"
#include "engine/ops/batch_norm_fold.h"

namespace towers::engine::onnx_graph {

namespace {

using ::onnx::AttributeProto;
using ::onnx::GraphProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

// A value of the graph as the engine sees it.
struct Value
{
    std::string name;  // the ONNX value
    Shape shape;       // the engine's tensor for a batch of 1
    bool nchw = false; // a 4-D engine tensor whose ONNX value is its NCHW permutation
};

struct Initializer
{
    std::vector<std::int64_t> dims;
    std::vector<float> data;
};

void setInts(NodeProto& n, const char* name, const std::vector<std::int64_t>& values)
{
    AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::INTS);
    for (std::int64_t v : values) a->add_ints(v);
}

void setInt(NodeProto& n, const char* name, std::int64_t value)
{
    AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::INT);
    a->set_i(value);
}

void setFloat(NodeProto& n, const char* name, double value)
{
    AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::FLOAT);
    a->set_f(static_cast<float>(value));
}

float floatAttribute(const NodeProto& n, const char* name, float fallback)
{
    for (const AttributeProto& a : n.attribute())
        if (a.name() == name) return a.f();
    return fallback;
}

class RecordingOps;

class GraphBuilder
{
public:
    GraphBuilder(Model& model, GraphProto& graph) : m_graph(graph)
    {
        for (const Parameter* p : model.parameters())
            if (!p->value.empty()) m_parameterNames[p->value.raw()] = p->name;
    }

    Value input(const Shape& hwc, OnnxLayout layout)
    {
        m_names.insert({"input", "logits", "probabilities"});
        const Shape engine{1, hwc[0], hwc[1], hwc[2]};
        // An NCHW input is the engine's NHWC tensor, permuted.
        return {"input", engine, layout == OnnxLayout::Nchw};
    }

    Value emit(Layer& layer, const Value& in);
    GraphStats finish(const Value& logits, std::int64_t classes);

    // --- what RecordingOps calls, one per op ---
    void conv(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
              Activation act);
    void maxPool(const Pool2dDesc& d, const Tensor& x, Tensor& y);
    void avgPool(const Pool2dDesc& d, const Tensor& x, Tensor& y);
    void lrn(const LrnDesc& d, const Tensor& x, Tensor& y);
    void linear(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, Activation act);
    void relu(const Tensor& x, Tensor& y);
    void add(const Tensor& a, const Tensor& b, Tensor& y);
    void batchNorm(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                   const Tensor& mean, const Tensor& var, Tensor& y);
    void toNchw(const Tensor& x, Tensor& y);
    void toNhwc(const Tensor& x, Tensor& y);
    [[noreturn]] void refuse(const char* op) const
    {
        throw Unsupported("layer '" + m_layer + "' calls " + op +
                          " in inference, which has no place in an exported model");
    }

private:
    std::string uniqueName(const std::string& base)
    {
        std::string name = base;
        for (int i = 2; !m_names.insert(name).second; ++i) name = base + "_" + std::to_string(i);
        return name;
    }
    // A node named "<layer>/<op>" whose one output has the same name.
    NodeProto& node(const char* op, const std::vector<std::string>& inputs, std::string* output)
    {
        NodeProto* n = m_graph.add_node();
        const std::string name =
            uniqueName((m_layer.empty() ? std::string("graph") : m_layer) + "/" + op);
        n->set_op_type(op);
        n->set_name(name);
        for (const auto& i : inputs) n->add_input(i);
        n->add_output(name);
        *output = name;
        return *n;
    }
    std::string initializer(const std::string& base, Initializer init)
    {
        const std::string name = uniqueName(base);
        m_initOrder.push_back(name);
        m_inits[name] = std::move(init);
        return name;
    }
    // The initializer of a weight tensor, named after its parameter.
    std::string parameter(const Tensor& t)
    {
        const void* key = t.raw();
        if (auto it = m_parameterInits.find(key); it != m_parameterInits.end()) return it->second;
        if (t.dtype() != DType::Float32)
            throw Unsupported("layer '" + m_layer +
                              "': only float32 weights can be exported, got " + t.describe());
        const Tensor host = t.onHost();
        Initializer init;
        init.dims = host.shape().dims();
        init.data.assign(host.data<float>(), host.data<float>() + host.numel());
        const auto named = m_parameterNames.find(key);
        const std::string name =
            initializer(named != m_parameterNames.end() ? named->second : m_layer + ".constant",
                        std::move(init));
        m_parameterInits[key] = name;
        return name;
    }

    void bind(const Tensor& t, Value v) { m_bound[t.raw()] = std::move(v); }
    Value lookup(const Tensor& t)
    {
        const auto it = t.empty() ? m_bound.end() : m_bound.find(t.raw());
        if (it == m_bound.end())
            throw Unsupported("layer '" + m_layer +
                              "' computes a tensor outside the backend's ops; the ONNX exporter "
                              "cannot follow it");
        return t.shape() == it->second.shape ? it->second : reshape(it->second, t.shape());
    }
    // The ONNX value holding `v` in NCHW order (a 4-D engine tensor).
    std::string asNchw(const Value& v)
    {
        if (v.shape.rank() != 4)
            throw Unsupported("layer '" + m_layer + "' expects an image tensor, got " +
                              v.shape.str());
        return v.nchw ? v.name : transpose(v.name, {0, 3, 1, 2});
    }
    // The ONNX value holding the engine's tensor as it is.
    std::string asEngine(const Value& v)
    {
        return v.nchw ? transpose(v.name, {0, 2, 3, 1}) : v.name;
    }
    std::string transpose(const std::string& name, const std::vector<std::int64_t>& perm)
    {
        const std::string key = name + (perm[1] == 3 ? "->nchw" : "->nhwc");
        if (auto it = m_transposed.find(key); it != m_transposed.end()) return it->second;
        std::string out;
        setInts(node("Transpose", {name}, &out), "perm", perm);
        m_transposed[key] = out;
        return out;
    }
    // The engine's view of the same bytes with another shape (Flatten's [N, C, H, W] -> [N, CHW]).
    Value reshape(const Value& v, const Shape& target)
    {
        if (target.numel() != v.shape.numel() || target.rank() < 1 || target[0] != v.shape[0])
            throw Unsupported("layer '" + m_layer + "' views " + v.shape.str() + " as " +
                              target.str());
        std::string out;
        if (target.rank() == 2) {
            setInt(node("Flatten", {asEngine(v)}, &out), "axis", 1);
        } else {
            Initializer shape;
            shape.dims = {target.rank()};
            // Reshape takes int64; the batch dimension is copied (0), the rest are fixed.
            const std::string shapeName = initializer(m_layer + ".shape", std::move(shape));
            m_int64Inits.insert(shapeName);
            std::vector<std::int64_t> dims = target.dims();
            dims[0] = 0;
            m_int64Values[shapeName] = dims;
            node("Reshape", {asEngine(v), shapeName}, &out);
        }
        return {out, target, false};
    }
    Value activation(Value v, Activation act)
    {
        if (act == Activation::None) return v;
        node("Relu", {v.name}, &v.name);
        return v;
    }
    void checkWindow(const Window2d& w, const char* what) const
    {
        // ONNX's output size, floor((in + pads - kernel) / stride) + 1, must be the engine's.
        const auto size = [](std::int64_t in, int pad0, int pad1, int k, int s) {
            return (in + pad0 + pad1 - k) / s + 1;
        };
        if (size(w.h, w.padTop, w.padBottom, w.kh, w.sh) != w.oh ||
            size(w.w, w.padLeft, w.padRight, w.kw, w.sw) != w.ow)
            throw Unsupported("layer '" + m_layer + "': the " + what + " window " + w.str() +
                              " has no ONNX equivalent");
    }
    void setWindow(NodeProto& n, const Window2d& w)
    {
        setInts(n, "kernel_shape", {w.kh, w.kw});
        setInts(n, "strides", {w.sh, w.sw});
        // ONNX: [top, left, bottom, right]; TensorFlow's SAME puts the odd pixel bottom/right.
        setInts(n, "pads", {w.padTop, w.padLeft, w.padBottom, w.padRight});
    }

    int foldBatchNorms();
    void renameValue(const std::string& from, const std::string& to);
    void writeInitializers();

    GraphProto& m_graph;
    std::unordered_map<const void*, std::string>
        m_parameterNames; // weight bytes -> state_dict name
    std::unordered_map<const void*, std::string> m_parameterInits; // weight bytes -> initializer
    std::unordered_map<const void*, Value> m_bound;                // this layer's tensors
    std::map<std::string, std::string> m_transposed;
    std::map<std::string, Initializer> m_inits;
    std::vector<std::string> m_initOrder;
    std::set<std::string> m_int64Inits;
    std::map<std::string, std::vector<std::int64_t>> m_int64Values;
    std::set<std::string> m_names;
    std::string m_layer;
};

// An Ops whose inference calls become nodes of the graph. Outputs are only given their shape:
// nothing is computed. Training calls are refused.
// The ops an inference forward calls, each recorded as graph nodes.
#define TOWERS_RECORDED_OPS(X)                                                                     \
    X(conv2dForward)                                                                               \
    X(maxPoolForward)                                                                              \
    X(avgPoolForward)                                                                              \
    X(lrnForward)                                                                                  \
    X(linearForward)                                                                               \
    X(reluForward)                                                                                 \
    X(add)                                                                                         \
    X(batchNormForwardInference)                                                                   \
    X(nhwcToNchw)                                                                                  \
    X(nchwToNhwc)

class RecordingOps final : public Ops
{
public:
    explicit RecordingOps(GraphBuilder& builder)
        : Ops(opSet({TOWERS_RECORDED_OPS(TOWERS_OP_ID)})), m_b(builder)
    {
    }

    std::string name() const override { return "onnx-export"; }
    Device device() const override { return Device::host(); }

protected:
    void conv2dForwardImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b,
                           Tensor& y, Activation act) override
    {
        m_b.conv(d, x, w, b, y, act);
    }
    void conv2dForwardTrainingImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                   const Tensor& b, Tensor& y, Activation act,
                                   Tensor& saved) override
    {
        saved = Tensor();
        m_b.conv(d, x, w, b, y, act);
    }
    void maxPoolForwardImpl(const Pool2dDesc& d, const Tensor& x, Tensor& y,
                            Tensor& workspace) override
    {
        workspace = Tensor();
        m_b.maxPool(d, x, y);
    }
    void avgPoolForwardImpl(const Pool2dDesc& d, const Tensor& x, Tensor& y) override
    {
        m_b.avgPool(d, x, y);
    }
    void lrnForwardImpl(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace) override
    {
        workspace = Tensor();
        m_b.lrn(d, x, y);
    }
    void linearForwardImpl(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                           Activation act) override
    {
        m_b.linear(x, w, b, y, act);
    }
    void reluForwardImpl(const Tensor& x, Tensor& y) override { m_b.relu(x, y); }
    void addImpl(const Tensor& a, const Tensor& b, Tensor& y) override { m_b.add(a, b, y); }
    void batchNormForwardInferenceImpl(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                                       const Tensor& beta, const Tensor& runningMean,
                                       const Tensor& runningVar, Tensor& y) override
    {
        m_b.batchNorm(d, x, gamma, beta, runningMean, runningVar, y);
    }
    void nhwcToNchwImpl(const Tensor& x, Tensor& y) override { m_b.toNchw(x, y); }
    void nchwToNhwcImpl(const Tensor& x, Tensor& y) override { m_b.toNhwc(x, y); }

    // Every other op is training's, or loss's: refused with the layer that called it.
    Ops& fallback(Op op) override { m_b.refuse(opName(op)); }

private:
    GraphBuilder& m_b;
};

Value GraphBuilder::emit(Layer& layer, const Value& in)
{
    if (auto* seq = dynamic_cast<Sequential*>(&layer)) {
        Value v = in;
        for (const auto& child : seq->layers()) v = emit(*child, v);
        return v;
    }
    if (auto* res = dynamic_cast<Residual*>(&layer)) {
        const Value body = emit(res->body(), in);
        m_layer = res->name();
        m_bound.clear();
        Tensor x = Tensor::zeros(in.shape, DType::Float32),
               b = Tensor::zeros(body.shape, DType::Float32), y;
        bind(x, in);
        bind(b, body);
        add(x, b, y);
        return m_bound.at(y.raw());
    }
    if (auto* cat = dynamic_cast<Concat*>(&layer)) {
        std::vector<std::string> parts;
        std::int64_t channels = 0;
        for (const auto& branch : cat->branches()) {
            const Value v = emit(*branch, in);
            m_layer = cat->name();
            parts.push_back(asNchw(v));
            channels += v.shape[3];
        }
        Value out{{}, {in.shape[0], in.shape[1], in.shape[2], channels}, true};
        setInt(node("Concat", parts, &out.name), "axis", 1); // NCHW's channels
        return out;
    }
    // A leaf: run its inference forward on a batch of 1 and follow the tensors it passes to ops.
    m_layer = layer.name();
    m_bound.clear();
    Tensor x = Tensor::zeros(in.shape, DType::Float32), y;
    bind(x, in);
    RecordingOps ops(*this);
    ExecContext ctx{ops, false, 0};
    layer.forward(ctx, x, y);
    const Shape expected = layer.outputShape(in.shape);
    if (y.shape() != expected)
        throw Unsupported("layer '" + m_layer + "' produced " + y.shape().str() + ", expected " +
                          expected.str());
    if (!y.empty() && !m_bound.count(y.raw()) && layer.kind() == "dropout")
        return in; // identity in inference
    return lookup(y);
}

void GraphBuilder::conv(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b,
                        Tensor& y, Activation act)
{
    checkWindow(d.win, "convolution");
    std::vector<std::string> inputs{asNchw(lookup(x)), parameter(w)};
    if (!b.empty()) inputs.push_back(parameter(b));
    Value out{{}, d.outputShape(), true};
    NodeProto& n = node("Conv", inputs, &out.name);
    setWindow(n, d.win);
    setInts(n, "dilations", {1, 1});
    setInt(n, "group", 1);
    Tensor::ensure(y, d.outputShape(), x.dtype());
    bind(y, activation(out, act));
}

void GraphBuilder::maxPool(const Pool2dDesc& d, const Tensor& x, Tensor& y)
{
    checkWindow(d.win, "max-pool");
    Value out{{}, d.outputShape(), true};
    // Padded positions never win, in ONNX's MaxPool as in the engine.
    setWindow(node("MaxPool", {asNchw(lookup(x))}, &out.name), d.win);
    Tensor::ensure(y, d.outputShape(), x.dtype());
    bind(y, out);
}

void GraphBuilder::avgPool(const Pool2dDesc& d, const Tensor& x, Tensor& y)
{
    checkWindow(d.win, "average-pool");
    Value out{{}, d.outputShape(), true};
    // count_include_pad's default, 0: pads do not count, in ONNX's AveragePool as in the engine. A
    // global pool is a window of the whole image (the graph's spatial size is fixed).
    setWindow(node("AveragePool", {asNchw(lookup(x))}, &out.name), d.win);
    Tensor::ensure(y, d.outputShape(), x.dtype());
    bind(y, out);
}

void GraphBuilder::lrn(const LrnDesc& d, const Tensor& x, Tensor& y)
{
    // ONNX: y = x / (bias + alpha / size * sum of x^2 over the size channels around c) ^ beta;
    // TensorFlow: the same sum over c - r .. c + r with alpha itself, so size = 2r + 1 and ONNX's
    // alpha is TensorFlow's times the size.
    const int size = 2 * d.depthRadius + 1;
    Value out{{}, d.shape, true};
    NodeProto& n = node("LRN", {asNchw(lookup(x))}, &out.name);
    setInt(n, "size", size);
    setFloat(n, "alpha", d.alpha * size);
    setFloat(n, "beta", d.beta);
    setFloat(n, "bias", d.bias);
    Tensor::ensure(y, d.shape, x.dtype());
    bind(y, out);
}

void GraphBuilder::linear(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                          Activation act)
{
    const Value v = lookup(x);
    if (v.shape.rank() != 2 || w.rank() != 2)
        throw Unsupported("layer '" + m_layer + "': a linear layer on " + v.shape.str());
    std::vector<std::string> inputs{asEngine(v), parameter(w)};
    if (!b.empty()) inputs.push_back(parameter(b));
    const Shape shape{v.shape[0], w.dim(0)};
    Value out{{}, shape, false};
    setInt(node("Gemm", inputs, &out.name), "transB", 1); // weights are [out, in]
    Tensor::ensure(y, shape, x.dtype());
    bind(y, activation(out, act));
}

void GraphBuilder::relu(const Tensor& x, Tensor& y)
{
    const Value v = lookup(x);
    Tensor::ensure(y, x.shape(), x.dtype());
    bind(y, activation(v, Activation::Relu));
}

void GraphBuilder::add(const Tensor& a, const Tensor& b, Tensor& y)
{
    const Value va = lookup(a), vb = lookup(b);
    if (va.shape != vb.shape)
        throw Unsupported("layer '" + m_layer + "' adds " + va.shape.str() + " and " +
                          vb.shape.str());
    Value out{{}, va.shape, va.nchw};
    node("Add", {va.name, va.nchw ? asNchw(vb) : asEngine(vb)}, &out.name);
    Tensor::ensure(y, a.shape(), a.dtype());
    bind(y, out);
}

void GraphBuilder::batchNorm(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta, const Tensor& mean, const Tensor& var, Tensor& y)
{
    // Channels are the engine's last dimension and ONNX's second: NCHW for images, [N, C] else.
    const Value v = lookup(x);
    const bool image = v.shape.rank() == 4;
    Value out{{}, v.shape, image};
    NodeProto& n = node("BatchNormalization",
                        {image ? asNchw(v) : asEngine(v), parameter(gamma), parameter(beta),
                         parameter(mean), parameter(var)},
                        &out.name);
    setFloat(n, "epsilon", d.epsilon);
    Tensor::ensure(y, d.shape, x.dtype());
    bind(y, out);
}

void GraphBuilder::toNchw(const Tensor& x, Tensor& y)
{
    const Value v = lookup(x);
    if (v.shape.rank() != 4)
        throw Unsupported("layer '" + m_layer + "' transposes " + v.shape.str());
    const Shape shape{v.shape[0], v.shape[3], v.shape[1], v.shape[2]};
    // The engine's NCHW tensor is what an NCHW-held value already is.
    Tensor::ensure(y, shape, x.dtype());
    bind(y, {asNchw(v), shape, false});
}

void GraphBuilder::toNhwc(const Tensor& x, Tensor& y)
{
    const Value v = lookup(x);
    if (v.shape.rank() != 4)
        throw Unsupported("layer '" + m_layer + "' transposes " + v.shape.str());
    const Shape shape{v.shape[0], v.shape[2], v.shape[3], v.shape[1]};
    Tensor::ensure(y, shape, x.dtype());
    bind(y, {asEngine(v), shape, true});
}

void GraphBuilder::renameValue(const std::string& from, const std::string& to)
{
    for (NodeProto& n : *m_graph.mutable_node()) {
        for (std::string& s : *n.mutable_input())
            if (s == from) s = to;
        for (std::string& s : *n.mutable_output())
            if (s == from) s = to;
    }
}

// Folds BatchNormalization(Conv(x, W, b)) into Conv(x, W', b') where the convolution's output
// feeds nothing else: W'[o] = W[o] * s[o], b'[o] = (b[o] - mean[o]) * s[o] + beta[o] with
// s = gamma / sqrt(var + epsilon), computed in double.
int GraphBuilder::foldBatchNorms()
{
    std::map<std::string, int> uses;
    std::map<std::string, int> producer;
    for (int i = 0; i < m_graph.node_size(); ++i) {
        for (const auto& s : m_graph.node(i).input()) ++uses[s];
        for (const auto& s : m_graph.node(i).output()) producer[s] = i;
    }
    std::vector<bool> removed(std::size_t(m_graph.node_size()), false);
    int folded = 0;
    for (int i = 0; i < m_graph.node_size(); ++i) {
        const NodeProto& bn = m_graph.node(i);
        if (bn.op_type() != "BatchNormalization") continue;
        const auto p = producer.find(bn.input(0));
        if (p == producer.end() || uses[bn.input(0)] != 1) continue;
        NodeProto& conv = *m_graph.mutable_node(p->second);
        if (conv.op_type() != "Conv") continue;
        const Initializer& gamma = m_inits.at(bn.input(1));
        const Initializer& beta = m_inits.at(bn.input(2));
        const Initializer& mean = m_inits.at(bn.input(3));
        const Initializer& var = m_inits.at(bn.input(4));
        const double eps = floatAttribute(bn, "epsilon", 1e-5f);
        Initializer w = m_inits.at(conv.input(1));
        const std::size_t channels = gamma.data.size();
        const std::size_t per = w.data.size() / channels;
        Initializer b;
        b.dims = {std::int64_t(channels)};
        b.data.assign(channels, 0.0f);
        if (conv.input_size() > 2) b = m_inits.at(conv.input(2));
        for (std::size_t o = 0; o < channels; ++o) {
            const double s = foldedScale(gamma.data[o], var.data[o], eps);
            for (std::size_t k = 0; k < per; ++k)
                w.data[o * per + k] = foldedWeight(w.data[o * per + k], s);
            b.data[o] = foldedBias(b.data[o], mean.data[o], beta.data[o], s);
        }
        // New initializers (the old ones may be shared), named after the convolution's weights.
        const std::string wName = conv.input(1);
        const std::string stem = wName.size() > 7 && wName.ends_with(".weight")
                                     ? wName.substr(0, wName.size() - 7)
                                     : wName;
        const std::string foldedW = initializer(stem + ".weight_folded", std::move(w));
        const std::string foldedB = initializer(stem + ".bias_folded", std::move(b));
        conv.set_input(1, foldedW);
        if (conv.input_size() > 2)
            conv.set_input(2, foldedB);
        else
            conv.add_input(foldedB);
        removed[std::size_t(i)] = true;
        // The batch norm's consumers read the convolution's output instead.
        const std::string from = bn.output(0), to = conv.output(0); // copies: renaming changes them
        renameValue(from, to);
        ++folded;
    }
    if (folded) {
        auto* nodes = m_graph.mutable_node();
        int keep = 0;
        for (int i = 0; i < nodes->size(); ++i)
            if (!removed[std::size_t(i)]) nodes->SwapElements(keep++, i);
        while (nodes->size() > keep) nodes->RemoveLast();
    }
    return folded;
}

void GraphBuilder::writeInitializers()
{
    std::set<std::string> used;
    for (const NodeProto& n : m_graph.node())
        for (const auto& s : n.input()) used.insert(s);
    for (const std::string& name : m_initOrder) {
        if (!used.count(name)) continue;
        TensorProto* t = m_graph.add_initializer();
        t->set_name(name);
        if (m_int64Inits.count(name)) {
            const auto& dims = m_int64Values.at(name);
            t->set_data_type(TensorProto::INT64);
            t->add_dims(std::int64_t(dims.size()));
            for (std::int64_t v : dims) t->add_int64_data(v);
            continue;
        }
        const Initializer& init = m_inits.at(name);
        t->set_data_type(TensorProto::FLOAT);
        for (std::int64_t d : init.dims) t->add_dims(d);
        // raw_data is little-endian, as the floats are in memory here.
        t->set_raw_data(std::string(reinterpret_cast<const char*>(init.data.data()),
                                    init.data.size() * sizeof(float)));
    }
}

GraphStats GraphBuilder::finish(const Value& logits, std::int64_t classes)
{
    m_layer = "output";
    if (logits.shape.rank() != 2 || logits.shape[1] != classes)
        throw Unsupported("the network ends in " + logits.shape.str() + ", not [N, " +
                          std::to_string(classes) + "] logits");
    std::string last = asEngine(logits);
    GraphStats stats;
    stats.foldedBatchNorms = foldBatchNorms();
    // The last node's output becomes "logits" (an Identity when it is something else's too).
    bool renamed = false;
    for (int i = m_graph.node_size() - 1; i >= 0 && !renamed; --i) {
        const NodeProto& n = m_graph.node(i);
        if (n.output_size() == 1 && n.output(0) == last) {
            int uses = 0;
            for (const NodeProto& m : m_graph.node())
                for (const auto& s : m.input()) uses += s == last;
            if (uses == 0) {
                renameValue(last, "logits");
                renamed = true;
            }
        }
    }
    if (!renamed) {
        NodeProto* n = m_graph.add_node();
        n->set_op_type("Identity");
        n->set_name("output/Identity");
        n->add_input(last);
        n->add_output("logits");
    }
    NodeProto* softmax = m_graph.add_node();
    softmax->set_op_type("Softmax");
    softmax->set_name("output/Softmax");
    softmax->add_input("logits");
    softmax->add_output("probabilities");
    setInt(*softmax, "axis", 1);
    writeInitializers();
    stats.nodes = m_graph.node_size();
    return stats;
}

void setTensorType(::onnx::ValueInfoProto& v, const std::string& name,
                   const std::vector<std::int64_t>& dims)
{
    v.set_name(name);
    auto* type = v.mutable_type()->mutable_tensor_type();
    type->set_elem_type(TensorProto::FLOAT);
    auto* shape = type->mutable_shape();
    shape->add_dim()->set_dim_param("batch");
    for (std::int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

} // namespace

GraphStats buildGraph(Model& model, OnnxLayout layout, GraphProto& graph)
{
    const Shape& hwc = model.inputShape();
    if (hwc.rank() != 3)
        throw Unsupported("model '" + model.name() + "' has input " + hwc.str() +
                          ", not [H, W, C]");
    graph.set_name(model.name());
    const bool nchw = layout == OnnxLayout::Nchw;
    setTensorType(*graph.add_input(), "input",
                  nchw ? std::vector<std::int64_t>{hwc[2], hwc[0], hwc[1]}
                       : std::vector<std::int64_t>{hwc[0], hwc[1], hwc[2]});
    GraphBuilder builder(model, graph);
    const Value in = builder.input(hwc, layout);
    const Value logits = builder.emit(model.net(), in);
    const GraphStats stats = builder.finish(logits, model.numClasses());
    setTensorType(*graph.add_output(), "logits", {model.numClasses()});
    setTensorType(*graph.add_output(), "probabilities", {model.numClasses()});
    return stats;
}

} // namespace towers::engine::onnx_graph
