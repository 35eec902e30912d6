#pragma once
// What a run trained on, recorded with it (TrainConfig::datasetContent): the dataset's class
// names and, for its training and test sets, the number of examples and a CRC-32 of their pixels
// and labels. A dataset imported again under the same name (import --force), or replaced on disk,
// is told from the one a run trained on: a resume refuses it, eval says so.
#include <optional>
#include <string>
#include <vector>

#include "engine/data/dataset.h"

namespace towers::engine {

// The record, as compact JSON: {"classes": [...], "train": {"examples": N, "crc32": C},
// "test": {...}}; the CRC-32 (zlib's) of each set's pixels, then its labels.
std::string datasetContent(const Dataset& dataset);

// A record's examples and checksums as lines ("training examples N, CRC-32 C\ntest examples M,
// CRC-32 D"): what every process of a run compares (the classes are the configuration's).
// Throws InvalidArgument for a record that is not one.
std::string datasetContentLines(const std::string& record);

// In words, how `now` differs from `before` (both datasetContent records): the classes, the
// examples and the checksums that changed; "" when they are the same. Throws InvalidArgument for
// a record that is not one.
std::string datasetContentChange(const std::string& before, const std::string& now);

// The class names a record holds; none for one that is not a record.
std::optional<std::vector<std::string>> datasetContentClasses(const std::string& record);

} // namespace towers::engine
