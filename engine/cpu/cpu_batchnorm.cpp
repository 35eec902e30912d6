// Batch normalisation on oneDNN's batch_normalization primitives in nhwc / nc memory (channels
// last, as our tensors), with separate scale and shift (use_scale | use_shift, oneDNN >= 2.3; the
// packed use_scaleshift would need a copy of gamma and beta every call). oneDNN saves the batch
// mean and biased variance itself; the running statistics are a small loop here. A ReLU after
// the batch norm of a training step is fused into its primitives (fuse_norm_relu), whose
// workspace, the ReLU's mask, is the op's `saved` state.
#include <bit>

#include "engine/cpu/cpu_common.h"
#include "engine/ops/batch_norm_fold.h"
#include "engine/ops/op_checks.h"

namespace towers::engine::cpu {

namespace {

using dnnl::normalization_flags;
using dnnl::prop_kind;

dnnl::memory::desc dataDesc(const BatchNormDesc& d)
{
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const Shape& s = d.shape;
    // [N,C] is described as N,C,1,1 in nhwc (the same bytes): oneDNN 2.6 runs its JIT kernel for
    // nhwc but a plain C++ loop for nc (1.5 ms instead of 0.1 ms at 128 x 2048).
    if (s.rank() == 2) return dnnl::memory::desc({s[0], s[1], 1, 1}, dt::f32, tag::nhwc);
    return dnnl::memory::desc({s[0], s[3], s[1], s[2]}, dt::f32, tag::nhwc); // dims are N,C,H,W
}

dnnl::memory::desc channelDesc(const BatchNormDesc& d)
{
    return dnnl::memory::desc({d.channels()}, dnnl::memory::data_type::f32,
                              dnnl::memory::format_tag::a);
}

std::string bnKey(const char* op, const BatchNormDesc& d)
{
    // The exact epsilon bits: it is part of the primitive.
    return std::string("batchnorm ") + op + " " + dimsKey(d.shape) + " eps " +
           std::to_string(std::bit_cast<std::uint32_t>(static_cast<float>(d.epsilon)));
}

dnnl::batch_normalization_forward::primitive_desc forwardPd(const BatchNormDesc& d, prop_kind kind,
                                                            normalization_flags flags,
                                                            const dnnl::engine& eng)
{
    return {dnnl::batch_normalization_forward::desc(kind, dataDesc(d),
                                                    static_cast<float>(d.epsilon), flags),
            eng};
}

// A forward primitive with its source, destination, scale, shift, mean and variance arguments.
void makeForward(BoundPrimitive& bp, const dnnl::batch_normalization_forward::primitive_desc& pd,
                 const BatchNormDesc& d, const dnnl::engine& eng)
{
    bp.prim = dnnl::batch_normalization_forward(pd);
    bp.addArg(DNNL_ARG_SRC, pd.src_desc(), eng);
    bp.addArg(DNNL_ARG_DST, pd.dst_desc(), eng);
    bp.addArg(DNNL_ARG_SCALE, channelDesc(d), eng);
    bp.addArg(DNNL_ARG_SHIFT, channelDesc(d), eng);
    bp.addArg(DNNL_ARG_MEAN, pd.mean_desc(), eng);
    bp.addArg(DNNL_ARG_VARIANCE, pd.variance_desc(), eng);
}

void bindForward(BoundPrimitive& p, const Tensor& x, Tensor& y, const Tensor& gamma,
                 const Tensor& beta, const Tensor& mean, const Tensor& variance)
{
    p.bind(DNNL_ARG_SRC, x);
    p.bind(DNNL_ARG_DST, y);
    p.bind(DNNL_ARG_SCALE, gamma);
    p.bind(DNNL_ARG_SHIFT, beta);
    p.bind(DNNL_ARG_MEAN, mean);
    p.bind(DNNL_ARG_VARIANCE, variance);
}

// A training primitive and the bytes of the ReLU mask it writes or reads (0 without ReLU).
struct TrainingEntry
{
    BoundPrimitive p;
    std::int64_t workspaceBytes = 0;
};

normalization_flags trainingFlags(bool relu)
{
    const auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    return relu ? flags | normalization_flags::fuse_norm_relu : flags;
}

// The running statistics from the batch's, the unbiased variance as PyTorch.
void updateRunningStatistics(const BatchNormDesc& d, const Tensor& saveMean, const Tensor& saveVar,
                             Tensor& runningMean, Tensor& runningVar)
{
    const float m = static_cast<float>(d.momentum);
    const float unbias = static_cast<float>(checks::unbiasFactor(d));
    const float* pm = saveMean.data<float>();
    const float* pv = saveVar.data<float>();
    float* prm = runningMean.data<float>();
    float* prv = runningVar.data<float>();
    for (std::int64_t k = 0; k < d.channels(); ++k) {
        prm[k] = (1 - m) * prm[k] + m * pm[k];
        prv[k] = (1 - m) * prv[k] + m * pv[k] * unbias;
    }
}

// The training forward; with `mask`, ReLU fused after it and its mask (oneDNN's workspace) left
// there.
void trainingForward(OneDnnOps& ops, const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                     const Tensor& beta, Tensor& y, Tensor& runningMean, Tensor& runningVar,
                     Tensor& saveMean, Tensor& saveVar, Tensor* mask)
{
    const std::int64_t c = d.channels();
    Tensor::ensure(y, d.shape, DType::Float32);
    Tensor::ensure(saveMean, {c}, DType::Float32);
    Tensor::ensure(saveVar, {c}, DType::Float32);
    const bool relu = mask != nullptr;
    guarded("running a batch norm forward (training)", [&] {
        dnnl::engine& eng = ops.dnnlEngine();
        auto& e = ops.cached<TrainingEntry>(bnKey(relu ? "train relu" : "train", d), [&] {
            const auto pd = forwardPd(d, prop_kind::forward_training, trainingFlags(relu), eng);
            auto s = std::make_shared<TrainingEntry>();
            makeForward(s->p, pd, d, eng);
            if (relu) {
                s->p.addArg(DNNL_ARG_WORKSPACE, pd.workspace_desc(), eng);
                s->workspaceBytes = static_cast<std::int64_t>(pd.workspace_desc().get_size());
            }
            return s;
        });
        bindForward(e.p, x, y, gamma, beta, saveMean, saveVar);
        if (relu) {
            Tensor::ensure(*mask, Shape{e.workspaceBytes}, DType::UInt8);
            e.p.bind(DNNL_ARG_WORKSPACE, *mask);
        }
        e.p.execute(ops.dnnlStream());
    });
    updateRunningStatistics(d, saveMean, saveVar, runningMean, runningVar);
}

// The backward; with `mask` (the fused forward's), dy through that ReLU first.
void trainingBackward(OneDnnOps& ops, const BatchNormDesc& d, const Tensor& x, const Tensor& dy,
                      const Tensor& gamma, const Tensor& saveMean, const Tensor& saveVar,
                      const Tensor* mask, Tensor& dx, Tensor& dgamma, Tensor& dbeta)
{
    const Tensor dyIn = dy; // keeps dy's bytes should dx be the same tensor object
    Tensor::ensure(dx, d.shape, DType::Float32);
    Tensor::ensure(dgamma, {d.channels()}, DType::Float32);
    Tensor::ensure(dbeta, {d.channels()}, DType::Float32);
    const bool relu = mask != nullptr;
    TrainingEntry* e = nullptr;
    guarded("building a batch norm backward", [&] {
        dnnl::engine& eng = ops.dnnlEngine();
        e = &ops.cached<TrainingEntry>(bnKey(relu ? "bwd relu" : "bwd", d), [&] {
            const auto flags = trainingFlags(relu);
            const auto hint = forwardPd(d, prop_kind::forward_training, flags, eng);
            const dnnl::batch_normalization_backward::primitive_desc pd(
                dnnl::batch_normalization_backward::desc(prop_kind::backward, dataDesc(d),
                                                         dataDesc(d), static_cast<float>(d.epsilon),
                                                         flags),
                eng, hint);
            auto s = std::make_shared<TrainingEntry>();
            BoundPrimitive& bp = s->p;
            bp.prim = dnnl::batch_normalization_backward(pd);
            bp.addArg(DNNL_ARG_SRC, pd.src_desc(), eng);
            bp.addArg(DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), eng);
            bp.addArg(DNNL_ARG_SCALE, channelDesc(d), eng);
            bp.addZeroedArg(DNNL_ARG_SHIFT, channelDesc(d), eng); // required, never read
            bp.addArg(DNNL_ARG_MEAN, pd.mean_desc(), eng);
            bp.addArg(DNNL_ARG_VARIANCE, pd.variance_desc(), eng);
            bp.addArg(DNNL_ARG_DIFF_SRC, pd.diff_src_desc(), eng);
            bp.addArg(DNNL_ARG_DIFF_SCALE, channelDesc(d), eng);
            bp.addArg(DNNL_ARG_DIFF_SHIFT, channelDesc(d), eng);
            if (relu) {
                bp.addArg(DNNL_ARG_WORKSPACE, pd.workspace_desc(), eng);
                s->workspaceBytes = static_cast<std::int64_t>(pd.workspace_desc().get_size());
            }
            return s;
        });
    });
    if (relu) {
        requireDType(*mask, DType::UInt8, "batch norm saved state");
        requireShape(*mask, Shape{e->workspaceBytes},
                     "batch norm saved state (from the oneDNN batchNormActForwardTraining of this "
                     "descriptor)");
    }
    guarded("running a batch norm backward", [&] {
        BoundPrimitive& p = e->p;
        p.bind(DNNL_ARG_SRC, x);
        p.bind(DNNL_ARG_DIFF_DST, dyIn);
        p.bind(DNNL_ARG_SCALE, gamma);
        p.bind(DNNL_ARG_MEAN, saveMean);
        p.bind(DNNL_ARG_VARIANCE, saveVar);
        p.bind(DNNL_ARG_DIFF_SRC, dx);
        p.bind(DNNL_ARG_DIFF_SCALE, dgamma);
        p.bind(DNNL_ARG_DIFF_SHIFT, dbeta);
        if (relu) p.bind(DNNL_ARG_WORKSPACE, *mask);
        p.execute(ops.dnnlStream());
    });
}

} // namespace

void OneDnnOps::batchNormForwardTrainingImpl(const BatchNormDesc& d, const Tensor& x,
                                             const Tensor& gamma, const Tensor& beta, Tensor& y,
                                             Tensor& runningMean, Tensor& runningVar,
                                             Tensor& saveMean, Tensor& saveVar)
{
    trainingForward(*this, d, x, gamma, beta, y, runningMean, runningVar, saveMean, saveVar,
                    nullptr);
}

void OneDnnOps::batchNormActForwardTrainingImpl(const BatchNormDesc& d, const Tensor& x,
                                                const Tensor& gamma, const Tensor& beta,
                                                Activation act, Tensor& y, Tensor& runningMean,
                                                Tensor& runningVar, Tensor& saveMean,
                                                Tensor& saveVar, Tensor& saved)
{
    if (act == Activation::None) saved = Tensor();
    trainingForward(*this, d, x, gamma, beta, y, runningMean, runningVar, saveMean, saveVar,
                    act == Activation::Relu ? &saved : nullptr);
}

void OneDnnOps::batchNormForwardInferenceImpl(const BatchNormDesc& d, const Tensor& x,
                                              const Tensor& gamma, const Tensor& beta,
                                              const Tensor& runningMean, const Tensor& runningVar,
                                              Tensor& y)
{
    batchNormActForwardInferenceImpl(d, x, gamma, beta, runningMean, runningVar, Activation::None,
                                     y);
}

void OneDnnOps::batchNormActForwardInferenceImpl(const BatchNormDesc& d, const Tensor& x,
                                                 const Tensor& gamma, const Tensor& beta,
                                                 const Tensor& runningMean,
                                                 const Tensor& runningVar, Activation act,
                                                 Tensor& y)
{
    // With ReLU, one pass (fuse_norm_relu; in inference it needs no workspace, as nothing reads
    // a mask) instead of the batch norm's and a second over y.
    const bool relu = act == Activation::Relu;
    Tensor::ensure(y, d.shape, DType::Float32);
    guarded("running a batch norm forward (inference)", [&] {
        auto& p = cached<BoundPrimitive>(bnKey(relu ? "infer relu" : "infer", d), [&] {
            auto flags = normalization_flags::use_global_stats | normalization_flags::use_scale |
                         normalization_flags::use_shift;
            if (relu) flags = flags | normalization_flags::fuse_norm_relu;
            const auto pd = forwardPd(d, prop_kind::forward_inference, flags, m_engine);
            auto bp = std::make_shared<BoundPrimitive>();
            makeForward(*bp, pd, d, m_engine);
            if (pd.workspace_desc().get_size() != 0) // not in oneDNN 2.6; should a later need one
                bp->addOwnedArg(DNNL_ARG_WORKSPACE, pd.workspace_desc(), m_engine);
            return bp;
        });
        bindForward(p, x, y, gamma, beta, runningMean, runningVar);
        p.execute(m_stream);
    });
}

void OneDnnOps::foldBatchNormImpl(const Tensor& w, const Tensor& b, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& runningMean,
                                  const Tensor& runningVar, double epsilon, Tensor& wOut,
                                  Tensor& bOut)
{
    // The weights of one layer (thousands to a few million floats, once per evaluation batch):
    // over the output channels across the threads, each value as batch_norm_fold.h has it.
    const std::int64_t channels = w.dim(0), per = w.numel() / channels;
    Tensor::ensure(wOut, w.shape(), DType::Float32);
    Tensor::ensure(bOut, {channels}, DType::Float32);
    const float* pw = w.data<float>();
    const float* pb = b.empty() ? nullptr : b.data<float>();
    const float *pg = gamma.data<float>(), *pbeta = beta.data<float>();
    const float *pm = runningMean.data<float>(), *pv = runningVar.data<float>();
    float* pwo = wOut.data<float>();
    float* pbo = bOut.data<float>();
    parallelItems(channels, per, [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
        for (std::int64_t o = begin; o < end; ++o) {
            const double s = foldedScale(pg[o], pv[o], epsilon);
            for (std::int64_t k = 0; k < per; ++k)
                pwo[o * per + k] = foldedWeight(pw[o * per + k], s);
            pbo[o] = foldedBias(pb ? pb[o] : 0.f, pm[o], pbeta[o], s);
        }
    });
}

void OneDnnOps::batchNormBackwardImpl(const BatchNormDesc& d, const Tensor& x, const Tensor& dy,
                                      const Tensor& gamma, const Tensor& saveMean,
                                      const Tensor& saveVar, Tensor& dx, Tensor& dgamma,
                                      Tensor& dbeta)
{
    trainingBackward(*this, d, x, dy, gamma, saveMean, saveVar, nullptr, dx, dgamma, dbeta);
}

void OneDnnOps::batchNormActBackwardImpl(const BatchNormDesc& d, const Tensor& x, const Tensor& y,
                                         const Tensor& dy, Activation act, const Tensor& gamma,
                                         const Tensor& saveMean, const Tensor& saveVar,
                                         const Tensor& saved, Tensor& dx, Tensor& dgamma,
                                         Tensor& dbeta)
{
    // Without the fused forward's mask (after a plain forward), the ReLU's mask comes from y.
    if (act == Activation::Relu && saved.empty())
        return Ops::batchNormActBackwardImpl(d, x, y, dy, act, gamma, saveMean, saveVar, saved, dx,
                                             dgamma, dbeta);
    trainingBackward(*this, d, x, dy, gamma, saveMean, saveVar,
                     act == Activation::Relu ? &saved : nullptr, dx, dgamma, dbeta);
}

} // namespace towers::engine::cpu
