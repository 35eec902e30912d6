// Dataset images to model input (preprocessImages): one block per image, running
// engine/data/distortion_math.h per element as the reference does, so the images are the CPU
// pipeline's to the last bit (this file is compiled with --fmad=false, see CMakeLists.txt; the
// byte's product and sum are rounded apart by affineValue itself). The channel sums are integers,
// so their order does not matter and they are exact.
#include <math_constants.h>

#include <algorithm>

#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"
#include "engine/data/distortion_math.h"

namespace towers::engine::cuda {

namespace {

namespace pp = ::towers::engine::preprocess;

static_assert(kThreads >= pp::kMaxChannels, "a thread per channel at least");

// Each thread keeps to one channel: it visits the elements threadIdx.x, + stride, + 2 stride, ...
// of an image, stride the largest multiple of the channel count within the block (the threads
// beyond it idle), so that its sums are of one channel and its element of a pixel is
// (pixel, threadIdx.x % c).
__global__ void __launch_bounds__(kThreads)
    preprocessKernel(const PreprocessParams p, const std::uint8_t* source, const double* draws,
                     float* y, std::int64_t batch)
{
    __shared__ unsigned long long sum[pp::kMaxChannels], sq[pp::kMaxChannels];
    // The sums as affineCoefficients takes them; in shared memory, not in thread 0's stack (a
    // kernel's stack frame is reserved for every thread the GPU can hold).
    __shared__ double sumD[pp::kMaxChannels], sqD[pp::kMaxChannels];
    __shared__ float a[pp::kMaxChannels], b[pp::kMaxChannels];
    const int c = p.channels;
    const std::int64_t pixels = std::int64_t(p.height) * p.width;
    const std::int64_t perImage = pixels * c;
    const std::int64_t imageBytes = std::int64_t(p.sourceHeight) * p.sourceWidth * c;
    const auto norm = static_cast<pp::Normalization>(p.normalization);
    const int stride = int(blockDim.x) / c * c; // blockDim.x >= kMaxChannels >= c
    const bool active = int(threadIdx.x) < stride;
    const int k = int(threadIdx.x) % c;
    const int first = int(threadIdx.x) / c, step = stride / c; // in pixels
    for (std::int64_t n = blockIdx.x; n < batch; n += gridDim.x) {
        const double* row = draws + n * pp::kDrawColumns;
        float* out = y + n * perImage;
        // Every thread has read the previous image's coefficients before they change.
        __syncthreads();
        // The same row for the whole block: every thread takes the same branch.
        if (!pp::drawFits(row, p.sourceCount, p.sourceHeight, p.sourceWidth, p.height, p.width)) {
            for (std::int64_t e = threadIdx.x; e < perImage; e += blockDim.x) out[e] = CUDART_NAN_F;
            continue;
        }
        const pp::ImageDraw d = pp::unpackDraw(row);
        const std::uint8_t* image = source + pp::drawIndex(row) * imageBytes;
        const pp::OutputWindow w = pp::outputWindow(p.height, p.width, d.shiftY, d.shiftX);
        const bool sums = pp::needsSums(norm, d);
        if (sums) {
            if (int(threadIdx.x) < c) {
                sum[threadIdx.x] = 0;
                sq[threadIdx.x] = 0;
            }
            __syncthreads();
            if (active) {
                unsigned long long s = 0, q = 0;
                for (std::int64_t px = first; px < pixels; px += step) {
                    const std::int64_t src = pp::sourcePixel(int(px / p.width), int(px % p.width),
                                                             p.width, w, d, p.sourceWidth);
                    if (src >= 0) {
                        const unsigned long long x = image[src * c + k];
                        s += x;
                        q += x * x;
                    }
                }
                atomicAdd(&sum[k], s);
                atomicAdd(&sq[k], q);
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            if (sums)
                for (int j = 0; j < c; ++j) {
                    sumD[j] = double(sum[j]);
                    sqD[j] = double(sq[j]);
                }
            pp::affineCoefficients(norm, c, p.height, p.width, d, sums ? sumD : nullptr,
                                   sums ? sqD : nullptr, p.mean, p.stddev, a, b);
        }
        __syncthreads();
        if (active) {
            const float ak = a[k], bk = b[k];
            for (std::int64_t px = first; px < pixels; px += step) {
                const std::int64_t src = pp::sourcePixel(int(px / p.width), int(px % p.width),
                                                         p.width, w, d, p.sourceWidth);
                out[px * c + k] =
                    pp::affineValue(ak, bk, src < 0 ? std::uint8_t(0) : image[src * c + k]);
            }
        }
    }
}

} // namespace

void preprocessImages(cudaStream_t s, const PreprocessParams& p, const std::uint8_t* source,
                      const double* draws, float* y, std::int64_t batch)
{
    if (batch <= 0) return;
    // One block per image (a grid-stride loop past the limit of a grid's x dimension).
    const auto grid = static_cast<unsigned>(std::min<std::int64_t>(batch, 0x7fffffff));
    preprocessKernel<<<grid, kThreads, 0, s>>>(p, source, draws, y, batch);
    TOWERS_CUDA_LAUNCHED();
}

} // namespace towers::engine::cuda
