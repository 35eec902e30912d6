#pragma once
// A tiny MNIST-style dataset on disk and the options of a short run of fashion-fast on it, for the
// tests that train for real (training controller, Train page, end to end).
#include <QString>

#include <filesystem>

#include "engine/train/training_session.h"

namespace towers::test {

// Writes <root>/mnist/ (IDX files of 28x28 images: `train` + `test` examples).
void writeTinyMnist(const std::filesystem::path& root, std::int64_t train = 256,
                    std::int64_t test = 64);
// fashion-fast on that dataset: `towers` towers of 16 examples, `steps` steps, every step logged,
// evaluation every `evalEvery` steps, checkpoints at the end and on stop.
engine::SessionOptions tinyRun(const std::filesystem::path& dataRoot,
                               const std::filesystem::path& runDir, std::int64_t steps,
                               int towers = 2, std::int64_t evalEvery = 0);

} // namespace towers::test
