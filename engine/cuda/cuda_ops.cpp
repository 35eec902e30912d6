// The CUDA backend's ops other than convolution (cuda_conv.cpp): cuBLAS for the fully connected
// layers, the backend's own kernels (kernels.h) for the rest.
#include "engine/cuda/cuda_ops.h"

#include <cmath>
#include <vector>

#include "engine/cuda/conv_plan.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/stream_memory.h"
#include "engine/ops/dropout_mask.h"
#include "engine/ops/op_checks.h"
#include "engine/ops/step_scalars.h"

namespace towers::engine::cuda {

CudaOps::CudaOps(int index, const GpuOpsOptions& options)
    : Ops(opSet({TOWERS_CUDA_OPS(TOWERS_OP_ID)})), m_device(index), m_options(options)
{
    DeviceGuard guard(m_device);
    // A blocking stream: it orders with the legacy default stream, on which the work outside ops
    // runs (tensors copied to the host or between devices, the same-device communicator's
    // synchronous average), so that such a copy sees every op issued before it. (The
    // communicators' own streams are non-blocking, ordered with this one by events.) Inside an op,
    // its memory work goes on this stream (stream_memory.h).
    TOWERS_CUDA(cudaStreamCreate(&m_stream));
    try {
        TOWERS_CUDNN(cudnnCreate(&m_cudnn));
        TOWERS_CUDNN(cudnnSetStream(m_cudnn, m_stream));
        TOWERS_CUBLAS(cublasCreate(&m_cublas));
        TOWERS_CUBLAS(cublasSetStream(m_cublas, m_stream));
        // Float32 GEMMs in float32 (CUBLAS_DEFAULT_MATH never uses TF32 unless asked), TF32 only
        // when the user allowed it.
        TOWERS_CUBLAS(cublasSetMathMode(m_cublas, m_options.allowTf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                      : CUBLAS_DEFAULT_MATH));
    } catch (...) {
        if (m_cublas) cublasDestroy(m_cublas);
        if (m_cudnn) cudnnDestroy(m_cudnn);
        cudaStreamDestroy(m_stream);
        throw;
    }
}

CudaOps::~CudaOps()
{
    DeviceGuard guard(m_device);
    m_plans.clear();
    m_workspace = Tensor();
    cudaStreamSynchronize(m_stream);
    if (m_copyStream) {
        cudaStreamSynchronize(m_copyStream);
        cudaEventDestroy(m_copied);
        cudaStreamDestroy(m_copyStream);
    }
    for (cudaEvent_t e : m_events) cudaEventDestroy(e);
    // The tensors this context allocated that outlive it are freed on the legacy stream from now
    // on: this stream's work is finished.
    retireStream(m_stream);
    cublasDestroy(m_cublas);
    cudnnDestroy(m_cudnn);
    cudaStreamDestroy(m_stream);
}

void CudaOps::synchronize()
{
    DeviceGuard guard(m_device);
    TOWERS_CUDA(cudaStreamSynchronize(m_stream));
}

void CudaOps::clearMarks()
{
    m_marks = 0;
}

int CudaOps::mark()
{
    DeviceGuard guard(m_device);
    const std::size_t slot = std::size_t(m_marks % kMarkWindow);
    if (slot == m_events.size()) {
        cudaEvent_t e = nullptr;
        TOWERS_CUDA(cudaEventCreate(&e)); // with timing
        m_events.push_back(e);
    }
    TOWERS_CUDA(cudaEventRecord(m_events[slot], m_stream));
    return m_marks++;
}

void CudaOps::waitFor(int mark)
{
    requireMark(mark, m_marks);
    DeviceGuard guard(m_device);
    TOWERS_CUDA(cudaEventSynchronize(m_events[std::size_t(mark % kMarkWindow)]));
}

double CudaOps::millisecondsBetween(int a, int b)
{
    requireMark(a, m_marks);
    requireMark(b, m_marks);
    DeviceGuard guard(m_device);
    float ms = 0;
    // Both events have completed: the caller waited for the later one.
    TOWERS_CUDA(cudaEventElapsedTime(&ms, m_events[std::size_t(a % kMarkWindow)],
                                     m_events[std::size_t(b % kMarkWindow)]));
    return double(ms);
}

void CudaOps::uploadImpl(const Tensor& src, Tensor& dst)
{
    const OpScope scope(m_device, m_stream);
    ensure(dst, src.shape(), src.dtype());
    // From page-locked memory the copy runs on this stream while the host issues the forward
    // pass behind it; from pageable memory CUDA stages it first.
    if (src.bytes())
        TOWERS_CUDA(
            cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyHostToDevice, m_stream));
}

void CudaOps::prefetchImpl(const Tensor& src, Tensor& dst)
{
    const OpScope scope(m_device, m_stream);
    if (!m_copyStream) {
        TOWERS_CUDA(cudaStreamCreateWithFlags(&m_copyStream, cudaStreamNonBlocking));
        const cudaError_t e = cudaEventCreateWithFlags(&m_copied, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            cudaStreamDestroy(m_copyStream);
            m_copyStream = nullptr;
            TOWERS_CUDA(e);
        }
    }
    TOWERS_CUDA(
        cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyHostToDevice, m_copyStream));
    TOWERS_CUDA(cudaEventRecord(m_copied, m_copyStream));
    TOWERS_CUDA(cudaStreamWaitEvent(m_stream, m_copied, 0));
}

void CudaOps::copyImpl(const Tensor& src, Tensor& dst)
{
    const OpScope scope(m_device, m_stream);
    ensure(dst, src.shape(), src.dtype());
    if (src.bytes() && dst.raw() != src.raw())
        TOWERS_CUDA(
            cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice, m_stream));
}

void CudaOps::downloadImpl(const Tensor& src, Tensor& dst)
{
    const OpScope scope(m_device, m_stream);
    // Into page-locked memory the copy runs on this stream and the host goes on; into pageable
    // memory CUDA returns once the bytes are there.
    if (src.bytes())
        TOWERS_CUDA(
            cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToHost, m_stream));
}

void CudaOps::ensure(Tensor& t, const Shape& shape, DType dtype) const
{
    Tensor::ensure(t, shape, dtype, device());
}

void* CudaOps::workspace(std::size_t bytes)
{
    if (m_workspace.empty() || m_workspace.bytes() < bytes)
        m_workspace = Tensor({static_cast<std::int64_t>(std::max<std::size_t>(bytes, 1))},
                             DType::UInt8, device());
    return m_workspace.raw();
}

// ---- pooling and LRN ----

namespace {

// A step's scalars on the GPU (checked by the op's entry), or nullptr for the host arguments.
const double* stepScalars(const Tensor& scalars)
{
    return scalars.empty() ? nullptr : static_cast<const double*>(scalars.raw());
}

WindowGeometry geometry(const Window2d& w)
{
    return {w.n, w.h, w.w, w.c, w.oh, w.ow, w.kh, w.kw, w.sh, w.sw, w.padTop, w.padLeft};
}
} // namespace

void CudaOps::maxPoolForwardImpl(const Pool2dDesc& d, const Tensor& x, Tensor& y, Tensor& workspace)
{
    const OpScope scope(m_device, m_stream);
    if (x.numel() > INT32_MAX)
        throw Unsupported("CUDA max pool: input too large for int32 indices");
    ensure(y, d.outputShape());
    ensure(workspace, d.outputShape(), DType::Int32);
    cuda::maxPoolForward(m_stream, geometry(d.win), floats(x), floats(y),
                         static_cast<std::int32_t*>(workspace.raw()));
}

// x and y are not read: the workspace holds each maximum's index (the entry checks them).
void CudaOps::maxPoolBackwardImpl(const Pool2dDesc& d, const Tensor& /*x*/, const Tensor& /*y*/,
                                  const Tensor& dy, const Tensor& workspace, Tensor& dx)
{
    const OpScope scope(m_device, m_stream);
    if (workspace.empty()) throw InvalidArgument("max pool workspace: tensor is empty");
    requireShape(workspace, d.outputShape(), "max pool workspace");
    requireDType(workspace, DType::Int32, "max pool workspace");
    ensure(dx, d.inputShape());
    cuda::maxPoolBackward(m_stream, geometry(d.win), floats(dy),
                          static_cast<const std::int32_t*>(workspace.raw()), floats(dx));
}

void CudaOps::lrnForwardImpl(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace)
{
    const OpScope scope(m_device, m_stream);
    ensure(y, d.shape);
    ensure(workspace, d.shape);
    const std::int64_t c = d.shape[d.shape.rank() - 1];
    cuda::lrnForward(m_stream, floats(x), floats(y), floats(workspace), x.numel() / c, c,
                     d.depthRadius, float(d.bias), float(d.alpha), float(d.beta));
}

void CudaOps::lrnBackwardImpl(const LrnDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                              const Tensor& workspace, Tensor& dx)
{
    const OpScope scope(m_device, m_stream);
    requireShape(workspace, d.shape, "lrn workspace");
    requireDType(workspace, DType::Float32, "lrn workspace");
    ensure(dx, d.shape);
    const std::int64_t c = d.shape[d.shape.rank() - 1];
    cuda::lrnBackward(m_stream, floats(x), floats(y), floats(dy), floats(workspace), floats(dx),
                      x.numel() / c, c, d.depthRadius, float(d.alpha), float(d.beta));
}

// ---- fully connected, row-major through column-major cuBLAS (see each call) ----

void CudaOps::linearForwardImpl(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                                Activation act)
{
    const OpScope scope(m_device, m_stream);
    const auto d = checks::linearForward(x, w);
    ensure(y, {d.n, d.out});
    // y^T (out x n) = w (seen column-major: in x out, transposed) * x^T (in x n).
    const float one = 1, zero = 0;
    TOWERS_CUBLAS(cublasSgemm(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(d.out), int(d.n), int(d.in),
                              &one, floats(w), int(d.in), floats(x), int(d.in), &zero, floats(y),
                              int(d.out)));
    biasActivation(m_stream, floats(y), b.empty() ? nullptr : floats(b), d.n, d.out,
                   act == Activation::Relu);
}

void CudaOps::linearBackwardDataImpl(const Tensor& dy, const Tensor& w, Tensor& dx)
{
    const OpScope scope(m_device, m_stream);
    const auto d = checks::linearBackwardData(dy, w);
    ensure(dx, {d.n, d.in});
    // dx^T (in x n) = w^T (in x out, column-major as stored) * dy^T (out x n).
    const float one = 1, zero = 0;
    TOWERS_CUBLAS(cublasSgemm(m_cublas, CUBLAS_OP_N, CUBLAS_OP_N, int(d.in), int(d.n), int(d.out),
                              &one, floats(w), int(d.in), floats(dy), int(d.out), &zero, floats(dx),
                              int(d.in)));
}

void CudaOps::linearBackwardWeightsImpl(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db)
{
    const OpScope scope(m_device, m_stream);
    const auto d = checks::linearBackwardWeights(x, dy);
    ensure(dw, {d.out, d.in});
    // dw^T (in x out) = x^T (in x n) * dy (n x out: dy^T as stored, transposed).
    const float one = 1, zero = 0;
    TOWERS_CUBLAS(cublasSgemm(m_cublas, CUBLAS_OP_N, CUBLAS_OP_T, int(d.in), int(d.out), int(d.n),
                              &one, floats(x), int(d.in), floats(dy), int(d.out), &zero, floats(dw),
                              int(d.in)));
    if (db) {
        ensure(*db, {d.out});
        biasGradient(m_stream, floats(dy), floats(*db), d.n, d.out);
    }
}

// ---- element-wise ----

void CudaOps::reluForwardImpl(const Tensor& x, Tensor& y)
{
    const OpScope scope(m_device, m_stream);
    ensure(y, x.shape());
    cuda::reluForward(m_stream, floats(x), floats(y), x.numel());
}

void CudaOps::reluBackwardImpl(const Tensor& y, const Tensor& dy, Tensor& dx)
{
    const OpScope scope(m_device, m_stream);
    if (&dx != &dy) ensure(dx, y.shape());
    cuda::reluBackward(m_stream, floats(y), floats(dy), floats(dx), y.numel());
}

void CudaOps::addImpl(const Tensor& a, const Tensor& b, Tensor& y)
{
    const OpScope scope(m_device, m_stream);
    if (&y != &a && &y != &b) ensure(y, a.shape());
    addTensors(m_stream, floats(a), floats(b), floats(y), a.numel());
}

void CudaOps::dropoutForwardImpl(const Tensor& x, double rate, std::uint64_t seed, Tensor& y,
                                 Tensor& mask, const Tensor& scalars)
{
    const OpScope scope(m_device, m_stream);
    ensure(y, x.shape());
    ensure(mask, x.shape(), DType::UInt8);
    cuda::dropoutForward(m_stream, floats(x), floats(y), static_cast<std::uint8_t*>(mask.raw()),
                         x.numel(), seed, dropoutThreshold(rate),
                         static_cast<float>(1.0 / (1.0 - rate)), stepScalars(scalars));
}

void CudaOps::dropoutBackwardImpl(const Tensor& dy, const Tensor& mask, double rate, Tensor& dx)
{
    const OpScope scope(m_device, m_stream);
    ensure(dx, dy.shape());
    cuda::dropoutBackward(m_stream, floats(dy), static_cast<const std::uint8_t*>(mask.raw()),
                          floats(dx), dy.numel(), static_cast<float>(1.0 / (1.0 - rate)));
}

// ---- batch normalisation ----

void CudaOps::batchNormForwardTrainingImpl(const BatchNormDesc& d, const Tensor& x,
                                           const Tensor& gamma, const Tensor& beta, Tensor& y,
                                           Tensor& runningMean, Tensor& runningVar,
                                           Tensor& saveMean, Tensor& saveVar)
{
    const OpScope scope(m_device, m_stream);
    const std::int64_t c = d.channels(), rows = d.rows();
    ensure(y, d.shape);
    ensure(saveMean, {c});
    ensure(saveVar, {c});
    batchNormStatistics(m_stream, floats(x), floats(saveMean), floats(saveVar), rows, c);
    batchNormApply(m_stream, floats(x), floats(saveMean), floats(saveVar), floats(gamma),
                   floats(beta), floats(y), rows, c, float(d.epsilon));
    batchNormRunningUpdate(m_stream, floats(runningMean), floats(runningVar), floats(saveMean),
                           floats(saveVar), c, rows, float(d.momentum));
}

void CudaOps::batchNormForwardInferenceImpl(const BatchNormDesc& d, const Tensor& x,
                                            const Tensor& gamma, const Tensor& beta,
                                            const Tensor& runningMean, const Tensor& runningVar,
                                            Tensor& y)
{
    const OpScope scope(m_device, m_stream);
    ensure(y, d.shape);
    batchNormApply(m_stream, floats(x), floats(runningMean), floats(runningVar), floats(gamma),
                   floats(beta), floats(y), d.rows(), d.channels(), float(d.epsilon));
}

void CudaOps::batchNormBackwardImpl(const BatchNormDesc& d, const Tensor& x, const Tensor& dy,
                                    const Tensor& gamma, const Tensor& saveMean,
                                    const Tensor& saveVar, Tensor& dx, Tensor& dgamma,
                                    Tensor& dbeta)
{
    const OpScope scope(m_device, m_stream);
    const std::int64_t c = d.channels();
    ensure(dx, d.shape);
    ensure(dgamma, {c});
    ensure(dbeta, {c});
    cuda::batchNormBackward(m_stream, floats(x), floats(dy), floats(saveMean), floats(saveVar),
                            floats(gamma), floats(dx), floats(dgamma), floats(dbeta), d.rows(), c,
                            float(d.epsilon));
}

// ---- layout ----

void CudaOps::nhwcToNchwImpl(const Tensor& x, Tensor& y)
{
    const OpScope scope(m_device, m_stream);
    ensure(y, {x.dim(0), x.dim(3), x.dim(1), x.dim(2)});
    cuda::nhwcToNchw(m_stream, floats(x), floats(y), x.dim(0), x.dim(1), x.dim(2), x.dim(3));
}

void CudaOps::nchwToNhwcImpl(const Tensor& x, Tensor& y)
{
    const OpScope scope(m_device, m_stream);
    ensure(y, {x.dim(0), x.dim(2), x.dim(3), x.dim(1)});
    cuda::nchwToNhwc(m_stream, floats(x), floats(y), x.dim(0), x.dim(2), x.dim(3), x.dim(1));
}

// ---- loss ----

void CudaOps::softmaxCrossEntropyForwardImpl(const Tensor& logits, const Tensor& labels,
                                             Tensor& probs, Tensor& loss)
{
    const OpScope scope(m_device, m_stream);
    const std::int64_t n = logits.dim(0), k = logits.dim(1);
    ensure(probs, logits.shape());
    ensure(loss, Shape{1}, DType::Float64);
    // No wait for the GPU: a bad label makes the loss NaN (op_list.h).
    cuda::softmaxCrossEntropyForward(m_stream, floats(logits),
                                     static_cast<const std::int32_t*>(labels.raw()), floats(probs),
                                     static_cast<double*>(loss.raw()), n, k);
}

void CudaOps::softmaxCrossEntropyBackwardImpl(const Tensor& probs, const Tensor& labels,
                                              double scale, Tensor& dlogits)
{
    const OpScope scope(m_device, m_stream);
    ensure(dlogits, probs.shape());
    cuda::softmaxCrossEntropyBackward(
        m_stream, floats(probs), static_cast<const std::int32_t*>(labels.raw()), floats(dlogits),
        probs.dim(0), probs.dim(1), static_cast<float>(scale));
}

// ---- reductions and updates ----

void CudaOps::sumSquaresImpl(const Tensor& x, double scale, Tensor& sum)
{
    const OpScope scope(m_device, m_stream);
    cuda::sumSquares(m_stream, floats(x), static_cast<double*>(sum.raw()), x.numel(), scale);
}

void CudaOps::flagNonFiniteImpl(const Tensor& x, Tensor& flag)
{
    const OpScope scope(m_device, m_stream);
    cuda::flagNonFinite(m_stream, floats(x), static_cast<float*>(flag.raw()), x.numel());
}

void CudaOps::axpyImpl(double alpha, const Tensor& x, Tensor& y)
{
    const OpScope scope(m_device, m_stream);
    cuda::axpy(m_stream, static_cast<float>(alpha), floats(x), floats(y), x.numel());
}

namespace {
// An update's skip flag for its kernel: nullptr when there is none (op_list.h).
const float* skipFlag(const Tensor& skip)
{
    return skip.empty() ? nullptr : floats(skip);
}

} // namespace

void CudaOps::sgdUpdateImpl(double lr, const Tensor& g, Tensor& w, const Tensor& skip,
                            const Tensor& scalars)
{
    const OpScope scope(m_device, m_stream);
    // axpy's kernel with alpha = -lr: the bits of axpy(-lr, g, w).
    cuda::sgdUpdate(m_stream, static_cast<float>(lr), floats(g), floats(w), w.numel(),
                    skipFlag(skip), stepScalars(scalars));
}

void CudaOps::momentumUpdateImpl(const MomentumStep& s, const Tensor& g, Tensor& buf, Tensor& w,
                                 const Tensor& skip, const Tensor& scalars)
{
    const OpScope scope(m_device, m_stream);
    cuda::momentumUpdate(m_stream, floats(g), floats(buf), floats(w), w.numel(), float(s.lr),
                         float(s.momentum), float(s.dampening), s.nesterov, s.first, skipFlag(skip),
                         stepScalars(scalars));
}

void CudaOps::emaUpdateImpl(double keep, const Tensor& value, Tensor& shadow, const Tensor& skip,
                            const Tensor& scalars)
{
    const OpScope scope(m_device, m_stream);
    cuda::emaUpdate(m_stream, floats(value), floats(shadow), shadow.numel(), float(keep),
                    skipFlag(skip), stepScalars(scalars));
}

void CudaOps::adamUpdateImpl(const AdamStep& s, const Tensor& g, Tensor& m, Tensor& v, Tensor& w,
                             const Tensor& skip, const Tensor& scalars)
{
    const OpScope scope(m_device, m_stream);
    if (s.step < 1) throw InvalidArgument("adamUpdate: step must be at least 1");
    const AdamCorrections c = adamCorrections(s.beta1, s.beta2, s.step);
    cuda::adamUpdate(m_stream, floats(g), floats(m), floats(v), floats(w), w.numel(), float(s.lr),
                     float(s.beta1), float(s.beta2), float(s.epsilon), c.first, c.secondSqrt,
                     skipFlag(skip), stepScalars(scalars));
}

// ---- input ----

void CudaOps::preprocessImagesImpl(const PreprocessDesc& d, const Tensor& source,
                                   const Tensor& draws, Tensor& y)
{
    const OpScope scope(m_device, m_stream);
    const Tensor src = source, rows = draws;
    PreprocessParams p{};
    p.sourceCount = src.dim(0);
    p.sourceHeight = static_cast<int>(src.dim(1));
    p.sourceWidth = static_cast<int>(src.dim(2));
    p.height = d.height;
    p.width = d.width;
    p.channels = d.channels;
    p.normalization = d.normalization;
    if (d.normalization == static_cast<int>(preprocess::Normalization::MeanStd))
        for (int k = 0; k < d.channels; ++k) {
            p.mean[k] = d.mean[static_cast<std::size_t>(k)];
            p.stddev[k] = d.stddev[static_cast<std::size_t>(k)];
        }
    ensure(y, {rows.dim(0), d.height, d.width, d.channels});
    // No wait for the GPU: a row that does not fit makes its image NaN (op_list.h).
    cuda::preprocessImages(m_stream, p, static_cast<const std::uint8_t*>(src.raw()),
                           static_cast<const double*>(rows.raw()), floats(y), rows.dim(0));
}

} // namespace towers::engine::cuda
