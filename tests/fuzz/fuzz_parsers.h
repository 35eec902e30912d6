#pragma once
// What the fuzzers and the corpus test run on one input: every parser over the same bytes. A
// parser may succeed or throw IoError; anything else escapes (a crash for libFuzzer, a failure for
// the Qt test), and so does a result that breaks the parser's promises (std::logic_error).
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/data/dataset.h"

namespace towers::fuzz {

inline void requireConsistent(const engine::ImageSet& set, bool labelled, int classes)
{
    if (set.count < 1 || set.height < 1 || set.width < 1 || set.channels < 1 ||
        set.pixels.size() != static_cast<std::size_t>(set.count * set.imageBytes()))
        throw std::logic_error("parser returned an inconsistent image set");
    if (labelled) {
        if (set.labels.size() != static_cast<std::size_t>(set.count))
            throw std::logic_error("parser returned a label count that differs from the images");
        for (std::int32_t l : set.labels)
            if (l < 0 || l >= classes)
                throw std::logic_error("parser returned a label out of range");
    }
}

// The IDX parsers (images and labels; plain, or gzip when the input starts with 1f 8b). Returns
// how many of them accepted the input.
inline int parseIdx(const std::uint8_t* data, std::size_t size)
{
    const std::vector<std::uint8_t> bytes(data, data + size);
    int accepted = 0;
    try {
        requireConsistent(engine::parseIdxImages(bytes, "fuzz input"), false, 0);
        ++accepted;
    } catch (const engine::IoError&) {
    }
    try {
        for (std::int32_t l : engine::parseIdxLabels(bytes, 10, "fuzz input"))
            if (l < 0 || l >= 10)
                throw std::logic_error("parseIdxLabels returned a label out of range");
        ++accepted;
    } catch (const engine::IoError&) {
    }
    return accepted;
}

// The CIFAR record parser in its three uses: CIFAR-10, CIFAR-100 fine and coarse. Returns how
// many of them accepted the input.
inline int parseCifar(const std::uint8_t* data, std::size_t size)
{
    int accepted = 0;
    struct Mode
    {
        int labelBytes;
        bool fine;
        int classes;
    };
    for (const Mode m : {Mode{1, false, 10}, Mode{2, true, 100}, Mode{2, false, 20}}) {
        try {
            requireConsistent(engine::parseCifarRecords(data, size, m.labelBytes, m.fine, m.classes,
                                                        "fuzz input"),
                              true, m.classes);
            ++accepted;
        } catch (const engine::IoError&) {
        }
    }
    return accepted;
}

} // namespace towers::fuzz
