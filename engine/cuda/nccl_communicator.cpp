// NCCL across GPUs: one communicator per GPU (one rank each), every rank driven by its tower's
// thread. The communicators are non-blocking (config.blocking = 0): every NCCL call returns at
// once, and AbortableCommunicator (abortable_communicator.h) waits, where it waits, by polling
// ncclCommGetAsyncError (and cudaStreamQuery), so that an abort from any thread (ncclCommAbort on
// every communicator, after the calls in progress have returned) releases every rank within a
// poll's pause instead of leaving it in cudaStreamSynchronize forever.
//
// Streams and events. Each rank has a communication stream of its own (non-blocking: it does not
// order with the legacy default stream), on its GPU, and every collective of the rank runs there,
// so that the device runs them in the order the rank issued them (the same on every rank, as
// NCCL needs), synchronous ones included. The rank's compute stream is its tower's (attach(),
// CudaOps::stream(); the legacy default stream until then, which orders with every blocking
// stream).
//  * startAllReduceMean: an event recorded on the compute stream (the backward issued so far,
//    which produced the bucket), the communication stream made to wait for it, ncclAllReduce
//    (ncclAvg, in place) of the bucket's tensors in one group on the communication stream, then a
//    'done' event recorded there; returns without waiting. The compute stream goes on with the
//    backward meanwhile.
//  * complete: the compute stream waits for the 'done' event (cudaStreamWaitEvent), so that what
//    the tower issues next (the finiteness check, the optimizer update of those parameters) runs
//    after the reduction; the host does not wait for the GPU.
//  * A non-blocking communicator may answer ncclGroupEnd with ncclInProgress: the operations are
//    then still being enqueued (connecting to the peers, the first time), and NCCL takes no other
//    call on that communicator, nor work on its stream, until ncclCommGetAsyncError says
//    ncclSuccess. The 'done' event is recorded only then (enqueued()), which the template asks
//    before the rank's next collective and in complete(), polling under its lease and abort.
//    complete() thereby also reports an asynchronous NCCL error (BackendError, the others
//    aborted) instead of leaving the error to a later, uninterruptible wait.
//  * allReduceMean and broadcast (synchronous): the communication stream waits for events on the
//    compute stream and on the legacy default stream (what was written outside ops: weights
//    loaded, copied), the collective runs there, after every asynchronous one the rank started
//    before, and the host polls until the communication stream is idle, so that everything after
//    the call, on any stream or on the host, sees the result.
//  * The tensors of a collective in flight are held (as the driver's references) until the
//    compute stream waits for it, so that a tensor its owner drops meanwhile is freed, on its
//    stream, only after the reduction.
//  * With ranks in several processes (a world: makeNcclWorldCommunicator), the same, each local
//    rank being its global rank's NCCL communicator; ncclAvg divides by the world's size. The
//    barrier is a collective of the world too: a one-float ncclAllReduce of a cell of the rank's
//    own, on its communication stream like the others (a rank returns from it once every rank of
//    the world has come), and a broadcast's root 0 is NCCL rank 0, the world's first rank.
//  * The end: destroyAll (finalise) or abortAll (ncclCommAbort, which releases the kernels in
//    flight) frees the communicators, then waits a bounded while for the communication streams
//    to drain (after an abort, the kernels still running end at once), releases the tensors held
//    (a stream that did not drain keeps its rank's for the process's life), and destroys the events
//    and the streams (both safe with work pending: CUDA releases them once it is done). Nothing
//    waits on the compute streams there: their ops may be gone already.
#include <nccl.h>

#include <optional>
#include <set>
#include <thread>

#include "engine/cuda/abortable_communicator.h"
#include "engine/cuda/communicators.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/nccl_world.h"

namespace towers::engine::cuda {

namespace {

// How long NCCL may take to start (all ranks in one process: seconds) and to finish.
constexpr auto kStartLimit = std::chrono::minutes(2);
constexpr auto kFinishLimit = std::chrono::seconds(30);
// How long the end waits for the communication streams to drain before it lets them go.
constexpr auto kDrainLimit = std::chrono::seconds(10);

std::string ncclText(ncclResult_t r, ncclComm_t comm = nullptr)
{
    std::string text = ncclGetErrorString(r);
    const char* last = ncclGetLastError(comm);
    if (last && *last) text += std::string(" (") + last + ")";
    return text;
}

// Polls the communicators until none is in progress, or `limit` passes: ncclSuccess, the first
// error, or ncclInProgress on time-out.
ncclResult_t waitUntilReady(const std::vector<ncclComm_t>& comms, std::chrono::milliseconds limit,
                            ncclComm_t* failed)
{
    const auto deadline = std::chrono::steady_clock::now() + limit;
    PollBackoff backoff;
    for (;;) {
        bool pending = false;
        for (ncclComm_t c : comms) {
            if (!c) continue;
            ncclResult_t state = ncclSuccess;
            const ncclResult_t r = ncclCommGetAsyncError(c, &state);
            if (r != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
                *failed = c;
                return r != ncclSuccess ? r : state;
            }
            pending = pending || state == ncclInProgress;
        }
        if (!pending) return ncclSuccess;
        if (std::chrono::steady_clock::now() > deadline) return ncclInProgress;
        backoff.pause();
    }
}

void abortAllOf(std::vector<ncclComm_t>& comms) noexcept
{
    for (auto& c : comms)
        if (c) {
            ncclCommAbort(c); // also allowed while another rank's collective is in flight
            c = nullptr;
        }
}

std::string cudaText(cudaError_t e)
{
    cudaGetLastError(); // a non-sticky error is not reported again by the next call
    return std::string("CUDA error: ") + cudaGetErrorString(e);
}

// One rank's streams and events (see the top of this file).
struct RankStreams
{
    int device = 0;
    cudaStream_t compute = cudaStreamLegacy; // the tower's, once attached
    cudaStream_t comm = nullptr;             // every collective of the rank, in order
    cudaEvent_t ready = nullptr;             // the compute stream's work before a collective
    cudaEvent_t legacyReady = nullptr;       // the legacy stream's, before a synchronous one
    std::vector<cudaEvent_t> done;           // by token: the end of an asynchronous collective
    std::vector<std::vector<Tensor>> held;   // by token: its tensors, until ordered()
    Tensor barrierCell;                      // a world's barrier: one float on the rank's GPU
    std::vector<std::uint64_t> freeTokens;
    // The token whose collective NCCL is still enqueuing: its 'done' is recorded once it is in.
    std::optional<std::uint64_t> unrecorded;
};

// Every rank's streams and events, created on its GPU: "" or why not (then none is left).
void releaseStreams(std::vector<RankStreams>& ranks) noexcept;
std::string createStreams(std::vector<RankStreams>& ranks, const std::vector<int>& devices)
{
    ranks.assign(devices.size(), RankStreams{});
    for (std::size_t i = 0; i < devices.size(); ++i) {
        RankStreams& s = ranks[i];
        s.device = devices[i];
        const QuietDeviceGuard guard(s.device);
        cudaError_t e = cudaStreamCreateWithFlags(&s.comm, cudaStreamNonBlocking);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s.legacyReady, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            const std::string why = "GPU " + std::to_string(s.device) + ": " + cudaText(e);
            releaseStreams(ranks);
            return why;
        }
    }
    return {};
}

void releaseStreams(std::vector<RankStreams>& ranks) noexcept
{
    for (RankStreams& s : ranks) {
        const QuietDeviceGuard guard(s.device);
        s.held.clear(); // freed on their own streams, after what was issued there
        s.barrierCell = Tensor();
        // Both return at once with work pending, and CUDA releases them once it is done.
        for (cudaEvent_t& e : s.done)
            if (e) cudaEventDestroy(e);
        s.done.clear();
        s.freeTokens.clear();
        s.unrecorded.reset();
        if (s.ready) cudaEventDestroy(s.ready);
        if (s.legacyReady) cudaEventDestroy(s.legacyReady);
        if (s.comm) cudaStreamDestroy(s.comm);
        s.ready = s.legacyReady = nullptr;
        s.comm = nullptr;
        s.compute = cudaStreamLegacy;
    }
    cudaGetLastError();
}

// Waits, at most `limit` in all, until the communication streams are idle (or failed). A rank
// whose stream still runs then (an aborted kernel that did not end) keeps its tensors (and its
// barrier's cell) for the process's life: freed on their own streams, which do not wait for this
// one, their memory could be handed out while the kernel still writes it.
void drain(std::vector<RankStreams>& ranks, std::chrono::milliseconds limit) noexcept
{
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (RankStreams& s : ranks) {
        if (!s.comm) continue;
        const QuietDeviceGuard guard(s.device);
        PollBackoff backoff;
        while (cudaStreamQuery(s.comm) == cudaErrorNotReady &&
               std::chrono::steady_clock::now() < deadline)
            backoff.pause();
        if (cudaStreamQuery(s.comm) == cudaErrorNotReady) {
            // The world barrier's cell too: an aborted barrier may still write it.
            try {
                if (!s.held.empty())
                    static_cast<void>(new std::vector<std::vector<Tensor>>(std::move(s.held)));
                if (s.barrierCell.bytes()) static_cast<void>(new Tensor(std::move(s.barrierCell)));
            } catch (...) { // no memory for the holder: the tensors go as before
            }
            s.held.clear();
        }
    }
    cudaGetLastError();
}

class NcclDriver
{
public:
    NcclDriver(std::vector<ncclComm_t> comms, std::vector<int> devices,
               std::vector<RankStreams> ranks, bool world)
        : m_comms(std::move(comms)), m_devices(std::move(devices)), m_ranks(std::move(ranks)),
          m_world(world)
    {
    }

    int size() const { return int(m_devices.size()); }
    Device device(int rank) const { return {DeviceKind::Cuda, m_devices[std::size_t(rank)]}; }
    const char* name() const { return "NCCL"; }
    bool spansProcesses() const { return m_world; }

    void attach(int rank, Ops& ops)
    {
        if (ops.device() != device(rank))
            throw InvalidArgument("NCCL: rank " + std::to_string(rank) + " on " +
                                  device(rank).str() + " was given the ops of " +
                                  ops.device().str());
        // Other ops on this GPU (none in the engine) keep the legacy stream, which orders with
        // every blocking stream: correct, and slower.
        auto* cuda = dynamic_cast<CudaOps*>(&ops);
        m_ranks[std::size_t(rank)].compute = cuda ? cuda->stream() : cudaStreamLegacy;
    }

    CollectiveStatus launch(int rank, CollectiveKind kind, int root, std::span<Tensor> tensors)
    {
        if (kind != CollectiveKind::Barrier && !anyBytes(tensors)) return {};
        RankStreams& s = m_ranks[std::size_t(rank)];
        DeviceGuard guard(s.device);
        // After what the tower's stream and the legacy stream (work outside ops) issued so far.
        cudaError_t e = after(s, s.compute, s.ready);
        if (e == cudaSuccess && s.compute != cudaStreamLegacy)
            e = after(s, cudaStreamLegacy, s.legacyReady);
        if (e != cudaSuccess) return {CollectiveState::Failed, cudaText(e)};
        const ncclResult_t r = group(rank, kind, root, tensors);
        if (r != ncclSuccess && r != ncclInProgress)
            return {CollectiveState::Failed, ncclText(r, m_comms[std::size_t(rank)])};
        return poll(rank);
    }

    // The synchronous collective launched last: finished once NCCL has enqueued it and the
    // communication stream is idle.
    CollectiveStatus poll(int rank)
    {
        RankStreams& s = m_ranks[std::size_t(rank)];
        DeviceGuard guard(s.device);
        // Still enqueuing (connecting to the peers, the first time): no CUDA work to wait for yet.
        if (const CollectiveStatus a = asyncState(rank); a.state != CollectiveState::Done) return a;
        const cudaError_t q = cudaStreamQuery(s.comm);
        if (q == cudaSuccess) return {};
        if (q == cudaErrorNotReady) {
            cudaGetLastError(); // not an error: never reported by the next launch's check
            return {CollectiveState::Pending, {}};
        }
        return {CollectiveState::Failed, cudaText(q)};
    }

    AsyncLaunch launchAsync(int rank, std::span<Tensor> tensors)
    {
        RankStreams& s = m_ranks[std::size_t(rank)];
        DeviceGuard guard(s.device);
        AsyncLaunch out;
        if (s.freeTokens.empty()) {
            cudaEvent_t done = nullptr;
            const cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
            if (e != cudaSuccess) return {{CollectiveState::Failed, cudaText(e)}, 0};
            s.done.push_back(done);
            s.held.emplace_back();
            s.freeTokens.push_back(s.done.size() - 1);
        }
        // A token lost to a failure below stays in `done`, destroyed by the teardown.
        out.token = s.freeTokens.back();
        s.freeTokens.pop_back();
        s.held[out.token].assign(tensors.begin(), tensors.end());
        // The backward that produced the tensors, issued so far on the compute stream.
        cudaError_t e = after(s, s.compute, s.ready);
        if (e != cudaSuccess) return {{CollectiveState::Failed, cudaText(e)}, out.token};
        const ncclResult_t r = anyBytes(tensors)
                                   ? group(rank, CollectiveKind::AllReduceMean, 0, tensors)
                                   : ncclSuccess;
        if (r == ncclInProgress) {
            // Not on the stream yet: recorded by enqueued() once it is.
            s.unrecorded = out.token;
            out.status = {CollectiveState::Pending, {}};
            return out;
        }
        if (r != ncclSuccess)
            return {{CollectiveState::Failed, ncclText(r, m_comms[std::size_t(rank)])}, out.token};
        e = cudaEventRecord(s.done[out.token], s.comm);
        if (e != cudaSuccess) return {{CollectiveState::Failed, cudaText(e)}, out.token};
        return out;
    }

    CollectiveStatus enqueued(int rank)
    {
        RankStreams& s = m_ranks[std::size_t(rank)];
        DeviceGuard guard(s.device);
        if (const CollectiveStatus a = asyncState(rank); a.state != CollectiveState::Done) return a;
        if (s.unrecorded) {
            // NCCL has put the collective on the stream: its end is what is there now.
            const cudaError_t e = cudaEventRecord(s.done[*s.unrecorded], s.comm);
            if (e != cudaSuccess) return {CollectiveState::Failed, cudaText(e)};
            s.unrecorded.reset();
        }
        return {};
    }

    CollectiveStatus ordered(int rank, std::uint64_t token)
    {
        RankStreams& s = m_ranks[std::size_t(rank)];
        if (s.unrecorded == token || token >= s.done.size())
            return {CollectiveState::Failed,
                    "collective " + std::to_string(token) + " ordered before it was enqueued"};
        DeviceGuard guard(s.device);
        const cudaError_t e = cudaStreamWaitEvent(s.compute, s.done[std::size_t(token)], 0);
        if (e != cudaSuccess) return {CollectiveState::Failed, cudaText(e)};
        // The compute stream frees them (their own stream, or the legacy one) after the wait.
        s.held[std::size_t(token)].clear();
        s.freeTokens.push_back(token);
        return {};
    }

    void abortAll() noexcept
    {
        abortAllOf(m_comms);
        finish();
    }

    // Finalise every communicator together (NCCL flushes and disconnects them), then free them;
    // anything that does not finish in time is aborted instead.
    void destroyAll() noexcept
    {
        bool clean = ncclGroupStart() == ncclSuccess;
        if (clean) {
            for (ncclComm_t c : m_comms) {
                const ncclResult_t r = ncclCommFinalize(c);
                clean = clean && (r == ncclSuccess || r == ncclInProgress);
            }
            const ncclResult_t end = ncclGroupEnd();
            clean = clean && (end == ncclSuccess || end == ncclInProgress);
        }
        ncclComm_t failed = nullptr;
        if (clean) clean = waitUntilReady(m_comms, kFinishLimit, &failed) == ncclSuccess;
        if (!clean) {
            abortAllOf(m_comms);
        } else {
            for (auto& c : m_comms) {
                ncclCommDestroy(c);
                c = nullptr;
            }
        }
        finish();
    }

private:
    // NCCL's word on rank's communicator: Pending while it is still enqueuing, Failed with its
    // error, else Done.
    CollectiveStatus asyncState(int rank)
    {
        ncclComm_t comm = m_comms[std::size_t(rank)];
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
        if (r != ncclSuccess) return {CollectiveState::Failed, ncclText(r, comm)};
        if (state == ncclInProgress) return {CollectiveState::Pending, {}};
        if (state != ncclSuccess) return {CollectiveState::Failed, ncclText(state, comm)};
        return {};
    }

    static bool anyBytes(std::span<Tensor> tensors)
    {
        for (const auto& t : tensors)
            if (t.bytes() > 0) return true;
        return false;
    }

    // The communication stream's next work waits for what `stream` has issued so far.
    static cudaError_t after(RankStreams& s, cudaStream_t stream, cudaEvent_t event)
    {
        const cudaError_t e = cudaEventRecord(event, stream);
        return e != cudaSuccess ? e : cudaStreamWaitEvent(s.comm, event, 0);
    }

    // The collective of every tensor, in one group on rank's communication stream: ncclSuccess
    // (enqueued), ncclInProgress (a non-blocking communicator still enqueuing it) or the error.
    // A broadcast's root is an NCCL rank: the local rank in one process, the world's rank 0 in
    // several (the template takes no other root there). A barrier sums the rank's cell.
    ncclResult_t group(int rank, CollectiveKind kind, int root, std::span<Tensor> tensors)
    {
        ncclComm_t comm = m_comms[std::size_t(rank)];
        RankStreams& s = m_ranks[std::size_t(rank)];
        cudaStream_t stream = s.comm;
        if (kind == CollectiveKind::Barrier && !s.barrierCell.bytes()) return ncclInvalidUsage;
        ncclResult_t r = ncclGroupStart();
        if (r != ncclSuccess) return r;
        bool inProgress = false;
        auto take = [&](ncclResult_t one) {
            if (one == ncclInProgress) {
                inProgress = true;
            } else if (one != ncclSuccess) {
                r = one;
            }
            return r == ncclSuccess;
        };
        if (kind == CollectiveKind::Barrier) {
            void* cell = const_cast<void*>(s.barrierCell.raw());
            take(ncclAllReduce(cell, cell, 1, ncclFloat32, ncclSum, comm, stream));
        }
        for (const auto& t : tensors) {
            if (!t.bytes() || kind == CollectiveKind::Barrier) continue;
            void* data = const_cast<void*>(t.raw());
            const ncclResult_t one =
                kind == CollectiveKind::AllReduceMean
                    ? ncclAllReduce(data, data, std::size_t(t.numel()), ncclFloat32, ncclAvg, comm,
                                    stream)
                    : ncclBroadcast(data, data, t.bytes(), ncclUint8, root, comm, stream);
            if (!take(one)) break;
        }
        const ncclResult_t end = ncclGroupEnd(); // the group is closed whatever happened in it
        if (r != ncclSuccess) return r;
        if (end != ncclSuccess) return end;
        return inProgress ? ncclInProgress : ncclSuccess;
    }

    // After the communicators are gone: the streams drained (a bounded while), the tensors held
    // released, the events and streams destroyed.
    void finish() noexcept
    {
        drain(m_ranks, kDrainLimit);
        releaseStreams(m_ranks);
    }

    std::vector<ncclComm_t> m_comms;
    std::vector<int> m_devices;
    std::vector<RankStreams> m_ranks; // each touched by its rank's thread, or by the teardown
    bool m_world = false;             // the ranks are this process's part of a world
};

// NCCL communicators for `devices` as ranks firstRank + i of nranks (the world's id in `id`),
// started in one group and waited for, at most kStartLimit: the communicator, or nullptr with the
// reason in whyNot (NCCL's own words: "Duplicate GPU detected", a peer that never came).
std::unique_ptr<Communicator> startNccl(const std::vector<int>& devices, const ncclUniqueId& id,
                                        int nranks, int firstRank, bool world, std::string* whyNot)
{
    auto fail = [&](const std::string& why) -> std::unique_ptr<Communicator> {
        if (whyNot) *whyNot = why;
        return nullptr;
    };
    const int n = int(devices.size());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; // every call returns at once: see the top of this file
    std::vector<ncclComm_t> comms(devices.size(), nullptr);
    const int previous = deviceToRestore();
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return fail("NCCL could not start: " + ncclText(r));
    for (int i = 0; i < n && (r == ncclSuccess || r == ncclInProgress); ++i) {
        if (cudaSetDevice(devices[std::size_t(i)]) != cudaSuccess) {
            cudaGetLastError();
            r = ncclUnhandledCudaError;
            break;
        }
        r = ncclCommInitRankConfig(&comms[std::size_t(i)], nranks, id, firstRank + i, &config);
    }
    const ncclResult_t end = ncclGroupEnd();
    if (previous >= 0) cudaSetDevice(previous);
    if (r == ncclSuccess || r == ncclInProgress) r = end;
    ncclComm_t failed = nullptr;
    if (r == ncclSuccess || r == ncclInProgress) r = waitUntilReady(comms, kStartLimit, &failed);
    if (r != ncclSuccess) {
        std::string why = r == ncclInProgress ? std::string("NCCL did not start within 2 minutes")
                                              : "NCCL could not start: " + ncclText(r, failed);
        if (r == ncclInProgress && world)
            why += " (a process of the world that never joined, or no network between them)";
        abortAllOf(comms);
        return fail(why);
    }
    std::vector<RankStreams> ranks;
    std::string noStreams = createStreams(ranks, devices);
    if (noStreams.empty() && world) {
        try {
            for (RankStreams& s : ranks)
                s.barrierCell =
                    Tensor::zeros({1}, DType::Float32).copyTo({DeviceKind::Cuda, s.device});
        } catch (const std::exception& e) {
            releaseStreams(ranks);
            noStreams = e.what();
        }
    }
    if (!noStreams.empty()) {
        abortAllOf(comms);
        return fail("NCCL's streams could not be created: " + noStreams);
    }
    return std::make_unique<AbortableCommunicator<NcclDriver>>(
        NcclDriver(std::move(comms), devices, std::move(ranks), world));
}

} // namespace

std::unique_ptr<Communicator> makeNcclCommunicator(const std::vector<int>& devices,
                                                   std::string* whyNot)
{
    if (std::set<int>(devices.begin(), devices.end()).size() != devices.size()) {
        if (whyNot) *whyNot = "NCCL takes one rank per GPU, and some towers share a GPU";
        return nullptr;
    }
    ncclUniqueId id;
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
        if (whyNot) *whyNot = "NCCL could not start: " + ncclText(r);
        return nullptr;
    }
    const int n = int(devices.size());
    return startNccl(devices, id, n, 0, false, whyNot);
}

std::unique_ptr<Communicator> makeNcclWorldCommunicator(const std::vector<int>& devices,
                                                        const GpuBackend::NcclWorld& world,
                                                        int deviceCount, std::string* whyNot)
{
    if (!world.shareId)
        throw InvalidArgument("an NCCL world needs shareId: every process calls it to share "
                              "NCCL's id");
    const WorldCheck check = checkNcclWorld(devices, world.worldSize, world.firstRank, deviceCount);
    ncclUniqueId id;
    // Every process shares (or receives) the id, whatever failed: see nccl_world.h.
    const std::string notJoining = exchangeNcclId(
        world.firstRank == 0, check.why, &id, sizeof id,
        [](void* out) -> std::string {
            const ncclResult_t r = ncclGetUniqueId(static_cast<ncclUniqueId*>(out));
            return r == ncclSuccess ? std::string()
                                    : "NCCL could not make the world's id: " + ncclText(r);
        },
        world.shareId, world.anyRefuses);
    if (check.verdict == WorldVerdict::Invalid) throw InvalidArgument(check.why);
    if (!notJoining.empty()) {
        if (whyNot) *whyNot = notJoining;
        return nullptr;
    }
    return startNccl(devices, id, world.worldSize, world.firstRank, true, whyNot);
}

} // namespace towers::engine::cuda
