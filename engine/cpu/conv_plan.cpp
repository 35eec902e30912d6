#include "engine/cpu/conv_plan.h"

#include <cstring>
#include <functional>
#include <optional>

#include "engine/cpu/im2col.h"
#include "engine/cpu/masked_gradient.h"
#include "engine/cpu/simd_target.h"

namespace towers::engine::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;
constexpr auto bf16 = memory::data_type::bf16;

struct Geometry
{
    memory::dims src, dst, weights, bias, strides, padL, padR;
};

Geometry geometry(const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    // oneDNN orders dimensions N, C, H, W whatever the memory layout; the tag gives the layout.
    return {{g.n, g.c, g.h, g.w},
            {g.n, d.outChannels, g.oh, g.ow},
            {d.outChannels, g.c, g.kh, g.kw},
            {d.outChannels},
            {g.sh, g.sw},
            {g.padTop, g.padLeft},
            {g.padBottom, g.padRight}};
}

// Towers' own Winograd (winograd_5x5.h, winograd_3x3.h): NHWC in and out, no oneDNN primitive.
bool isTowersWinograd(ConvAlgorithm a)
{
    return a == ConvAlgorithm::Winograd5x5 || a == ConvAlgorithm::TowersWinograd3x3;
}

memory::desc md(const memory::dims& dims, Tag tag, memory::data_type type = f32)
{
    return memory::desc(dims, type, tag);
}

// What the primitives read: bfloat16 copies of activations, weights and gradients for DirectBf16
// (they accumulate and write float32), float32 otherwise.
memory::data_type inputType(ConvAlgorithm a)
{
    return a == ConvAlgorithm::DirectBf16 ? bf16 : f32;
}

// Whether a training forward keeps its input and weights, as the primitives read them, for
// backward: oneDNN's Winograd (blocked) and DirectBf16 (bfloat16).
bool keepsConvertedInputs(ConvAlgorithm a)
{
    return a == ConvAlgorithm::Winograd3x3 || a == ConvAlgorithm::DirectBf16;
}

// Once oneDNN's heuristic has picked Winograd for the forward of a shape, the plan asks for it in
// every direction: the heuristic keeps direct for some backward passes where Winograd measured
// 2x faster (mnist's conv2 backward weights, 64 -> 256 at 10x10: 20 ms against 40 on one core).
dnnl::algorithm onednnAlgorithm(ConvAlgorithm a)
{
    return a == ConvAlgorithm::Winograd3x3 ? dnnl::algorithm::convolution_winograd
                                           : dnnl::algorithm::convolution_direct;
}

// Activations NHWC, except for oneDNN's Winograd, which takes the layouts it wants.
Tag activationTag(ConvAlgorithm a)
{
    return a == ConvAlgorithm::Winograd3x3 ? Tag::any : Tag::nhwc;
}

dnnl::convolution_forward::primitive_desc forwardPd(const dnnl::engine& eng, const Geometry& g,
                                                    ConvAlgorithm a, bool bias, Activation act,
                                                    dnnl::algorithm algo,
                                                    memory::data_type out = f32)
{
    using dnnl::convolution_forward;
    dnnl::primitive_attr attr = BoundPrimitive::scratchpadAttr();
    if (act == Activation::Relu) {
        // Fused: ReLU is applied while the output is still in registers.
        dnnl::post_ops po;
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(po);
    }
    const auto kind = dnnl::prop_kind::forward_training;
    const Tag t = activationTag(a);
    const auto in = inputType(a);
    const auto desc =
        bias ? convolution_forward::desc(kind, algo, md(g.src, t, in), md(g.weights, Tag::any, in),
                                         md(g.bias, Tag::x), md(g.dst, t, out), g.strides, g.padL,
                                         g.padR)
             : convolution_forward::desc(kind, algo, md(g.src, t, in), md(g.weights, Tag::any, in),
                                         md(g.dst, t, out), g.strides, g.padL, g.padR);
    return convolution_forward::primitive_desc(desc, attr, eng);
}

dnnl::convolution_forward::primitive_desc forwardPd(const dnnl::engine& eng, const Geometry& g,
                                                    ConvAlgorithm a, bool bias, Activation act)
{
    return forwardPd(eng, g, a, bias, act, onednnAlgorithm(a));
}

// Floating-point operations per vector instruction of oneDNN's kernels on the instruction set they
// run on now (ONEDNN_MAX_CPU_ISA included): lanes, twice with fused multiply-add; 0 without JIT.
int onednnVectorFlops()
{
    using dnnl::cpu_isa;
    switch (dnnl::get_effective_cpu_isa()) {
    case cpu_isa::avx512_mic:
    case cpu_isa::avx512_mic_4ops:
    case cpu_isa::avx512_core:
    case cpu_isa::avx512_core_vnni:
    case cpu_isa::avx512_core_bf16:
    case cpu_isa::avx512_core_amx:
        return 32;
    case cpu_isa::avx2:
    case cpu_isa::avx2_vnni:
        return 16;
    case cpu_isa::avx:
        return 8;
    case cpu_isa::sse41:
        return 4;
    case cpu_isa::all:
        break;
    }
    return 0;
}

// Builds a backward primitive descriptor with the plan's algorithm, or, should oneDNN have no
// such kernel for that direction, with the one its heuristic picks.
template <class Make> auto backwardPd(ConvAlgorithm a, const Make& make)
{
    try {
        return make(onednnAlgorithm(a));
    } catch (const dnnl::error&) {
        if (a != ConvAlgorithm::Winograd3x3) throw;
        return make(dnnl::algorithm::convolution_auto);
    }
}

// Backward runs in the layouts oneDNN prefers, except around Towers' own Winograd, which reads and
// writes NHWC, and in bfloat16, where NHWC takes the forward's converted input as it is and g as
// one pass masks and converts it.
Tag backwardTag(ConvAlgorithm a)
{
    return isTowersWinograd(a) || a == ConvAlgorithm::DirectBf16 ? Tag::nhwc : Tag::any;
}

// The state a training forward leaves for backward: a header naming the plan, then (Winograd3x3)
// the blocked input and the reordered weights.
struct SavedHeader
{
    std::uint64_t magic, plan, bytes;
};
constexpr std::uint64_t kSavedMagic = 0x31766e6f63737774ULL; // "twsconv1"
constexpr std::size_t kHeaderBytes = 64;

std::size_t roundUp64(std::size_t n)
{
    return (n + 63) / 64 * 64;
}

} // namespace

const char* convAlgorithmName(ConvAlgorithm a)
{
    switch (a) {
    case ConvAlgorithm::Direct:
        return "direct";
    case ConvAlgorithm::Winograd3x3:
        return "winograd 3x3";
    case ConvAlgorithm::Winograd5x5:
        return "winograd 5x5";
    case ConvAlgorithm::TowersWinograd3x3:
        return "winograd 3x3"; // as oneDNN's: the implementation it reports tells whose
    case ConvAlgorithm::DirectBf16:
        return "direct bf16";
    }
    return "?";
}

ConvAlgorithm chooseConvAlgorithm(const dnnl::engine& eng, const Conv2dDesc& d, Precision precision,
                                  ConvUse use)
{
    applySimdTargetLimit();
    // In bfloat16, oneDNN's direct kernels (2x float32's multiply rate with AVX512_BF16's dot
    // products, far more with AMX), unless it has only a reference loop for this shape in
    // bfloat16: that shape then computes in float32, as below. Without AMX, float32 Winograd
    // F(4x4, 3x3) (oneDNN's or Towers') saves more than the dot products gain where its transforms
    // are amortised over enough input channels: such a convolution stays in float32, faster and
    // exact. How many depends on the use (2 Zen 4 cores, forward + backward ms per step, float32
    // Winograd against bfloat16 direct): in training from 64 (cifar10-resnet's 64 -> 128 at 16x16
    // 31.0 vs 39.0 and its 64 -> 64 residual block 39.9 vs 46.8, the whole bf16 step 1.08x faster;
    // mnist-convnet's 256 -> 512 at 14x14 128 vs 149; at 14x14 with 64, partial tiles, the two
    // tie; with 32, bfloat16 wins: fashion-fast's 32 -> 64 at 14x14 10.0 vs 8.6); in evaluation's
    // forward alone, where bfloat16 direct wins at 64 (fashion-wide's pass 0.92x with float32
    // there), from 128. So does one with a single input channel (a grey image's first
    // layer): bfloat16's dot products pair input channels (AMX's tiles take 32), so with one they
    // run half or more on padding, and the conversions cost more than they gain (fashion-fast's
    // conv1, 1 -> 32 at 28x28, batch 128, 2 threads, forward + backward ms: float32 0.58 + 1.64,
    // bfloat16 0.90 + 1.72 on AMX and 0.99 + 1.93 on avx512_core_bf16; with 3 channels bfloat16
    // wins: cifar10-resnet's first layer 1.47 + 2.59 against 1.51 + 3.20).
    if (precision == Precision::BFloat16 && d.win.c > 1) {
        const std::int64_t float32From = use == ConvUse::Training ? 64 : 128;
        const auto bf16 =
            forwardPd(eng, geometry(d), ConvAlgorithm::DirectBf16, false, Activation::None);
        const std::string impl = bf16.impl_info_str();
        if (impl.find("ref") == std::string::npos) {
            if (impl.find("amx") != std::string::npos || !Winograd3x3::supports(d) ||
                d.win.c < float32From)
                return ConvAlgorithm::DirectBf16;
            const ConvAlgorithm f32 = chooseConvAlgorithm(eng, d, Precision::Float32);
            return f32 == ConvAlgorithm::Winograd3x3 || f32 == ConvAlgorithm::TowersWinograd3x3
                       ? f32
                       : ConvAlgorithm::DirectBf16;
        }
    }
    // Towers' Winograd where it beats oneDNN's direct kernels on the instruction sets the two run
    // on now, or where oneDNN has only its reference loop for this shape.
    if (Winograd5x5::supports(d) &&
        (Winograd5x5::fasterThanDirect(d, onednnVectorFlops()) ||
         std::strstr(forwardPd(eng, geometry(d), ConvAlgorithm::Direct, false, Activation::None)
                         .impl_info_str(),
                     "ref")))
        return ConvAlgorithm::Winograd5x5;
    if (Winograd3x3::supports(d)) {
        // oneDNN's own heuristic says whether it has a Winograd kernel for this shape on this CPU
        // (2.6: AVX-512 only) and whether it beats direct, but not for a layer with fewer than 16
        // channels on either side: oneDNN 2.6 took its Winograd for fashion-fast's first layer
        // (1 -> 32 at 28x28, batch 64) on an Intel Xeon with AMX, 5.6 ms forward against 0.75 for
        // a direct kernel on the same machine. Where it has one, it is kept from 256 input
        // channels on; below, Towers' is faster where it runs on vectors as strong, needing no
        // reorders to and from oneDNN's blocked layout (the figures in conv_plan.h).
        constexpr std::int64_t kOneDnnWinogradChannels = 256;
        if (Winograd3x3::enoughChannels(d)) {
            try {
                const auto pd = forwardPd(eng, geometry(d), ConvAlgorithm::Winograd3x3, false,
                                          Activation::None, dnnl::algorithm::convolution_auto);
                if (std::strstr(pd.impl_info_str(), "wino")) {
                    if (d.win.c < kOneDnnWinogradChannels &&
                        Winograd3x3::fasterThanDirect(d, onednnVectorFlops()))
                        return ConvAlgorithm::TowersWinograd3x3;
                    return ConvAlgorithm::Winograd3x3;
                }
            } catch (const dnnl::error&) {
                // no Winograd of oneDNN's here
            }
        }
        // Elsewhere Towers' F(4x4, 3x3) where it beats oneDNN's direct kernels on the instruction
        // sets the two run on now (AVX2 against avx2: mnist-convnet's conv2 and conv3), or where
        // oneDNN has only its reference loop.
        if (Winograd3x3::fasterThanDirect(d, onednnVectorFlops()) ||
            std::strstr(forwardPd(eng, geometry(d), ConvAlgorithm::Direct, false, Activation::None)
                            .impl_info_str(),
                        "ref"))
            return ConvAlgorithm::TowersWinograd3x3;
    }
    return ConvAlgorithm::Direct;
}

struct ConvPlan::Forward
{
    BoundPrimitive conv;
    BoundPrimitive weightsReorder; // OIHW to the primitive's layout, when they differ
    bool reorderWeights = false;
    // Winograd3x3: NHWC input to blocked, blocked output to NHWC; DirectBf16: input to bfloat16.
    BoundPrimitive srcReorder, dstReorder;
    memory::desc srcDesc, weightsDesc;
    std::size_t srcBytes = 0, weightsBytes = 0;
    AlignedBuffer ownSrc, ownWeights; // when no saved state is given
};

namespace {
// Gives `conv` its weights: w itself, or, with a reorder, w reordered into `to` (the layout the
// primitive reads).
void bindWeights(dnnl::stream& s, BoundPrimitive& conv, BoundPrimitive* reorder, const Tensor& w,
                 void* to)
{
    if (!reorder) {
        conv.bind(DNNL_ARG_WEIGHTS, w);
        return;
    }
    reorder->bind(DNNL_ARG_FROM, w);
    reorder->bind(DNNL_ARG_TO, to);
    reorder->execute(s);
    conv.bind(DNNL_ARG_WEIGHTS, to);
}

// x in `type`: x itself, or x converted into `copy`.
const Tensor& inType(const Tensor& x, DType type, Tensor& copy)
{
    if (x.dtype() == type) return x;
    Tensor::ensure(copy, x.shape(), type);
    convertActivations(x, copy);
    return copy;
}
} // namespace

// The forward of evaluation's bfloat16 activations (the oneDNN backend's bf16Activations): Direct
// and DirectBf16 as one primitive that writes y in its dtype, reading x as it comes where that is
// the type the primitive reads (a bfloat16 x into DirectBf16), else converting it (a float32 x to
// bfloat16: the first layer's image; a bfloat16 x to float32 for Direct, a single input channel).
// Null for the other algorithms, and where oneDNN has no kernel for the pair of types but a
// reference loop or none (2.6: a float32 input with a bfloat16 output): the plan's own forward
// then runs on float32 copies.
struct ConvPlan::TypedForward
{
    BoundPrimitive conv;
    BoundPrimitive weightsReorder; // OIHW float32 to the primitive's weights, when they differ
    bool reorderWeights = false;
    memory::data_type src = f32;
    Tensor convertedX; // x in the type the primitive reads, when it comes in the other
    AlignedBuffer ownWeights;
};

struct ConvPlan::BackwardWeights
{
    BoundPrimitive conv;
    bool srcIsNhwc = true, srcMatchesSaved = false;
    BoundPrimitive srcReorder;
    AlignedBuffer ownSrc, ownBias;
    bool reorderDiffWeights = false;
    BoundPrimitive diffWeightsReorder; // the primitive's layout to OIHW
    // Small bfloat16 images on AMX (viaMatmul): `conv` is oneDNN's matrix product dW = g^T x col,
    // over the input's patches in `col` (im2col.h), O x (kh kw c) float32, which
    // diffWeightsReorder turns into OIHW.
    bool viaMatmul = false;
    AlignedBuffer col;

    // x as the primitive reads it: x itself (NHWC float32), the forward's converted copy in its
    // saved state, or a copy converted here by srcReorder.
    const void* input(dnnl::stream& s, const Tensor& x, const char* state)
    {
        if (srcIsNhwc) return x.raw();
        if (state && srcMatchesSaved) return state;
        void* own = ownSrc.get(srcReorder.arg(DNNL_ARG_TO).get_desc().get_size());
        srcReorder.bind(DNNL_ARG_FROM, x);
        srcReorder.bind(DNNL_ARG_TO, own);
        srcReorder.execute(s);
        return own;
    }
};

namespace {

// Whether the backward weights of a bfloat16 convolution runs as a matrix product over the
// input's patches (where oneDNN's product runs on AMX) instead of oneDNN's AMX convolution kernel
// (jit:avx512_core_amx_bf16), which runs far below its rate on small images. Intel Xeon with AMX,
// 2 cores, batch 128, 3x3, ms a call on random data, the kernel against the product (the patches,
// written and read once more, cost about 0.1 ms a MB besides):
//  * images of at most 16 output pixels: 256 -> 256 at 4x4 6.9 against 2.0, 512 -> 512 36 against
//    8.5-9.2 (the kernel at 270-350 GFLOP/s);
//  * stride 1 with an output smaller than the input (VALID padding), up to 100 output pixels: 10x10
//    -> 8x8 at 64, 128 or 256 -> 256 and 256 -> 512 4.8-43 against 1.8-18 (2.4-2.9x: the kernel
//    at 450-510 GFLOP/s); mnist-convnet's conv2 (12x12 -> 10x10, 64 -> 256) 6.2-6.8 against
//    2.9-3.1. Its bf16 step: 1.22x (six pairs of runs);
//  * but an 8x8 image padded to keep its size runs the kernel at 800-940 GFLOP/s: the product
//    gains 1.2-1.7x before the patches, and cifar10-resnet's step (128 -> 256 at 8x8) was no
//    faster with it (eight pairs, median 0.98); at 16x16 the kernel is the faster.
// Without AMX the two run at the same rate (avx512_core_bf16, 4x4: 11.9 against 12.3).
bool patchMatmulShape(const Window2d& g)
{
    const std::int64_t pixels = g.oh * g.ow;
    return pixels <= 16 || (g.sh == 1 && g.sw == 1 && pixels <= 100 && pixels < g.h * g.w);
}
// The patches are (n oh ow) x (kh kw c) bfloat16 values; larger ones stay with the convolution.
constexpr std::size_t kMatmulMaxPatchBytes = std::size_t(64) << 20;

std::size_t patchBytes(const Window2d& g)
{
    return std::size_t(g.n * g.oh * g.ow) * std::size_t(g.kh * g.kw * g.c) * sizeof(std::uint16_t);
}

// The product dW (O x K, K = kh kw c) = g^T (O x M, g being M x O NHWC) x col (M x K), M the output
// pixels, in bfloat16 with float32 accumulation, if this geometry takes it on this CPU.
std::optional<dnnl::matmul::primitive_desc> patchMatmul(const dnnl::engine& eng,
                                                        const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    if (!patchMatmulShape(g) || patchBytes(g) > kMatmulMaxPatchBytes) return {};
    const memory::dim m = g.n * g.oh * g.ow, k = g.kh * g.kw * g.c, o = d.outChannels;
    const memory::desc a({o, m}, bf16, memory::dims{1, o}), b({m, k}, bf16, Tag::ab),
        c({o, k}, f32, Tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), BoundPrimitive::scratchpadAttr(),
                                    eng);
    if (!std::strstr(pd.impl_info_str(), "amx")) return {};
    return pd;
}

// The weights of backward data as a forward convolution: w' [C, O, kh, kw] = w [O, C, kh - 1 - ky,
// kw - 1 - kx], input and output channels swapped and the window turned by 180 degrees.
void turnedWeights(const float* w, std::int64_t o, std::int64_t c, int kh, int kw, float* out)
{
    const std::int64_t window = std::int64_t(kh) * kw;
    parallelItems(c, o * window, [=](std::int64_t b, std::int64_t e) {
        for (std::int64_t ci = b; ci < e; ++ci)
            for (std::int64_t oi = 0; oi < o; ++oi) {
                const float* from = w + (oi * c + ci) * window;
                float* to = out + (ci * o + oi) * window;
                for (std::int64_t k = 0; k < window; ++k) to[k] = from[window - 1 - k];
            }
    });
}

// Backward data of a stride-1 bfloat16 convolution as oneDNN's forward convolution of g (bfloat16
// NHWC) into dx (float32 NHWC) with turnedWeights, where that runs on AMX: its forward kernel
// (brgconv) is faster than its backward-data one (jit) on every cifar10-resnet layer (Intel Xeon
// with AMX, 2 cores, batch 128, ms a call: 256 -> 256 at 4x4 2.6-3.4 against 1.6-1.7, 64 -> 64 at
// 16x16 1.4 against 1.0, 64 -> 128 at 16x16 2.3-2.5 against 1.9, 128 -> 256 at 8x8 2.6 against
// 2.1-2.3, 32 -> 64 at 32x32 2.3-2.5 against 2.2-2.5). A pad larger than the window less one has
// no such form.
std::optional<dnnl::convolution_forward::primitive_desc> transposedForward(const dnnl::engine& eng,
                                                                           const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    if (g.sh != 1 || g.sw != 1 || g.padTop > g.kh - 1 || g.padBottom > g.kh - 1 ||
        g.padLeft > g.kw - 1 || g.padRight > g.kw - 1)
        return {};
    // The convolution from g (the output's shape) to dx (the input's), as a DirectBf16 forward.
    const Geometry forward = geometry(d);
    Geometry t = forward;
    t.src = forward.dst;
    t.dst = forward.src;
    t.weights = {g.c, d.outChannels, g.kh, g.kw};
    t.bias = {g.c};
    t.padL = {g.kh - 1 - g.padTop, g.kw - 1 - g.padLeft};
    t.padR = {g.kh - 1 - g.padBottom, g.kw - 1 - g.padRight};
    try {
        auto pd = forwardPd(eng, t, ConvAlgorithm::DirectBf16, false, Activation::None);
        if (!std::strstr(pd.impl_info_str(), "amx")) return {};
        return pd;
    } catch (const dnnl::error&) {
        return {}; // no kernel for it: the backward-data one
    }
}

} // namespace

struct ConvPlan::BackwardData
{
    BoundPrimitive conv;
    bool weightsAreOihw = true, weightsMatchSaved = false;
    BoundPrimitive weightsReorder;
    AlignedBuffer ownWeights;
    bool gradMatches = true;    // the primitive reads g in m_gradDesc
    BoundPrimitive gradReorder; // into the primitive's own diff_dst memory
    bool diffSrcIsNhwc = true;
    BoundPrimitive diffSrcReorder;
    // DirectBf16 on AMX, stride 1 (viaForward): `conv` is oneDNN's forward convolution of g with
    // the weights transposed and turned (turnedWeights), padded by kernel - 1 - pad on each side,
    // which is dx; weightsReorder takes the turned float32 weights to its bfloat16 layout.
    bool viaForward = false;
    AlignedBuffer turned;
};

ConvPlan::ConvPlan(const dnnl::engine& eng, const Conv2dDesc& d, bool bias, Activation act,
                   Precision precision, ConvUse use)
    : m_engine(eng), m_desc(d), m_bias(bias), m_act(act),
      m_algorithm(chooseConvAlgorithm(eng, d, precision, use))
{
    m_key = d.win.str() + " out " + std::to_string(d.outChannels) + (bias ? " bias" : "") +
            (act == Activation::Relu ? " relu" : "") +
            (m_algorithm == ConvAlgorithm::DirectBf16 ? " bf16" : "");
    if (m_algorithm == ConvAlgorithm::Winograd5x5) m_winograd = std::make_unique<Winograd5x5>(d);
    if (m_algorithm == ConvAlgorithm::TowersWinograd3x3)
        m_winograd = std::make_unique<Winograd3x3>(d);
}

void ConvPlan::buildForward()
{
    const Geometry g = geometry(m_desc);
    auto f = std::make_shared<Forward>();
    if (m_winograd) {
        m_fwd = f; // nothing of oneDNN's
        return;
    }
    const auto pd = forwardPd(m_engine, g, m_algorithm, m_bias, m_act);
    f->conv.prim = dnnl::convolution_forward(pd);
    f->srcDesc = pd.src_desc();
    f->weightsDesc = pd.weights_desc();
    f->conv.addArg(DNNL_ARG_SRC, f->srcDesc, m_engine);
    f->conv.addArg(DNNL_ARG_WEIGHTS, f->weightsDesc, m_engine);
    if (m_bias) f->conv.addArg(DNNL_ARG_BIAS, pd.bias_desc(), m_engine);
    f->conv.addScratchpad(pd.scratchpad_desc(), m_engine);
    const memory::desc oihw = md(g.weights, Tag::oihw);
    f->reorderWeights = f->weightsDesc != oihw;
    if (f->reorderWeights) f->weightsReorder = makeReorder(oihw, f->weightsDesc, m_engine);
    if (keepsConvertedInputs(m_algorithm)) {
        // The input and the weights as the primitive reads them, kept for backward.
        f->srcBytes = f->srcDesc.get_size();
        f->weightsBytes = f->weightsDesc.get_size();
        f->srcReorder = makeReorder(md(g.src, Tag::nhwc), f->srcDesc, m_engine);
    }
    if (m_algorithm == ConvAlgorithm::Winograd3x3) {
        f->conv.addOwnedArg(DNNL_ARG_DST, pd.dst_desc(), m_engine);
        f->dstReorder = makeReorder(pd.dst_desc(), md(g.dst, Tag::nhwc), m_engine);
        f->dstReorder.shareArg(DNNL_ARG_FROM, f->conv.arg(DNNL_ARG_DST));
    } else if (m_algorithm == ConvAlgorithm::DirectBf16) {
        f->conv.addArg(DNNL_ARG_DST, pd.dst_desc(), m_engine);
    } else {
        f->conv.addArg(DNNL_ARG_DST, pd.dst_desc(), m_engine);
        if (f->reorderWeights) {
            // The reordered weights live in the primitive's own memory.
            f->conv.addOwnedArg(DNNL_ARG_WEIGHTS, f->weightsDesc, m_engine);
            f->weightsReorder.shareArg(DNNL_ARG_TO, f->conv.arg(DNNL_ARG_WEIGHTS));
        }
    }
    m_fwd = f;
}

void ConvPlan::buildTypedForward(DType out)
{
    auto& slot = m_typed[out == DType::BFloat16];
    slot.built = true;
    if (m_algorithm != ConvAlgorithm::Direct && m_algorithm != ConvAlgorithm::DirectBf16) return;
    const Geometry g = geometry(m_desc);
    std::optional<dnnl::convolution_forward::primitive_desc> found;
    try {
        found = forwardPd(m_engine, g, m_algorithm, m_bias, m_act, onednnAlgorithm(m_algorithm),
                          out == DType::BFloat16 ? bf16 : f32);
    } catch (const dnnl::error&) {
        return; // no kernel for these types (2.6: float32 input, bfloat16 output)
    }
    const auto& pd = *found;
    if (std::strstr(pd.impl_info_str(), "ref")) return; // the float32 copies are faster
    auto f = std::make_shared<TypedForward>();
    f->conv.prim = dnnl::convolution_forward(pd);
    f->src = inputType(m_algorithm);
    f->conv.addArg(DNNL_ARG_SRC, pd.src_desc(), m_engine);
    f->conv.addArg(DNNL_ARG_DST, pd.dst_desc(), m_engine);
    if (m_bias) f->conv.addArg(DNNL_ARG_BIAS, pd.bias_desc(), m_engine);
    f->conv.addScratchpad(pd.scratchpad_desc(), m_engine);
    const memory::desc oihw = md(g.weights, Tag::oihw);
    f->reorderWeights = pd.weights_desc() != oihw;
    f->conv.addArg(DNNL_ARG_WEIGHTS, pd.weights_desc(), m_engine);
    if (f->reorderWeights) f->weightsReorder = makeReorder(oihw, pd.weights_desc(), m_engine);
    slot.fwd = f;
}

void ConvPlan::forwardActivations(dnnl::stream& s, const Tensor& x, const Tensor& w,
                                  const Tensor& b, Tensor& y)
{
    auto& slot = m_typed[y.dtype() == DType::BFloat16];
    if (!slot.built) buildTypedForward(y.dtype());
    if (!slot.fwd) {
        // The plan's own forward on float32 copies of what is bfloat16.
        Tensor* out = &y;
        if (y.dtype() != DType::Float32) {
            Tensor::ensure(m_stagedY, y.shape(), DType::Float32);
            out = &m_stagedY;
        }
        forward(s, inType(x, DType::Float32, m_stagedX), w, b, *out, nullptr);
        if (out != &y) convertActivations(*out, y);
        return;
    }
    TypedForward& f = *slot.fwd;
    const DType src = f.src == bf16 ? DType::BFloat16 : DType::Float32;
    f.conv.bind(DNNL_ARG_SRC, inType(x, src, f.convertedX));
    f.conv.bind(DNNL_ARG_DST, y);
    if (m_bias) f.conv.bind(DNNL_ARG_BIAS, b.data<float>());
    const std::size_t weightBytes = f.conv.arg(DNNL_ARG_WEIGHTS).get_desc().get_size();
    bindWeights(s, f.conv, f.reorderWeights ? &f.weightsReorder : nullptr, w,
                f.reorderWeights ? f.ownWeights.get(weightBytes) : nullptr);
    f.conv.execute(s);
}

void ConvPlan::forward(dnnl::stream& s, const Tensor& x, const Tensor& w, const Tensor& b,
                       Tensor& y, Tensor* saved)
{
    if (x.dtype() == DType::BFloat16 || y.dtype() == DType::BFloat16) {
        forwardActivations(s, x, w, b, y); // evaluation's bfloat16 activations: no saved state
        return;
    }
    if (!m_fwd) buildForward();
    Forward& f = *m_fwd;
    char* state = nullptr;
    if (saved) {
        const std::size_t bytes = kHeaderBytes + roundUp64(f.srcBytes) + roundUp64(f.weightsBytes);
        Tensor::ensure(*saved, Shape{static_cast<std::int64_t>(bytes)}, DType::UInt8);
        const SavedHeader h{kSavedMagic, std::hash<std::string>{}(m_key), bytes};
        std::memcpy(saved->raw(), &h, sizeof h);
        state = static_cast<char*>(saved->raw()) + kHeaderBytes;
    }
    const float* bias = m_bias ? b.data<float>() : nullptr;
    switch (m_algorithm) {
    case ConvAlgorithm::Winograd5x5:
    case ConvAlgorithm::TowersWinograd3x3:
        m_winograd->forward(x.data<float>(), w.data<float>(), bias, m_act == Activation::Relu,
                            y.data<float>());
        return;
    case ConvAlgorithm::Winograd3x3:
    case ConvAlgorithm::DirectBf16: {
        void* xb = state ? state : f.ownSrc.get(f.srcBytes);
        void* wb = state ? state + roundUp64(f.srcBytes) : f.ownWeights.get(f.weightsBytes);
        f.srcReorder.bind(DNNL_ARG_FROM, x);
        f.srcReorder.bind(DNNL_ARG_TO, xb);
        f.srcReorder.execute(s);
        f.conv.bind(DNNL_ARG_SRC, xb);
        bindWeights(s, f.conv, f.reorderWeights ? &f.weightsReorder : nullptr, w, wb);
        if (m_bias) f.conv.bind(DNNL_ARG_BIAS, bias);
        if (m_algorithm == ConvAlgorithm::DirectBf16) {
            f.conv.bind(DNNL_ARG_DST, y);
            f.conv.execute(s);
            return;
        }
        f.conv.execute(s);
        f.dstReorder.bind(DNNL_ARG_TO, y);
        f.dstReorder.execute(s);
        return;
    }
    case ConvAlgorithm::Direct:
        f.conv.bind(DNNL_ARG_SRC, x);
        f.conv.bind(DNNL_ARG_DST, y);
        if (m_bias) f.conv.bind(DNNL_ARG_BIAS, bias);
        if (f.reorderWeights) {
            f.weightsReorder.bind(DNNL_ARG_FROM, w);
            f.weightsReorder.execute(s);
        } else {
            f.conv.bind(DNNL_ARG_WEIGHTS, w);
        }
        f.conv.execute(s);
        return;
    }
}

void ConvPlan::buildBackward()
{
    using dnnl::convolution_backward_weights;
    if (!m_fwd) buildForward(); // the saved-state layout
    const Geometry g = geometry(m_desc);
    if (m_winograd) {
        m_bwdW = std::make_shared<BackwardWeights>(); // all of backward is Towers' own
        return;
    }
    const Tag t = backwardTag(m_algorithm);
    const auto in = inputType(m_algorithm);
    const auto attr = BoundPrimitive::scratchpadAttr();
    const auto hint = forwardPd(m_engine, g, m_algorithm, m_bias, Activation::None);
    const memory::desc oihw = md(g.weights, Tag::oihw), dstNhwc = md(g.dst, Tag::nhwc);

    // Backward weights: it fixes the layout of g for both backward primitives. In bfloat16 the
    // bias gradient is summed from float32 dy instead (backward()): from g's bfloat16 copy, the
    // few large terms of a bias gradient would cancel to as much as 2 % off.
    m_bwdBias = m_bias && m_algorithm != ConvAlgorithm::DirectBf16;
    auto w = std::make_shared<BackwardWeights>();
    if (m_algorithm == ConvAlgorithm::DirectBf16) {
        if (const auto pd = patchMatmul(m_engine, m_desc)) {
            // g in bfloat16 NHWC is the product's g^T as it is, the input's bfloat16 NHWC copy
            // (the forward's, or made here) gives the patches.
            w->viaMatmul = true;
            w->conv.prim = dnnl::matmul(*pd);
            w->conv.addArg(DNNL_ARG_SRC, pd->src_desc(), m_engine);
            w->conv.addArg(DNNL_ARG_WEIGHTS, pd->weights_desc(), m_engine);
            w->conv.addOwnedArg(DNNL_ARG_DST, pd->dst_desc(), m_engine);
            w->conv.addScratchpad(pd->scratchpad_desc(), m_engine);
            const memory::desc srcBf16 = md(g.src, Tag::nhwc, bf16);
            w->srcIsNhwc = false;
            w->srcMatchesSaved = m_fwd->srcDesc == srcBf16;
            w->srcReorder = makeReorder(md(g.src, Tag::nhwc), srcBf16, m_engine);
            w->reorderDiffWeights = true;
            w->diffWeightsReorder = makeReorder(md(g.weights, Tag::ohwi), oihw, m_engine);
            w->diffWeightsReorder.shareArg(DNNL_ARG_FROM, w->conv.arg(DNNL_ARG_DST));
            m_gradDesc = md(g.dst, Tag::nhwc, bf16);
            m_gradBf16 = true;
            m_gradBlock = -1;
            m_bwdW = w;
            return;
        }
    }
    {
        const auto pd = backwardPd(m_algorithm, [&](dnnl::algorithm algo) {
            const auto desc =
                m_bwdBias
                    ? convolution_backward_weights::desc(
                          algo, md(g.src, t, in), md(g.weights, Tag::any), md(g.bias, Tag::x),
                          md(g.dst, t, in), g.strides, g.padL, g.padR)
                    : convolution_backward_weights::desc(algo, md(g.src, t, in),
                                                         md(g.weights, Tag::any), md(g.dst, t, in),
                                                         g.strides, g.padL, g.padR);
            return convolution_backward_weights::primitive_desc(desc, attr, m_engine, hint);
        });
        w->conv.prim = convolution_backward_weights(pd);
        const memory::desc src = pd.src_desc();
        w->conv.addArg(DNNL_ARG_SRC, src, m_engine);
        w->conv.addArg(DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), m_engine);
        if (m_bwdBias) w->conv.addArg(DNNL_ARG_DIFF_BIAS, pd.diff_bias_desc(), m_engine);
        w->conv.addScratchpad(pd.scratchpad_desc(), m_engine);
        w->srcIsNhwc = src == md(g.src, Tag::nhwc);
        w->srcMatchesSaved = keepsConvertedInputs(m_algorithm) && src == m_fwd->srcDesc;
        if (!w->srcIsNhwc) w->srcReorder = makeReorder(md(g.src, Tag::nhwc), src, m_engine);
        w->reorderDiffWeights = pd.diff_weights_desc() != oihw;
        if (w->reorderDiffWeights) {
            w->conv.addOwnedArg(DNNL_ARG_DIFF_WEIGHTS, pd.diff_weights_desc(), m_engine);
            w->diffWeightsReorder = makeReorder(pd.diff_weights_desc(), oihw, m_engine);
            w->diffWeightsReorder.shareArg(DNNL_ARG_FROM, w->conv.arg(DNNL_ARG_DIFF_WEIGHTS));
        } else {
            w->conv.addArg(DNNL_ARG_DIFF_WEIGHTS, oihw, m_engine);
        }
        m_gradDesc = pd.diff_dst_desc();
        // In bfloat16, g is masked and converted in one pass (with the bias gradient summed),
        // NHWC as the primitive was asked for.
        m_gradBf16 = in == bf16;
        if (m_gradBf16 && m_gradDesc != md(g.dst, Tag::nhwc, bf16))
            throw BackendError("oneDNN's bfloat16 backward-weights convolution " + m_key +
                               " reads its gradient in another layout than the NHWC asked for");
        m_gradBlock = m_gradBf16 ? -1 : channelBlockOf(m_gradDesc, g.dst);
        if (m_gradBlock < 0 && !m_gradBf16)
            m_gradReorder = makeReorder(dstNhwc, m_gradDesc, m_engine);
    }
    m_bwdW = w;
}

void ConvPlan::buildBackwardData()
{
    using dnnl::convolution_backward_data;
    const Geometry g = geometry(m_desc);
    const Tag t = backwardTag(m_algorithm);
    const auto in = inputType(m_algorithm);
    const auto attr = BoundPrimitive::scratchpadAttr();
    const auto hint = forwardPd(m_engine, g, m_algorithm, m_bias, Activation::None);
    const memory::desc oihw = md(g.weights, Tag::oihw);
    auto d = std::make_shared<BackwardData>();
    if (m_gradBf16) {
        if (const auto pd = transposedForward(m_engine, m_desc)) {
            d->viaForward = true;
            d->conv.prim = dnnl::convolution_forward(*pd);
            d->conv.addArg(DNNL_ARG_SRC, pd->src_desc(), m_engine);
            d->conv.addArg(DNNL_ARG_WEIGHTS, pd->weights_desc(), m_engine);
            d->conv.addArg(DNNL_ARG_DST, pd->dst_desc(), m_engine);
            d->conv.addScratchpad(pd->scratchpad_desc(), m_engine);
            d->weightsReorder =
                makeReorder(md({g.src[1], g.dst[1], g.weights[2], g.weights[3]}, Tag::oihw),
                            pd->weights_desc(), m_engine);
            m_bwdD = d;
            return;
        }
    }
    {
        // Reading g as the backward weights wrote it saves a reorder; if oneDNN has no kernel for
        // that layout, it gets the one it prefers.
        auto makePd = [&](const memory::desc& diffDst) {
            return backwardPd(m_algorithm, [&](dnnl::algorithm algo) {
                const convolution_backward_data::desc desc(algo, md(g.src, t),
                                                           md(g.weights, Tag::any, in), diffDst,
                                                           g.strides, g.padL, g.padR);
                return convolution_backward_data::primitive_desc(desc, attr, m_engine, hint);
            });
        };
        convolution_backward_data::primitive_desc pd;
        try {
            pd = makePd(m_gradDesc);
        } catch (const dnnl::error&) {
            pd = makePd(md(g.dst, t, in));
        }
        d->conv.prim = convolution_backward_data(pd);
        d->conv.addScratchpad(pd.scratchpad_desc(), m_engine);
        d->gradMatches = pd.diff_dst_desc() == m_gradDesc;
        if (d->gradMatches) {
            d->conv.addArg(DNNL_ARG_DIFF_DST, m_gradDesc, m_engine);
        } else {
            d->conv.addOwnedArg(DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), m_engine);
            d->gradReorder = makeReorder(m_gradDesc, pd.diff_dst_desc(), m_engine);
            d->gradReorder.shareArg(DNNL_ARG_TO, d->conv.arg(DNNL_ARG_DIFF_DST));
        }
        const memory::desc wd = pd.weights_desc();
        d->conv.addArg(DNNL_ARG_WEIGHTS, wd, m_engine);
        d->weightsAreOihw = wd == oihw;
        d->weightsMatchSaved =
            keepsConvertedInputs(m_algorithm) && m_fwd->reorderWeights && wd == m_fwd->weightsDesc;
        if (!d->weightsAreOihw) d->weightsReorder = makeReorder(oihw, wd, m_engine);
        const memory::desc srcNhwc = md(g.src, Tag::nhwc);
        d->diffSrcIsNhwc = pd.diff_src_desc() == srcNhwc;
        if (d->diffSrcIsNhwc) {
            d->conv.addArg(DNNL_ARG_DIFF_SRC, srcNhwc, m_engine);
        } else {
            d->conv.addOwnedArg(DNNL_ARG_DIFF_SRC, pd.diff_src_desc(), m_engine);
            d->diffSrcReorder = makeReorder(pd.diff_src_desc(), srcNhwc, m_engine);
            d->diffSrcReorder.shareArg(DNNL_ARG_FROM, d->conv.arg(DNNL_ARG_DIFF_SRC));
        }
    }
    m_bwdD = d;
}

void ConvPlan::maskGradient(dnnl::stream& s, const Tensor& dy, const Tensor* y, float* biasSums)
{
    const Window2d& g = m_desc.win;
    const std::int64_t hw = g.oh * g.ow;
    if (m_gradBf16) {
        auto* out = static_cast<std::uint16_t*>(m_grad.get(m_gradDesc.get_size()));
        maskedGradientBf16(dy.data<float>(), y ? y->data<float>() : nullptr, g.n * hw,
                           m_desc.outChannels, out, biasSums);
        m_gradPtr = out;
        return;
    }
    if (m_gradBlock == 0 && !y) {
        m_gradPtr = dy.raw(); // g is dy itself
        return;
    }
    if (m_gradBlock >= 0) {
        float* out = static_cast<float*>(m_grad.get(m_gradDesc.get_size()));
        maskedGradient(dy.data<float>(), y ? y->data<float>() : nullptr, g.n, hw,
                       m_desc.outChannels, m_gradBlock, out);
        m_gradPtr = out;
        return;
    }
    float* tmp = m_gradTmp.floats(static_cast<std::size_t>(dy.numel()));
    maskedGradient(dy.data<float>(), y ? y->data<float>() : nullptr, g.n, hw, m_desc.outChannels, 0,
                   tmp);
    void* out = m_grad.get(m_gradDesc.get_size());
    m_gradReorder.bind(DNNL_ARG_FROM, tmp);
    m_gradReorder.bind(DNNL_ARG_TO, out);
    m_gradReorder.execute(s);
    m_gradPtr = out;
}

const char* ConvPlan::savedState(const Tensor* saved) const
{
    if (!saved || saved->empty()) return nullptr;
    const std::size_t bytes =
        kHeaderBytes + roundUp64(m_fwd->srcBytes) + roundUp64(m_fwd->weightsBytes);
    SavedHeader h{};
    if (saved->dtype() == DType::UInt8 && saved->bytes() == bytes)
        std::memcpy(&h, saved->raw(), sizeof h);
    if (h.magic != kSavedMagic || h.plan != std::hash<std::string>{}(m_key) || h.bytes != bytes)
        throw InvalidArgument("conv2d saved state: not from conv2dForwardTraining of this "
                              "convolution (" +
                              m_key + ")");
    return static_cast<const char*>(saved->raw()) + kHeaderBytes;
}

void ConvPlan::backward(dnnl::stream& s, const Tensor& dy, const Gradients& a)
{
    if (!m_bwdW) buildBackward();
    const char* state = savedState(a.saved);
    if (m_winograd) {
        // Towers' Winograd applies the ReLU mask as it reads dy.
        const float* mask = m_act == Activation::Relu ? a.y->data<float>() : nullptr;
        if (a.dw)
            m_winograd->backwardWeights(a.x->data<float>(), dy.data<float>(), mask,
                                        a.dw->data<float>(),
                                        m_bias && a.db ? a.db->data<float>() : nullptr);
        if (a.dx)
            m_winograd->backwardData(dy.data<float>(), mask, a.w->data<float>(),
                                     a.dx->data<float>());
        return;
    }
    // In bfloat16 the bias gradient comes from float32 dy, summed as g is converted.
    float* biasSums = m_bias && !m_bwdBias && a.dw && a.db ? a.db->data<float>() : nullptr;
    maskGradient(s, dy, m_act == Activation::Relu ? a.y : nullptr, biasSums);

    if (a.dw && m_bwdW->viaMatmul) {
        BackwardWeights& w = *m_bwdW;
        auto* col = static_cast<std::uint16_t*>(w.col.get(patchBytes(m_desc.win)));
        im2col16(m_desc.win, static_cast<const std::uint16_t*>(w.input(s, *a.x, state)), col);
        w.conv.bind(DNNL_ARG_SRC, m_gradPtr);
        w.conv.bind(DNNL_ARG_WEIGHTS, col);
        w.conv.execute(s);
        w.diffWeightsReorder.bind(DNNL_ARG_TO, *a.dw);
        w.diffWeightsReorder.execute(s);
    } else if (a.dw) {
        BackwardWeights& w = *m_bwdW;
        w.conv.bind(DNNL_ARG_SRC, w.input(s, *a.x, state));
        w.conv.bind(DNNL_ARG_DIFF_DST, m_gradPtr);
        if (m_bwdBias)
            w.conv.bind(DNNL_ARG_DIFF_BIAS,
                        a.db ? a.db->raw()
                             : w.ownBias.get(static_cast<std::size_t>(m_desc.outChannels) * 4));
        if (!w.reorderDiffWeights) w.conv.bind(DNNL_ARG_DIFF_WEIGHTS, *a.dw);
        w.conv.execute(s);
        if (w.reorderDiffWeights) {
            w.diffWeightsReorder.bind(DNNL_ARG_TO, *a.dw);
            w.diffWeightsReorder.execute(s);
        }
    }

    if (!a.dx) return;
    if (!m_bwdD) buildBackwardData();
    BackwardData& d = *m_bwdD;
    if (d.viaForward) {
        const Window2d& g = m_desc.win;
        float* turned = d.turned.floats(static_cast<std::size_t>(a.w->numel()));
        turnedWeights(a.w->data<float>(), m_desc.outChannels, g.c, g.kh, g.kw, turned);
        void* wb = d.ownWeights.get(d.conv.arg(DNNL_ARG_WEIGHTS).get_desc().get_size());
        d.weightsReorder.bind(DNNL_ARG_FROM, turned);
        d.weightsReorder.bind(DNNL_ARG_TO, wb);
        d.weightsReorder.execute(s);
        d.conv.bind(DNNL_ARG_SRC, m_gradPtr);
        d.conv.bind(DNNL_ARG_WEIGHTS, wb);
        d.conv.bind(DNNL_ARG_DST, *a.dx);
        d.conv.execute(s);
        return;
    }
    if (d.gradMatches) {
        d.conv.bind(DNNL_ARG_DIFF_DST, m_gradPtr);
    } else {
        d.gradReorder.bind(DNNL_ARG_FROM, m_gradPtr);
        d.gradReorder.execute(s);
    }
    if (d.weightsAreOihw) {
        d.conv.bind(DNNL_ARG_WEIGHTS, *a.w);
    } else if (state && d.weightsMatchSaved) {
        d.conv.bind(DNNL_ARG_WEIGHTS, state + roundUp64(m_fwd->srcBytes));
    } else {
        const std::size_t bytes = d.conv.arg(DNNL_ARG_WEIGHTS).get_desc().get_size();
        bindWeights(s, d.conv, &d.weightsReorder, *a.w, d.ownWeights.get(bytes));
    }
    if (d.diffSrcIsNhwc) d.conv.bind(DNNL_ARG_DIFF_SRC, *a.dx);
    d.conv.execute(s);
    if (!d.diffSrcIsNhwc) {
        d.diffSrcReorder.bind(DNNL_ARG_TO, *a.dx);
        d.diffSrcReorder.execute(s);
    }
}

} // namespace towers::engine::cpu
