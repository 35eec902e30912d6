#pragma once
// Joining an NCCL world of several processes (GpuBackend::NcclWorld), the parts free of CUDA and
// NCCL so that tst_cuda_host_logic checks them on the CPU: whether this process's towers can be
// its ranks, and the exchange of the world's id, which every process makes exactly once whatever
// fails, so that no process is left waiting in it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace towers::engine::cuda {

enum class WorldVerdict
{
    Fine,
    Invalid, // the caller's mistake: InvalidArgument
    Refused, // NCCL cannot take it: nullptr and the reason (the caller averages through the host)
};

struct WorldCheck
{
    WorldVerdict verdict = WorldVerdict::Fine;
    std::string why; // empty when Fine
};

// Whether this process's towers (rank r on GPU deviceOfRank[r]) can be global ranks firstRank + r
// of an NCCL world of worldSize ranks, on a machine of deviceCount GPUs.
inline WorldCheck checkNcclWorld(const std::vector<int>& deviceOfRank, int worldSize, int firstRank,
                                 int deviceCount)
{
    const auto n = std::int64_t(deviceOfRank.size());
    if (n == 0) return {WorldVerdict::Invalid, "a communicator needs at least one rank"};
    for (int d : deviceOfRank)
        if (d < 0 || d >= deviceCount)
            return {WorldVerdict::Invalid, "there is no GPU " + std::to_string(d) +
                                               " (this machine has " + std::to_string(deviceCount) +
                                               ")"};
    const std::string world = "an NCCL world of " + std::to_string(worldSize) + " ranks";
    if (worldSize < n)
        return {WorldVerdict::Invalid, world + " cannot hold this process's " + std::to_string(n) +
                                           (n == 1 ? " tower" : " towers")};
    if (firstRank < 0 || std::int64_t(firstRank) + n > worldSize)
        return {WorldVerdict::Invalid, "global ranks " + std::to_string(firstRank) + " to " +
                                           std::to_string(std::int64_t(firstRank) + n - 1) +
                                           " are not all in " + world};
    for (std::size_t i = 0; i < deviceOfRank.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            if (deviceOfRank[i] == deviceOfRank[j])
                return {WorldVerdict::Refused, "two towers of this process on GPU " +
                                                   std::to_string(deviceOfRank[i]) +
                                                   ": NCCL takes one rank per GPU"};
    return {};
}

// Whether `size` bytes are all zero: the id that the process of global rank 0 shares when it has
// none (a real ncclUniqueId never is: it holds that process's address).
inline bool allZeroBytes(const void* bytes, std::size_t size)
{
    const auto* p = static_cast<const unsigned char*>(bytes);
    for (std::size_t i = 0; i < size; ++i)
        if (p[i]) return false;
    return true;
}

// The exchange of the world's id (`size` bytes at `id`), made exactly once by every process. The
// process of global rank 0 (`root`) makes the id with makeId ("" or why not) unless it failed
// already (`localFailure`: checkNcclWorld's reason), and shares it, all zeros when it has none,
// so that the others fail at once instead of waiting for it inside NCCL; every other process
// receives it. Then, with `anyRefuses` (true on every process when its argument is true on any),
// every process says once whether it will not start NCCL, so that where one cannot (its own
// towers, which only it checks) none does, instead of the others waiting in NCCL's start for a
// rank that never comes. Returns "" when `id` holds the world's id and this process goes on to
// start NCCL, else why not (localFailure first). An exception of shareId or anyRefuses (the
// launcher's collective failed) reaches the caller: nothing was started.
inline std::string exchangeNcclId(bool root, const std::string& localFailure, void* id,
                                  std::size_t size, const std::function<std::string(void*)>& makeId,
                                  const std::function<void(void*, std::size_t)>& shareId,
                                  const std::function<bool(bool)>& anyRefuses = {})
{
    std::memset(id, 0, size);
    std::string rootFailure;
    if (root && localFailure.empty()) {
        try {
            rootFailure = makeId(id);
        } catch (const std::exception& e) {
            rootFailure = e.what();
        }
        if (rootFailure.empty() && allZeroBytes(id, size))
            rootFailure = "NCCL made an empty id"; // the others would read it as a failure
        if (!rootFailure.empty()) std::memset(id, 0, size);
    }
    shareId(id, size);
    std::string why = localFailure;
    if (why.empty()) why = rootFailure;
    if (why.empty() && !root && allZeroBytes(id, size))
        why = "the process of global rank 0 could not start NCCL (it shared no id)";
    if (anyRefuses && anyRefuses(!why.empty()) && why.empty())
        why = "another process of the world cannot start NCCL (its log says why)";
    return why;
}

} // namespace towers::engine::cuda
