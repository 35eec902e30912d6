// NCCL across GPUs: one communicator over the towers' GPUs, one rank per GPU, every rank driven by
// its tower's thread. The collectives run on the legacy default stream, which orders them after
// the backward the tower's (blocking) stream has issued and before its optimizer update.
#include <nccl.h>

#include <set>

#include "engine/cuda/communicators.h"
#include "engine/cuda/cuda_check.h"
#include "engine/train/rendezvous.h"

namespace towers::engine::cuda {

namespace {

std::string ncclText(ncclResult_t r)
{
    return std::string(ncclGetErrorString(r));
}

class NcclCommunicator final : public Communicator
{
public:
    NcclCommunicator(std::vector<ncclComm_t> comms, std::vector<int> devices)
        : m_comms(std::move(comms)), m_devices(std::move(devices)),
          m_rendezvous(int(m_devices.size()))
    {
    }
    ~NcclCommunicator() override
    {
        for (auto c : m_comms)
            if (c) (m_rendezvous.aborted() ? ncclCommAbort(c) : ncclCommDestroy(c));
    }

    int size() const override { return int(m_devices.size()); }

    void allReduceMean(int rank, std::span<Tensor> tensors) override
    {
        run(rank, "allReduceMean", tensors, [&](const Tensor& t, ncclComm_t comm) {
            if (t.dtype() != DType::Float32)
                throw InvalidArgument("NCCL allReduceMean: only float32 tensors, got " +
                                      t.describe());
            return ncclAllReduce(t.raw(), const_cast<void*>(t.raw()), std::size_t(t.numel()),
                                 ncclFloat32, ncclAvg, comm, cudaStreamLegacy);
        });
    }

    void broadcast(int rank, int root, std::span<Tensor> tensors) override
    {
        if (root < 0 || root >= size())
            throw InvalidArgument("NCCL broadcast: no root rank " + std::to_string(root));
        run(rank, "broadcast", tensors, [&](const Tensor& t, ncclComm_t comm) {
            return ncclBroadcast(t.raw(), const_cast<void*>(t.raw()), t.bytes(), ncclUint8, root,
                                 comm, cudaStreamLegacy);
        });
    }

    void barrier(int rank) override
    {
        requireRank(rank);
        m_rendezvous.arrive();
    }

    void abort(const std::string& reason) override
    {
        if (m_rendezvous.aborted()) return;
        m_rendezvous.abort(reason);
    }
    bool aborted() const override { return m_rendezvous.aborted(); }

private:
    void requireRank(int rank) const
    {
        if (rank < 0 || rank >= size())
            throw InvalidArgument("NCCL: no rank " + std::to_string(rank));
    }

    template <class Op> void run(int rank, const char* what, std::span<Tensor> tensors, Op op)
    {
        requireRank(rank);
        if (m_rendezvous.aborted())
            throw CollectiveAborted("NCCL " + std::string(what) + ": another tower failed");
        const Device here{DeviceKind::Cuda, m_devices[std::size_t(rank)]};
        for (const auto& t : tensors)
            if (t.device() != here)
                throw InvalidArgument(std::string("NCCL ") + what + ": rank " +
                                      std::to_string(rank) + " on " + here.str() + " was given " +
                                      t.describe());
        DeviceGuard guard(here.index);
        ncclComm_t comm = m_comms[std::size_t(rank)];
        ncclResult_t r = ncclGroupStart();
        for (const auto& t : tensors)
            if (r == ncclSuccess && t.bytes()) r = op(t, comm);
        const ncclResult_t end = ncclGroupEnd();
        if (r == ncclSuccess) r = end;
        // Wait here, so that a failure (or another rank's abort) surfaces as an error of this
        // step, and the tower's timing shows the collective.
        cudaError_t sync = r == ncclSuccess ? cudaStreamSynchronize(cudaStreamLegacy) : cudaSuccess;
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        if (r != ncclSuccess || async != ncclSuccess || sync != cudaSuccess) {
            const std::string why =
                std::string("NCCL ") + what + " failed on " + here.str() + ": " +
                (r != ncclSuccess       ? ncclText(r)
                 : async != ncclSuccess ? ncclText(async)
                                        : std::string(cudaGetErrorString(sync)));
            cudaGetLastError();
            m_rendezvous.abort(why);
            for (auto c : m_comms)
                ncclCommAbort(c); // releases the other ranks' pending collectives
            m_comms.assign(m_comms.size(), nullptr);
            throw BackendError(why);
        }
    }

    std::vector<ncclComm_t> m_comms;
    std::vector<int> m_devices;
    Rendezvous m_rendezvous;
};

} // namespace

std::unique_ptr<Communicator> makeNcclCommunicator(const std::vector<int>& devices,
                                                   std::string* whyNot)
{
    if (std::set<int>(devices.begin(), devices.end()).size() != devices.size()) {
        if (whyNot) *whyNot = "NCCL takes one rank per GPU, and some towers share a GPU";
        return nullptr;
    }
    std::vector<ncclComm_t> comms(devices.size(), nullptr);
    const ncclResult_t r = ncclCommInitAll(comms.data(), int(devices.size()), devices.data());
    if (r != ncclSuccess) {
        if (whyNot) *whyNot = "NCCL could not start: " + ncclText(r);
        return nullptr;
    }
    return std::make_unique<NcclCommunicator>(std::move(comms), devices);
}

} // namespace towers::engine::cuda
