// oneDNN 2-D convolution. Activations stay in the callers' NHWC memory (oneDNN's nhwc kernels are
// as fast as its blocked ones here, and nhwc keeps LRN and pooling off their slow paths); weights
// use the layout the primitive prefers (format_tag::any), reached from the caller's OIHW tensor by
// a reorder that is built once per shape with its destination memory. Everything per shape
// (primitive, reorders, scratchpad, memory objects) lives in one cache entry; a call only points
// the memory objects at the tensors and executes.
#include <unordered_map>

#include "engine/cpu/onednn_backend.h"

namespace towers::engine::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;
using Args = std::unordered_map<int, memory>;

struct ConvMds
{
    memory::desc src, dst, weightsAny, weightsUser, bias;
    memory::dims strides, padL, padR;
};

ConvMds convMds(const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    // oneDNN orders dimensions N, C, H, W whatever the memory layout; nhwc gives the layout.
    return {memory::desc({g.n, g.c, g.h, g.w}, f32, Tag::nhwc),
            memory::desc({g.n, d.outChannels, g.oh, g.ow}, f32, Tag::nhwc),
            memory::desc({d.outChannels, g.c, g.kh, g.kw}, f32, Tag::any),
            memory::desc({d.outChannels, g.c, g.kh, g.kw}, f32, Tag::oihw),
            memory::desc({d.outChannels}, f32, Tag::x),
            {g.sh, g.sw},
            {g.padTop, g.padLeft},
            {g.padBottom, g.padRight}};
}

std::string convKey(const char* op, const Conv2dDesc& d)
{
    return std::string(op) + " " + d.win.str() + " out " + std::to_string(d.outChannels);
}

// A user-mode scratchpad lets each cache entry own its scratch memory, allocated once, instead of
// oneDNN allocating per execution (or sharing one between threads running different towers).
dnnl::primitive_attr scratchpadAttr()
{
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
}

void addScratchpad(OneDnnOps& ops, const memory::desc& md, Args& args)
{
    if (md.get_size() > 0) args[DNNL_ARG_SCRATCHPAD] = memory(md, ops.dnnlEngine());
}

// A memory object without storage; each call points it at a tensor with bind().
memory view(OneDnnOps& ops, const memory::desc& md)
{
    return memory(md, ops.dnnlEngine(), DNNL_MEMORY_NONE);
}

void bind(const memory& m, const Tensor& t)
{
    m.set_data_handle(const_cast<void*>(t.raw()));
}

dnnl::convolution_forward::primitive_desc forwardPd(OneDnnOps& ops, const ConvMds& m, bool bias,
                                                    const dnnl::primitive_attr& attr)
{
    using dnnl::convolution_forward;
    const auto kind = dnnl::prop_kind::forward_training;
    const auto algo = dnnl::algorithm::convolution_direct;
    const auto desc = bias ? convolution_forward::desc(kind, algo, m.src, m.weightsAny, m.bias,
                                                       m.dst, m.strides, m.padL, m.padR)
                           : convolution_forward::desc(kind, algo, m.src, m.weightsAny, m.dst,
                                                       m.strides, m.padL, m.padR);
    return convolution_forward::primitive_desc(desc, attr, ops.dnnlEngine());
}

// Weights handed to a primitive: the caller's OIHW tensor, reordered into the primitive's layout
// when that differs (the reorder and its destination are built once).
struct WeightsIn
{
    memory user;
    memory inner;
    dnnl::reorder toInner;
    bool reorder = false;

    void init(OneDnnOps& ops, const memory::desc& userMd, const memory::desc& innerMd)
    {
        user = view(ops, userMd);
        reorder = innerMd != userMd;
        if (reorder) {
            inner = memory(innerMd, ops.dnnlEngine());
            toInner = dnnl::reorder(user, inner);
        } else {
            inner = user;
        }
    }
    void run(OneDnnOps& ops, const Tensor& w)
    {
        bind(user, w);
        if (reorder) toInner.execute(ops.dnnlStream(), user, inner);
    }
};

struct ConvForward
{
    dnnl::convolution_forward prim;
    memory src, bias, dst;
    WeightsIn weights;
    Args args;
};

struct ConvBackwardData
{
    dnnl::convolution_backward_data prim;
    memory diffDst, diffSrc;
    WeightsIn weights;
    Args args;
};

struct ConvBackwardWeights
{
    dnnl::convolution_backward_weights prim;
    memory src, diffDst, diffBias;
    memory user, inner; // diff weights: the caller's OIHW tensor and the primitive's layout
    dnnl::reorder toUser;
    bool reorder = false;
    Args args;
};

} // namespace

void OneDnnOps::conv2dForward(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                              const Tensor& b, Tensor& y, Activation act)
{
    requireF32(x, "conv2d x");
    requireF32(w, "conv2d w");
    requireShape(x, d.inputShape(), "conv2d x");
    requireShape(w, d.weightShape(), "conv2d w");
    const bool hasBias = !b.empty();
    if (hasBias) {
        requireF32(b, "conv2d b");
        requireShape(b, Shape{d.outChannels}, "conv2d b");
    }
    const bool relu = act == Activation::Relu;
    Tensor::ensure(y, d.outputShape(), DType::Float32);

    const std::string key =
        convKey("conv fwd", d) + (hasBias ? " bias" : "") + (relu ? " relu" : "");
    ConvForward* e = nullptr;
    guarded("building a convolution", [&] {
        e = &cached<ConvForward>(key, [&] {
            const ConvMds m = convMds(d);
            dnnl::primitive_attr attr = scratchpadAttr();
            if (relu) {
                // Fused: ReLU is applied while the output is still in registers.
                dnnl::post_ops po;
                po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
                attr.set_post_ops(po);
            }
            const auto pd = forwardPd(*this, m, hasBias, attr);
            auto s = std::make_shared<ConvForward>();
            s->prim = dnnl::convolution_forward(pd);
            s->src = view(*this, pd.src_desc());
            s->dst = view(*this, pd.dst_desc());
            s->weights.init(*this, m.weightsUser, pd.weights_desc());
            s->args = {{DNNL_ARG_SRC, s->src},
                       {DNNL_ARG_WEIGHTS, s->weights.inner},
                       {DNNL_ARG_DST, s->dst}};
            if (hasBias) {
                s->bias = view(*this, pd.bias_desc());
                s->args[DNNL_ARG_BIAS] = s->bias;
            }
            addScratchpad(*this, pd.scratchpad_desc(), s->args);
            return s;
        });
    });
    guarded("running a convolution", [&] {
        bind(e->src, x);
        bind(e->dst, y);
        if (hasBias) bind(e->bias, b);
        e->weights.run(*this, w);
        e->prim.execute(m_stream, e->args);
        m_stream.wait();
    });
}

void OneDnnOps::conv2dBackwardData(const Conv2dDesc& d, const Tensor& dy, const Tensor& w,
                                   Tensor& dx)
{
    requireF32(dy, "conv2d dy");
    requireF32(w, "conv2d w");
    requireShape(dy, d.outputShape(), "conv2d dy");
    requireShape(w, d.weightShape(), "conv2d w");
    Tensor::ensure(dx, d.inputShape(), DType::Float32);

    ConvBackwardData* e = nullptr;
    guarded("building a convolution backward-data", [&] {
        e = &cached<ConvBackwardData>(convKey("conv bwd data", d), [&] {
            const ConvMds m = convMds(d);
            const auto attr = scratchpadAttr();
            const auto hint = forwardPd(*this, m, false, attr);
            const dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct,
                                                             m.src, m.weightsAny, m.dst, m.strides,
                                                             m.padL, m.padR);
            const dnnl::convolution_backward_data::primitive_desc pd(desc, attr, dnnlEngine(),
                                                                     hint);
            auto s = std::make_shared<ConvBackwardData>();
            s->prim = dnnl::convolution_backward_data(pd);
            s->diffDst = view(*this, pd.diff_dst_desc());
            s->diffSrc = view(*this, pd.diff_src_desc());
            s->weights.init(*this, m.weightsUser, pd.weights_desc());
            s->args = {{DNNL_ARG_DIFF_DST, s->diffDst},
                       {DNNL_ARG_WEIGHTS, s->weights.inner},
                       {DNNL_ARG_DIFF_SRC, s->diffSrc}};
            addScratchpad(*this, pd.scratchpad_desc(), s->args);
            return s;
        });
    });
    guarded("running a convolution backward-data", [&] {
        bind(e->diffDst, dy);
        bind(e->diffSrc, dx);
        e->weights.run(*this, w);
        e->prim.execute(m_stream, e->args);
        m_stream.wait();
    });
}

void OneDnnOps::conv2dBackwardWeights(const Conv2dDesc& d, const Tensor& x, const Tensor& dy,
                                      Tensor& dw, Tensor* db)
{
    requireF32(x, "conv2d x");
    requireF32(dy, "conv2d dy");
    requireShape(x, d.inputShape(), "conv2d x");
    requireShape(dy, d.outputShape(), "conv2d dy");
    const bool hasBias = db != nullptr;
    Tensor::ensure(dw, d.weightShape(), DType::Float32);
    if (hasBias) Tensor::ensure(*db, Shape{d.outChannels}, DType::Float32);

    const std::string key = convKey("conv bwd weights", d) + (hasBias ? " bias" : "");
    ConvBackwardWeights* e = nullptr;
    guarded("building a convolution backward-weights", [&] {
        e = &cached<ConvBackwardWeights>(key, [&] {
            using dnnl::convolution_backward_weights;
            const ConvMds m = convMds(d);
            const auto attr = scratchpadAttr();
            const auto hint = forwardPd(*this, m, hasBias, attr);
            const auto algo = dnnl::algorithm::convolution_direct;
            const auto desc =
                hasBias ? convolution_backward_weights::desc(algo, m.src, m.weightsAny, m.bias,
                                                             m.dst, m.strides, m.padL, m.padR)
                        : convolution_backward_weights::desc(algo, m.src, m.weightsAny, m.dst,
                                                             m.strides, m.padL, m.padR);
            const convolution_backward_weights::primitive_desc pd(desc, attr, dnnlEngine(), hint);
            auto s = std::make_shared<ConvBackwardWeights>();
            s->prim = convolution_backward_weights(pd);
            s->src = view(*this, pd.src_desc());
            s->diffDst = view(*this, pd.diff_dst_desc());
            s->user = view(*this, m.weightsUser);
            s->reorder = pd.diff_weights_desc() != m.weightsUser;
            if (s->reorder) {
                s->inner = memory(pd.diff_weights_desc(), dnnlEngine());
                s->toUser = dnnl::reorder(s->inner, s->user);
            } else {
                s->inner = s->user;
            }
            s->args = {{DNNL_ARG_SRC, s->src},
                       {DNNL_ARG_DIFF_DST, s->diffDst},
                       {DNNL_ARG_DIFF_WEIGHTS, s->inner}};
            if (hasBias) {
                s->diffBias = view(*this, pd.diff_bias_desc());
                s->args[DNNL_ARG_DIFF_BIAS] = s->diffBias;
            }
            addScratchpad(*this, pd.scratchpad_desc(), s->args);
            return s;
        });
    });
    guarded("running a convolution backward-weights", [&] {
        bind(e->src, x);
        bind(e->diffDst, dy);
        bind(e->user, dw);
        if (hasBias) bind(e->diffBias, *db);
        e->prim.execute(m_stream, e->args);
        if (e->reorder) e->toUser.execute(m_stream, e->inner, e->user);
        m_stream.wait();
    });
}

} // namespace towers::engine::cpu
