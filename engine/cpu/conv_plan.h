#pragma once
// Private to engine/cpu: how the oneDNN backend runs one convolution geometry, in all directions.
//
// The algorithm is chosen once per geometry, at run time, for the instruction sets the kernels
// run on (oneDNN's and Highway's; nothing here assumes AVX-512):
//  * Winograd5x5: 5x5 stride 1 where Towers' Winograd (winograd_5x5.h) beats oneDNN's direct
//    kernels on the instruction sets both run on now (Winograd5x5::fasterThanDirect: 16 or more
//    channels on both sides, and Highway's vectors at least half as strong as oneDNN's: AVX-512
//    or AVX2 against oneDNN's avx512_core or avx2, SSE4 against its sse41 or avx; not SSE4 against
//    avx2), or wherever oneDNN has only a reference loop. The tutorial's conv2 on any x86-64;
//    never a first layer's 3 channels. All three directions by Towers' Winograd; everything stays
//    NHWC.
//  * Winograd3x3: 3x3 stride 1 where oneDNN's convolution_auto picks its Winograd F(4x4, 3x3) for
//    the forward (2.6 has one on AVX-512 only: mnist-convnet's conv2 and conv3, 2-3x fewer
//    multiplications than direct), then Winograd in all three directions. It takes the blocked
//    activations it asks for: inputs are reordered in, outputs out; a training forward keeps the
//    blocked input and the reordered weights in the caller's `saved` bytes for backward. Where
//    oneDNN has it, it is kept for 256 input channels or more, where it is as fast as Towers' own
//    or faster (mnist's conv3, 2 Zen 4 cores: 141 against 155 ms forward + backward); with fewer,
//    Towers' own (below) is faster where Highway's vectors are as strong as oneDNN's, having no
//    reorders to and from the blocked layout (mnist's conv2 33 against 41 ms, fashion-wide's
//    32 -> 32 at 28x28 15 against 21, cifar10-resnet's 64 -> 128 at 32x32 32 against 44).
//  * TowersWinograd3x3: 3x3 stride 1 elsewhere, where Towers' F(4x4, 3x3) (winograd_3x3.h) beats
//    oneDNN's direct kernels on the instruction sets both run on now
//    (Winograd3x3::fasterThanDirect: 16 or more channels on both sides, 512 or more output
//    pixels, at least twice fewer multiplications, and Highway's vectors at least half as strong
//    as oneDNN's), or wherever oneDNN has only a reference loop: on AVX2, mnist-convnet's conv2
//    and conv3 (1.7x and 2.0x faster over the three directions than oneDNN's direct avx2
//    kernels) and every other 3x3 layer of the registered models but first layers; on AVX-512,
//    the layers with fewer than 256 input channels that oneDNN would run as Winograd. As for
//    Winograd5x5, all three directions are Towers' and everything stays NHWC.
//  * Direct: oneDNN's direct convolution, forward on NHWC (as fast as blocked there, and no
//    reorders), backward in the layouts oneDNN prefers on this CPU (blocked nChw16c on AVX-512,
//    nChw8c on AVX2: 2-3x faster backward weights for first layers with 1 or 3 input channels).
//  * DirectBf16: with Precision::BFloat16, oneDNN's direct convolution reading bfloat16 copies of
//    the input, the weights and g (converted by reorders, rounded to nearest even) and
//    accumulating and writing float32: about twice float32's rate where the CPU has AVX512_BF16
//    (2 Zen 4 cores, the tutorial's conv2: 6.7 / 6.6 / 8.3 ms forward / backward data / backward
//    weights against 13.6 / 13.2 / 13.7 in float32 direct). A training forward keeps the converted
//    input and weights in `saved` for backward. Shapes oneDNN runs only by a reference loop in
//    bfloat16 stay float32, and so do convolutions of a single input channel (conv_plan.cpp). On
//    AMX, the backward weights of a small image (at most 16 output pixels, or at most 100 and
//    fewer than the input's: cifar10-resnet's 4x4 layers, mnist-convnet's VALID conv2 and conv3)
//    is oneDNN's bfloat16 matrix product g^T x patches (im2col.h) instead of its convolution
//    kernel, which runs far below its rate there (2.4-4x slower, the patches included); and the
//    backward data of a stride-1 convolution is oneDNN's forward convolution of g with the weights
//    transposed and turned by 180 degrees (brgconv, faster than its backward-data kernel). In
//    evaluation with bfloat16 images between the layers (ExecContext::bf16Activations), its
//    forward reads a bfloat16 x as it comes and writes a bfloat16 y from the same kernel, no
//    conversion on either side (cifar10-resnet's forward pass 1.52x faster on AMX).
// Backward starts from g = dy masked by the fused ReLU, written in one pass straight into the
// layout the backward primitives asked for (NHWC, nChw8c or nChw16c; masked_gradient.h; any other
// goes through a oneDNN reorder), or masked as Towers' Winograd reads it.
#include <string>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/winograd_3x3.h"
#include "engine/cpu/winograd_5x5.h"
#include "engine/ops/precision.h"

namespace towers::engine::cpu {

enum class ConvAlgorithm
{
    Direct,
    Winograd3x3,       // oneDNN's
    Winograd5x5,       // Towers'
    TowersWinograd3x3, // Towers'
    DirectBf16         // oneDNN's direct convolution reading bfloat16 copies (Precision::BFloat16)
};

// "direct", "winograd 3x3" (oneDNN's or Towers'), "winograd 5x5" or "direct bf16".
const char* convAlgorithmName(ConvAlgorithm a);
// The algorithm a plan for this geometry runs in this precision and use (builds a primitive
// descriptor: not for hot paths).
ConvAlgorithm chooseConvAlgorithm(const dnnl::engine& eng, const Conv2dDesc& d,
                                  Precision precision = Precision::Float32,
                                  ConvUse use = ConvUse::Training);

class ConvPlan
{
public:
    ConvPlan(const dnnl::engine& eng, const Conv2dDesc& d, bool bias, Activation act,
             Precision precision = Precision::Float32, ConvUse use = ConvUse::Training);
    ConvPlan(const ConvPlan&) = delete;
    ConvPlan& operator=(const ConvPlan&) = delete;

    ConvAlgorithm algorithm() const { return m_algorithm; }
    // Towers' own Winograd when the plan runs it (it runs no oneDNN primitive, so reports take its
    // implementation from here), else null.
    const WinogradConv* towersWinograd() const { return m_winograd.get(); }

    // y = act(conv(x, w) + b); b is ignored unless the plan has a bias. A training forward passes
    // `saved`, which is resized and filled with the state backward reuses. In evaluation x and y
    // may be bfloat16 (each independently; `saved` null): Direct and DirectBf16 then read and
    // write those types in one primitive, the other algorithms work on float32 copies.
    void forward(dnnl::stream& s, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                 Tensor* saved);

    // The arguments of backward: null for what the caller does not have or does not want.
    struct Gradients
    {
        const Tensor* x = nullptr;     // needed for dw
        const Tensor* w = nullptr;     // needed for dx
        const Tensor* y = nullptr;     // needed when the plan's activation is ReLU
        const Tensor* saved = nullptr; // from a training forward of this plan, or null / empty
        Tensor* dx = nullptr;
        Tensor* dw = nullptr;
        Tensor* db = nullptr; // only when the plan has a bias (and dw is wanted)
    };
    void backward(dnnl::stream& s, const Tensor& dy, const Gradients& g);

private:
    struct Forward;
    struct TypedForward;
    struct BackwardWeights;
    struct BackwardData;

    void buildForward();
    // The forward with a y of `out` and x of any float type (evaluation's bfloat16 activations).
    void buildTypedForward(DType out);
    void forwardActivations(dnnl::stream& s, const Tensor& x, const Tensor& w, const Tensor& b,
                            Tensor& y);
    void buildBackward(); // backward weights, which fixes the layout of g
    void buildBackwardData();
    // g from dy (masked by y when not null) for the backward primitives; in bfloat16 also the
    // bias gradient into biasSums when not null.
    void maskGradient(dnnl::stream& s, const Tensor& dy, const Tensor* y,
                      float* biasSums = nullptr);
    // The blocked input and weights a training forward saved, or null.
    const char* savedState(const Tensor* saved) const;

    dnnl::engine m_engine;
    Conv2dDesc m_desc;
    bool m_bias;
    Activation m_act;
    ConvAlgorithm m_algorithm;
    std::string m_key; // identifies the plan in the header of its saved state

    std::shared_ptr<Forward> m_fwd;
    struct TypedSlot
    {
        bool built = false;
        std::shared_ptr<TypedForward> fwd; // null: float32 copies through m_fwd
    };
    TypedSlot m_typed[2];        // y float32, y bfloat16
    Tensor m_stagedX, m_stagedY; // the float32 copies
    std::shared_ptr<BackwardWeights> m_bwdW;
    std::shared_ptr<BackwardData> m_bwdD;
    std::unique_ptr<WinogradConv> m_winograd; // Winograd5x5, TowersWinograd3x3

    // The masked gradient in the backward primitives' layout.
    dnnl::memory::desc m_gradDesc;
    int m_gradBlock = 0;     // channelBlockOf(m_gradDesc): 0 nhwc, 8 / 16 blocked, -1 other
    bool m_gradBf16 = false; // DirectBf16: g is bfloat16 NHWC, masked and converted in one pass
    bool m_bwdBias = false;  // the backward-weights primitive computes db (not in bfloat16)
    AlignedBuffer m_grad;    // g, unless it can be dy itself
    AlignedBuffer m_gradTmp; // g in NHWC before a oneDNN reorder, for the "other" layouts
    BoundPrimitive m_gradReorder;
    const void* m_gradPtr = nullptr; // where g is for the running backward
};

} // namespace towers::engine::cpu
