// Element-wise ops, dropout, layout transposes, the softmax cross-entropy loss and the whole-tensor
// reductions: plain loops, sums in double. Inputs are held as local views before the outputs are
// sized, so an output that is the same tensor object as an input keeps reading the input's bytes.
#include <algorithm>
#include <cmath>

#include "engine/ops/dropout_mask.h"
#include "engine/ops/op_checks.h"
#include "engine/ops/step_scalars.h"
#include "engine/reference/ref_common.h"

namespace towers::engine::reference {

namespace {

// [N,A,B,C] -> [N,C,A,B]: y[n][c][a][b] = x[n][a][b][c] (NHWC -> NCHW).
template <class T> void moveLastToSecond(const Tensor& x, Tensor& y)
{
    const std::int64_t n = x.dim(0), a = x.dim(1), b = x.dim(2), c = x.dim(3);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t ia = 0; ia < a; ++ia)
            for (std::int64_t ib = 0; ib < b; ++ib)
                for (std::int64_t ic = 0; ic < c; ++ic)
                    py[((i * c + ic) * a + ia) * b + ib] = px[((i * a + ia) * b + ib) * c + ic];
}

// [N,A,B,C] -> [N,B,C,A]: y[n][b][c][a] = x[n][a][b][c] (NCHW -> NHWC).
template <class T> void moveSecondToLast(const Tensor& x, Tensor& y)
{
    const std::int64_t n = x.dim(0), a = x.dim(1), b = x.dim(2), c = x.dim(3);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t ia = 0; ia < a; ++ia)
            for (std::int64_t ib = 0; ib < b; ++ib)
                for (std::int64_t ic = 0; ic < c; ++ic)
                    py[((i * b + ib) * c + ic) * a + ia] = px[((i * a + ia) * b + ib) * c + ic];
}

} // namespace

void ReferenceOps::reluForwardImpl(const Tensor& x, Tensor& y)
{
    const Tensor in = x;
    Tensor::ensure(y, in.shape(), in.dtype());
    byDType(in.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* px = in.data<T>();
        T* py = y.data<T>();
        for (std::int64_t i = 0; i < in.numel(); ++i) py[i] = px[i] > 0 ? px[i] : T(0);
    });
}

void ReferenceOps::reluBackwardImpl(const Tensor& y, const Tensor& dy, Tensor& dx)
{
    const Tensor yIn = y, dyIn = dy;
    Tensor::ensure(dx, yIn.shape(), yIn.dtype());
    byDType(yIn.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* py = yIn.data<T>();
        const T* pdy = dyIn.data<T>();
        T* pdx = dx.data<T>();
        for (std::int64_t i = 0; i < yIn.numel(); ++i) pdx[i] = py[i] > 0 ? pdy[i] : T(0);
    });
}

void ReferenceOps::addImpl(const Tensor& a, const Tensor& b, Tensor& y)
{
    const Tensor aIn = a, bIn = b;
    Tensor::ensure(y, aIn.shape(), aIn.dtype());
    byDType(aIn.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* pa = aIn.data<T>();
        const T* pb = bIn.data<T>();
        T* py = y.data<T>();
        for (std::int64_t i = 0; i < aIn.numel(); ++i)
            py[i] = static_cast<T>(double(pa[i]) + double(pb[i]));
    });
}

void ReferenceOps::dropoutForwardImpl(const Tensor& x, double rate, std::uint64_t layerSeed,
                                      Tensor& y, Tensor& mask, const Tensor& scalars)
{
    const std::uint64_t seed = step_scalars::dropoutSeed(layerSeed, scalars);
    const Tensor in = x;
    Tensor::ensure(y, in.shape(), in.dtype());
    Tensor::ensure(mask, in.shape(), DType::UInt8);
    const std::uint32_t threshold = dropoutThreshold(rate);
    const double scale = 1.0 / (1.0 - rate);
    byDType(in.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* px = in.data<T>();
        T* py = y.data<T>();
        std::uint8_t* pm = mask.data<std::uint8_t>();
        for (std::int64_t i = 0; i < in.numel(); ++i) {
            const bool keep = dropoutKeeps(seed, static_cast<std::uint64_t>(i), threshold);
            pm[i] = keep ? 1 : 0;
            py[i] = keep ? static_cast<T>(px[i] * scale) : T(0);
        }
    });
}

void ReferenceOps::dropoutBackwardImpl(const Tensor& dy, const Tensor& mask, double rate,
                                       Tensor& dx)
{
    const Tensor dyIn = dy, maskIn = mask;
    Tensor::ensure(dx, dyIn.shape(), dyIn.dtype());
    const double scale = 1.0 / (1.0 - rate);
    byDType(dyIn.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* pdy = dyIn.data<T>();
        const std::uint8_t* pm = maskIn.data<std::uint8_t>();
        T* pdx = dx.data<T>();
        for (std::int64_t i = 0; i < dyIn.numel(); ++i)
            pdx[i] = pm[i] ? static_cast<T>(pdy[i] * scale) : T(0);
    });
}

void ReferenceOps::convertFloatImpl(const Tensor& x, DType dtype, Tensor& y)
{
    const Tensor in = x;
    Tensor::ensure(y, in.shape(), dtype);
    for (std::int64_t i = 0; i < in.numel(); ++i) y.setAt(i, in.at(i));
}

void ReferenceOps::nhwcToNchwImpl(const Tensor& x, Tensor& y)
{
    Tensor::ensure(y, {x.dim(0), x.dim(3), x.dim(1), x.dim(2)}, x.dtype());
    byDType(x.dtype(), [&](auto tag) { moveLastToSecond<decltype(tag)>(x, y); });
}

void ReferenceOps::nchwToNhwcImpl(const Tensor& x, Tensor& y)
{
    Tensor::ensure(y, {x.dim(0), x.dim(2), x.dim(3), x.dim(1)}, x.dtype());
    byDType(x.dtype(), [&](auto tag) { moveSecondToLast<decltype(tag)>(x, y); });
}

void ReferenceOps::copyChannelsImpl(const Tensor& x, std::int64_t xOffset, std::int64_t count,
                                    Tensor& y, std::int64_t yOffset)
{
    const std::int64_t pixels = x.dim(0) * x.dim(1) * x.dim(2), cx = x.dim(3), cy = y.dim(3);
    byDType(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* px = x.data<T>();
        T* py = y.data<T>();
        for (std::int64_t p = 0; p < pixels; ++p)
            for (std::int64_t c = 0; c < count; ++c)
                py[p * cy + yOffset + c] = px[p * cx + xOffset + c];
    });
}

void ReferenceOps::softmaxCrossEntropyForwardImpl(const Tensor& logits, const Tensor& labels,
                                                  double smoothing, Tensor& probs, Tensor& lossOut)
{
    const std::int64_t k = logits.dim(1);
    const std::int64_t n = logits.dim(0);
    const Tensor in = logits;
    Tensor::ensure(probs, in.shape(), in.dtype());
    double loss = 0;
    byDType(in.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* pl = in.data<T>();
        const std::int32_t* lab = labels.data<std::int32_t>();
        T* pp = probs.data<T>();
        for (std::int64_t i = 0; i < n; ++i) {
            const T* row = pl + i * k;
            const double mx = *std::max_element(row, row + k);
            double sum = 0;
            for (std::int64_t j = 0; j < k; ++j) sum += std::exp(row[j] - mx);
            const double logSum = mx + std::log(sum);
            // -sum_j q_j log p_j = logSum - sum_j q_j z_j; the label's logit alone without
            // smoothing (no sum over the row, whose terms could overflow and would not cancel).
            double target = row[lab[i]];
            if (smoothing > 0) {
                double all = 0;
                for (std::int64_t j = 0; j < k; ++j) all += row[j];
                target = (1.0 - smoothing) * target + smoothing / double(k) * all;
            }
            loss += logSum - target;
            for (std::int64_t j = 0; j < k; ++j)
                pp[i * k + j] = static_cast<T>(std::exp(row[j] - logSum));
        }
    });
    Tensor::ensure(lossOut, Shape{1}, DType::Float64);
    lossOut.data<double>()[0] = n ? loss / static_cast<double>(n) : 0.0;
}

void ReferenceOps::softmaxCrossEntropyBackwardImpl(const Tensor& probs, const Tensor& labels,
                                                   double smoothing, double scale, Tensor& dlogits)
{
    const double hit = 1.0 - smoothing, spread = smoothing / double(probs.dim(1));
    const std::int64_t k = probs.dim(1);
    const Tensor in = probs;
    Tensor::ensure(dlogits, in.shape(), in.dtype());
    byDType(in.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* pp = in.data<T>();
        const std::int32_t* lab = labels.data<std::int32_t>();
        T* pd = dlogits.data<T>();
        for (std::int64_t i = 0; i < in.dim(0); ++i)
            for (std::int64_t j = 0; j < k; ++j)
                pd[i * k + j] = static_cast<T>(
                    (double(pp[i * k + j]) - (j == lab[i] ? hit : 0.0) - spread) * scale);
    });
}

void ReferenceOps::sumSquaresImpl(const Tensor& x, double scale, Tensor& sum)
{
    double s = 0;
    byDType(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* p = x.data<T>();
        for (std::int64_t i = 0; i < x.numel(); ++i) s += double(p[i]) * double(p[i]);
    });
    sum.data<double>()[0] += scale * s;
}

void ReferenceOps::clipToNormImpl(const Tensor& sumSquares, double maxNorm, Tensor& x)
{
    // min(1, maxNorm / (norm + 1e-6)), PyTorch's clip_grad_norm_; a NaN norm scales nothing.
    const double factor = maxNorm / (std::sqrt(sumSquares.data<double>()[0]) + 1e-6);
    if (!(factor < 1.0)) return;
    byDType(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T c = static_cast<T>(factor);
        T* p = x.data<T>();
        for (std::int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<T>(p[i] * c);
    });
}

void ReferenceOps::flagNonFiniteImpl(const Tensor& x, Tensor& flag)
{
    byDType(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* px = x.data<T>();
        for (std::int64_t i = 0; i < x.numel(); ++i)
            if (!std::isfinite(px[i])) {
                flag.data<T>()[0] = T(1);
                return;
            }
    });
}

void ReferenceOps::axpyImpl(double alpha, const Tensor& x, Tensor& y)
{
    byDType(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* px = x.data<T>();
        T* py = y.data<T>();
        for (std::int64_t i = 0; i < x.numel(); ++i)
            py[i] = static_cast<T>(double(py[i]) + alpha * double(px[i]));
    });
}

} // namespace towers::engine::reference
