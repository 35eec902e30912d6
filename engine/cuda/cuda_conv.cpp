// Convolution on cuDNN: forward, backward data and backward filter, NHWC with OHWI filters, each
// algorithm chosen once per shape by cuDNN's measurement (cudnnFind...AlgorithmEx) and cached.
#include <algorithm>
#include <cstring>
#include <optional>

#include "engine/cuda/conv_plan.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/kernels.h"

namespace towers::engine::cuda {

namespace {

// The most a measured algorithm may ask for; cuDNN's fastest choices rarely need more.
constexpr std::size_t kWorkspaceLimit = std::size_t(256) << 20;

// cuDNN's measurement of one pass of a plan: the fastest algorithm that succeeded within the
// workspace limit, or none, with cuDNN's status (a failure, or nothing usable).
template <class Perf> struct Measured
{
    cudnnStatus_t status;
    std::optional<Perf> best;
};

template <class Perf, int Count, class Find> Measured<Perf> measure(Find find)
{
    Perf results[Count];
    int count = 0;
    Measured<Perf> m{find(Count, &count, results), std::nullopt};
    if (m.status != CUDNN_STATUS_SUCCESS) return m;
    for (int i = 0; i < count; ++i) // sorted by time
        if (results[i].status == CUDNN_STATUS_SUCCESS && results[i].memory <= kWorkspaceLimit) {
            m.best = results[i];
            break;
        }
    return m;
}

// After a measurement found nothing: an NHWC plan turns NCHW (the caller measures again); an
// NCHW plan has nowhere to go, and says why.
void fallBackToNchw(ConvPlan& p, cudnnStatus_t status, const char* pass)
{
    if (!p.nchw) {
        p.useNchw();
        return;
    }
    if (status != CUDNN_STATUS_SUCCESS)
        throw BackendError(std::string("cuDNN could not measure the ") + pass +
                           " algorithms of convolution " + p.desc.win.str() + ": " +
                           cudnnGetErrorString(status));
    throw BackendError(std::string("cuDNN found no ") + pass + " algorithm for convolution " +
                       p.desc.win.str());
}
} // namespace

ConvPlan::ConvPlan(const Conv2dDesc& d, bool allowTf32) : desc(d)
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
        TOWERS_CUDNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, int(g.n),
                                                int(g.c), int(paddedH), int(paddedW)));
        TOWERS_CUDNN(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, int(g.n),
                                                int(d.outChannels), int(g.oh), int(g.ow)));
        TOWERS_CUDNN(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                                                int(d.outChannels), int(g.c), g.kh, g.kw));
        TOWERS_CUDNN(cudnnSetConvolution2dDescriptor(conv, padH, padW, g.sh, g.sw, 1, 1,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        // FMA math keeps float32 exact to float32; TF32 only when the user allowed it.
        TOWERS_CUDNN(
            cudnnSetConvolutionMathType(conv, allowTf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
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
    TOWERS_CUDNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(g.n),
                                            int(g.c), int(paddedH), int(paddedW)));
    TOWERS_CUDNN(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(g.n),
                                            int(desc.outChannels), int(g.oh), int(g.ow)));
    TOWERS_CUDNN(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                            int(desc.outChannels), int(g.c), g.kh, g.kw));
    nchw = true;
    haveForward = haveBackwardData = haveBackwardFilter = false;
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
    if (it == m_plans.end())
        it = m_plans.emplace(key, std::make_unique<ConvPlan>(d, m_options.allowTf32)).first;
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

void CudaOps::conv2dForwardImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                const Tensor& b, Tensor& y, Activation act)
{
    DeviceGuard guard(m_device);
    if (!b.empty()) {
    }
    ensure(y, d.outputShape());
    ConvPlan& p = plan(d);
    const float one = 1, zero = 0;
    for (;;) {
        const Tensor xp = p.nchw ? toNchw(m_stream, padded(p, x), device()) : padded(p, x);
        const Tensor wf = p.nchw ? w : filterOhwi(d, w);
        Tensor out = p.nchw ? Tensor(nchwShape(y.shape()), DType::Float32, device()) : y;
        if (!p.haveForward) {
            const auto m = measure<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
                [&](int n, int* count, cudnnConvolutionFwdAlgoPerf_t* results) {
                    return cudnnFindConvolutionForwardAlgorithmEx(
                        m_cudnn, p.x, xp.raw(), p.w, wf.raw(), p.conv, p.y, out.raw(), n, count,
                        results, workspace(kWorkspaceLimit), kWorkspaceLimit);
                });
            if (!m.best) {
                fallBackToNchw(p, m.status, "forward");
                continue;
            }
            p.forward = m.best->algo;
            p.forwardWorkspace = m.best->memory;
            p.haveForward = true;
        }
        TOWERS_CUDNN(cudnnConvolutionForward(m_cudnn, &one, p.x, xp.raw(), p.w, wf.raw(), p.conv,
                                             p.forward, workspace(p.forwardWorkspace),
                                             p.forwardWorkspace, &zero, p.y, out.raw()));
        if (p.nchw) fromNchw(m_stream, out, y);
        break;
    }
    biasActivation(m_stream, floats(y), b.empty() ? nullptr : floats(b), y.numel() / d.outChannels,
                   d.outChannels, act == Activation::Relu);
}

void CudaOps::conv2dBackwardDataImpl(const Conv2dDesc& d, const Tensor& dy, const Tensor& w,
                                     Tensor& dx)
{
    DeviceGuard guard(m_device);
    ensure(dx, d.inputShape());
    ConvPlan& p = plan(d);
    const Window2d& g = d.win;
    const float one = 1, zero = 0;
    for (;;) {
        const Tensor wf = p.nchw ? w : filterOhwi(d, w);
        const Tensor dyl = p.nchw ? toNchw(m_stream, dy, device()) : dy;
        // The gradient of the padded input, in the plan's layout.
        Tensor dxl = p.nchw ? Tensor({g.n, g.c, p.paddedH, p.paddedW}, DType::Float32, device())
                     : p.needsPadding()
                         ? Tensor({g.n, p.paddedH, p.paddedW, g.c}, DType::Float32, device())
                         : dx;
        if (!p.haveBackwardData) {
            const auto m =
                measure<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
                    [&](int n, int* count, cudnnConvolutionBwdDataAlgoPerf_t* results) {
                        return cudnnFindConvolutionBackwardDataAlgorithmEx(
                            m_cudnn, p.w, wf.raw(), p.y, dyl.raw(), p.conv, p.x, dxl.raw(), n,
                            count, results, workspace(kWorkspaceLimit), kWorkspaceLimit);
                    });
            if (!m.best) {
                fallBackToNchw(p, m.status, "backward-data");
                continue;
            }
            p.backwardData = m.best->algo;
            p.backwardDataWorkspace = m.best->memory;
            p.haveBackwardData = true;
        }
        TOWERS_CUDNN(cudnnConvolutionBackwardData(
            m_cudnn, &one, p.w, wf.raw(), p.y, dyl.raw(), p.conv, p.backwardData,
            workspace(p.backwardDataWorkspace), p.backwardDataWorkspace, &zero, p.x, dxl.raw()));
        Tensor dxp = dxl; // NHWC, padded or not
        if (p.nchw) {
            dxp = p.needsPadding()
                      ? Tensor({g.n, p.paddedH, p.paddedW, g.c}, DType::Float32, device())
                      : dx;
            fromNchw(m_stream, dxl, dxp);
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
    DeviceGuard guard(m_device);
    ensure(dw, d.weightShape());
    ConvPlan& p = plan(d);
    const float one = 1, zero = 0;
    for (;;) {
        const Tensor xp = p.nchw ? toNchw(m_stream, padded(p, x), device()) : padded(p, x);
        const Tensor dyl = p.nchw ? toNchw(m_stream, dy, device()) : dy;
        // NCHW plans write OIHW, as stored; NHWC plans OHWI, transposed back below.
        Tensor dwl =
            p.nchw ? dw
                   : Tensor({d.outChannels, d.win.kh, d.win.kw, d.win.c}, DType::Float32, device());
        if (!p.haveBackwardFilter) {
            const auto m = measure<cudnnConvolutionBwdFilterAlgoPerf_t,
                                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
                [&](int n, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* results) {
                    return cudnnFindConvolutionBackwardFilterAlgorithmEx(
                        m_cudnn, p.x, xp.raw(), p.y, dyl.raw(), p.conv, p.w, dwl.raw(), n, count,
                        results, workspace(kWorkspaceLimit), kWorkspaceLimit);
                });
            if (!m.best) {
                fallBackToNchw(p, m.status, "backward-filter");
                continue;
            }
            p.backwardFilter = m.best->algo;
            p.backwardFilterWorkspace = m.best->memory;
            p.haveBackwardFilter = true;
        }
        TOWERS_CUDNN(
            cudnnConvolutionBackwardFilter(m_cudnn, &one, p.x, xp.raw(), p.y, dyl.raw(), p.conv,
                                           p.backwardFilter, workspace(p.backwardFilterWorkspace),
                                           p.backwardFilterWorkspace, &zero, p.w, dwl.raw()));
        if (!p.nchw)
            ohwiToOihw(m_stream, floats(dwl), floats(dw), d.outChannels, d.win.c, d.win.kh,
                       d.win.kw);
        break;
    }
    if (db) {
        ensure(*db, {d.outChannels});
        biasGradient(m_stream, floats(dy), floats(*db), dy.numel() / d.outChannels, d.outChannels);
    }
}

} // namespace towers::engine::cuda
