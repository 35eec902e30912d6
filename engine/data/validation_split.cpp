#include "engine/data/validation_split.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "engine/tensor/rng.h"

namespace towers::engine {

namespace {

ImageSet emptyLike(const ImageSet& set)
{
    ImageSet s;
    s.height = set.height;
    s.width = set.width;
    s.channels = set.channels;
    return s;
}

void append(ImageSet& to, const ImageSet& from, std::int64_t i)
{
    const auto bytes = std::size_t(from.imageBytes());
    const std::uint8_t* image = from.image(i);
    to.pixels.insert(to.pixels.end(), image, image + bytes);
    to.labels.push_back(from.labels[std::size_t(i)]);
    ++to.count;
}

} // namespace

std::int64_t heldOutOfClass(std::int64_t images, double share)
{
    if (!(share > 0) || images < 2) return 0;
    return std::clamp<std::int64_t>(std::llround(double(images) * share), 1, images - 1);
}

std::int64_t validationImages(const std::vector<std::int64_t>& classCounts, double share)
{
    std::int64_t n = 0;
    for (const std::int64_t c : classCounts) n += heldOutOfClass(c, share);
    return n;
}

ValidationSplit splitValidation(const ImageSet& set, int classes, double share, std::uint64_t seed)
{
    if (!(share >= 0 && share <= kMaxValidationShare))
        throw InvalidArgument("the validation share must be in [0, 0.5], got " +
                              std::to_string(share));
    if (classes < 1) throw InvalidArgument("a validation split needs at least one class");
    // Each class's images in order, then the share of each drawn.
    std::vector<std::vector<std::int64_t>> members(static_cast<std::size_t>(classes));
    for (std::int64_t i = 0; i < set.count; ++i) {
        const std::int32_t label = set.labels[std::size_t(i)];
        if (label < 0 || label >= classes)
            throw InvalidArgument("image " + std::to_string(i) + " has the label " +
                                  std::to_string(label) + ", outside [0, " +
                                  std::to_string(classes) + ")");
        members[std::size_t(label)].push_back(i);
    }
    std::vector<bool> held(static_cast<std::size_t>(set.count), false);
    Rng rng(seed);
    for (const auto& m : members) {
        const auto n = std::int64_t(m.size());
        const std::int64_t k = heldOutOfClass(n, share);
        if (k == 0) continue;
        const std::vector<std::int64_t> order = rng.permutation(n);
        for (std::int64_t j = 0; j < k; ++j)
            held[std::size_t(m[std::size_t(order[std::size_t(j)])])] = true;
    }
    ValidationSplit split{emptyLike(set), emptyLike(set), {}};
    const auto heldCount = std::size_t(std::count(held.begin(), held.end(), true));
    const auto bytes = std::size_t(set.imageBytes());
    split.validation.pixels.reserve(heldCount * bytes);
    split.validation.labels.reserve(heldCount);
    split.train.pixels.reserve((std::size_t(set.count) - heldCount) * bytes);
    split.train.labels.reserve(std::size_t(set.count) - heldCount);
    split.validationIndex.reserve(heldCount);
    for (std::int64_t i = 0; i < set.count; ++i) {
        append(held[std::size_t(i)] ? split.validation : split.train, set, i);
        if (held[std::size_t(i)]) split.validationIndex.push_back(i);
    }
    return split;
}

} // namespace towers::engine
