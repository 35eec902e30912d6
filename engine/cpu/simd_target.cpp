#include "engine/cpu/simd_target.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>

#include <hwy/targets.h>

#include "engine/errors.h"

namespace towers::engine::cpu {

namespace {

struct Limit
{
    std::string value;   // as the variable says, upper-cased
    std::string problem; // why it was refused, or empty
};

Limit applyOnce()
{
    Limit limit;
    const char* env = std::getenv("TOWERS_SIMD_TARGET");
    if (!env || !*env) return limit;
    for (const char* c = env; *c; ++c)
        limit.value += static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
    std::string names;
    std::int64_t better = 0; // the targets above the one named
    // Lower bits are better targets.
    for (std::int64_t rest = HWY_TARGETS; rest != 0; rest &= rest - 1) {
        const std::int64_t bit = rest & -rest;
        if (limit.value == hwy::TargetName(bit)) {
            hwy::DisableTargets(better);
            return limit;
        }
        better |= bit;
        names += std::string(names.empty() ? "" : ", ") + hwy::TargetName(bit);
    }
    limit.problem = "TOWERS_SIMD_TARGET=" + std::string(env) + ": not one of " + names +
                    " (or unset for the best this CPU has)";
    return limit;
}

const Limit& limit()
{
    static const Limit l = applyOnce(); // thread-safe, once per process
    return l;
}

} // namespace

void applySimdTargetLimit()
{
    if (!limit().problem.empty()) throw InvalidArgument(limit().problem);
}

std::string simdTargetLimit()
{
    return limit().problem.empty() ? limit().value : std::string();
}

namespace {

// What this process may run: the CPU's targets under TOWERS_SIMD_TARGET, read before any test
// narrows them.
std::int64_t cpuTargets()
{
    static const std::int64_t targets = [] {
        applySimdTargetLimit();
        return hwy::SupportedTargets();
    }();
    return targets;
}

} // namespace

std::vector<SimdTarget> simdTargets()
{
    std::vector<SimdTarget> out;
    // Lower bits are better targets.
    for (std::int64_t rest = HWY_TARGETS; rest != 0; rest &= rest - 1) {
        const std::int64_t bit = rest & -rest;
        out.push_back({bit, hwy::TargetName(bit), (cpuTargets() & bit) != 0});
    }
    return out;
}

bool avx512Allowed()
{
    for (const SimdTarget& t : simdTargets())
        if (t.supported && t.name.rfind("AVX3", 0) == 0) return true; // AVX3, AVX3_ZEN4, ...
    return false;
}

ForcedSimdTarget::ForcedSimdTarget(std::int64_t id)
{
    hwy::SetSupportedTargetsForTest(id);
}

ForcedSimdTarget::~ForcedSimdTarget()
{
    // Back to every target this process may run (not to no mock, which would drop
    // TOWERS_SIMD_TARGET's limit).
    hwy::SetSupportedTargetsForTest(cpuTargets());
}

} // namespace towers::engine::cpu
