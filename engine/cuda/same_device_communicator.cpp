// Towers sharing one GPU: their tensors are averaged on that GPU by one kernel per tensor that
// reads every rank's copy in rank order (in double) and writes the mean into all of them, so that
// every replica gets bitwise the same values, as with the host's averaging.
//
// Asynchronous averages (startAllReduceMean, complete), with TicketBoard (ticket_board.h) for the
// host-side bookkeeping:
//  * start: the rank records a 'ready' event on its compute stream (its tower's, attach(); the
//    legacy default stream until then), then registers it with its tensors and goes on. The rank
//    that registers collective k last enqueues it (under the board's lock, so in ticket order), on
//    the communicator's own stream (non-blocking: it does not order with the legacy stream): a
//    wait for every rank's 'ready' event, the mean kernels, a 'done' event.
//  * complete: the host waits (a condition variable, released by abort) only until collective k
//    is enqueued, that is until the last rank has started it; then the rank's compute stream
//    waits for the 'done' event, and its later work (the finiteness check, the optimizer update)
//    runs after the mean. Nothing waits for the GPU on the host.
//  * The board keeps each rank's tensors until that rank's complete(): its compute stream, on
//    which they are freed, then runs after the kernels that read them.
//  * The communicator's end waits for its stream (its kernels are finite: every wait in it is on
//    work already issued), then destroys the events and the stream.
//
// The synchronous allReduceMean and broadcast go on the legacy default stream, after every rank
// has arrived (a rendezvous), and the host waits for them: the legacy stream orders with the
// towers' blocking streams, so a synchronous collective also runs after every asynchronous one
// whose complete() a rank issued before it (the compute stream waits for its 'done' event), and a
// tensor is never in an asynchronous and a synchronous collective at once (it is the
// communicator's until complete()). No matching of collectives across ranks is needed on one GPU,
// so the two kinds may interleave otherwise.
#include <mutex>
#include <utility>
#include <vector>

#include "engine/cuda/communicators.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/ticket_board.h"
#include "engine/dist/rendezvous.h"

static_assert(towers::engine::cuda::kMaxSameDeviceRanks ==
              towers::engine::cuda::kMaxRanksPerDevice);

namespace towers::engine::cuda {

namespace {

// Events of one device (cudaEventDisableTiming), reused: an event may be recorded again once the
// streams that were to wait for it have been told to (cudaStreamWaitEvent takes the work recorded
// at the time of the call). All destroyed with the pool.
class EventPool
{
public:
    explicit EventPool(int device) : m_device(device) {}
    ~EventPool()
    {
        const QuietDeviceGuard guard(m_device);
        for (cudaEvent_t e : m_all) cudaEventDestroy(e); // safe while recorded work is pending
        cudaGetLastError();
    }
    EventPool(const EventPool&) = delete;
    EventPool& operator=(const EventPool&) = delete;

    // On the current device, which must be the pool's.
    cudaEvent_t take()
    {
        std::lock_guard lock(m_mutex);
        if (!m_free.empty()) {
            cudaEvent_t e = m_free.back();
            m_free.pop_back();
            return e;
        }
        cudaEvent_t e = nullptr;
        TOWERS_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        m_all.push_back(e);
        return e;
    }
    void give(cudaEvent_t e)
    {
        if (!e) return;
        std::lock_guard lock(m_mutex);
        m_free.push_back(e);
    }

private:
    int m_device;
    std::mutex m_mutex;
    std::vector<cudaEvent_t> m_all, m_free;
};

// A rank's part of an asynchronous average.
struct Started
{
    std::vector<Tensor> tensors;
    cudaEvent_t ready = nullptr; // recorded on the rank's compute stream; the pool's once waited
};

class SameDeviceCommunicator final : public Communicator
{
public:
    SameDeviceCommunicator(int device, int ranks, cudaStream_t stream)
        : m_device(device), m_rendezvous(ranks), m_slots(std::size_t(ranks)),
          m_compute(std::size_t(ranks), cudaStreamLegacy), m_stream(stream), m_events(device),
          m_board(ranks)
    {
    }
    ~SameDeviceCommunicator() override
    {
        const QuietDeviceGuard guard(m_device);
        // The kernels of an aborted collective may still read tensors the board holds, which are
        // freed on their compute streams when the board goes: let them finish first.
        cudaStreamSynchronize(m_stream);
        cudaStreamDestroy(m_stream);
        cudaGetLastError();
    }

    int size() const override { return m_rendezvous.size(); }

    void attach(int rank, Ops& ops) override
    {
        requireRank(rank);
        const Device here{DeviceKind::Cuda, m_device};
        if (ops.device() != here)
            throw InvalidArgument("communicator: rank " + std::to_string(rank) + " on " +
                                  here.str() + " was given the ops of " + ops.device().str());
        // Other ops (none in the engine) keep the legacy stream, which orders with every
        // blocking stream: correct, and slower.
        auto* cuda = dynamic_cast<CudaOps*>(&ops);
        m_compute[std::size_t(rank)] = cuda ? cuda->stream() : cudaStreamLegacy;
    }

    std::uint64_t startAllReduceMean(int rank, std::span<Tensor> tensors) override
    {
        requireRank(rank);
        cudaEvent_t ready = nullptr;
        try {
            DeviceGuard guard(m_device);
            // Recorded before registering: the rank that enqueues needs every rank's.
            ready = m_events.take();
            TOWERS_CUDA(cudaEventRecord(ready, m_compute[std::size_t(rank)]));
            return m_board.start(
                rank, Started{{tensors.begin(), tensors.end()}, ready},
                [&](std::uint64_t, std::vector<Started>& all) { return enqueueMean(all); });
        } catch (const CollectiveAborted&) {
            m_events.give(ready);
            throw;
        } catch (const std::exception& e) {
            // A mismatch (InvalidArgument) or a CUDA error: every rank is released with it.
            abort(e.what());
            throw;
        }
    }

    void complete(int rank, std::uint64_t ticket) override
    {
        requireRank(rank);
        try {
            const auto recycle =
                m_board.complete(rank, ticket, "complete", [&](cudaEvent_t done, Started&) {
                    if (!done) return;
                    DeviceGuard guard(m_device);
                    TOWERS_CUDA(cudaStreamWaitEvent(m_compute[std::size_t(rank)], done, 0));
                });
            if (recycle) m_events.give(*recycle); // every rank's stream waits for it already
        } catch (const CollectiveAborted&) {
            throw;
        } catch (const InvalidArgument&) {
            throw; // a ticket out of order: refused, nothing changed
        } catch (const std::exception& e) {
            abort(e.what());
            throw;
        }
    }

    void allReduceMean(int rank, std::span<Tensor> tensors) override
    {
        collect(rank, tensors, true);
        if (rank == 0 && size() > 1) {
            // Launched after every rank has issued its backward (the rendezvous), on the legacy
            // stream, which waits for the towers' blocking streams and is waited for by them.
            try {
                DeviceGuard guard(m_device);
                for (std::size_t i = 0; i < tensors.size(); ++i) {
                    RankPointers ptrs{};
                    for (int r = 0; r < size(); ++r)
                        ptrs.p[r] = static_cast<float*>(
                            const_cast<void*>(m_slots[std::size_t(r)][i].raw()));
                    const std::int64_t n = tensors[i].numel();
                    if (n == 0) continue;
                    meanAcrossRanks(cudaStreamLegacy, ptrs, size(), n);
                }
                TOWERS_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
            } catch (const std::exception& e) {
                abort(e.what());
                throw;
            }
        }
        m_rendezvous.arrive(); // the means are everywhere
    }

    void broadcast(int rank, int root, std::span<Tensor> tensors) override
    {
        if (root < 0 || root >= size())
            throw InvalidArgument("broadcast: no root rank " + std::to_string(root));
        collect(rank, tensors, false);
        if (rank != root) {
            DeviceGuard guard(m_device);
            const auto& from = m_slots[std::size_t(root)];
            for (std::size_t i = 0; i < tensors.size(); ++i)
                if (tensors[i].bytes())
                    TOWERS_CUDA(cudaMemcpy(tensors[i].raw(), from[i].raw(), tensors[i].bytes(),
                                           cudaMemcpyDeviceToDevice));
        }
        m_rendezvous.arrive();
    }

    void barrier(int rank) override
    {
        requireRank(rank);
        m_rendezvous.arrive();
    }
    void abort(const std::string& reason) override
    {
        m_rendezvous.abort(reason);
        m_board.abort(reason);
    }
    bool aborted() const override { return m_rendezvous.aborted() || m_board.aborted(); }

private:
    void requireRank(int rank) const
    {
        if (rank < 0 || rank >= size())
            throw InvalidArgument("communicator: no rank " + std::to_string(rank));
    }

    // Registers the rank's tensors, waits for all, and checks that they match rank 0's.
    void collect(int rank, std::span<Tensor> tensors, bool average)
    {
        requireRank(rank);
        m_slots[std::size_t(rank)] = tensors;
        m_rendezvous.arrive();
        try {
            const Device here{DeviceKind::Cuda, m_device};
            if (average)
                requireSameLayout(m_slots, "allReduceMean", here, {DType::Float32});
            else
                requireSameLayout(m_slots, "broadcast", here);
        } catch (const InvalidArgument& e) {
            abort(e.what());
            throw;
        }
    }

    // Under the board's lock, on the thread of the rank that started collective k last, with
    // the device current: the mean of every rank's tensors on m_stream, after every rank's
    // 'ready' event; returns the 'done' event (nullptr with one rank: nothing to wait for).
    cudaEvent_t enqueueMean(std::vector<Started>& all)
    {
        std::vector<std::span<Tensor>> slots;
        for (auto& s : all) slots.emplace_back(s.tensors);
        requireSameLayout(slots, "allReduceMean", {DeviceKind::Cuda, m_device}, {DType::Float32});
        for (auto& s : all) {
            if (size() > 1) TOWERS_CUDA(cudaStreamWaitEvent(m_stream, s.ready, 0));
            m_events.give(std::exchange(s.ready, nullptr)); // the wait has taken what it holds
        }
        if (size() == 1) return nullptr;
        for (std::size_t i = 0; i < slots.front().size(); ++i) {
            const std::int64_t n = slots.front()[i].numel();
            if (n == 0) continue;
            RankPointers ptrs{};
            for (int r = 0; r < size(); ++r)
                ptrs.p[r] = static_cast<float*>(slots[std::size_t(r)][i].raw());
            meanAcrossRanks(m_stream, ptrs, size(), n);
        }
        cudaEvent_t done = m_events.take();
        TOWERS_CUDA(cudaEventRecord(done, m_stream));
        return done;
    }

    int m_device;
    Rendezvous m_rendezvous;
    std::vector<std::span<Tensor>> m_slots;
    std::vector<cudaStream_t> m_compute; // by rank: its tower's stream (attach())
    cudaStream_t m_stream;               // the asynchronous averages'
    EventPool m_events;                  // declared before the board: destroyed after it
    TicketBoard<Started, cudaEvent_t> m_board;
};

} // namespace

std::unique_ptr<Communicator> makeSameDeviceCommunicator(int device, int ranks, std::string* whyNot)
{
    if (ranks > kMaxSameDeviceRanks) {
        if (whyNot)
            *whyNot = "more than " + std::to_string(kMaxSameDeviceRanks) + " towers on one GPU";
        return nullptr;
    }
    cudaStream_t stream = nullptr;
    {
        DeviceGuard guard(device);
        const cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            cudaGetLastError();
            if (whyNot)
                *whyNot = std::string("no stream for the averages on GPU ") +
                          std::to_string(device) + ": " + cudaGetErrorString(e);
            return nullptr;
        }
    }
    return std::make_unique<SameDeviceCommunicator>(device, ranks, stream);
}

} // namespace towers::engine::cuda
