// Convolution on cuDNN: forward, backward data and backward filter, NHWC with OHWI filters, each
// algorithm chosen once per shape by cuDNN's measurement (cudnnFind...AlgorithmEx) and cached.
#include <algorithm>
#include <cstring>

#include "engine/cuda/conv_plan.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/kernels.h"

namespace towers::engine::cuda {

namespace {
const float* f(const Tensor& t) { return static_cast<const float*>(t.raw()); }
float* f(Tensor& t) { return static_cast<float*>(t.raw()); }

// The most a measured algorithm may ask for; cuDNN's fastest choices rarely need more.
constexpr std::size_t kWorkspaceLimit = std::size_t(256) << 20;

template <class Perf> const Perf* fastest(const Perf* results, int count)
{
    for (int i = 0; i < count; ++i) // cuDNN returns them sorted by time
        if (results[i].status == CUDNN_STATUS_SUCCESS && results[i].memory <= kWorkspaceLimit) return &results[i];
    return nullptr;
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
        TOWERS_CUDNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, int(g.n), int(g.c),
                                                int(paddedH), int(paddedW)));
        TOWERS_CUDNN(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, int(g.n),
                                                int(d.outChannels), int(g.oh), int(g.ow)));
        TOWERS_CUDNN(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, int(d.outChannels),
                                                int(g.c), g.kh, g.kw));
        TOWERS_CUDNN(cudnnSetConvolution2dDescriptor(conv, padH, padW, g.sh, g.sw, 1, 1, CUDNN_CROSS_CORRELATION,
                                                     CUDNN_DATA_FLOAT));
        // FMA math keeps float32 exact to float32; TF32 only when the user allowed it.
        TOWERS_CUDNN(cudnnSetConvolutionMathType(conv, allowTf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
        int n = 0, c = 0, h = 0, wd = 0;
        TOWERS_CUDNN(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &c, &h, &wd));
        if (h != g.oh || wd != g.ow)
            throw BackendError("cuDNN computes a " + std::to_string(h) + "x" + std::to_string(wd) +
                               " output for convolution " + g.str() + ", Towers expects " + std::to_string(g.oh) +
                               "x" + std::to_string(g.ow));
    } catch (...) {
        release();
        throw;
    }
}

ConvPlan::~ConvPlan()
{
    release();
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
    if (it == m_plans.end()) it = m_plans.emplace(key, std::make_unique<ConvPlan>(d, m_options.allowTf32)).first;
    return *it->second;
}

Tensor CudaOps::padded(const ConvPlan& p, const Tensor& x)
{
    if (!p.needsPadding()) return x;
    const Window2d& g = p.desc.win;
    Tensor out({g.n, p.paddedH, p.paddedW, g.c}, DType::Float32, device());
    padNhwc(m_stream, f(x), f(out), g.n, g.h, g.w, g.c, p.paddedH, p.paddedW, p.extraTop, p.extraLeft);
    return out;
}

Tensor CudaOps::filterOhwi(const Conv2dDesc& d, const Tensor& w)
{
    Tensor out({d.outChannels, d.win.kh, d.win.kw, d.win.c}, DType::Float32, device());
    oihwToOhwi(m_stream, f(w), f(out), d.outChannels, d.win.c, d.win.kh, d.win.kw);
    return out;
}

void CudaOps::conv2dForward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                            Activation act)
{
    DeviceGuard guard(m_device);
    requireHere(x, "conv2d x");
    requireHere(w, "conv2d w");
    requireShape(x, d.inputShape(), "conv2d x");
    requireShape(w, d.weightShape(), "conv2d w");
    if (!b.empty()) {
        requireHere(b, "conv2d b");
        requireShape(b, {d.outChannels}, "conv2d b");
    }
    ensure(y, d.outputShape());
    ConvPlan& p = plan(d);
    const Tensor xp = padded(p, x);
    const Tensor wf = filterOhwi(d, w);
    const float one = 1, zero = 0;
    if (!p.haveForward) {
        cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int count = 0;
        TOWERS_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(m_cudnn, p.x, xp.raw(), p.w, wf.raw(), p.conv, p.y,
                                                            y.raw(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
                                                            results, workspace(kWorkspaceLimit), kWorkspaceLimit));
        const auto* best = fastest(results, count);
        if (!best) throw BackendError("cuDNN found no forward algorithm for convolution " + d.win.str());
        p.forward = best->algo;
        p.forwardWorkspace = best->memory;
        p.haveForward = true;
    }
    TOWERS_CUDNN(cudnnConvolutionForward(m_cudnn, &one, p.x, xp.raw(), p.w, wf.raw(), p.conv, p.forward,
                                         workspace(p.forwardWorkspace), p.forwardWorkspace, &zero, p.y, y.raw()));
    biasActivation(m_stream, f(y), b.empty() ? nullptr : f(b), y.numel() / d.outChannels, d.outChannels,
                   act == Activation::Relu);
}

void CudaOps::conv2dBackwardData(const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor& dx)
{
    DeviceGuard guard(m_device);
    requireHere(dy, "conv2d dy");
    requireHere(w, "conv2d w");
    requireShape(dy, d.outputShape(), "conv2d dy");
    requireShape(w, d.weightShape(), "conv2d w");
    ensure(dx, d.inputShape());
    ConvPlan& p = plan(d);
    const Tensor wf = filterOhwi(d, w);
    const Window2d& g = d.win;
    Tensor dxp = p.needsPadding() ? Tensor({g.n, p.paddedH, p.paddedW, g.c}, DType::Float32, device()) : dx;
    const float one = 1, zero = 0;
    if (!p.haveBackwardData) {
        cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        int count = 0;
        TOWERS_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(
            m_cudnn, p.w, wf.raw(), p.y, dy.raw(), p.conv, p.x, dxp.raw(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
            &count, results, workspace(kWorkspaceLimit), kWorkspaceLimit));
        const auto* best = fastest(results, count);
        if (!best) throw BackendError("cuDNN found no backward-data algorithm for convolution " + d.win.str());
        p.backwardData = best->algo;
        p.backwardDataWorkspace = best->memory;
        p.haveBackwardData = true;
    }
    TOWERS_CUDNN(cudnnConvolutionBackwardData(m_cudnn, &one, p.w, wf.raw(), p.y, dy.raw(), p.conv, p.backwardData,
                                              workspace(p.backwardDataWorkspace), p.backwardDataWorkspace, &zero, p.x,
                                              dxp.raw()));
    if (p.needsPadding())
        cropNhwc(m_stream, f(dxp), f(dx), g.n, g.h, g.w, g.c, p.paddedH, p.paddedW, p.extraTop, p.extraLeft);
}

void CudaOps::conv2dBackwardWeights(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db)
{
    DeviceGuard guard(m_device);
    requireHere(x, "conv2d x");
    requireHere(dy, "conv2d dy");
    requireShape(x, d.inputShape(), "conv2d x");
    requireShape(dy, d.outputShape(), "conv2d dy");
    ensure(dw, d.weightShape());
    ConvPlan& p = plan(d);
    const Tensor xp = padded(p, x);
    Tensor dwf({d.outChannels, d.win.kh, d.win.kw, d.win.c}, DType::Float32, device());
    const float one = 1, zero = 0;
    if (!p.haveBackwardFilter) {
        cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        int count = 0;
        TOWERS_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            m_cudnn, p.x, xp.raw(), p.y, dy.raw(), p.conv, p.w, dwf.raw(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
            &count, results, workspace(kWorkspaceLimit), kWorkspaceLimit));
        const auto* best = fastest(results, count);
        if (!best) throw BackendError("cuDNN found no backward-filter algorithm for convolution " + d.win.str());
        p.backwardFilter = best->algo;
        p.backwardFilterWorkspace = best->memory;
        p.haveBackwardFilter = true;
    }
    TOWERS_CUDNN(cudnnConvolutionBackwardFilter(m_cudnn, &one, p.x, xp.raw(), p.y, dy.raw(), p.conv,
                                                p.backwardFilter, workspace(p.backwardFilterWorkspace),
                                                p.backwardFilterWorkspace, &zero, p.w, dwf.raw()));
    ohwiToOihw(m_stream, f(dwf), f(dw), d.outChannels, d.win.c, d.win.kh, d.win.kw);
    if (db) {
        ensure(*db, {d.outChannels});
        biasGradient(m_stream, f(dy), f(*db), dy.numel() / d.outChannels, d.outChannels);
    }
}

} // namespace towers::engine::cuda
