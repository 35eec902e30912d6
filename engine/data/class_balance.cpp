#include "engine/data/class_balance.h"

#include <algorithm>

namespace towers::engine {

std::vector<std::vector<std::int64_t>> examplesByClass(std::span<const std::int32_t> labels)
{
    std::int32_t largest = -1;
    for (const std::int32_t l : labels) largest = std::max(largest, l);
    std::vector<std::vector<std::int64_t>> byClass(static_cast<std::size_t>(largest + 1));
    for (std::size_t i = 0; i < labels.size(); ++i)
        if (labels[i] >= 0) byClass[static_cast<std::size_t>(labels[i])].push_back(std::int64_t(i));
    return byClass;
}

std::vector<std::int64_t> balancedOrder(const std::vector<std::vector<std::int64_t>>& byClass,
                                        std::int64_t count, Rng& rng)
{
    std::int64_t classes = 0;
    for (const auto& examples : byClass)
        if (!examples.empty()) ++classes;
    std::vector<std::int64_t> order;
    if (classes == 0 || count <= 0) return order;
    order.reserve(static_cast<std::size_t>(count));
    std::int64_t rank = 0; // among the classes with examples
    for (const auto& examples : byClass) {
        if (examples.empty()) continue;
        std::int64_t share = count / classes + (rank < count % classes ? 1 : 0);
        ++rank;
        const auto n = std::int64_t(examples.size());
        while (share > 0) { // whole rounds of the class's images, then part of one
            const std::vector<std::int64_t> round = rng.permutation(n);
            const std::int64_t take = std::min(share, n);
            for (std::int64_t i = 0; i < take; ++i)
                order.push_back(examples[static_cast<std::size_t>(round[std::size_t(i)])]);
            share -= take;
        }
    }
    const std::vector<std::int64_t> shuffle = rng.permutation(std::int64_t(order.size()));
    std::vector<std::int64_t> shuffled(order.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        shuffled[i] = order[static_cast<std::size_t>(shuffle[i])];
    return shuffled;
}

} // namespace towers::engine
