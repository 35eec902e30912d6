// Convolution on cuDNN: forward, backward data and backward filter, NHWC with OHWI filters (NCHW
// where cuDNN does not support NHWC), each algorithm chosen once per shape from cuDNN's ranking
// (its heuristics, or with --cudnn-benchmark its measurement) by conv_algorithm.h's rules and
// kept, with its math type.
// In bf16 (GpuOpsOptions::precision), cuDNN reads bfloat16 copies of what it reads (made after the
// layout's transposes and pads, which stay float32) and writes bfloat16, made float32 at once:
// the convolution computes in float32 between the two roundings.
#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "engine/cuda/conv_algorithm.h"
#include "engine/cuda/conv_plan.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/stream_memory.h"

namespace towers::engine::cuda {

namespace {

// The most a measured algorithm may ask for; cuDNN's fastest choices rarely need more.
constexpr std::size_t kWorkspaceLimit = std::size_t(256) << 20;

// conv_algorithm.h speaks cuDNN 9's status numbers.
static_assert(int(CUDNN_STATUS_SUCCESS) == kCudnnSuccess);
static_assert(int(CUDNN_STATUS_NOT_SUPPORTED) == kCudnnNotSupported);
static_assert(CUDNN_STATUS_CATEGORY(int(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)) == kCudnnNotSupported);
static_assert(!isNotSupportedStatus(int(CUDNN_STATUS_EXECUTION_FAILED)));
static_assert(int(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER) == kCudnnIncompatibleDriver);
static_assert(int(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE) ==
              kCudnnSublibraryUnavailable);
static_assert(int(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED) == kCudnnWorkspaceTooSmall);

AlgorithmRules rulesFor(const GpuOpsOptions& o)
{
    // With bfloat16 data, tensor-op math is not TF32: it multiplies the bfloat16 operands exactly.
    return {kWorkspaceLimit, !o.allowNondeterministic,
            o.allowTf32 || o.precision == Precision::BFloat16};
}

// One pass of a plan ranked by cuDNN, and the algorithm chosen from the ranking
// (conv_algorithm.h).
template <class Perf> struct Ranked
{
    AlgorithmVerdict verdict;
    Perf best{};
};

// cuDNN's ranking of at most `maxCount(handle)` algorithms for one pass of `p`: its heuristics,
// `heuristics(n, &count, results)` (cudnnGet..._v7; `workspaceOf(algo, &bytes)` then asks each
// one's workspace of cuDNN, under the entry's math type), or with o.measureAlgorithms its
// measurement, `measure(n, &count, results)` (cudnnFind...AlgorithmEx, which reports each one's
// workspace); and the algorithm chosen from it by rulesFor(o), passing over those this pass's
// first runs were refused. Leaves the descriptor's math type unspecified: each pass sets its own.
template <class Perf, class Heuristics, class Measure, class WorkspaceOf>
Ranked<Perf> rankAndChoose(ConvPlan& p, ConvPlan::Pass pass, cudnnHandle_t handle,
                           cudnnStatus_t (*maxCount)(cudnnHandle_t, int*), const GpuOpsOptions& o,
                           Heuristics heuristics, Measure measure, WorkspaceOf workspaceOf)
{
    int most = 0;
    TOWERS_CUDNN(maxCount(handle, &most));
    p.setMath(p.measureMath);
    std::vector<Perf> results(std::size_t(std::max(most, 1)));
    int count = 0;
    const bool measured = o.measureAlgorithms;
    const cudnnStatus_t status = measured ? measure(int(results.size()), &count, results.data())
                                          : heuristics(int(results.size()), &count, results.data());
    const int usable =
        status == CUDNN_STATUS_SUCCESS ? std::clamp(count, 0, int(results.size())) : 0;
    std::vector<MeasuredAlgorithm> entries(static_cast<std::size_t>(usable));
    for (int i = 0; i < usable; ++i) {
        Perf& r = results[std::size_t(i)];
        // Under FMA math cuDNN runs FMA kernels only, whatever math type it reports for them:
        // they run under FMA again.
        if (p.measureMath == CUDNN_FMA_MATH) r.mathType = CUDNN_FMA_MATH;
        if (!measured && r.status == CUDNN_STATUS_SUCCESS) {
            p.setMath(r.mathType);
            std::size_t bytes = 0;
            r.status = workspaceOf(r.algo, &bytes);
            if (r.status == CUDNN_STATUS_SUCCESS) r.memory = bytes;
        }
        const auto& refused = p.runs[pass].refused;
        entries[std::size_t(i)] = {int(r.status), r.memory, r.determinism == CUDNN_DETERMINISTIC,
                                   r.mathType == CUDNN_FMA_MATH,
                                   std::find(refused.begin(), refused.end(), int(r.algo)) !=
                                       refused.end()};
    }
    Ranked<Perf> m{chooseAlgorithm(int(status), entries, rulesFor(o))};
    if (m.verdict.choice == AlgorithmChoice::Chosen) m.best = results[std::size_t(m.verdict.index)];
    return m;
}

// After a pass ran its algorithm (`status`: what the call of cuDNN, `call`, returned): true when it
// ran. A first run that cuDNN refused (isRefusedRunStatus) marks the algorithm refused, clears
// `have` and returns false: the caller ranks again and takes the next (an NHWC plan turns NCHW
// when none is left). Any other failure, or one of an algorithm that has run before, throws as
// TOWERS_CUDNN does.
bool ranOrRefused(ConvPlan& p, ConvPlan::Pass pass, int algo, bool& have, cudnnStatus_t status,
                  const char* call, int line)
{
    ConvPlan::PassRuns& r = p.runs[pass];
    if (status == CUDNN_STATUS_SUCCESS) {
        r.ran = true;
        return true;
    }
    if (r.ran || !isRefusedRunStatus(int(status))) throwCudnn(status, call, __FILE__, line);
    r.refused.push_back(algo);
    if (r.firstRefusal == CUDNN_STATUS_SUCCESS) r.firstRefusal = status;
    have = false;
    return false;
}

// After a ranking gave nothing usable: an NHWC plan turns NCHW when cuDNN does not support the
// case there (the caller ranks again); anything else is an error that says what and where.
void fallBackOrThrow(ConvPlan& p, ConvPlan::Pass pass, const AlgorithmVerdict& v,
                     const char* passName)
{
    if (v.choice == AlgorithmChoice::NotSupported && !p.nchw) {
        p.useNchw();
        return;
    }
    std::string what = std::string("cuDNN has no usable ") + passName +
                       " algorithm for convolution " + p.desc.win.str() + " with " +
                       std::to_string(p.desc.outChannels) + " filters in " +
                       (p.nchw ? "NCHW" : "NHWC") + ": ";
    if (v.choice == AlgorithmChoice::Failed) {
        what += cudnnGetErrorString(static_cast<cudnnStatus_t>(v.status)) + std::string(" (") +
                v.why + ")";
        if (v.status == int(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED))
            throw DeviceOutOfMemory(what);
        throw BackendError(what);
    }
    if (v.status != kCudnnSuccess) // the ranking itself was refused
        what += cudnnGetErrorString(static_cast<cudnnStatus_t>(v.status)) + std::string(": ");
    what += v.why;
    if (const cudnnStatus_t first = p.runs[pass].firstRefusal; first != CUDNN_STATUS_SUCCESS)
        what += std::string(" (the first refusal: ") + cudnnGetErrorString(first) + ")";
    throw BackendError(what + (p.nchw ? " (nor in NHWC)" : ""));
}
} // namespace

ConvPlan::ConvPlan(const Conv2dDesc& d, bool allowTf32, bool bf16)
    : desc(d), dataType(bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT)
{
    const Window2d& g = d.win;
    padH = std::min(g.padTop, g.padBottom);
    padW = std::min(g.padLeft, g.padRight);
    extraTop = g.padTop - padH;
    extraBottom = g.padBottom - padH;
    extraLeft = g.padLeft - padW;
    extraRight = g.padRight - padW;
    paddedH = g.h + extraTop + extraBottom;
    paddedW = g.w + extraLeft + extraRight;
    try {
        TOWERS_CUDNN(cudnnCreateTensorDescriptor(&x));
        TOWERS_CUDNN(cudnnCreateTensorDescriptor(&y));
        TOWERS_CUDNN(cudnnCreateFilterDescriptor(&w));
        TOWERS_CUDNN(cudnnCreateConvolutionDescriptor(&conv));
        TOWERS_CUDNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, dataType, int(g.n), int(g.c),
                                                int(paddedH), int(paddedW)));
        TOWERS_CUDNN(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, dataType, int(g.n),
                                                int(d.outChannels), int(g.oh), int(g.ow)));
        TOWERS_CUDNN(cudnnSetFilter4dDescriptor(w, dataType, CUDNN_TENSOR_NHWC, int(d.outChannels),
                                                int(g.c), g.kh, g.kw));
        TOWERS_CUDNN(cudnnSetConvolution2dDescriptor(conv, padH, padW, g.sh, g.sw, 1, 1,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        // FMA math keeps float32 exact to float32; TF32 only when the user allowed it; bfloat16
        // data on tensor cores. cuDNN measures the algorithms of this math type (with tensor ops:
        // of both kinds).
        measureMath = allowTf32 || bf16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
        setMath(measureMath);
        int n = 0, c = 0, h = 0, wd = 0;
        TOWERS_CUDNN(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &c, &h, &wd));
        if (h != g.oh || wd != g.ow)
            throw BackendError("cuDNN computes a " + std::to_string(h) + "x" + std::to_string(wd) +
                               " output for convolution " + g.str() + ", Towers expects " +
                               std::to_string(g.oh) + "x" + std::to_string(g.ow));
    } catch (...) {
        release();
        throw;
    }
}

ConvPlan::~ConvPlan()
{
    release();
}

void ConvPlan::useNchw()
{
    const Window2d& g = desc.win;
    TOWERS_CUDNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, dataType, int(g.n), int(g.c),
                                            int(paddedH), int(paddedW)));
    TOWERS_CUDNN(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, dataType, int(g.n),
                                            int(desc.outChannels), int(g.oh), int(g.ow)));
    TOWERS_CUDNN(cudnnSetFilter4dDescriptor(w, dataType, CUDNN_TENSOR_NCHW, int(desc.outChannels),
                                            int(g.c), g.kh, g.kw));
    nchw = true;
    haveForward = haveBackwardData = haveBackwardFilter = false;
    for (PassRuns& r : runs) r = {};
}

void ConvPlan::setMath(cudnnMathType_t math)
{
    TOWERS_CUDNN(cudnnSetConvolutionMathType(conv, math));
}

void ConvPlan::release() noexcept
{
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
    conv = nullptr;
    w = nullptr;
    y = x = nullptr;
}

ConvPlan& CudaOps::plan(const Conv2dDesc& d)
{
    const std::string key = d.win.str() + " o" + std::to_string(d.outChannels);
    auto it = m_plans.find(key);
    if (it == m_plans.end()) {
        auto p = std::make_unique<ConvPlan>(d, m_options.allowTf32, bf16());
        if (m_options.convolutionsInNchw) p->useNchw();
        it = m_plans.emplace(key, std::move(p)).first;
    }
    return *it->second;
}

Tensor CudaOps::padded(const ConvPlan& p, const Tensor& x)
{
    if (!p.needsPadding()) return x;
    const Window2d& g = p.desc.win;
    Tensor out({g.n, p.paddedH, p.paddedW, g.c}, DType::Float32, device());
    padNhwc(m_stream, floats(x), floats(out), g.n, g.h, g.w, g.c, p.paddedH, p.paddedW, p.extraTop,
            p.extraLeft);
    return out;
}

namespace {
// [n, h, w, c] <-> [n, c, h, w] copies for a plan that fell back to NCHW.
Tensor toNchw(cudaStream_t s, const Tensor& t, const Device& dev)
{
    Tensor out({t.dim(0), t.dim(3), t.dim(1), t.dim(2)}, DType::Float32, dev);
    nhwcToNchw(s, floats(t), floats(out), t.dim(0), t.dim(1), t.dim(2), t.dim(3));
    return out;
}
void fromNchw(cudaStream_t s, const Tensor& nchw, Tensor& nhwc)
{
    nchwToNhwc(s, floats(nchw), floats(nhwc), nhwc.dim(0), nhwc.dim(1), nhwc.dim(2), nhwc.dim(3));
}
Shape nchwShape(const Shape& nhwc)
{
    return {nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
}
} // namespace

Tensor CudaOps::filterOhwi(const Conv2dDesc& d, const Tensor& w)
{
    Tensor out({d.outChannels, d.win.kh, d.win.kw, d.win.c}, DType::Float32, device());
    oihwToOhwi(m_stream, floats(w), floats(out), d.outChannels, d.win.c, d.win.kh, d.win.kw);
    return out;
}

Tensor CudaOps::cudnnInput(const Tensor& t)
{
    return bf16() ? toBf16(t) : t;
}

Tensor CudaOps::cudnnOutput(const Tensor& t)
{
    return bf16() ? Tensor(t.shape(), DType::BFloat16, device()) : t;
}

void CudaOps::fromCudnn(const Tensor& written, Tensor& t)
{
    if (bf16()) fromBf16(written, t);
}

void CudaOps::conv2dForwardImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                const Tensor& b, Tensor& y, Activation act)
{
    const OpScope scope(m_device, m_stream);
    ensure(y, d.outputShape());
    ConvPlan& p = plan(d);
    const float one = 1, zero = 0;
    for (;;) {
        const Tensor xp =
            cudnnInput(p.nchw ? toNchw(m_stream, padded(p, x), device()) : padded(p, x));
        const Tensor wf = cudnnInput(p.nchw ? w : filterOhwi(d, w));
        // The float32 output in the plan's layout, and what cuDNN writes.
        Tensor out32 = p.nchw ? Tensor(nchwShape(y.shape()), DType::Float32, device()) : y;
        Tensor out = cudnnOutput(out32);
        if (!p.haveForward && capturing())
            refuseDuringCapture("conv2dForward",
                                "cuDNN has not chosen this convolution's algorithm yet (run it "
                                "once before capturing)");
        if (!p.haveForward) {
            const auto m = rankAndChoose<cudnnConvolutionFwdAlgoPerf_t>(
                p, ConvPlan::Forward, m_cudnn, cudnnGetConvolutionForwardAlgorithmMaxCount,
                m_options,
                [&](int n, int* count, cudnnConvolutionFwdAlgoPerf_t* results) {
                    return cudnnGetConvolutionForwardAlgorithm_v7(m_cudnn, p.x, p.w, p.conv, p.y, n,
                                                                  count, results);
                },
                [&](int n, int* count, cudnnConvolutionFwdAlgoPerf_t* results) {
                    return cudnnFindConvolutionForwardAlgorithmEx(
                        m_cudnn, p.x, xp.raw(), p.w, wf.raw(), p.conv, p.y, out.raw(), n, count,
                        results, workspace(kWorkspaceLimit), kWorkspaceLimit);
                },
                [&](cudnnConvolutionFwdAlgo_t algo, std::size_t* bytes) {
                    return cudnnGetConvolutionForwardWorkspaceSize(m_cudnn, p.x, p.w, p.conv, p.y,
                                                                   algo, bytes);
                });
            if (m.verdict.choice != AlgorithmChoice::Chosen) {
                fallBackOrThrow(p, ConvPlan::Forward, m.verdict, "forward");
                continue;
            }
            p.forward = m.best.algo;
            p.forwardWorkspace = m.best.memory;
            p.forwardMath = m.best.mathType;
            p.haveForward = true;
        }
        p.setMath(p.forwardMath);
        if (!ranOrRefused(p, ConvPlan::Forward, int(p.forward), p.haveForward,
                          cudnnConvolutionForward(m_cudnn, &one, p.x, xp.raw(), p.w, wf.raw(),
                                                  p.conv, p.forward, workspace(p.forwardWorkspace),
                                                  p.forwardWorkspace, &zero, p.y, out.raw()),
                          "cudnnConvolutionForward", __LINE__))
            continue;
        fromCudnn(out, out32);
        if (p.nchw) fromNchw(m_stream, out32, y);
        break;
    }
    biasActivation(m_stream, floats(y), b.empty() ? nullptr : floats(b), y.numel() / d.outChannels,
                   d.outChannels, act == Activation::Relu);
}

void CudaOps::conv2dBackwardDataImpl(const Conv2dDesc& d, const Tensor& dy, const Tensor& w,
                                     Tensor& dx)
{
    const OpScope scope(m_device, m_stream);
    ensure(dx, d.inputShape());
    ConvPlan& p = plan(d);
    const Window2d& g = d.win;
    const float one = 1, zero = 0;
    for (;;) {
        const Tensor wf = cudnnInput(p.nchw ? w : filterOhwi(d, w));
        const Tensor dyl = cudnnInput(p.nchw ? toNchw(m_stream, dy, device()) : dy);
        // The gradient of the padded input, in the plan's layout, and what cuDNN writes.
        Tensor dxl32 = p.nchw ? Tensor({g.n, g.c, p.paddedH, p.paddedW}, DType::Float32, device())
                       : p.needsPadding()
                           ? Tensor({g.n, p.paddedH, p.paddedW, g.c}, DType::Float32, device())
                           : dx;
        Tensor dxl = cudnnOutput(dxl32);
        if (!p.haveBackwardData && capturing())
            refuseDuringCapture("conv2dBackwardData",
                                "cuDNN has not chosen this convolution's algorithm yet (run it "
                                "once before capturing)");
        if (!p.haveBackwardData) {
            const auto m = rankAndChoose<cudnnConvolutionBwdDataAlgoPerf_t>(
                p, ConvPlan::BackwardData, m_cudnn,
                cudnnGetConvolutionBackwardDataAlgorithmMaxCount, m_options,
                [&](int n, int* count, cudnnConvolutionBwdDataAlgoPerf_t* results) {
                    return cudnnGetConvolutionBackwardDataAlgorithm_v7(m_cudnn, p.w, p.y, p.conv,
                                                                       p.x, n, count, results);
                },
                [&](int n, int* count, cudnnConvolutionBwdDataAlgoPerf_t* results) {
                    return cudnnFindConvolutionBackwardDataAlgorithmEx(
                        m_cudnn, p.w, wf.raw(), p.y, dyl.raw(), p.conv, p.x, dxl.raw(), n, count,
                        results, workspace(kWorkspaceLimit), kWorkspaceLimit);
                },
                [&](cudnnConvolutionBwdDataAlgo_t algo, std::size_t* bytes) {
                    return cudnnGetConvolutionBackwardDataWorkspaceSize(m_cudnn, p.w, p.y, p.conv,
                                                                        p.x, algo, bytes);
                });
            if (m.verdict.choice != AlgorithmChoice::Chosen) {
                fallBackOrThrow(p, ConvPlan::BackwardData, m.verdict, "backward-data");
                continue;
            }
            p.backwardData = m.best.algo;
            p.backwardDataWorkspace = m.best.memory;
            p.backwardDataMath = m.best.mathType;
            p.haveBackwardData = true;
        }
        p.setMath(p.backwardDataMath);
        if (!ranOrRefused(
                p, ConvPlan::BackwardData, int(p.backwardData), p.haveBackwardData,
                cudnnConvolutionBackwardData(m_cudnn, &one, p.w, wf.raw(), p.y, dyl.raw(), p.conv,
                                             p.backwardData, workspace(p.backwardDataWorkspace),
                                             p.backwardDataWorkspace, &zero, p.x, dxl.raw()),
                "cudnnConvolutionBackwardData", __LINE__))
            continue;
        fromCudnn(dxl, dxl32);
        Tensor dxp = dxl32; // NHWC, padded or not
        if (p.nchw) {
            dxp = p.needsPadding()
                      ? Tensor({g.n, p.paddedH, p.paddedW, g.c}, DType::Float32, device())
                      : dx;
            fromNchw(m_stream, dxl32, dxp);
        }
        if (p.needsPadding())
            cropNhwc(m_stream, floats(dxp), floats(dx), g.n, g.h, g.w, g.c, p.paddedH, p.paddedW,
                     p.extraTop, p.extraLeft);
        break;
    }
}

void CudaOps::conv2dBackwardWeightsImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& dy,
                                        Tensor& dw, Tensor* db)
{
    const OpScope scope(m_device, m_stream);
    ensure(dw, d.weightShape());
    ConvPlan& p = plan(d);
    const float one = 1, zero = 0;
    for (;;) {
        const Tensor xp =
            cudnnInput(p.nchw ? toNchw(m_stream, padded(p, x), device()) : padded(p, x));
        const Tensor dyl = cudnnInput(p.nchw ? toNchw(m_stream, dy, device()) : dy);
        // NCHW plans write OIHW, as stored; NHWC plans OHWI, transposed back below; and what
        // cuDNN writes.
        Tensor dwl32 =
            p.nchw ? dw
                   : Tensor({d.outChannels, d.win.kh, d.win.kw, d.win.c}, DType::Float32, device());
        Tensor dwl = cudnnOutput(dwl32);
        if (!p.haveBackwardFilter && capturing())
            refuseDuringCapture("conv2dBackwardWeights",
                                "cuDNN has not chosen this convolution's algorithm yet (run it "
                                "once before capturing)");
        if (!p.haveBackwardFilter) {
            const auto m = rankAndChoose<cudnnConvolutionBwdFilterAlgoPerf_t>(
                p, ConvPlan::BackwardFilter, m_cudnn,
                cudnnGetConvolutionBackwardFilterAlgorithmMaxCount, m_options,
                [&](int n, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* results) {
                    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(m_cudnn, p.x, p.y, p.conv,
                                                                         p.w, n, count, results);
                },
                [&](int n, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* results) {
                    return cudnnFindConvolutionBackwardFilterAlgorithmEx(
                        m_cudnn, p.x, xp.raw(), p.y, dyl.raw(), p.conv, p.w, dwl.raw(), n, count,
                        results, workspace(kWorkspaceLimit), kWorkspaceLimit);
                },
                [&](cudnnConvolutionBwdFilterAlgo_t algo, std::size_t* bytes) {
                    return cudnnGetConvolutionBackwardFilterWorkspaceSize(m_cudnn, p.x, p.y, p.conv,
                                                                          p.w, algo, bytes);
                });
            if (m.verdict.choice != AlgorithmChoice::Chosen) {
                fallBackOrThrow(p, ConvPlan::BackwardFilter, m.verdict, "backward-filter");
                continue;
            }
            p.backwardFilter = m.best.algo;
            p.backwardFilterWorkspace = m.best.memory;
            p.backwardFilterMath = m.best.mathType;
            p.haveBackwardFilter = true;
        }
        p.setMath(p.backwardFilterMath);
        if (!ranOrRefused(p, ConvPlan::BackwardFilter, int(p.backwardFilter), p.haveBackwardFilter,
                          cudnnConvolutionBackwardFilter(
                              m_cudnn, &one, p.x, xp.raw(), p.y, dyl.raw(), p.conv,
                              p.backwardFilter, workspace(p.backwardFilterWorkspace),
                              p.backwardFilterWorkspace, &zero, p.w, dwl.raw()),
                          "cudnnConvolutionBackwardFilter", __LINE__))
            continue;
        fromCudnn(dwl, dwl32);
        if (!p.nchw)
            ohwiToOihw(m_stream, floats(dwl32), floats(dw), d.outChannels, d.win.c, d.win.kh,
                       d.win.kw);
        break;
    }
    if (db) {
        ensure(*db, {d.outChannels});
        biasGradient(m_stream, floats(dy), floats(*db), dy.numel() / d.outChannels, d.outChannels);
    }
}

} // namespace towers::engine::cuda
