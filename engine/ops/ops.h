#pragma once
// The op interface every backend implements. Layers call these; they never see oneDNN, cuDNN or
// loops. The ops themselves, their documentation and conventions are in op_list.h: each is a
// public, non-virtual entry here that checks its arguments once, for every backend alike (shapes,
// dtypes, devices: op_checks.cpp), then calls the backend's protected `<op>Impl`. A backend that
// leaves an op out (supports() says which it implements) has it run staged through a host backend,
// with one log line the first time.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/ops/descriptors.h"
#include "engine/ops/op_list.h"
#include "engine/ops/precision.h"
#include "engine/tensor/tensor.h"

namespace towers::engine {

// Work captured from an Ops context (Ops::beginCapture): a CUDA graph on a GPU.
class CapturedWork
{
public:
    virtual ~CapturedWork();
    CapturedWork(const CapturedWork&) = delete;
    CapturedWork& operator=(const CapturedWork&) = delete;

    // Issues the captured work again as it was captured (the same ops on the same tensors'
    // storage with the same values), ordered after the work issued before it through the context
    // it was captured from, and runs the host bookkeeping captured with it (Ops::hostWork) on the
    // calling thread. The work's first run is its first replay.
    void replay();
    // The ops and copies it holds.
    virtual std::size_t size() const = 0;
    // Whether a replay that throws has run nothing of it: one graph, launched at once (a launch
    // CUDA refuses runs nothing). A capture in parts (Ops::outsideCapture) runs its first part
    // and the work after it before it launches the next.
    virtual bool launchesAtOnce() const { return true; }

protected:
    CapturedWork() = default;
    virtual void launch() = 0;

private:
    friend class Ops;
    std::vector<std::function<void()>> m_hostWork;
};

class Ops
{
public:
    virtual ~Ops();
    Ops(const Ops&) = delete;
    Ops& operator=(const Ops&) = delete;

    // "reference", "onednn", ...
    virtual std::string name() const = 0;
    virtual Device device() const = 0;
    // Whether this backend runs dtype as its float type (the reference float32 and float64, the
    // others float32); a call with floats of another dtype throws Unsupported.
    virtual bool runsFloat(DType dtype) const { return dtype == DType::Float32; }
    // The precision of its convolutions and matrix products (precision.h); the tensors between
    // the ops of training are float32 either way.
    virtual Precision precision() const { return Precision::Float32; }
    // Whether the forward ops of evaluation take bfloat16 image activations ([bf16 x] in
    // op_list.h), so that an evaluation pass keeps its images bfloat16 from one op to the next
    // (ExecContext::bf16Activations): the oneDNN backend in Precision::BFloat16.
    virtual bool bf16Activations() const { return false; }
    // The cache an evaluation pass may keep a batch's images in from one layer to the next
    // (ExecContext::chunkCacheBytes), in bytes: the CPU backend's level-2 caches of its threads; 0
    // where whole batches run best (a GPU, the reference loops).
    virtual std::int64_t evaluationCacheBytes() const { return 0; }
    // Waits until every op issued through this context has finished: a no-op for the CPU
    // backends, which finish each op before returning; a GPU's asynchronous work (and its faults,
    // as BackendError) surfaces here. For timing, and before a host reads what ops wrote.
    virtual void synchronize() {}
    // The copies between the host and where this context computes: public entries that check
    // where the tensors are (InvalidArgument naming them), then call the backend's *Impl.
    //
    // Copies a host tensor into `dst` on this context's device (resized as Tensor::ensure does),
    // ordered before every op issued after it. A GPU backend copies asynchronously on its stream
    // when `src` is page-locked (Tensor::pinned), so `src` must stay unchanged until that copy has
    // run (synchronize(), or waitFor() a later mark). The default copies at once.
    void upload(const Tensor& src, Tensor& dst);
    // Copies a host tensor into `dst` as upload() does, ordered before the ops issued after it
    // but not after those issued before it, so that the copy overlaps them: a GPU backend copies
    // from page-locked memory on a copy stream that its stream then waits for (an event). `dst`
    // must therefore not be read or written by an op that may not have finished (a step's own
    // input buffer, whose previous step is done), and `src` must stay unchanged as for upload().
    // When `dst` has to be (re)made, this is upload(). The default uploads.
    void prefetch(const Tensor& src, Tensor& dst);
    // Copies `src` into `dst` (resized as Tensor::ensure does, on this context's device), both
    // where this context computes, ordered among its ops: on a GPU, on its stream without the
    // host waiting. The default copies at once.
    void copy(const Tensor& src, Tensor& dst);
    // Copies `src` (where this context computes) into the host tensor `dst`, of the same shape
    // and dtype, after the ops issued before it: on a GPU, on its stream without the host
    // waiting when `dst` is page-locked, the bytes in place once synchronize() or waitFor() a
    // later mark has returned. The default copies at once.
    void download(const Tensor& src, Tensor& dst);

    // Device time, for a step's split into compute, communication and update without waiting in
    // between: mark() records how far the work issued through this context has got (an event on
    // a GPU's stream; the host's clock by default, for ops that finish before they return) and
    // returns its number, counted from 0 after clearMarks(). waitFor(m) returns once the work
    // issued before mark m has finished (a GPU's faults surface there, as from synchronize());
    // after it, millisecondsBetween(a, b) for marks a <= m and b <= m is the time from mark a to
    // mark b. A mark stays readable until kMarkWindow newer ones have been made, so that the
    // marks of a step issued ahead do not overwrite those of the step before it (InvalidArgument
    // for a mark not made since clearMarks() or overwritten). Only waitFor() waits; reached(m)
    // says, without waiting, whether it would return at once (the default, for ops that finish
    // before they return: true).
    static constexpr int kMarkWindow = 64;
    virtual void clearMarks();
    virtual int mark();
    virtual void waitFor(int mark);
    virtual bool reached(int mark);
    virtual double millisecondsBetween(int a, int b);

    // Capture (CUDA graphs). Between beginCapture() and endCapture(), the ops and copies issued
    // through this context are recorded, not run: their tensors by storage (the addresses every
    // replay uses: each must have been made before the capture and keep its storage while the
    // work is replayed) and every other argument by value (so a value that changes from step to
    // step must reach the ops in a tensor, as StepScalars do). Nothing in a capture may wait for
    // the device or read what it computes (synchronize, waitFor, mark, an op this backend runs on
    // the host, prefetch), nor make a tensor where the context computes: such a call throws
    // Unsupported saying so. endCapture() returns the work, not yet run (replay() runs it), or
    // throws why the capture failed (Unsupported, BackendError) with nothing of it run; after an
    // exception inside a capture, abandonCapture() ends it, nothing of it run. Either way the
    // context is then as before beginCapture(). captureUnavailable(): "" when this backend can
    // capture, else why not, in words for a log.
    virtual std::string captureUnavailable() const;
    void beginCapture();
    std::unique_ptr<CapturedWork> endCapture();
    void abandonCapture() noexcept;
    bool capturing() const { return m_capturing; }
    // Host bookkeeping that belongs to the work being issued (a counter that the device work
    // implies, as batch norm's num_batches_tracked): runs `work` now or, during a capture, at
    // each replay of the captured work instead.
    void hostWork(std::function<void()> work);
    // Work that cannot be captured but has its place among the ops (a collective that a
    // communicator launches on a stream of its own, ordered after the ops before it by events):
    // runs `work` now or, during a capture, at that place in each replay: the capture is cut
    // there, the part before it issued (and its host work run) before `work` runs, the part after
    // it after. `work` outlives this call: what it uses must stay until the captured work goes.
    // Should ending or beginning a part fail, the capture is over (nothing of it run) and the
    // exception is thrown here.
    void outsideCapture(std::function<void()> work);

    // Whether this backend implements `op` itself; a composite op (isComposite) always runs,
    // composed of the single ops when the backend does not fuse it.
    bool supports(Op op) const { return isComposite(op) || m_implemented.test(std::size_t(op)); }
    // How an op this backend leaves out runs: a host backend made by `makeHostOps` (the engine's
    // backend registry gives oneDNN), with this backend's tensors copied to it and back. Without
    // one, such an op throws Unsupported naming it.
    void setHostFallback(std::function<std::unique_ptr<Ops>()> makeHostOps);
    // Where the fallback's one line per op goes (default: standard error).
    void setLog(std::function<void(const std::string&)> log);

    // The ops (op_list.h has each one's contract).
#define TOWERS_OP_PUBLIC(n) TOWERS_OP_##n(TOWERS_OP_PUBLIC_DECL)
#define TOWERS_OP_PUBLIC_DECL(n, R, P, A) R n P;
    TOWERS_OPS(TOWERS_OP_PUBLIC)
#undef TOWERS_OP_PUBLIC_DECL
#undef TOWERS_OP_PUBLIC

protected:
    // `implemented`: the single ops this backend overrides (TOWERS_OP_ID over its list).
    explicit Ops(OpSet implemented);

    // The copies' implementations, called with checked arguments (download's `dst` is a host
    // tensor like `src`; prefetch's `dst` already has `src`'s shape and dtype on this device).
    // The defaults copy at once (Tensor::copyFrom), resizing `dst` as Tensor::ensure does.
    virtual void uploadImpl(const Tensor& src, Tensor& dst);
    virtual void prefetchImpl(const Tensor& src, Tensor& dst)
    {
        uploadImpl(src, dst);
    }
    virtual void copyImpl(const Tensor& src, Tensor& dst);
    virtual void downloadImpl(const Tensor& src, Tensor& dst);

    // The implementations, called with checked arguments. The single ops' base versions are
    // never called for an op in `implemented`; the composite ops' compose the single ops.
#define TOWERS_OP_VIRTUAL(n) TOWERS_OP_##n(TOWERS_OP_VIRTUAL_DECL)
#define TOWERS_OP_VIRTUAL_DECL(n, R, P, A) virtual R n##Impl P;
    TOWERS_OPS(TOWERS_OP_VIRTUAL)
#undef TOWERS_OP_VIRTUAL_DECL
#undef TOWERS_OP_VIRTUAL

    // Where an op this backend does not support runs: the host fallback (staged), else
    // Unsupported. A backend may override it to refuse in its own words.
    virtual Ops& fallback(Op op);

    // A backend that can capture overrides captureUnavailable() and these: begin recording,
    // end it (the work, or an exception with nothing recorded kept), end it after a failure.
    virtual void beginCaptureImpl();
    virtual std::unique_ptr<CapturedWork> endCaptureImpl();
    virtual void abandonCaptureImpl() noexcept {}
    // Unsupported "<what> during a capture: <why>" while capturing.
    void refuseDuringCapture(const char* what, const char* why) const;

private:
    OpSet m_implemented;
    std::function<std::unique_ptr<Ops>()> m_makeHostOps;
    std::function<void(const std::string&)> m_log;
    std::unique_ptr<Ops> m_hostOps; // made on first use
    OpSet m_logged;
    std::mutex m_fallbackMutex;
    std::vector<std::chrono::steady_clock::time_point> m_marks; // the default marks, a ring
    int m_markCount = 0;                                        // made since clearMarks()
    bool m_capturing = false;
    std::vector<std::function<void()>> m_capturedHostWork; // hostWork() during the capture
    // A capture cut by outsideCapture(): its parts ended so far, each followed by its work.
    std::vector<std::unique_ptr<CapturedWork>> m_capturedParts;
    std::vector<std::function<void()>> m_outsideWork;
    std::unique_ptr<CapturedWork>
    endCapturedPart();                 // the part since the last cut, with its host work
    void dropCapturedParts() noexcept; // the parts and their work, when the capture is over

protected:
    // InvalidArgument unless `mark` is one of the `made` marks since clearMarks() and still in
    // the window (for backends with marks of their own, too).
    static void requireMark(int mark, int made);
};

// The execution context a layer runs in: the backend's ops, whether this is a training pass, and
// the step (mixed into dropout seeds so that each step draws a fresh, reproducible mask).
class LayerProfiler; // engine/nn/layer.h
class Layer;

struct ExecContext
{
    Ops& ops;
    bool training = true;
    std::uint64_t step = 0;
    // The tower (replica) this pass runs on, mixed into dropout seeds so that towers draw
    // different masks; replica 0 draws the masks of a single-tower run.
    std::uint64_t replica = 0;
    // When set, sees every layer's forward and backward begin and end (towers-cli bench
    // --per-layer); null in training.
    LayerProfiler* profiler = nullptr;
    // When set, called after each layer's backward: its parameters' gradients are final (Model
    // reports them to the towers' gradient averaging while backward goes on).
    const std::function<void(Layer&)>* backwardDone = nullptr;
    // When set, the step's StepScalars where the ops compute (step_scalar_values.h): the ops that
    // take them read the step from there (dropout's masks) rather than from `step`, the same masks.
    const Tensor* scalars = nullptr;
    // In evaluation mode (training false): a convolution followed by a batch norm runs as one
    // convolution with the batch norm folded into its weights and bias (foldBatchNorm) and the
    // batch norm's activation, as inference engines and the ONNX export do; the convolution's own
    // output is then not computed. Set by evaluation and classification, left off where a layer's
    // output or a backward after the pass is wanted (layer views, gradient checks).
    bool foldBatchNorms = false;
    // In evaluation mode (training false), on a backend whose bf16Activations(): the images
    // between the layers stay bfloat16, as TorchInductor and inference engines keep them:
    // convolutions write bfloat16, pooling, flattening and residual sums pass it on, linear layers
    // read it and write float32; a layer that takes float32 only gets its input converted
    // (Layer::takesBf16), and the model's logits are float32. Set with foldBatchNorms by evaluation
    // and classification.
    bool bf16Activations = false;
    // In evaluation mode, when above 0: the top-level Sequential runs its first layers on a chunk
    // of the batch at a time, small enough that their images stay in a cache of this many bytes
    // between one layer and the next rather than go out to memory and back (a first convolution's
    // output read again by its max pooling), and the layers after on the whole batch
    // (Sequential::chunking says which layers and how many images). Set by evaluation and
    // classification from Ops::evaluationCacheBytes().
    std::int64_t chunkCacheBytes = 0;

    // The context of an evaluation's forward pass, as evaluation, classification and bench
    // --inference run it: not training, batch norms folded, bfloat16 images between the layers
    // where the backend takes them, and the first layers in chunks where the backend has a cache
    // for them.
    static ExecContext forEvaluation(Ops& ops, std::uint64_t replica = 0)
    {
        ExecContext ctx{ops, false, 0, replica};
        ctx.foldBatchNorms = true;
        ctx.bf16Activations = ops.bf16Activations();
        ctx.chunkCacheBytes = ops.evaluationCacheBytes();
        return ctx;
    }
};

// The plain reference backend: naive loops accumulating in double, float32 and float64. The test
// oracle for every other backend.
std::unique_ptr<Ops> makeReferenceOps();

inline void Ops::clearMarks()
{
    m_markCount = 0;
}
inline int Ops::mark()
{
    if (m_capturing) refuseDuringCapture("mark", "a mark times the device's work as it runs");
    if (m_marks.size() < std::size_t(kMarkWindow)) m_marks.resize(std::size_t(kMarkWindow));
    m_marks[std::size_t(m_markCount % kMarkWindow)] = std::chrono::steady_clock::now();
    return m_markCount++;
}
inline void Ops::waitFor(int mark)
{
    if (m_capturing) refuseDuringCapture("waitFor", "captured work does not run until replayed");
    requireMark(mark, m_markCount);
}
inline bool Ops::reached(int mark)
{
    if (m_capturing) refuseDuringCapture("reached", "captured work does not run until replayed");
    requireMark(mark, m_markCount);
    return true;
}
inline double Ops::millisecondsBetween(int a, int b)
{
    requireMark(a, m_markCount);
    requireMark(b, m_markCount);
    return std::chrono::duration<double, std::milli>(m_marks[std::size_t(b % kMarkWindow)] -
                                                     m_marks[std::size_t(a % kMarkWindow)])
        .count();
}

// waitFor(mark) for a wait that something else may have to end: polls reached(mark), calling
// `watch` between polls, and once the work is done waits for it (its faults surface as from
// waitFor). A step whose collectives wait for another process that failed never ends on its own;
// the watch, throwing that process's failure, ends the wait instead.
void waitWatching(Ops& ops, int mark, const std::function<void()>& watch);

} // namespace towers::engine
