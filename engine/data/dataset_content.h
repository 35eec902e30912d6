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

// CRC-32 (zlib's) of a set's pixels, then its labels.
unsigned long imageSetCrc(const ImageSet& set);

// The record, as compact JSON: {"classes": [...], "train": {"examples": N, "crc32": C},
// "test": {...}}.
std::string datasetContent(const Dataset& dataset);

// In words, how `now` differs from `before` (both datasetContent records): the classes, the
// examples and the checksums that changed; "" when they are the same. Throws InvalidArgument for
// a record that is not one.
std::string datasetContentChange(const std::string& before, const std::string& now);

// The class names a record holds; none for one that is not a record.
std::optional<std::vector<std::string>> datasetContentClasses(const std::string& record);

} // namespace towers::engine
