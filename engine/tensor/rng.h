#pragma once
// A small, portable random generator (xoshiro256**, seeded through splitmix64) with our own
// normal and truncated-normal draws, so that the same seed gives the same weights on every
// platform and standard library.
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/tensor/splitmix64.h"

namespace towers::engine {

class Rng
{
public:
    explicit Rng(std::uint64_t seed = 0)
    {
        std::uint64_t x = seed;
        for (auto& s : m_s) {
            x = splitmix64(x);
            s = x;
        }
    }

    std::uint64_t next()
    {
        const std::uint64_t result = rotl(m_s[1] * 5, 7) * 9;
        const std::uint64_t t = m_s[1] << 17;
        m_s[2] ^= m_s[0];
        m_s[3] ^= m_s[1];
        m_s[1] ^= m_s[2];
        m_s[0] ^= m_s[3];
        m_s[2] ^= t;
        m_s[3] = rotl(m_s[3], 45);
        return result;
    }

    // Uniform in [0, 1).
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
    // Uniform integer in [0, n).
    std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }

    // Standard normal (Box-Muller, one value per call).
    double normal()
    {
        double u1 = uniform();
        while (u1 <= 0.0) u1 = uniform();
        const double u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }

    // 0 .. n-1 in a random order: Fisher-Yates, swapping each position from the last down with
    // one at or before it (below(i + 1)). The input pipeline's epochs and the import's held-out
    // images depend on this exact order.
    std::vector<std::int64_t> permutation(std::int64_t n)
    {
        std::vector<std::int64_t> p(static_cast<std::size_t>(n > 0 ? n : 0));
        for (std::size_t i = 0; i < p.size(); ++i) p[i] = std::int64_t(i);
        for (std::size_t i = p.size(); i-- > 1;) std::swap(p[i], p[std::size_t(below(i + 1))]);
        return p;
    }

    // TensorFlow's truncated normal: values beyond two standard deviations are redrawn.
    double truncatedNormal(double stddev)
    {
        double v;
        do v = normal();
        while (std::fabs(v) > 2.0);
        return v * stddev;
    }

private:
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    std::uint64_t m_s[4];
};

} // namespace towers::engine
