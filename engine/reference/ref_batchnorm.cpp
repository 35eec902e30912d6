// Batch normalisation over the last dimension, viewed as [rows, C]: two-pass statistics in double.
#include <cmath>
#include <vector>

#include "engine/ops/op_checks.h"
#include "engine/reference/ref_common.h"

namespace towers::engine::reference {

namespace {

// y = gamma * (x - mean) / sqrt(var + eps) + beta with per-channel mean and var.
template <class T>
void normalise(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
               const std::vector<double>& mean, const std::vector<double>& var, Tensor& y)
{
    const std::int64_t rows = d.rows(), c = d.channels();
    const T* px = x.data<T>();
    const T* pg = gamma.data<T>();
    const T* pb = beta.data<T>();
    T* py = y.data<T>();
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t k = 0; k < c; ++k) {
            const auto ku = static_cast<std::size_t>(k);
            const double xhat = (px[r * c + k] - mean[ku]) / std::sqrt(var[ku] + d.epsilon);
            py[r * c + k] = static_cast<T>(pg[k] * xhat + pb[k]);
        }
}

} // namespace

void ReferenceOps::batchNormForwardTrainingImpl(const BatchNormDesc& d, const Tensor& x,
                                                const Tensor& gamma, const Tensor& beta, Tensor& y,
                                                Tensor& runningMean, Tensor& runningVar,
                                                Tensor& saveMean, Tensor& saveVar)
{
    const DType dt = x.dtype();
    const std::int64_t rows = d.rows(), c = d.channels();
    Tensor::ensure(y, d.shape, dt);
    Tensor::ensure(saveMean, {c}, dt);
    Tensor::ensure(saveVar, {c}, dt);
    byDType(dt, [&](auto tag) {
        using T = decltype(tag);
        const T* px = x.data<T>();
        std::vector<double> mean(static_cast<std::size_t>(c), 0.0), var(mean);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t k = 0; k < c; ++k) mean[static_cast<std::size_t>(k)] += px[r * c + k];
        for (auto& m : mean) m /= static_cast<double>(rows);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t k = 0; k < c; ++k) {
                const double dev = px[r * c + k] - mean[static_cast<std::size_t>(k)];
                var[static_cast<std::size_t>(k)] += dev * dev;
            }
        for (auto& v : var) v /= static_cast<double>(rows); // biased, used to normalise
        normalise<T>(d, x, gamma, beta, mean, var, y);

        T* prm = runningMean.data<T>();
        T* prv = runningVar.data<T>();
        T* psm = saveMean.data<T>();
        T* psv = saveVar.data<T>();
        const double m = d.momentum, unbias = checks::unbiasFactor(d);
        for (std::int64_t k = 0; k < c; ++k) {
            const auto ku = static_cast<std::size_t>(k);
            psm[k] = static_cast<T>(mean[ku]);
            psv[k] = static_cast<T>(var[ku]);
            prm[k] = static_cast<T>((1 - m) * prm[k] + m * mean[ku]);
            prv[k] = static_cast<T>((1 - m) * prv[k] + m * var[ku] * unbias);
        }
    });
}

void ReferenceOps::batchNormForwardInferenceImpl(const BatchNormDesc& d, const Tensor& x,
                                                 const Tensor& gamma, const Tensor& beta,
                                                 const Tensor& runningMean,
                                                 const Tensor& runningVar, Tensor& y)
{
    const DType dt = x.dtype();
    Tensor::ensure(y, d.shape, dt);
    byDType(dt, [&](auto tag) {
        using T = decltype(tag);
        const auto c = static_cast<std::size_t>(d.channels());
        std::vector<double> mean(c), var(c);
        for (std::size_t k = 0; k < c; ++k) {
            mean[k] = runningMean.data<T>()[k];
            var[k] = runningVar.data<T>()[k];
        }
        normalise<T>(d, x, gamma, beta, mean, var, y);
    });
}

void ReferenceOps::foldBatchNormImpl(const Tensor& w, const Tensor& b, const Tensor& gamma,
                                     const Tensor& beta, const Tensor& runningMean,
                                     const Tensor& runningVar, double epsilon, Tensor& wOut,
                                     Tensor& bOut)
{
    const DType dt = w.dtype();
    const std::int64_t channels = w.dim(0), per = w.numel() / channels;
    Tensor::ensure(wOut, w.shape(), dt);
    Tensor::ensure(bOut, {channels}, dt);
    byDType(dt, [&](auto tag) {
        using T = decltype(tag);
        for (std::int64_t o = 0; o < channels; ++o) {
            const double s =
                double(gamma.data<T>()[o]) / std::sqrt(double(runningVar.data<T>()[o]) + epsilon);
            for (std::int64_t k = 0; k < per; ++k)
                wOut.data<T>()[o * per + k] = static_cast<T>(double(w.data<T>()[o * per + k]) * s);
            const double bias = b.empty() ? 0.0 : double(b.data<T>()[o]);
            bOut.data<T>()[o] = static_cast<T>((bias - double(runningMean.data<T>()[o])) * s +
                                               double(beta.data<T>()[o]));
        }
    });
}

void ReferenceOps::batchNormBackwardImpl(const BatchNormDesc& d, const Tensor& x, const Tensor& dy,
                                         const Tensor& gamma, const Tensor& saveMean,
                                         const Tensor& saveVar, Tensor& dx, Tensor& dgamma,
                                         Tensor& dbeta)
{
    const DType dt = x.dtype();
    const std::int64_t rows = d.rows(), c = d.channels();
    const Tensor dyIn = dy; // keeps dy's bytes should dx be the same tensor object
    Tensor::ensure(dx, d.shape, dt);
    Tensor::ensure(dgamma, {c}, dt);
    Tensor::ensure(dbeta, {c}, dt);
    byDType(dt, [&](auto tag) {
        using T = decltype(tag);
        const T* px = x.data<T>();
        const T* pdy = dyIn.data<T>();
        const T* pg = gamma.data<T>();
        const T* pm = saveMean.data<T>();
        const T* pv = saveVar.data<T>();
        std::vector<double> work(static_cast<std::size_t>(3 * c), 0.0);
        double* invStd = work.data();
        double* sumDy = invStd + c;
        double* sumDyXhat = sumDy + c;
        for (std::int64_t k = 0; k < c; ++k) invStd[k] = 1.0 / std::sqrt(double(pv[k]) + d.epsilon);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t k = 0; k < c; ++k) {
                const double xhat = (px[r * c + k] - double(pm[k])) * invStd[k];
                sumDy[k] += pdy[r * c + k];
                sumDyXhat[k] += pdy[r * c + k] * xhat;
            }
        // dx = gamma * invStd / n * (n * dy - sum(dy) - xhat * sum(dy * xhat))
        T* pdx = dx.data<T>();
        const double n = static_cast<double>(rows);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t k = 0; k < c; ++k) {
                const double xhat = (px[r * c + k] - double(pm[k])) * invStd[k];
                pdx[r * c + k] = static_cast<T>(
                    pg[k] * invStd[k] / n * (n * pdy[r * c + k] - sumDy[k] - xhat * sumDyXhat[k]));
            }
        for (std::int64_t k = 0; k < c; ++k) {
            dgamma.data<T>()[k] = static_cast<T>(sumDyXhat[k]);
            dbeta.data<T>()[k] = static_cast<T>(sumDy[k]);
        }
    });
}

} // namespace towers::engine::reference
