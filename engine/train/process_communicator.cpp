#include "engine/train/process_communicator.h"

#include <algorithm>
#include <cstring>

namespace towers::engine {

namespace {

// Tensor j of every global tower g lies at receive + g * block + offset.
template <class T>
void foldMean(const char* receive, std::size_t block, std::size_t offset, int globalTowers,
              std::vector<std::vector<Tensor>>& local, std::size_t j)
{
    const std::int64_t n = local.front()[j].numel();
    const double count = double(globalTowers);
    std::vector<T*> out;
    for (auto& tensors : local) out.push_back(tensors[j].template data<T>());
#pragma omp parallel for schedule(static) if (n > (1 << 15))
    for (std::int64_t i = 0; i < n; ++i) {
        double sum = 0;
        for (int g = 0; g < globalTowers; ++g) { // global tower order, always
            T v;
            std::memcpy(&v, receive + std::size_t(g) * block + offset + std::size_t(i) * sizeof(T),
                        sizeof(T));
            sum += double(v);
        }
        const T mean = static_cast<T>(sum / count);
        for (T* o : out) o[i] = mean;
    }
}

std::size_t bytesOf(const std::vector<Tensor>& tensors)
{
    std::size_t b = 0;
    for (const auto& t : tensors) b += t.bytes();
    return b;
}

void pack(const std::vector<Tensor>& tensors, char* to)
{
    for (const auto& t : tensors) {
        if (t.bytes()) std::memcpy(to, t.raw(), t.bytes());
        to += t.bytes();
    }
}

} // namespace

ProcessCommunicator::ProcessCommunicator(int towers, ProcessGroup& group)
    : m_size(towers), m_group(group), m_rendezvous(towers), m_started(std::max(towers, 1))
{
    m_slots.resize(std::size_t(towers));
}

void ProcessCommunicator::checkRank(int rank, const char* what) const
{
    if (rank < 0 || rank >= m_size)
        throw InvalidArgument(std::string(what) + ": rank " + std::to_string(rank) +
                              " out of range [0, " + std::to_string(m_size) + ")");
}

void ProcessCommunicator::allReduceMean(int rank, std::span<Tensor> tensors)
{
    complete(rank, startAllReduceMean(rank, tensors));
}

std::uint64_t ProcessCommunicator::startAllReduceMean(int rank, std::span<Tensor> tensors)
{
    checkRank(rank, "startAllReduceMean");
    std::unique_lock lock(m_mutex);
    if (m_rendezvous.aborted()) throw CollectiveAborted(m_rendezvous.reason());
    const auto [ticket, started] = m_started.start(rank, tensors);
    auto& s = *started;
    if (!m_started.allArrived(s)) return ticket;
    // The last of this process's towers sends them all (the entry stays where it is).
    lock.unlock();
    try {
        std::vector<std::span<Tensor>> slots(s.tensors.begin(), s.tensors.end());
        requireSameLayout(slots, "allReduceMean", Device::host(), {DType::Float32, DType::Float64});
        const std::size_t block = bytesOf(s.tensors.front());
        s.send.resize(block * std::size_t(m_size));
        for (int r = 0; r < m_size; ++r)
            pack(s.tensors[std::size_t(r)], s.send.data() + std::size_t(r) * block);
        s.receive.resize(s.send.size() * std::size_t(m_group.size()));
        s.request = m_group.startAllGather(s.send.data(), s.send.size(), s.receive.data());
    } catch (const std::exception& e) {
        abort(e.what());
        throw;
    }
    lock.lock();
    s.gathering = true;
    m_changed.notify_all();
    return ticket;
}

void ProcessCommunicator::complete(int rank, std::uint64_t ticket)
{
    checkRank(rank, "complete");
    std::unique_lock lock(m_mutex);
    auto& s = m_started.find(rank, ticket);
    m_changed.wait(lock, [&] { return s.gathering || m_rendezvous.aborted(); });
    if (!s.folding && !m_rendezvous.aborted()) {
        // The first tower here waits for the other processes and folds for every tower.
        s.folding = true;
        lock.unlock();
        try {
            m_group.wait(s.request);
            const std::size_t block = bytesOf(s.tensors.front());
            const int global = globalTowers();
            std::size_t offset = 0;
            for (std::size_t j = 0; j < s.tensors.front().size(); ++j) {
                if (s.tensors.front()[j].dtype() == DType::Float32)
                    foldMean<float>(s.receive.data(), block, offset, global, s.tensors, j);
                else
                    foldMean<double>(s.receive.data(), block, offset, global, s.tensors, j);
                offset += s.tensors.front()[j].bytes();
            }
        } catch (const std::exception& e) {
            abort(e.what());
            throw;
        }
        lock.lock();
        s.reduced = true;
        m_changed.notify_all();
    }
    m_changed.wait(lock, [&] { return s.reduced || m_rendezvous.aborted(); });
    if (!s.reduced) throw CollectiveAborted(m_rendezvous.reason());
    m_started.completed(ticket);
}

void ProcessCommunicator::broadcast(int rank, int root, std::span<Tensor> tensors)
{
    checkRank(rank, "broadcast");
    if (root < 0 || root >= globalTowers())
        throw InvalidArgument("broadcast: root tower " + std::to_string(root) +
                              " out of range [0, " + std::to_string(globalTowers()) + ")");
    m_slots[std::size_t(rank)] = tensors;
    m_rendezvous.arrive();
    const int rootProcess = root / m_size, rootRank = root % m_size;
    try {
        requireSameLayout(m_slots, "broadcast", Device::host());
        if (rank == 0) { // one tower of each process takes part for all
            const auto& from = m_slots[std::size_t(rootRank)];
            std::vector<Tensor> source(from.begin(), from.end());
            std::vector<char> bytes(bytesOf(source));
            if (m_group.rank() == rootProcess) pack(source, bytes.data());
            m_group.broadcast(bytes.data(), bytes.size(), rootProcess);
            std::size_t offset = 0;
            for (std::size_t i = 0; i < tensors.size(); ++i) {
                const std::size_t b = tensors[i].bytes();
                for (const auto& slot : m_slots)
                    if (b) std::memcpy(slot[i].raw(), bytes.data() + offset, b);
                offset += b;
            }
        }
    } catch (const std::exception& e) {
        abort(e.what());
        throw;
    }
    m_rendezvous.arrive();
}

void ProcessCommunicator::barrier(int rank)
{
    checkRank(rank, "barrier");
    m_rendezvous.arrive();
}

void ProcessCommunicator::abort(const std::string& reason)
{
    m_rendezvous.abort(reason);
    m_group.abortLocal(reason); // a tower waiting on the other processes returns too
    std::lock_guard lock(m_mutex);
    m_changed.notify_all();
}

bool ProcessCommunicator::aborted() const
{
    return m_rendezvous.aborted();
}

} // namespace towers::engine
