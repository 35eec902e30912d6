#pragma once
// The CUDA execution context of one GPU: its stream, cuDNN and cuBLAS handles, the convolution
// workspace and the per-shape convolution plans (descriptors and the algorithms chosen from cuDNN's
// measurements). Every op opens an OpScope (stream_memory.h): its device current and its stream
// bound on the calling thread, so that the tensors it allocates, frees, zeroes or copies are
// ordered on that stream. Internal to the plugin; the engine sees it as an Ops.
//
// Capture (Ops::beginCapture) is CUDA stream capture into a graph, on a non-blocking capture stream
// of the context's own rather than on its stream: while a blocking stream captures, CUDA makes the
// legacy default stream unusable on the whole device (every thread's tensors made, copied or freed
// outside ops, another tower's included). The ops, the library handles and this thread's memory
// work for the device (stream_policy.h) go on the capture stream until the capture ends; the graph
// is replayed on the context's stream, after the work issued before it.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/gpu/gpu_backend.h"
#include "engine/ops/ops.h"

namespace towers::engine::cuda {

struct ConvPlan;

// A float32 tensor's device pointer, for the kernels' launchers and the libraries.
inline const float* floats(const Tensor& t)
{
    return static_cast<const float*>(t.raw());
}
inline float* floats(Tensor& t)
{
    return static_cast<float*>(t.raw());
}

// The ops the CUDA backend implements (cuDNN, cuBLAS and its own kernels), named one by one so
// that an op new to op_list.h runs staged through oneDNN until it is added here; the composite
// ops are the base class's compositions.
#define TOWERS_CUDA_OPS(X)                                                                         \
    X(conv2dForward)                                                                               \
    X(conv2dBackwardData)                                                                          \
    X(conv2dBackwardWeights)                                                                       \
    X(maxPoolForward)                                                                              \
    X(maxPoolBackward)                                                                             \
    X(avgPoolForward)                                                                              \
    X(avgPoolBackward)                                                                             \
    X(lrnForward)                                                                                  \
    X(lrnBackward)                                                                                 \
    X(linearForward)                                                                               \
    X(linearBackwardData)                                                                          \
    X(linearBackwardWeights)                                                                       \
    X(reluForward)                                                                                 \
    X(reluBackward)                                                                                \
    X(add)                                                                                         \
    X(dropoutForward)                                                                              \
    X(dropoutBackward)                                                                             \
    X(batchNormForwardTraining)                                                                    \
    X(batchNormForwardInference)                                                                   \
    X(foldBatchNorm)                                                                               \
    X(batchNormBackward)                                                                           \
    X(nhwcToNchw)                                                                                  \
    X(nchwToNhwc)                                                                                  \
    X(copyChannels)                                                                                \
    X(softmaxCrossEntropyForward)                                                                  \
    X(softmaxCrossEntropyBackward)                                                                 \
    X(sumSquares)                                                                                  \
    X(flagNonFinite)                                                                               \
    X(axpy)                                                                                        \
    X(clipToNorm)                                                                                  \
    X(sgdUpdate)                                                                                   \
    X(momentumUpdate)                                                                              \
    X(adamUpdate)                                                                                  \
    X(emaUpdate)                                                                                   \
    X(preprocessImages)

class CudaOps final : public Ops
{
public:
    CudaOps(int index, const GpuOpsOptions& options);
    ~CudaOps() override;
    CudaOps(const CudaOps&) = delete;
    CudaOps& operator=(const CudaOps&) = delete;

    std::string name() const override { return "cuda"; }
    Device device() const override { return {DeviceKind::Cuda, m_device}; }
    // GpuOpsOptions::precision: BFloat16 runs the convolutions and matrix products on bfloat16
    // copies of their operands (cuda_conv.cpp, gemm()).
    Precision precision() const override { return m_options.precision; }
    void synchronize() override;
    // Marks are CUDA events recorded on the stream, a ring of kMarkWindow made as needed and
    // reused.
    void clearMarks() override;
    int mark() override;
    void waitFor(int mark) override;
    bool reached(int mark) override;
    double millisecondsBetween(int a, int b) override;

    // The stream every op of this context runs on (the communicators order their collectives
    // after its work, and its later work after them, with events); captured work is replayed on
    // it.
    cudaStream_t stream() const { return m_ownStream; }

    // "" with stream-ordered memory pools on the GPU (a capture's temporaries are the graph's
    // allocations), else why not.
    std::string captureUnavailable() const override;

protected:
    TOWERS_CUDA_OPS(TOWERS_OP_OVERRIDE)
    // On this context's stream, without the host waiting (from and to page-locked memory).
    void uploadImpl(const Tensor& src, Tensor& dst) override;
    // On the context's copy stream (made on first use), its stream waiting for the copy's event.
    void prefetchImpl(const Tensor& src, Tensor& dst) override;
    void copyImpl(const Tensor& src, Tensor& dst) override;
    void downloadImpl(const Tensor& src, Tensor& dst) override;

    // Stream capture on the capture stream (made on first use), begun and ended on one thread.
    void beginCaptureImpl() override;
    std::unique_ptr<CapturedWork> endCaptureImpl() override;
    void abandonCaptureImpl() noexcept override;

private:
    // Points the ops, cuDNN and cuBLAS (with its workspace) at `s`; false when a library refused.
    bool issueOn(cudaStream_t s) noexcept;
    // The end of a capture, with the device current: the ops back on their stream, the thread's
    // memory work off the capture stream, and CUDA's capture ended. The graph when there is one
    // (null after an invalidated capture), and CUDA's status.
    std::pair<cudaGraph_t, cudaError_t> stopCapture() noexcept;
    // Unsupported when a host copy during a capture involves pageable memory, which a graph's
    // copy cannot use.
    void requirePinnedDuringCapture(const Tensor& host, const char* what) const;

    void ensure(Tensor& t, const Shape& shape, DType dtype = DType::Float32) const;
    // The workspace, grown to at least `bytes` (refused during a capture: the graph would own it).
    void* workspace(std::size_t bytes);
    ConvPlan& plan(const Conv2dDesc& d);
    // x (NHWC) with the pads cuDNN cannot express applied, or x itself.
    Tensor padded(const ConvPlan& p, const Tensor& x);
    // OIHW weights in cuDNN's OHWI filter layout.
    Tensor filterOhwi(const Conv2dDesc& d, const Tensor& w);
    // What cuDNN reads of float32 `t`: t itself, or in bf16 its bfloat16 copy. Where cuDNN
    // writes a result bound for float32 `t`: t itself, or in bf16 a bfloat16 tensor of its shape,
    // which fromCudnn() then makes float32 in `t`.
    Tensor cudnnInput(const Tensor& t);
    Tensor cudnnOutput(const Tensor& t);
    void fromCudnn(const Tensor& written, Tensor& t);
    bool bf16() const { return m_options.precision == Precision::BFloat16; }
    // A bfloat16 copy of float32 `t` (nearest even), a temporary of the op; and the float32 of a
    // bfloat16 result into `out` (of its shape).
    Tensor toBf16(const Tensor& t);
    void fromBf16(const Tensor& t, Tensor& out);
    // C (m x n, column-major, float32) = op(A) op(B) through cuBLAS, A and B float32 tensors read
    // as column-major with leading dimensions lda and ldb: float32 products (cublasSgemm), or in
    // bf16 their bfloat16 copies with float32 accumulation (cublasGemmEx).
    void gemm(cublasOperation_t opA, cublasOperation_t opB, int m, int n, int k, const Tensor& a,
              int lda, const Tensor& b, int ldb, Tensor& c, int ldc);

    int m_device;
    GpuOpsOptions m_options;
    cudaStream_t m_ownStream = nullptr; // this context's stream
    // Where the ops issue their work now: m_ownStream, or m_captureStream during a capture.
    cudaStream_t m_stream = nullptr;
    cudnnHandle_t m_cudnn = nullptr;
    cublasHandle_t m_cublas = nullptr;
    // cuBLAS's workspace, given explicitly so that it never allocates one of its own inside a
    // capture (and so that the GEMMs choose the same algorithms captured or not).
    Tensor m_cublasWorkspace;
    Tensor m_workspace;
    std::map<std::string, std::unique_ptr<ConvPlan>> m_plans;
    std::vector<cudaEvent_t> m_events; // the marks' events: mark m is m_events[m % kMarkWindow]
    int m_marks = 0;                   // made since clearMarks()
    // prefetch(): a non-blocking stream for host-to-device copies beside this context's work,
    // and the event its stream waits for.
    cudaStream_t m_copyStream = nullptr;
    cudaEvent_t m_copied = nullptr;
    // Capture: the non-blocking stream it records from (made on first use), the thread that
    // began the capture under way, and what captured work checks before a replay: that the
    // context is still there and not capturing (it points at this context while it lives).
    cudaStream_t m_captureStream = nullptr;
    std::thread::id m_captureThread;
    std::shared_ptr<CudaOps*> m_self;
};

} // namespace towers::engine::cuda
