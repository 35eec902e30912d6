#pragma once
// Private to engine/cpu: 5x5 stride-1 convolutions by Winograd's minimal filtering F(2x2, 5x5).
//
// oneDNN 2.6 has Winograd only for 3x3 kernels; its direct 5x5 kernels already run near the FMA
// peak, so the only way to go faster is fewer multiplications. F(2x2, 5x5) computes each 2x2 output
// tile from a 6x6 input tile with 36 multiplications per channel pair instead of 100: the input
// tile and the kernel are transformed (V = B^T d B, U = G g G^T), multiplied element-wise -- for
// all channels at once, 36 small matrix products [tiles x C] x [C x K] -- and transformed back
// (Y = A^T M A). The interpolation points 0, +-1, +-2 and infinity keep the transforms' constants
// small, so float32 rounding stays near that of the direct sum (normalised error ~2e-6 against
// oneDNN's direct convolution on the tutorial's conv2). Backward data is the same computation on
// dy with the kernel flipped and its channel roles swapped; backward weights is F(5x5, 2x2).
//
// AVX-512 only (supports() says so); activations NHWC, weights OIHW, as the Ops interface.
#include <cstdint>

#include "engine/cpu/cpu_common.h"

namespace towers::engine::cpu {

class Winograd5x5
{
public:
    // True when this CPU and geometry can run it: a 5x5 kernel, stride 1, input and output
    // channels multiples of 16, and AVX-512.
    static bool supports(const Conv2dDesc& d);

    explicit Winograd5x5(const Conv2dDesc& d);

    // y = conv(x, w) (+ b when not null), then ReLU when asked.
    void forward(const float* x, const float* w, const float* b, bool relu, float* y);
    // The backward passes start from g = dy where mask > 0 (a fused ReLU's mask is the forward's
    // y; null: g = dy), applied as dy is read.
    // dx from g and w.
    void backwardData(const float* dy, const float* mask, const float* w, float* dx);
    // dw (OIHW) and, when db is not null, db from x and g, by F(5x5, 2x2) on the same tiles: the
    // 36 products become [K x tiles] x [tiles x C], summed over every tile of the batch.
    void backwardWeights(const float* x, const float* dy, const float* mask, float* dw, float* db);

    // One pass: `in` [n, inH, inW, inC] to `out` [n, outH, outW, outC] through a 5x5 kernel whose
    // taps start padTop rows above and padLeft columns left of each output pixel.
    struct Pass
    {
        std::int64_t n = 0, inH = 0, inW = 0, inC = 0, outH = 0, outW = 0, outC = 0;
        int padTop = 0, padLeft = 0;
        std::int64_t tilesH() const { return (outH + 1) / 2; }
        std::int64_t tilesW() const { return (outW + 1) / 2; }
    };

private:
    void run(const Pass& p, const float* in, const float* mask, const float* bias, bool relu,
             float* out);

    Pass m_forward, m_backward;
    AlignedBuffer m_u;       // the transformed kernel of the running pass, [36][inC][outC]
    AlignedBuffer m_scratch; // per thread: transformed inputs and products of one chunk of tiles
};

} // namespace towers::engine::cpu
