// NCCL across GPUs: one communicator per GPU (one rank each), every rank driven by its tower's
// thread. The communicators are non-blocking (config.blocking = 0): every NCCL call returns at
// once, and AbortableCommunicator (abortable_communicator.h) waits for a collective by polling
// ncclCommGetAsyncError and cudaStreamQuery, so that an abort from any thread (ncclCommAbort on
// every communicator, after the calls in progress have returned) releases every rank within a
// poll's pause instead of leaving it in cudaStreamSynchronize forever.
//
// The collectives run on the legacy default stream, which orders them after the backward the
// tower's (blocking) stream has issued and before its optimizer update. (Reducing buckets on a
// stream of their own while backward runs, ordered by events, is issue 16's next part.)
#include <nccl.h>

#include <set>
#include <thread>

#include "engine/cuda/abortable_communicator.h"
#include "engine/cuda/communicators.h"
#include "engine/cuda/cuda_check.h"

namespace towers::engine::cuda {

namespace {

// How long NCCL may take to start (all ranks in one process: seconds) and to finish.
constexpr auto kStartLimit = std::chrono::minutes(2);
constexpr auto kFinishLimit = std::chrono::seconds(30);

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

class NcclDriver
{
public:
    NcclDriver(std::vector<ncclComm_t> comms, std::vector<int> devices)
        : m_comms(std::move(comms)), m_devices(std::move(devices))
    {
    }

    int size() const { return int(m_devices.size()); }
    Device device(int rank) const { return {DeviceKind::Cuda, m_devices[std::size_t(rank)]}; }
    const char* name() const { return "NCCL"; }

    CollectiveStatus launch(int rank, CollectiveKind kind, int root, std::span<Tensor> tensors)
    {
        bool any = false;
        for (const auto& t : tensors) any = any || t.bytes() > 0;
        if (!any) return {};
        DeviceGuard guard(m_devices[std::size_t(rank)]);
        ncclComm_t comm = m_comms[std::size_t(rank)];
        ncclResult_t r = ncclGroupStart();
        if (r != ncclSuccess) return {CollectiveState::Failed, ncclText(r, comm)};
        for (const auto& t : tensors) {
            if (r != ncclSuccess || !t.bytes()) continue;
            void* data = const_cast<void*>(t.raw());
            r = kind == CollectiveKind::AllReduceMean
                    ? ncclAllReduce(data, data, std::size_t(t.numel()), ncclFloat32, ncclAvg, comm,
                                    cudaStreamLegacy)
                    : ncclBroadcast(data, data, t.bytes(), ncclUint8, root, comm, cudaStreamLegacy);
        }
        const ncclResult_t end = ncclGroupEnd(); // the group is closed whatever happened in it
        if (r == ncclSuccess) r = end;
        if (r != ncclSuccess && r != ncclInProgress)
            return {CollectiveState::Failed, ncclText(r, comm)};
        return poll(rank);
    }

    CollectiveStatus poll(int rank)
    {
        DeviceGuard guard(m_devices[std::size_t(rank)]);
        ncclComm_t comm = m_comms[std::size_t(rank)];
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
        if (r != ncclSuccess) return {CollectiveState::Failed, ncclText(r, comm)};
        // Still enqueuing (connecting to the peers, the first time): no CUDA work to wait for yet.
        if (state == ncclInProgress) return {CollectiveState::Pending, {}};
        if (state != ncclSuccess) return {CollectiveState::Failed, ncclText(state, comm)};
        const cudaError_t q = cudaStreamQuery(cudaStreamLegacy);
        if (q == cudaSuccess) return {};
        if (q == cudaErrorNotReady) return {CollectiveState::Pending, {}};
        cudaGetLastError();
        return {CollectiveState::Failed, std::string("CUDA error: ") + cudaGetErrorString(q)};
    }

    void abortAll() noexcept { abortAllOf(m_comms); }

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
            return;
        }
        for (auto& c : m_comms) {
            ncclCommDestroy(c);
            c = nullptr;
        }
    }

private:
    std::vector<ncclComm_t> m_comms;
    std::vector<int> m_devices;
};

} // namespace

std::unique_ptr<Communicator> makeNcclCommunicator(const std::vector<int>& devices,
                                                   std::string* whyNot)
{
    auto fail = [&](const std::string& why) -> std::unique_ptr<Communicator> {
        if (whyNot) *whyNot = why;
        return nullptr;
    };
    if (std::set<int>(devices.begin(), devices.end()).size() != devices.size())
        return fail("NCCL takes one rank per GPU, and some towers share a GPU");
    const int n = int(devices.size());
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return fail("NCCL could not start: " + ncclText(r));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; // every call returns at once: see the top of this file
    std::vector<ncclComm_t> comms(devices.size(), nullptr);
    int previous = -1;
    cudaGetDevice(&previous);
    r = ncclGroupStart();
    if (r != ncclSuccess) return fail("NCCL could not start: " + ncclText(r));
    for (int i = 0; i < n && (r == ncclSuccess || r == ncclInProgress); ++i) {
        if (cudaSetDevice(devices[std::size_t(i)]) != cudaSuccess) {
            cudaGetLastError();
            r = ncclUnhandledCudaError;
            break;
        }
        r = ncclCommInitRankConfig(&comms[std::size_t(i)], n, id, i, &config);
    }
    const ncclResult_t end = ncclGroupEnd();
    if (previous >= 0) cudaSetDevice(previous);
    if (r == ncclSuccess || r == ncclInProgress) r = end;
    ncclComm_t failed = nullptr;
    if (r == ncclSuccess || r == ncclInProgress) r = waitUntilReady(comms, kStartLimit, &failed);
    if (r != ncclSuccess) {
        const std::string why = r == ncclInProgress
                                    ? std::string("NCCL did not start within 2 minutes")
                                    : "NCCL could not start: " + ncclText(r, failed);
        abortAllOf(comms);
        return fail(why);
    }
    return std::make_unique<AbortableCommunicator<NcclDriver>>(
        NcclDriver(std::move(comms), devices));
}

} // namespace towers::engine::cuda
