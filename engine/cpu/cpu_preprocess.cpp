// Dataset images to model input (preprocessImages) on the CPU: the input pipeline's own
// applyPreprocessing (engine/data/distortion.cpp) per image, the images spread over the calling
// thread's OpenMP team. Each image is written by one thread, so the result does not depend on the
// team's size, and it is the loader's to the last bit.
#include <exception>
#include <mutex>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/data/distortion_math.h"
#include "engine/data/preprocessing.h"

namespace towers::engine::cpu {

void OneDnnOps::preprocessImagesImpl(const PreprocessDesc& d, const Tensor& source,
                                     const Tensor& draws, Tensor& y)
{
    namespace pp = preprocess;
    const Tensor src = source, rows = draws;
    const std::int64_t batch = rows.dim(0);
    const Shape imageShape{src.dim(1), src.dim(2), src.dim(3)};
    const std::int64_t imageBytes = imageShape.numel();
    const std::int64_t perImage = std::int64_t(d.height) * d.width * d.channels;
    const Preprocessing p = preprocessingOf(d);
    // The rows as distortions (every row fits: the entry, op_checks.cpp, checks host draws).
    std::vector<Distortion> distortions(static_cast<std::size_t>(batch));
    std::vector<const std::uint8_t*> images(static_cast<std::size_t>(batch));
    const std::uint8_t* bytes = src.data<std::uint8_t>();
    const double* pr = rows.data<double>();
    for (std::int64_t b = 0; b < batch; ++b) {
        const double* row = pr + b * pp::kDrawColumns;
        const pp::ImageDraw draw = pp::unpackDraw(row);
        distortions[static_cast<std::size_t>(b)] = distortionOf(draw);
        images[static_cast<std::size_t>(b)] = bytes + pp::drawIndex(row) * imageBytes;
    }
    Tensor::ensure(y, {batch, d.height, d.width, d.channels}, DType::Float32);
    float* out = y.data<float>();
    std::exception_ptr error;
    std::mutex errorMutex;
    const Distortion* pd = distortions.data();
    const std::uint8_t* const* pi = images.data();
    parallelItems(batch, 2 * perImage, [&](std::int64_t begin, std::int64_t end) {
        try {
            for (std::int64_t b = begin; b < end; ++b)
                applyPreprocessing(p, pi[b], imageShape, pd[b], out + b * perImage);
        } catch (...) {
            const std::lock_guard<std::mutex> lock(errorMutex);
            if (!error) error = std::current_exception();
        }
    });
    if (error) std::rethrow_exception(error);
}

} // namespace towers::engine::cpu
