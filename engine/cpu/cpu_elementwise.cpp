// Element-wise ops, dropout, the softmax cross-entropy loss and the whole-tensor reductions as
// OpenMP loops the compiler vectorises (for AVX-512 too, see cpu_common.h): they are memory-bound,
// and a plain loop over our own buffers needs no primitive, no memory objects and no allocation
// per call (measured faster than oneDNN eltwise/binary primitives for these sizes). The layout
// transposes are oneDNN reorders (a JIT kernel), cached per shape. Inputs are held as local views
// before the outputs are sized, so an output that is the same tensor object as an input keeps its
// bytes.
#include <algorithm>
#include <cmath>

#include "engine/cpu/cpu_common.h"
#include "engine/ops/dropout_mask.h"
#include "engine/reference/dense_checks.h"

namespace towers::engine::cpu {

namespace {

void requireNotAliased(const Tensor& x, const Tensor& y, const char* what)
{
    if (!y.empty() && y.raw() == x.raw())
        throw InvalidArgument(std::string(what) + ": the output must not share the input's memory");
}

} // namespace

void OneDnnOps::reluForward(const Tensor& x, Tensor& y)
{
    requireF32(x, "relu x");
    const Tensor in = x;
    Tensor::ensure(y, in.shape(), DType::Float32);
    const float* px = in.data<float>();
    float* py = y.data<float>();
    parallelChunks(in.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) py[i] = px[i] > 0.0f ? px[i] : 0.0f;
    });
}

void OneDnnOps::reluBackward(const Tensor& y, const Tensor& dy, Tensor& dx)
{
    requireF32(y, "relu y");
    requireF32(dy, "relu dy");
    checks::requireSameShape(dy, y, "relu dy", "y");
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

void OneDnnOps::add(const Tensor& a, const Tensor& b, Tensor& y)
{
    requireF32(a, "add a");
    requireF32(b, "add b");
    checks::requireSameShape(b, a, "add b", "a");
    const Tensor aIn = a, bIn = b;
    Tensor::ensure(y, aIn.shape(), DType::Float32);
    const float* pa = aIn.data<float>();
    const float* pb = bIn.data<float>();
    float* py = y.data<float>();
    parallelChunks(aIn.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) py[i] = pa[i] + pb[i];
    });
}

void OneDnnOps::dropoutForward(const Tensor& x, double rate, std::uint64_t seed, Tensor& y,
                               Tensor& mask)
{
    requireF32(x, "dropout x");
    checks::dropoutRate(rate);
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

void OneDnnOps::dropoutBackward(const Tensor& dy, const Tensor& mask, double rate, Tensor& dx)
{
    requireF32(dy, "dropout dy");
    checks::dropoutRate(rate);
    checks::dropoutMask(mask, dy);
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

// A cached reorder between two 4-D layouts of the same logical N,C,H,W tensor.
void reorder4d(OneDnnOps& ops, const char* what, const Shape& nchwDims,
               dnnl::memory::format_tag from, dnnl::memory::format_tag to, const Tensor& x,
               Tensor& y)
{
    guarded(what, [&] {
        const std::string key = std::string(what) + " " + dimsKey(nchwDims);
        auto& p = ops.cached<BoundPrimitive>(key, [&] {
            const dnnl::memory::dims dims(nchwDims.dims().begin(), nchwDims.dims().end());
            const dnnl::memory::desc src(dims, dnnl::memory::data_type::f32, from);
            const dnnl::memory::desc dst(dims, dnnl::memory::data_type::f32, to);
            return std::make_shared<BoundPrimitive>(makeReorder(src, dst, ops.dnnlEngine()));
        });
        p.bind(DNNL_ARG_FROM, x);
        p.bind(DNNL_ARG_TO, y);
        p.execute(ops.dnnlStream());
    });
}

} // namespace

void OneDnnOps::nhwcToNchw(const Tensor& x, Tensor& y)
{
    requireF32(x, "nhwcToNchw x");
    checks::nhwc(x, "nhwcToNchw x");
    requireNotAliased(x, y, "nhwcToNchw");
    const Shape nchw{x.dim(0), x.dim(3), x.dim(1), x.dim(2)};
    Tensor::ensure(y, nchw, DType::Float32);
    reorder4d(*this, "reordering NHWC to NCHW", nchw, dnnl::memory::format_tag::nhwc,
              dnnl::memory::format_tag::nchw, x, y);
}

void OneDnnOps::nchwToNhwc(const Tensor& x, Tensor& y)
{
    requireF32(x, "nchwToNhwc x");
    checks::nhwc(x, "nchwToNhwc x");
    requireNotAliased(x, y, "nchwToNhwc");
    Tensor::ensure(y, {x.dim(0), x.dim(2), x.dim(3), x.dim(1)}, DType::Float32);
    reorder4d(*this, "reordering NCHW to NHWC", x.shape(), dnnl::memory::format_tag::nchw,
              dnnl::memory::format_tag::nhwc, x, y);
}

double OneDnnOps::softmaxCrossEntropyForward(const Tensor& logits, const Tensor& labels,
                                             Tensor& probs)
{
    requireF32(logits, "softmax cross-entropy logits");
    const std::int64_t k = checks::softmaxLabels(logits, labels, "softmax cross-entropy logits");
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
        const float target = row[lab[i]]; // read first: probs may be logits
        float sum = 0;
        for (std::int64_t j = 0; j < k; ++j) {
            out[j] = std::exp(row[j] - mx);
            sum += out[j];
        }
        const float inv = 1.0f / sum;
        for (std::int64_t j = 0; j < k; ++j) out[j] *= inv;
        loss += double(mx) + std::log(double(sum)) - double(target);
    }
    return n ? loss / static_cast<double>(n) : 0.0;
}

void OneDnnOps::softmaxCrossEntropyBackward(const Tensor& probs, const Tensor& labels, double scale,
                                            Tensor& dlogits)
{
    requireF32(probs, "softmax cross-entropy probs");
    const std::int64_t k = checks::softmaxLabels(probs, labels, "softmax cross-entropy probs");
    const std::int64_t n = probs.dim(0);
    const Tensor in = probs;
    Tensor::ensure(dlogits, in.shape(), DType::Float32);
    const float* pp = in.data<float>();
    const std::int32_t* lab = labels.data<std::int32_t>();
    float* pd = dlogits.data<float>();
    const float s = static_cast<float>(scale);
#pragma omp parallel for schedule(static) if (n * k > kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) {
        const float target = pp[i * k + lab[i]]; // read first: dlogits may be probs
        for (std::int64_t j = 0; j < k; ++j) pd[i * k + j] = pp[i * k + j] * s;
        pd[i * k + lab[i]] = (target - 1.0f) * s;
    }
}

double OneDnnOps::sumSquares(const Tensor& x)
{
    requireF32(x, "sumSquares x");
    const float* p = x.data<float>();
    return parallelSum(x.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
        double s = 0;
#pragma omp simd reduction(+ : s)
        for (std::int64_t i = begin; i < end; ++i) s += double(p[i]) * double(p[i]);
        return s;
    });
}

void OneDnnOps::axpy(double alpha, const Tensor& x, Tensor& y)
{
    requireF32(x, "axpy x");
    requireF32(y, "axpy y");
    checks::requireSameShape(y, x, "axpy y", "x");
    const float a = static_cast<float>(alpha);
    const float* px = x.data<float>();
    float* py = y.data<float>();
    parallelChunks(x.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) py[i] += a * px[i];
    });
}

} // namespace towers::engine::cpu
