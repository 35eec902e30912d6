#pragma once
// Launchers of the backend's own CUDA kernels: what cuDNN and cuBLAS lack or cannot express (TF's
// asymmetric SAME padding, TF's LRN, the counter-based dropout mask every backend shares). All
// float32, all asynchronous on `stream`; each file of kernels is named after its op family.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/kernel_math.h"
#include "engine/data/distortion_math.h"

namespace towers::engine::cuda {

// ---- elementwise.cu ----
void reluForward(cudaStream_t s, const float* x, float* y, std::int64_t n);
void reluBackward(cudaStream_t s, const float* y, const float* dy, float* dx, std::int64_t n);
void addTensors(cudaStream_t s, const float* a, const float* b, float* y, std::int64_t n);
// y[r, c] += b[c] (b may be null), then ReLU when `relu`.
void biasActivation(cudaStream_t s, float* y, const float* b, std::int64_t rows, std::int64_t cols,
                    bool relu);
// `scalars`: nullptr, or a step's StepScalars on the GPU (ops/step_scalar_values.h's stepScalar).
void dropoutForward(cudaStream_t s, const float* x, float* y, std::uint8_t* mask, std::int64_t n,
                    std::uint64_t seed, std::uint32_t threshold, float scale,
                    const double* scalars);
void dropoutBackward(cudaStream_t s, const float* dy, const std::uint8_t* mask, float* dx,
                     std::int64_t n, float scale);

// bfloat16 copies (kernel_math.h's bfloat16Bits: nearest even) and back, for --precision bf16.
void toBfloat16(cudaStream_t s, const float* x, std::uint16_t* y, std::int64_t n);
void fromBfloat16(cudaStream_t s, const std::uint16_t* x, float* y, std::int64_t n);

// ---- layout.cu ----
void nhwcToNchw(cudaStream_t s, const float* x, float* y, std::int64_t n, std::int64_t h,
                std::int64_t w, std::int64_t c);
void nchwToNhwc(cudaStream_t s, const float* x, float* y, std::int64_t n, std::int64_t h,
                std::int64_t w, std::int64_t c);
// OIHW <-> OHWI (cuDNN's NHWC filter layout).
void oihwToOhwi(cudaStream_t s, const float* x, float* y, std::int64_t o, std::int64_t i,
                std::int64_t kh, std::int64_t kw);
void ohwiToOihw(cudaStream_t s, const float* x, float* y, std::int64_t o, std::int64_t i,
                std::int64_t kh, std::int64_t kw);
// count channels per pixel of x (cx channels a pixel, from the first copied) into y's (cy).
void copyChannels(cudaStream_t s, const float* x, float* y, std::int64_t pixels, std::int64_t count,
                  std::int64_t cx, std::int64_t cy);
// NHWC x [n,h,w,c] into y [n,h2,w2,c] at (top, left), zeros elsewhere.
void padNhwc(cudaStream_t s, const float* x, float* y, std::int64_t n, std::int64_t h,
             std::int64_t w, std::int64_t c, std::int64_t h2, std::int64_t w2, int top, int left);
// The inverse: y [n,h,w,c] = x [n,h2,w2,c] from (top, left).
void cropNhwc(cudaStream_t s, const float* x, float* y, std::int64_t n, std::int64_t h,
              std::int64_t w, std::int64_t c, std::int64_t h2, std::int64_t w2, int top, int left);

// ---- window.cu ----
// argmax: for each output, the input position (ih * w + iw) that won.
void maxPoolForward(cudaStream_t s, const WindowGeometry& g, const float* x, float* y,
                    std::int32_t* argmax);
void maxPoolBackward(cudaStream_t s, const WindowGeometry& g, const float* dy,
                     const std::int32_t* argmax, float* dx);
// A window's mean over its real elements, and its backward.
void avgPoolForward(cudaStream_t s, const WindowGeometry& g, const float* x, float* y);
void avgPoolBackward(cudaStream_t s, const WindowGeometry& g, const float* dy, float* dx);
// TensorFlow's LRN over the channels of rows of c values; scale (workspace) keeps
// bias + alpha * sum of squares for backward.
void lrnForward(cudaStream_t s, const float* x, float* y, float* scale, std::int64_t rows,
                std::int64_t c, int radius, float bias, float alpha, float beta);
void lrnBackward(cudaStream_t s, const float* x, const float* y, const float* dy,
                 const float* scale, float* dx, std::int64_t rows, std::int64_t c, int radius,
                 float alpha, float beta);

// ---- batch_norm.cu (rows x c, channels last) ----
// db[c] = sum over r of g[r, c], accumulated in double, deterministic.
void biasGradient(cudaStream_t s, const float* g, float* db, std::int64_t rows, std::int64_t cols);
// Batch mean and biased variance per channel (two passes, double accumulation).
void batchNormStatistics(cudaStream_t s, const float* x, float* mean, float* var, std::int64_t rows,
                         std::int64_t c);
void batchNormApply(cudaStream_t s, const float* x, const float* mean, const float* var,
                    const float* gamma, const float* beta, float* y, std::int64_t rows,
                    std::int64_t c, float epsilon);
// running = (1 - m) running + m batch, with the unbiased variance.
void batchNormRunningUpdate(cudaStream_t s, float* runningMean, float* runningVar,
                            const float* mean, const float* var, std::int64_t c, std::int64_t rows,
                            float momentum);
void batchNormBackward(cudaStream_t s, const float* x, const float* dy, const float* mean,
                       const float* var, const float* gamma, float* dx, float* dgamma, float* dbeta,
                       std::int64_t rows, std::int64_t c, float epsilon);
// A batch norm folded into the weights w [channels, per] and bias b (null: none) before it.
void foldBatchNorm(cudaStream_t s, const float* w, const float* b, const float* gamma,
                   const float* beta, const float* mean, const float* var, double epsilon,
                   float* wOut, float* bOut, std::int64_t channels, std::int64_t per);

// ---- loss.cu ----
// probs = softmax(logits); loss[0] = the mean over the rows of -sum_j q_j log p[r, j], q the
// target with label smoothing `smoothing` (op_list.h; -log p[r, label] for 0), NaN when a label is
// outside [0, k), on the device.
void softmaxCrossEntropyForward(cudaStream_t s, const float* logits, const std::int32_t* labels,
                                float* probs, double* loss, std::int64_t n, std::int64_t k,
                                double smoothing);
void softmaxCrossEntropyBackward(cudaStream_t s, const float* probs, const std::int32_t* labels,
                                 float* dlogits, std::int64_t n, std::int64_t k, double smoothing,
                                 float scale);
// sum[0] += scale * the sum of x[i]^2 in double, deterministic (fixed blocks, then one block).
void sumSquares(cudaStream_t s, const float* x, double* sum, std::int64_t n, double scale);

// ---- collectives.cu ----
constexpr int kMaxRanksPerDevice = 16;
struct RankPointers
{
    float* p[kMaxRanksPerDevice];
};
// For i < n: every ranks.p[r][i] (r < count) becomes their mean, summed in rank order in double.
void meanAcrossRanks(cudaStream_t s, const RankPointers& ranks, int count, std::int64_t n);

// ---- optim.cu ----
// The updates take their skip flag (op_list.h) as `skip`: nullptr for none, else a device float
// that each thread reads first, returning when it is not 0 (kernel_math.h's updateSkipped); and
// their step's scalars as `scalars`: nullptr for the host arguments, else a step's StepScalars on
// the GPU, read there in their place (ops/step_scalar_values.h's stepScalar).
void axpy(cudaStream_t s, float alpha, const float* x, float* y, std::int64_t n);
// w -= lr * g as axpy(-lr, g, w) computes it: the same kernel, alpha = -lr.
void sgdUpdate(cudaStream_t s, float lr, const float* g, float* w, std::int64_t n,
               const float* skip, const double* scalars);
void momentumUpdate(cudaStream_t s, const float* g, float* buf, float* w, std::int64_t n, float lr,
                    float momentum, float dampening, bool nesterov, bool first, const float* skip,
                    const double* scalars);
void flagNonFinite(cudaStream_t s, const float* x, float* flag, std::int64_t n);
// x[i] *= clipFactor(sumSquares[0], maxNorm) (ops/clip_norm.h), the factor read on the device.
void clipToNorm(cudaStream_t s, const double* sumSquares, double maxNorm, float* x, std::int64_t n);
void emaUpdate(cudaStream_t s, const float* value, float* shadow, std::int64_t n, float keep,
               const float* skip, const double* scalars);
// correction1 and correction2Sqrt: adamCorrections (ops/step_scalars.h); weightDecay: AdamW's
// decoupled decay (AdamStep), 0 for Adam.
void adamUpdate(cudaStream_t s, const float* g, float* m, float* v, float* w, std::int64_t n,
                float lr, double beta1, double beta2, double epsilon, double correction1,
                double correction2Sqrt, double weightDecay, const float* skip,
                const double* scalars);

// ---- preprocess.cu ----
// preprocessImages' sizes and normalisation (PreprocessDesc), by value as a kernel argument.
struct PreprocessParams
{
    std::int64_t sourceCount; // N
    int sourceHeight, sourceWidth;
    int height, width, channels; // the output image
    int normalization;           // preprocess::Normalization
    double mean[preprocess::kMaxChannels], stddev[preprocess::kMaxChannels]; // for MeanStd
};
// y [batch, height, width, channels] from source (uint8 [N, H, W, channels]) and draws
// (double [batch, kDrawColumns]), one block per image; an image whose row does not fit is NaN.
void preprocessImages(cudaStream_t s, const PreprocessParams& p, const std::uint8_t* source,
                      const double* draws, float* y, std::int64_t batch);

} // namespace towers::engine::cuda
