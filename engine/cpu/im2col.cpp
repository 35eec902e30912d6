#include "engine/cpu/im2col.h"

#include <cstring>

#include "engine/cpu/cpu_common.h"

namespace towers::engine::cpu {

void im2col16(const Window2d& g, const std::uint16_t* x, std::uint16_t* col)
{
    const std::int64_t rowLength = std::int64_t(g.kh) * g.kw * g.c;
    const std::size_t pixelBytes = std::size_t(g.c) * sizeof(std::uint16_t);
    parallelItems(g.n * g.oh * g.ow, rowLength, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t m = begin; m < end; ++m) {
            const std::int64_t n = m / (g.oh * g.ow), p = m % (g.oh * g.ow);
            const std::int64_t top = (p / g.ow) * g.sh - g.padTop;
            const std::int64_t left = (p % g.ow) * g.sw - g.padLeft;
            std::uint16_t* row = col + m * rowLength;
            for (int ky = 0; ky < g.kh; ++ky) {
                const std::int64_t iy = top + ky;
                for (int kx = 0; kx < g.kw; ++kx, row += g.c) {
                    const std::int64_t ix = left + kx;
                    if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w)
                        std::memset(row, 0, pixelBytes);
                    else
                        std::memcpy(row, x + ((n * g.h + iy) * g.w + ix) * g.c, pixelBytes);
                }
            }
        }
    });
}

} // namespace towers::engine::cpu
