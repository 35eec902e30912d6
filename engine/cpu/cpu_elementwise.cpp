// Element-wise ops, dropout, the softmax cross-entropy loss and the whole-tensor reductions as
// OpenMP loops the compiler vectorises (for AVX-512 too, see cpu_common.h): they are memory-bound,
// and a plain loop over our own buffers needs no primitive, no memory objects and no allocation
// per call (measured faster than oneDNN eltwise/binary primitives for these sizes). The layout
// transposes are oneDNN reorders (a JIT kernel), cached per shape. Inputs are held as local views
// before the outputs are sized, so an output that is the same tensor object as an input keeps its
// bytes.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/cpu/cpu_common.h"
#include "engine/ops/clip_norm.h"
#include "engine/ops/dropout_mask.h"
#include "engine/ops/op_checks.h"
#include "engine/ops/step_scalars.h"
#include "engine/tensor/bfloat16.h"

namespace towers::engine::cpu {

namespace {

} // namespace

void OneDnnOps::reluForwardImpl(const Tensor& x, Tensor& y)
{
    const Tensor in = x;
    Tensor::ensure(y, in.shape(), DType::Float32);
    const float* px = in.data<float>();
    float* py = y.data<float>();
    parallelChunks(in.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) py[i] = px[i] > 0.0f ? px[i] : 0.0f;
    });
}

void OneDnnOps::reluBackwardImpl(const Tensor& y, const Tensor& dy, Tensor& dx)
{
    const Tensor yIn = y, dyIn = dy;
    Tensor::ensure(dx, yIn.shape(), DType::Float32);
    const float* py = yIn.data<float>();
    const float* pdy = dyIn.data<float>();
    float* pdx = dx.data<float>();
    parallelChunks(yIn.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) pdx[i] = py[i] > 0.0f ? pdy[i] : 0.0f;
    });
}

void OneDnnOps::addImpl(const Tensor& a, const Tensor& b, Tensor& y)
{
    const Tensor aIn = a, bIn = b;
    if (aIn.dtype() == DType::BFloat16) { // evaluation's activations: the sum rounded once
        Tensor::ensure(y, aIn.shape(), DType::BFloat16);
        const auto* pa = static_cast<const std::uint16_t*>(aIn.raw());
        const auto* pb = static_cast<const std::uint16_t*>(bIn.raw());
        auto* py = static_cast<std::uint16_t*>(y.raw());
        parallelChunks(aIn.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
            for (std::int64_t i = begin; i < end; ++i)
                py[i] = bfloat16Bits(fromBfloat16Bits(pa[i]) + fromBfloat16Bits(pb[i]));
        });
        return;
    }
    Tensor::ensure(y, aIn.shape(), DType::Float32);
    const float* pa = aIn.data<float>();
    const float* pb = bIn.data<float>();
    float* py = y.data<float>();
    parallelChunks(aIn.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) py[i] = pa[i] + pb[i];
    });
}

void OneDnnOps::dropoutForwardImpl(const Tensor& x, double rate, std::uint64_t layerSeed, Tensor& y,
                                   Tensor& mask, const Tensor& scalars)
{
    const std::uint64_t seed = step_scalars::dropoutSeed(layerSeed, scalars);
    const Tensor in = x;
    Tensor::ensure(y, in.shape(), DType::Float32);
    Tensor::ensure(mask, in.shape(), DType::UInt8);
    const std::uint32_t threshold = dropoutThreshold(rate);
    const float scale = static_cast<float>(1.0 / (1.0 - rate));
    const float* px = in.data<float>();
    float* py = y.data<float>();
    std::uint8_t* pm = mask.data<std::uint8_t>();
    parallelChunks(in.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) {
            const bool keep = dropoutKeeps(seed, static_cast<std::uint64_t>(i), threshold);
            pm[i] = keep;
            py[i] = keep ? px[i] * scale : 0.0f;
        }
    });
}

void OneDnnOps::dropoutBackwardImpl(const Tensor& dy, const Tensor& mask, double rate, Tensor& dx)
{
    const Tensor dyIn = dy, maskIn = mask;
    Tensor::ensure(dx, dyIn.shape(), DType::Float32);
    const float scale = static_cast<float>(1.0 / (1.0 - rate));
    const float* pdy = dyIn.data<float>();
    const std::uint8_t* pm = maskIn.data<std::uint8_t>();
    float* pdx = dx.data<float>();
    parallelChunks(dyIn.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) pdx[i] = pm[i] ? pdy[i] * scale : 0.0f;
    });
}

namespace {

// A cached reorder between two 4-D layouts of the same logical N,C,H,W tensor, float32 or bfloat16.
void reorder4d(OneDnnOps& ops, const char* what, const Shape& nchwDims,
               dnnl::memory::format_tag from, dnnl::memory::format_tag to, const Tensor& x,
               Tensor& y)
{
    guarded(what, [&] {
        const bool bf16 = x.dtype() == DType::BFloat16;
        const std::string key = std::string(what) + " " + dimsKey(nchwDims) + (bf16 ? " bf16" : "");
        auto& p = ops.cached<BoundPrimitive>(key, [&] {
            const dnnl::memory::dims dims(nchwDims.dims().begin(), nchwDims.dims().end());
            const auto type = bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
            const dnnl::memory::desc src(dims, type, from);
            const dnnl::memory::desc dst(dims, type, to);
            return std::make_shared<BoundPrimitive>(makeReorder(src, dst, ops.dnnlEngine()));
        });
        p.bind(DNNL_ARG_FROM, x);
        p.bind(DNNL_ARG_TO, y);
        p.execute(ops.dnnlStream());
    });
}

} // namespace

void OneDnnOps::convertFloatImpl(const Tensor& x, DType dtype, Tensor& y)
{
    const Tensor in = x;
    Tensor::ensure(y, in.shape(), dtype);
    convertActivations(in, y);
}

void convertActivations(const Tensor& in, Tensor& y)
{
    const std::int64_t n = in.numel();
    if (in.dtype() == y.dtype()) {
        if (n) std::memcpy(y.raw(), in.raw(), y.bytes());
        return;
    }
    if (y.dtype() == DType::BFloat16) {
        const float* px = in.data<float>();
        auto* py = static_cast<std::uint16_t*>(y.raw());
        parallelChunks(n, [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
            for (std::int64_t i = begin; i < end; ++i) py[i] = bfloat16Bits(px[i]);
        });
        return;
    }
    const auto* px = static_cast<const std::uint16_t*>(in.raw());
    float* py = y.data<float>();
    parallelChunks(n, [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) py[i] = fromBfloat16Bits(px[i]);
    });
}

void OneDnnOps::nhwcToNchwImpl(const Tensor& x, Tensor& y)
{
    const Shape nchw{x.dim(0), x.dim(3), x.dim(1), x.dim(2)};
    Tensor::ensure(y, nchw, x.dtype()); // float32, or evaluation's bfloat16
    reorder4d(*this, "reordering NHWC to NCHW", nchw, dnnl::memory::format_tag::nhwc,
              dnnl::memory::format_tag::nchw, x, y);
}

void OneDnnOps::nchwToNhwcImpl(const Tensor& x, Tensor& y)
{
    Tensor::ensure(y, {x.dim(0), x.dim(2), x.dim(3), x.dim(1)}, DType::Float32);
    reorder4d(*this, "reordering NCHW to NHWC", x.shape(), dnnl::memory::format_tag::nchw,
              dnnl::memory::format_tag::nhwc, x, y);
}

void OneDnnOps::copyChannelsImpl(const Tensor& x, std::int64_t xOffset, std::int64_t count,
                                 Tensor& y, std::int64_t yOffset)
{
    // A run of `count` floats per pixel: memory-bound, in chunks of pixels over the threads.
    const std::int64_t pixels = x.dim(0) * x.dim(1) * x.dim(2), cx = x.dim(3), cy = y.dim(3);
    const float* px = x.data<float>() + xOffset;
    float* py = y.data<float>() + yOffset;
    const std::size_t run = static_cast<std::size_t>(count) * sizeof(float);
    parallelItems(pixels, count, [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
        for (std::int64_t p = begin; p < end; ++p) std::memcpy(py + p * cy, px + p * cx, run);
    });
}

void OneDnnOps::softmaxCrossEntropyForwardImpl(const Tensor& logits, const Tensor& labels,
                                               double smoothing, Tensor& probs, Tensor& lossOut)
{
    const std::int64_t k = logits.dim(1);
    const std::int64_t n = logits.dim(0);
    const Tensor in = logits;
    Tensor::ensure(probs, in.shape(), DType::Float32);
    const float* pl = in.data<float>();
    const std::int32_t* lab = labels.data<std::int32_t>();
    float* pp = probs.data<float>();
    double loss = 0;
#pragma omp parallel for schedule(static) reduction(+ : loss) if (n * k > kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) {
        const float* row = pl + i * k;
        float* out = pp + i * k;
        const float mx = *std::max_element(row, row + k);
        const float label = row[lab[i]]; // read first: probs may be logits
        // The smoothed target's logit, sum_j q_j z_j (the label's alone without smoothing).
        double target = label;
        if (smoothing > 0) {
            double all = 0;
            for (std::int64_t j = 0; j < k; ++j) all += row[j];
            target = (1.0 - smoothing) * target + smoothing / double(k) * all;
        }
        float sum = 0;
        for (std::int64_t j = 0; j < k; ++j) {
            out[j] = std::exp(row[j] - mx);
            sum += out[j];
        }
        const float inv = 1.0f / sum;
        for (std::int64_t j = 0; j < k; ++j) out[j] *= inv;
        loss += double(mx) + std::log(double(sum)) - target;
    }
    Tensor::ensure(lossOut, Shape{1}, DType::Float64);
    lossOut.data<double>()[0] = n ? loss / static_cast<double>(n) : 0.0;
}

void OneDnnOps::softmaxCrossEntropyBackwardImpl(const Tensor& probs, const Tensor& labels,
                                                double smoothing, double scale, Tensor& dlogits)
{
    const std::int64_t k = probs.dim(1);
    const std::int64_t n = probs.dim(0);
    const Tensor in = probs;
    Tensor::ensure(dlogits, in.shape(), DType::Float32);
    const float* pp = in.data<float>();
    const std::int32_t* lab = labels.data<std::int32_t>();
    float* pd = dlogits.data<float>();
    const float s = static_cast<float>(scale);
    // The smoothed target: hit + spread at the label, spread elsewhere (1 and 0 without).
    const float hit = static_cast<float>(1.0 - smoothing);
    const float spread = static_cast<float>(smoothing / double(k));
#pragma omp parallel for schedule(static) if (n * k > kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) {
        const float target = pp[i * k + lab[i]]; // read first: dlogits may be probs
        for (std::int64_t j = 0; j < k; ++j) pd[i * k + j] = (pp[i * k + j] - spread) * s;
        pd[i * k + lab[i]] = (target - hit - spread) * s;
    }
}

void OneDnnOps::sumSquaresImpl(const Tensor& x, double scale, Tensor& sum)
{
    const float* p = x.data<float>();
    sum.data<double>()[0] +=
        scale * parallelSum(x.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
            return sumSquaresInLanes(p, begin, end);
        });
}

void OneDnnOps::flagNonFiniteImpl(const Tensor& x, Tensor& flag)
{
    // x * 0 is 0 for every finite x and NaN for a NaN or an infinity: the sum is finite exactly
    // when every element is (and cannot overflow).
    const float* px = x.data<float>();
    float sum = 0;
    const std::int64_t n = x.numel();
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (n > (1 << 16))
    for (std::int64_t i = 0; i < n; ++i) sum += px[i] * 0.0f;
    if (!std::isfinite(sum)) flag.data<float>()[0] = 1.f;
}

void OneDnnOps::clipToNormImpl(const Tensor& sumSquares, double maxNorm, Tensor& x)
{
    const float c = clipFactor(sumSquares.data<double>()[0], maxNorm);
    if (c == 1.f) return; // x * 1 is x
    float* p = x.data<float>();
    parallelChunks(x.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) p[i] *= c;
    });
}

void OneDnnOps::axpyImpl(double alpha, const Tensor& x, Tensor& y)
{
    const float a = static_cast<float>(alpha);
    const float* px = x.data<float>();
    float* py = y.data<float>();
    parallelChunks(x.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) py[i] += a * px[i];
    });
}

} // namespace towers::engine::cpu
