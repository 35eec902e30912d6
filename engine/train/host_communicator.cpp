#include "engine/train/host_communicator.h"

#include <algorithm>
#include <cstring>

namespace towers::engine {

namespace {

template <class T>
void meanRange(const std::vector<std::span<Tensor>>& slots, std::size_t index, std::int64_t b,
               std::int64_t e)
{
    const std::size_t n = slots.size();
    std::vector<T*> ptr(n);
    for (std::size_t r = 0; r < n; ++r) ptr[r] = slots[r][index].template data<T>();
    const double count = double(n);
#pragma omp parallel for schedule(static) if (e - b > (1 << 15))
    for (std::int64_t i = b; i < e; ++i) {
        double sum = 0;
        for (std::size_t r = 0; r < n; ++r) sum += double(ptr[r][i]); // rank order, always
        const T mean = static_cast<T>(sum / count);
        for (std::size_t r = 0; r < n; ++r) ptr[r][i] = mean;
    }
}

} // namespace

HostCommunicator::HostCommunicator(int size) : m_size(size), m_rendezvous(size)
{
    m_slots.resize(std::size_t(size));
}

void HostCommunicator::checkRank(int rank, const char* what) const
{
    if (rank < 0 || rank >= m_size)
        throw InvalidArgument(std::string(what) + ": rank " + std::to_string(rank) +
                              " out of range [0, " + std::to_string(m_size) + ")");
}

void HostCommunicator::barrier(int rank)
{
    checkRank(rank, "barrier");
    m_rendezvous.arrive();
}

void HostCommunicator::abort(const std::string& reason)
{
    m_rendezvous.abort(reason);
}

bool HostCommunicator::aborted() const
{
    return m_rendezvous.aborted();
}

void HostCommunicator::allReduceMean(int rank, std::span<Tensor> tensors)
{
    checkRank(rank, "allReduceMean");
    m_slots[std::size_t(rank)] = tensors;
    m_rendezvous.arrive(); // every rank's tensors are registered and final
    try {
        requireSameLayout(m_slots, "allReduceMean", Device::host(),
                          {DType::Float32, DType::Float64});
    } catch (const InvalidArgument& e) {
        abort(e.what());
        throw;
    }
    if (m_size > 1) {
        // This rank's slice of the concatenated elements.
        std::int64_t total = 0;
        for (const auto& t : tensors) total += t.numel();
        const std::int64_t begin = total * rank / m_size, end = total * (rank + 1) / m_size;
        std::int64_t offset = 0;
        for (std::size_t i = 0; i < tensors.size(); ++i) {
            const std::int64_t n = tensors[i].numel();
            const std::int64_t b = std::clamp(begin - offset, std::int64_t(0), n);
            const std::int64_t e = std::clamp(end - offset, std::int64_t(0), n);
            if (b < e) {
                if (tensors[i].dtype() == DType::Float32)
                    meanRange<float>(m_slots, i, b, e);
                else
                    meanRange<double>(m_slots, i, b, e);
            }
            offset += n;
        }
    }
    m_rendezvous.arrive(); // every slice is written everywhere
}

void HostCommunicator::broadcast(int rank, int root, std::span<Tensor> tensors)
{
    checkRank(rank, "broadcast");
    checkRank(root, "broadcast root");
    m_slots[std::size_t(rank)] = tensors;
    m_rendezvous.arrive();
    try {
        requireSameLayout(m_slots, "broadcast", Device::host());
    } catch (const InvalidArgument& e) {
        abort(e.what());
        throw;
    }
    if (rank != root) {
        const auto& from = m_slots[std::size_t(root)];
        for (std::size_t i = 0; i < tensors.size(); ++i)
            if (tensors[i].bytes())
                std::memcpy(tensors[i].raw(), from[i].raw(), tensors[i].bytes());
    }
    m_rendezvous.arrive();
}

} // namespace towers::engine
