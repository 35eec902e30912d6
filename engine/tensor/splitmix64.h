#pragma once
// splitmix64, the 64-bit mixing function every draw of Towers starts from: Rng's seeding
// (tensor/rng.h), the dropout masks (ops/dropout_mask.h) and the loader's per-step keys. A
// constexpr function of <cstdint> alone, so that device code calls it too.
#include <cstdint>

namespace towers::engine {

constexpr std::uint64_t splitmix64(std::uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

} // namespace towers::engine
