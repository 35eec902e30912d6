#include "engine/train/host_communicator.h"

#include <algorithm>
#include <cstring>

namespace towers::engine {

namespace {

template <class T, class Slots>
void meanRange(const Slots& slots, std::size_t index, std::int64_t b, std::int64_t e)
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

// Every element of tensor `index` from b to e.
template <class Slots>
void meanOf(const Slots& slots, std::size_t index, std::int64_t b, std::int64_t e)
{
    if (slots.front()[index].dtype() == DType::Float32)
        meanRange<float>(slots, index, b, e);
    else
        meanRange<double>(slots, index, b, e);
}

} // namespace

HostCommunicator::HostCommunicator(int size)
    : m_size(size), m_rendezvous(size), m_started(std::max(size, 1))
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
    std::lock_guard lock(m_asyncMutex); // no waiter misses the news
    m_asyncDone.notify_all();
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
            if (b < e) meanOf(m_slots, i, b, e);
            offset += n;
        }
    }
    m_rendezvous.arrive(); // every slice is written everywhere
}

std::uint64_t HostCommunicator::startAllReduceMean(int rank, std::span<Tensor> tensors)
{
    checkRank(rank, "startAllReduceMean");
    std::unique_lock lock(m_asyncMutex);
    if (m_rendezvous.aborted()) throw CollectiveAborted(m_rendezvous.reason());
    const auto [ticket, started] = m_started.start(rank, tensors);
    auto& s = *started;
    if (!m_started.allArrived(s)) return ticket;
    // The last rank to start it reduces it, while the others go on. Nobody else touches the
    // tensors until it is marked reduced, and the entry stays where it is meanwhile.
    lock.unlock();
    try {
        std::vector<std::span<Tensor>> slots(s.tensors.begin(), s.tensors.end());
        requireSameLayout(slots, "allReduceMean", Device::host(), {DType::Float32, DType::Float64});
        if (m_size > 1)
            for (std::size_t i = 0; i < tensors.size(); ++i)
                meanOf(slots, i, 0, tensors[i].numel());
    } catch (const InvalidArgument& e) {
        abort(e.what());
        throw;
    }
    lock.lock();
    s.reduced = true;
    m_asyncDone.notify_all();
    return ticket;
}

void HostCommunicator::complete(int rank, std::uint64_t ticket)
{
    checkRank(rank, "complete");
    std::unique_lock lock(m_asyncMutex);
    auto& s = m_started.find(rank, ticket);
    m_asyncDone.wait(lock, [&] { return s.reduced || m_rendezvous.aborted(); });
    if (!s.reduced) throw CollectiveAborted(m_rendezvous.reason());
    m_started.completed(ticket);
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
