// Towers sharing one GPU: their tensors are averaged on that GPU by one kernel per tensor that
// reads every rank's copy in rank order (in double) and writes the mean into all of them, so that
// every replica gets bitwise the same values, as with the host's averaging.
#include <vector>

#include "engine/cuda/communicators.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"
#include "engine/train/rendezvous.h"

static_assert(towers::engine::cuda::kMaxSameDeviceRanks ==
              towers::engine::cuda::kMaxRanksPerDevice);

namespace towers::engine::cuda {

namespace {

class SameDeviceCommunicator final : public Communicator
{
public:
    SameDeviceCommunicator(int device, int ranks)
        : m_device(device), m_rendezvous(ranks), m_slots(std::size_t(ranks))
    {
    }

    int size() const override { return m_rendezvous.size(); }

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
                m_rendezvous.abort(e.what());
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
    void abort(const std::string& reason) override { m_rendezvous.abort(reason); }
    bool aborted() const override { return m_rendezvous.aborted(); }

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
            m_rendezvous.abort(e.what());
            throw;
        }
    }

    int m_device;
    Rendezvous m_rendezvous;
    std::vector<std::span<Tensor>> m_slots;
};

} // namespace

std::unique_ptr<Communicator> makeSameDeviceCommunicator(int device, int ranks, std::string* whyNot)
{
    if (ranks > kMaxSameDeviceRanks) {
        if (whyNot)
            *whyNot = "more than " + std::to_string(kMaxSameDeviceRanks) + " towers on one GPU";
        return nullptr;
    }
    return std::make_unique<SameDeviceCommunicator>(device, ranks);
}

} // namespace towers::engine::cuda
