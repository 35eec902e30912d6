#pragma once
// Checkpoints for tests of what reads them (classify, eval, the Classify page): a model freshly
// drawn from a seed, with a dataset's classes and the model's recipe on it.
#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/data/dataset.h"

namespace towers::test {

// Writes `file`: `model` initialised from `seed` with `data`'s classes, named for `data` (its
// name, class names and preprocessingFor(model, data)), at `step`.
void writeFreshCheckpoint(const std::string& model, const engine::Dataset& data,
                          const std::filesystem::path& file, std::uint64_t seed = 3,
                          std::int64_t step = 1, const std::string& config = {});

} // namespace towers::test
