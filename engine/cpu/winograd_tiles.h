#pragma once
// Private to engine/cpu: what Towers' Winograd convolutions share (winograd_5x5.h, F(2x2, 5x5);
// winograd_3x3.h, F(4x4, 3x3)). Both compute an m x m output tile from a 6 x 6 input tile
// (m + r - 1 = 6 for an r x r kernel) with the same interpolation points 0, +-1, +-2 and
// infinity, so they share the input transform, the tiling, the 36 batched products
// [tiles x C] x [C x K] and the dispatch: the per-target code is one template over m and r
// (winograd_tiles-inl.h), instantiated for both sizes in one file under Highway's foreach_target
// (winograd_kernels.cpp).
//
// Activations NHWC, weights OIHW, as the Ops interface. Backward data is the forward pass on dy
// with the kernel flipped and its channel roles swapped; backward weights is F(r x r, m x m) on the
// same tiles, the products summed over every tile of the batch in the transformed domain.
#include <cstdint>
#include <string>

#include "engine/cpu/cpu_common.h"

namespace towers::engine::cpu {

// One pass: `in` [n, inH, inW, inC] to `out` [n, outH, outW, outC] through an r x r kernel whose
// taps start padTop rows above and padLeft columns left of each output pixel.
struct WinogradPass
{
    std::int64_t n = 0, inH = 0, inW = 0, inC = 0, outH = 0, outW = 0, outC = 0;
    int padTop = 0, padLeft = 0;
    // Write `out` with non-temporal stores (streamsOutput), where its channels are whole vectors.
    bool streamOutput = false;
};

// A convolution by one of Towers' Winograd algorithms, in all three directions; the kernels of
// both sizes are winograd_kernels.cpp's. Winograd5x5 and Winograd3x3 say which geometries each
// computes and where it pays.
class WinogradConv
{
public:
    virtual ~WinogradConv() = default;
    WinogradConv(const WinogradConv&) = delete;
    WinogradConv& operator=(const WinogradConv&) = delete;

    // y = conv(x, w) (+ b when not null), then ReLU when asked.
    void forward(const float* x, const float* w, const float* b, bool relu, float* y);
    // The backward passes start from g = dy where mask > 0 (a fused ReLU's mask is the forward's
    // y; null: g = dy), applied as dy is read.
    // dx from g and w.
    void backwardData(const float* dy, const float* mask, const float* w, float* dx);
    // dw (OIHW) and, when db is not null, db from x and g: F(r x r, m x m) on the same tiles, the
    // 36 products [K x tiles] x [tiles x C] summed over every tile of the batch.
    void backwardWeights(const float* x, const float* dy, const float* mask, float* dw, float* db);

    // The algorithm, "winograd 5x5" or "winograd 3x3", and the implementation on the target the
    // kernels run on now, "towers:winograd5x5:AVX2", for reports.
    std::string algorithm() const;
    std::string implementation() const;

    // Floating-point operations per vector instruction on the target the kernels run on now:
    // lanes, twice with fused multiply-add (AVX-512 32, AVX2 16, SSE4 4, scalar 1).
    static int vectorFlops();
    // The Highway target the kernels run on now (HWY_AVX2, ...), and its name ("AVX3", "AVX2",
    // "SSE4", "SSSE3", "SCALAR" or "EMU128"). Asked again after a forced target
    // (TOWERS_SIMD_TARGET, ForcedSimdTarget), they answer for that target.
    static std::int64_t target();
    static std::string targetName();

    // Whether a pass writes its output (y, or backward data's dx) with non-temporal stores, past
    // the caches: where it is larger than streamAboveBytes(), the level-2 caches of the threads
    // together or half the last-level cache, whichever is more, so that it could not stay in the
    // caches for the next layer anyway. Its cache lines are then written without being read
    // first. Measured on 2 Zen 4 cores (cifar10-resnet's forward pass in evaluation, batch 250,
    // alternated): layer1.conv 15.5 -> 10.9 ms (65 MB out), layer2.conv 11.0 -> 8.9 (33 MB), the
    // max poolings that read those outputs unchanged. Smaller outputs stay in the caches: above
    // the level-2 caches alone, cifar10-tutorial's training step (conv2's 4.7 MB, read back from
    // the level-3 cache by its LRN) was 3 % slower. Evaluation's chunks of the batch
    // (Sequential::chunking) fit the level-2 caches.
    static std::int64_t streamAboveBytes();
    static bool streamsOutput(const WinogradPass& p);
    bool streamsForward() const { return m_forward.streamOutput; }
    bool streamsBackwardData() const { return m_backward.streamOutput; }
    // The constructor's choice (streamsOutput) overridden: the tests run both ways of storing on
    // small shapes.
    void setStreaming(bool forward, bool backwardData);

protected:
    // The forward pass of d and its backward-data pass for a k x k kernel (k = 3 or 5): dx[iy] =
    // sum_i w[i] dy[iy + padTop - i] = sum_i' w[k - 1 - i'] dy[iy + i' - (k - 1 - padTop)].
    WinogradConv(const Conv2dDesc& d, int k) : m_k(k)
    {
        const Window2d& g = d.win;
        m_forward = {g.n, g.h, g.w, g.c, g.oh, g.ow, d.outChannels, g.padTop, g.padLeft};
        m_backward = {
            g.n, g.oh, g.ow, d.outChannels, g.h, g.w, g.c, k - 1 - g.padTop, k - 1 - g.padLeft};
        m_forward.streamOutput = streamsOutput(m_forward);
        m_backward.streamOutput = streamsOutput(m_backward);
    }

    int m_k;
    WinogradPass m_forward, m_backward;
    // The transformed kernel of the running pass, [36][inC][outC rounded up to whole vectors].
    AlignedBuffer m_u;
    AlignedBuffer m_scratch; // per thread: transformed inputs and products of one chunk of tiles
};

} // namespace towers::engine::cpu
