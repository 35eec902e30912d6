// The CUDA backend's ops other than convolution (cuda_conv.cpp): cuBLAS for the fully connected
// layers, the backend's own kernels (kernels.h) for the rest.
#include "engine/cuda/cuda_ops.h"

#include <cmath>
#include <thread>
#include <utility>
#include <vector>

#include "engine/cuda/conv_plan.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/stream_memory.h"
#include "engine/ops/dropout_mask.h"
#include "engine/ops/op_checks.h"
#include "engine/ops/step_scalars.h"

namespace towers::engine::cuda {

namespace {

// cuBLAS's recommended workspace: at least its default pool's size, 32 MiB on Hopper and later.
std::size_t cublasWorkspaceBytes(int computeMajor)
{
    return std::size_t(computeMajor >= 9 ? 32 : 4) << 20;
}

// Whether a failed capture failed for what was in it (a call CUDA cannot capture, work joined
// from another stream) rather than for the device.
bool captureRefused(cudaError_t status)
{
    switch (status) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
        return true;
    default:
        return false;
    }
}

// A CUDA graph instantiated from a capture, replayed on its context's stream. It keeps the
// convolution workspace its kernels were captured with (the context makes a larger one when a new
// shape needs it, and the graph's would be freed), and needs the context itself to replay.
class CudaGraphWork final : public CapturedWork
{
public:
    CudaGraphWork(int device, cudaStream_t stream, cudaGraphExec_t exec, std::size_t nodes,
                  std::weak_ptr<CudaOps*> context, std::vector<Tensor> kept)
        : m_device(device), m_stream(stream), m_exec(exec), m_nodes(nodes),
          m_context(std::move(context)), m_kept(std::move(kept))
    {
    }
    ~CudaGraphWork() override
    {
        // A replay still running finishes first (CUDA frees the graph when it is done); the kept
        // tensors are freed on their streams, after it.
        const QuietDeviceGuard current(m_device);
        if (cudaGraphExecDestroy(m_exec) != cudaSuccess) cudaGetLastError();
    }
    std::size_t size() const override { return m_nodes; }

protected:
    void launch() override
    {
        const std::shared_ptr<CudaOps*> context = m_context.lock();
        if (!context || !*context)
            throw InvalidArgument("replay: the cuda:" + std::to_string(m_device) +
                                  " context the work was captured from is gone");
        if ((*context)->capturing())
            throw Unsupported("replay during a capture: captured work replays on its context's "
                              "stream, outside the capture (cuda)");
        if (!m_nodes) return; // a part with nothing in it (two cuts in a row)
        DeviceGuard guard(m_device);
        TOWERS_CUDA(cudaGraphLaunch(m_exec, m_stream));
    }

private:
    int m_device;
    cudaStream_t m_stream;
    cudaGraphExec_t m_exec;
    std::size_t m_nodes;
    std::weak_ptr<CudaOps*> m_context;
    std::vector<Tensor> m_kept;
};

} // namespace

CudaOps::CudaOps(int index, const GpuOpsOptions& options)
    : Ops(opSet({TOWERS_CUDA_OPS(TOWERS_OP_ID)})), m_device(index), m_options(options),
      m_self(std::make_shared<CudaOps*>(this))
{
    DeviceGuard guard(m_device);
    // A blocking stream: it orders with the legacy default stream, on which the work outside ops
    // runs (tensors copied to the host or between devices, the same-device communicator's
    // synchronous average), so that such a copy sees every op issued before it. (The
    // communicators' own streams are non-blocking, ordered with this one by events.) Inside an op,
    // its memory work goes on this stream (stream_memory.h).
    TOWERS_CUDA(cudaStreamCreate(&m_ownStream));
    m_stream = m_ownStream;
    try {
        int major = 0, minor = 0;
        TOWERS_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, m_device));
        TOWERS_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, m_device));
        if (bf16())
            if (const std::string no =
                    bf16UnavailableOn("cuda:" + std::to_string(m_device), major, minor);
                !no.empty())
                throw Unsupported(no);
        m_cublasWorkspace =
            Tensor({std::int64_t(cublasWorkspaceBytes(major))}, DType::UInt8, device());
        TOWERS_CUDNN(cudnnCreate(&m_cudnn));
        TOWERS_CUDNN(cudnnSetStream(m_cudnn, m_stream));
        TOWERS_CUBLAS(cublasCreate(&m_cublas));
        TOWERS_CUBLAS(cublasSetStream(m_cublas, m_stream));
        TOWERS_CUBLAS(
            cublasSetWorkspace(m_cublas, m_cublasWorkspace.raw(), m_cublasWorkspace.bytes()));
        // Float32 GEMMs in float32 (CUBLAS_DEFAULT_MATH never uses TF32 unless asked), TF32 only
        // when the user allowed it.
        TOWERS_CUBLAS(cublasSetMathMode(m_cublas, m_options.allowTf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                      : CUBLAS_DEFAULT_MATH));
    } catch (...) {
        if (m_cublas) cublasDestroy(m_cublas);
        if (m_cudnn) cudnnDestroy(m_cudnn);
        m_cublasWorkspace = Tensor();
        cudaStreamSynchronize(m_ownStream);
        retireStream(m_ownStream);
        cudaStreamDestroy(m_ownStream);
        throw;
    }
}

CudaOps::~CudaOps()
{
    // A capture left under way (an exception nobody abandoned) ends with nothing of it kept; work
    // captured from this context can no longer be replayed.
    abandonCapture();
    m_self.reset();
    DeviceGuard guard(m_device);
    m_plans.clear();
    m_workspace = Tensor();
    cudaStreamSynchronize(m_ownStream);
    if (m_copyStream) {
        cudaStreamSynchronize(m_copyStream);
        cudaEventDestroy(m_copied);
        cudaStreamDestroy(m_copyStream);
    }
    for (cudaEvent_t e : m_events) cudaEventDestroy(e);
    // The tensors this context allocated that outlive it are freed on the legacy stream from now
    // on: this stream's work is finished. (Nothing runs on the capture stream: what was
    // allocated there is void.)
    retireStream(m_ownStream);
    if (m_captureStream) {
        retireStream(m_captureStream);
        cudaStreamDestroy(m_captureStream);
    }
    cublasDestroy(m_cublas);
    cudnnDestroy(m_cudnn);
    cudaStreamDestroy(m_ownStream);
}

void CudaOps::synchronize()
{
    refuseDuringCapture("synchronize", "captured work does not run until replayed");
    DeviceGuard guard(m_device);
    TOWERS_CUDA(cudaStreamSynchronize(m_ownStream));
}

void CudaOps::clearMarks()
{
    m_marks = 0;
}

int CudaOps::mark()
{
    refuseDuringCapture("mark", "a mark times the device's work as it runs");
    DeviceGuard guard(m_device);
    const std::size_t slot = std::size_t(m_marks % kMarkWindow);
    if (slot == m_events.size()) {
        cudaEvent_t e = nullptr;
        TOWERS_CUDA(cudaEventCreate(&e)); // with timing
        m_events.push_back(e);
    }
    TOWERS_CUDA(cudaEventRecord(m_events[slot], m_ownStream));
    return m_marks++;
}

void CudaOps::waitFor(int mark)
{
    refuseDuringCapture("waitFor", "captured work does not run until replayed");
    requireMark(mark, m_marks);
    DeviceGuard guard(m_device);
    TOWERS_CUDA(cudaEventSynchronize(m_events[std::size_t(mark % kMarkWindow)]));
}

bool CudaOps::reached(int mark)
{
    refuseDuringCapture("reached", "captured work does not run until replayed");
    requireMark(mark, m_marks);
    DeviceGuard guard(m_device);
    const cudaError_t e = cudaEventQuery(m_events[std::size_t(mark % kMarkWindow)]);
    if (e == cudaErrorNotReady) {
        cudaGetLastError(); // not an error: never reported by the next launch's check
        return false;
    }
    // A fault of the work before it: reported as waitFor reports it (the wait returns at once).
    if (e != cudaSuccess)
        TOWERS_CUDA(cudaEventSynchronize(m_events[std::size_t(mark % kMarkWindow)]));
    return true;
}

// Allowed during a capture: the marks were made, and waited for, before it.
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

// ---- capture ----

std::string CudaOps::captureUnavailable() const
{
    if (!memoryPoolsSupported(m_device)) {
        const std::string failure = memoryPoolFailure(m_device);
        return "cuda:" + std::to_string(m_device) +
               " has no stream-ordered memory pool, from which captured work's temporaries are "
               "allocated" +
               (failure.empty() ? std::string() : " (" + failure + ")");
    }
    return {};
}

bool CudaOps::issueOn(cudaStream_t s) noexcept
{
    m_stream = s;
    bool ok = cudnnSetStream(m_cudnn, s) == CUDNN_STATUS_SUCCESS;
    ok = cublasSetStream(m_cublas, s) == CUBLAS_STATUS_SUCCESS && ok;
    // cublasSetStream gives the handle its default workspace back: ours again.
    ok = cublasSetWorkspace(m_cublas, m_cublasWorkspace.raw(), m_cublasWorkspace.bytes()) ==
             CUBLAS_STATUS_SUCCESS &&
         ok;
    return ok;
}

std::pair<cudaGraph_t, cudaError_t> CudaOps::stopCapture() noexcept
{
    issueOn(m_ownStream);
    unbindCapture();
    cudaGraph_t graph = nullptr;
    const cudaError_t status = cudaStreamEndCapture(m_captureStream, &graph);
    if (status != cudaSuccess) cudaGetLastError(); // not sticky: the context goes on
    return {graph, status};
}

void CudaOps::beginCaptureImpl()
{
    const std::string gpu = "cuda:" + std::to_string(m_device);
    if (currentCaptureBinding().stream)
        throw Unsupported("beginCapture on " + gpu +
                          ": this thread is capturing another context's work already (cuda)");
    DeviceGuard guard(m_device);
    // Non-blocking, so that the legacy stream stays usable while it captures (cuda_ops.h).
    if (!m_captureStream)
        TOWERS_CUDA(cudaStreamCreateWithFlags(&m_captureStream, cudaStreamNonBlocking));
    // Thread-local: a call on this thread that CUDA cannot capture (cudaMalloc, a synchronisation)
    // fails and invalidates the capture instead of slipping out of it; other threads, the other
    // towers', go on undisturbed.
    TOWERS_CUDA(cudaStreamBeginCapture(m_captureStream, cudaStreamCaptureModeThreadLocal));
    m_captureThread = std::this_thread::get_id();
    bindCapture(m_device, m_captureStream);
    if (!issueOn(m_captureStream)) {
        auto [graph, status] = stopCapture();
        if (graph) cudaGraphDestroy(graph);
        (void)status;
        cudaGetLastError();
        throw BackendError("cannot capture on " + gpu +
                           ": cuDNN or cuBLAS refused the capture stream");
    }
}

std::unique_ptr<CapturedWork> CudaOps::endCaptureImpl()
{
    const std::string gpu = "cuda:" + std::to_string(m_device);
    if (std::this_thread::get_id() != m_captureThread) {
        // CUDA ends a thread-local capture only on the thread that began it: this one is lost.
        // The ops go back to their stream; the capture stream is left to it (a new one serves
        // the next capture), and what was allocated in it is void.
        issueOn(m_ownStream);
        voidCapturedBlocks(m_captureStream);
        m_captureStream = nullptr;
        throw InvalidArgument("endCapture on " + gpu +
                              ": the capture was begun on another thread, the only one CUDA "
                              "ends it on; it is lost");
    }
    const QuietDeviceGuard current(m_device);
    auto [graph, status] = stopCapture();
    if (status != cudaSuccess || !graph) {
        if (graph) cudaGraphDestroy(graph);
        const std::size_t lost = voidCapturedBlocks(m_captureStream);
        std::string text = "the capture on " + gpu + " failed: " + cudaGetErrorString(status);
        if (captureRefused(status))
            text += " (a call in it that CUDA cannot capture, as a wait for the device)";
        if (lost)
            text += "; the " + std::to_string(lost) + " tensor" + (lost == 1 ? "" : "s") +
                    " made during it and still held never had memory: let them go";
        if (captureRefused(status)) throw Unsupported(text);
        throw BackendError(text);
    }
    if (const std::size_t left = capturedBlocks(m_captureStream)) {
        cudaGraphDestroy(graph);
        voidCapturedBlocks(m_captureStream);
        throw Unsupported(
            "the capture made " + std::to_string(left) + " tensor" + (left == 1 ? "" : "s") +
            " on " + gpu +
            " that outlive the capture: a graph's allocations are its own, so the tensors that "
            "captured work leaves behind must be made before the capture; these never had memory "
            "(the graph is gone): let them go without using them");
    }
    std::size_t nodes = 0;
    cudaError_t e = cudaGraphGetNodes(graph, nullptr, &nodes);
    const char* call = "cudaGraphGetNodes";
    cudaGraphExec_t exec = nullptr;
    // Every allocation of ours in the graph is freed in it (checked above); auto-free covers any a
    // library made inside the capture and left, which would stop the graph's next launch.
    if (e == cudaSuccess) {
        e = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
        call = "cudaGraphInstantiate";
    }
    cudaGraphDestroy(graph);
    if (e == cudaSuccess) {
        // Its memory mapped now, where a failure is the capture's (the step then goes op by op),
        // not at its first replay; what the pool and dropped graphs hold idle is given back when
        // that runs short.
        call = "cudaGraphUpload";
        e = cudaGraphUpload(exec, m_ownStream);
        if (e == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            trimIdleMemory(m_device);
            e = cudaGraphUpload(exec, m_ownStream);
        }
        if (e != cudaSuccess) cudaGraphExecDestroy(exec);
    }
    if (e != cudaSuccess) throwCuda(e, call, __FILE__, __LINE__);
    std::vector<Tensor> kept = {m_workspace, m_cublasWorkspace};
    return std::make_unique<CudaGraphWork>(m_device, m_ownStream, exec, nodes, m_self,
                                           std::move(kept));
}

void CudaOps::abandonCaptureImpl() noexcept
{
    if (std::this_thread::get_id() != m_captureThread) {
        issueOn(m_ownStream); // as endCaptureImpl on another thread
        voidCapturedBlocks(m_captureStream);
        m_captureStream = nullptr;
        return;
    }
    const QuietDeviceGuard current(m_device);
    auto [graph, status] = stopCapture();
    (void)status;
    if (graph) cudaGraphDestroy(graph);
    voidCapturedBlocks(m_captureStream);
    cudaGetLastError();
}

void CudaOps::requirePinnedDuringCapture(const Tensor& host, const char* what) const
{
    if (!capturing() || !host.bytes()) return;
    const std::shared_ptr<const Buffer> storage = host.storage().lock();
    if (!storage || !storage->pinned())
        refuseDuringCapture(what, "its host tensor is in pageable memory, which a graph's copy "
                                  "cannot read or write (Tensor::pinned)");
}

void CudaOps::uploadImpl(const Tensor& src, Tensor& dst)
{
    requirePinnedDuringCapture(src, "upload");
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
    requirePinnedDuringCapture(dst, "download");
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
    if (m_workspace.empty() || m_workspace.bytes() < bytes) {
        // Made inside a capture, it would be the graph's and outlive it.
        refuseDuringCapture("growing the convolution workspace",
                            "run the same work once before capturing it");
        m_workspace = Tensor({static_cast<std::int64_t>(std::max<std::size_t>(bytes, 1))},
                             DType::UInt8, device());
    }
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

void CudaOps::avgPoolForwardImpl(const Pool2dDesc& d, const Tensor& x, Tensor& y)
{
    const OpScope scope(m_device, m_stream);
    ensure(y, d.outputShape());
    cuda::avgPoolForward(m_stream, geometry(d.win), floats(x), floats(y));
}

void CudaOps::avgPoolBackwardImpl(const Pool2dDesc& d, const Tensor& dy, Tensor& dx)
{
    const OpScope scope(m_device, m_stream);
    ensure(dx, d.inputShape());
    cuda::avgPoolBackward(m_stream, geometry(d.win), floats(dy), floats(dx));
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

Tensor CudaOps::toBf16(const Tensor& t)
{
    Tensor out(t.shape(), DType::BFloat16, device());
    toBfloat16(m_stream, floats(t), static_cast<std::uint16_t*>(out.raw()), t.numel());
    return out;
}

void CudaOps::fromBf16(const Tensor& t, Tensor& out)
{
    fromBfloat16(m_stream, static_cast<const std::uint16_t*>(t.raw()), floats(out), t.numel());
}

void CudaOps::gemm(cublasOperation_t opA, cublasOperation_t opB, int m, int n, int k,
                   const Tensor& a, int lda, const Tensor& b, int ldb, Tensor& c, int ldc)
{
    const float one = 1, zero = 0;
    if (!bf16()) {
        TOWERS_CUBLAS(cublasSgemm(m_cublas, opA, opB, m, n, k, &one, floats(a), lda, floats(b), ldb,
                                  &zero, floats(c), ldc));
        return;
    }
    const Tensor a16 = toBf16(a), b16 = toBf16(b);
    TOWERS_CUBLAS(cublasGemmEx(m_cublas, opA, opB, m, n, k, &one, a16.raw(), CUDA_R_16BF, lda,
                               b16.raw(), CUDA_R_16BF, ldb, &zero, c.raw(), CUDA_R_32F, ldc,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaOps::linearForwardImpl(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                                Activation act)
{
    const OpScope scope(m_device, m_stream);
    const auto d = checks::linearForward(x, w);
    ensure(y, {d.n, d.out});
    // y^T (out x n) = w (seen column-major: in x out, transposed) * x^T (in x n).
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, int(d.out), int(d.n), int(d.in), w, int(d.in), x, int(d.in), y,
         int(d.out));
    biasActivation(m_stream, floats(y), b.empty() ? nullptr : floats(b), d.n, d.out,
                   act == Activation::Relu);
}

void CudaOps::linearBackwardDataImpl(const Tensor& dy, const Tensor& w, Tensor& dx)
{
    const OpScope scope(m_device, m_stream);
    const auto d = checks::linearBackwardData(dy, w);
    ensure(dx, {d.n, d.in});
    // dx^T (in x n) = w^T (in x out, column-major as stored) * dy^T (out x n).
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, int(d.in), int(d.n), int(d.out), w, int(d.in), dy, int(d.out),
         dx, int(d.in));
}

void CudaOps::linearBackwardWeightsImpl(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db)
{
    const OpScope scope(m_device, m_stream);
    const auto d = checks::linearBackwardWeights(x, dy);
    ensure(dw, {d.out, d.in});
    // dw^T (in x out) = x^T (in x n) * dy (n x out: dy^T as stored, transposed).
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, int(d.in), int(d.out), int(d.n), x, int(d.in), dy, int(d.out),
         dw, int(d.in));
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

void CudaOps::foldBatchNormImpl(const Tensor& w, const Tensor& b, const Tensor& gamma,
                                const Tensor& beta, const Tensor& runningMean,
                                const Tensor& runningVar, double epsilon, Tensor& wOut,
                                Tensor& bOut)
{
    const OpScope scope(m_device, m_stream);
    const std::int64_t channels = w.dim(0);
    ensure(wOut, w.shape());
    ensure(bOut, {channels});
    cuda::foldBatchNorm(m_stream, floats(w), b.empty() ? nullptr : floats(b), floats(gamma),
                        floats(beta), floats(runningMean), floats(runningVar), epsilon,
                        floats(wOut), floats(bOut), channels, w.numel() / channels);
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

void CudaOps::copyChannelsImpl(const Tensor& x, std::int64_t xOffset, std::int64_t count, Tensor& y,
                               std::int64_t yOffset)
{
    const OpScope scope(m_device, m_stream);
    cuda::copyChannels(m_stream, floats(x) + xOffset, floats(y) + yOffset,
                       x.dim(0) * x.dim(1) * x.dim(2), count, x.dim(3), y.dim(3));
}

// ---- loss ----

void CudaOps::softmaxCrossEntropyForwardImpl(const Tensor& logits, const Tensor& labels,
                                             double smoothing, Tensor& probs, Tensor& loss)
{
    const OpScope scope(m_device, m_stream);
    const std::int64_t n = logits.dim(0), k = logits.dim(1);
    ensure(probs, logits.shape());
    ensure(loss, Shape{1}, DType::Float64);
    // No wait for the GPU: a bad label makes the loss NaN (op_list.h).
    cuda::softmaxCrossEntropyForward(m_stream, floats(logits),
                                     static_cast<const std::int32_t*>(labels.raw()), floats(probs),
                                     static_cast<double*>(loss.raw()), n, k, smoothing);
}

void CudaOps::softmaxCrossEntropyBackwardImpl(const Tensor& probs, const Tensor& labels,
                                              double smoothing, double scale, Tensor& dlogits)
{
    const OpScope scope(m_device, m_stream);
    ensure(dlogits, probs.shape());
    cuda::softmaxCrossEntropyBackward(
        m_stream, floats(probs), static_cast<const std::int32_t*>(labels.raw()), floats(dlogits),
        probs.dim(0), probs.dim(1), smoothing, static_cast<float>(scale));
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

void CudaOps::clipToNormImpl(const Tensor& sumSquares, double maxNorm, Tensor& x)
{
    const OpScope scope(m_device, m_stream);
    cuda::clipToNorm(m_stream, static_cast<const double*>(sumSquares.raw()), maxNorm, floats(x),
                     x.numel());
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
                     s.beta1, s.beta2, s.epsilon, c.first, c.secondSqrt, s.weightDecay,
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
