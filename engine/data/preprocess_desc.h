#pragma once
// The preprocessing of dataset images where the model lives (the op preprocessImages,
// engine/ops/op_list.h): a recipe's output size and normalisation (preprocessing.h's
// Preprocessing, as plain data; its distortions arrive drawn, one row of distortion_math.h's draw
// columns per image). Header-only and plain, so that the op interface (engine/ops/descriptors.h)
// and the input pipeline share it without either reaching into the other.
#include <vector>

namespace towers::engine {

struct PreprocessDesc
{
    int height = 0, width = 0, channels = 0; // the output image, HWC; channels <= 64
    // preprocess::Normalization: 0 per-image standardisation, 1 the set's mean and std, 2 x / 255
    int normalization = 2;
    std::vector<double> mean, stddev; // per channel on the 0..1 scale, for normalisation 1
};

} // namespace towers::engine
