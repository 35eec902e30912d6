// Preprocessing recipes: the named recipes, validation, and the JSON form stored in checkpoints.
// The per-image work (the hot path) is in distortion.cpp.
#include "engine/data/preprocessing.h"
#include "engine/io/json_depth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace towers::engine {

namespace {

using nlohmann::json;

constexpr int kMaxSide = 4096;
constexpr int kMaxChannels = 64;

[[noreturn]] void fieldError(const std::string& field, const std::string& problem)
{
    throw InvalidArgument("preprocessing: field \"" + field + "\" " + problem);
}

std::string num(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.15g", v);
    return buf;
}

// The checks that do not depend on the source images; fields are named as in the JSON form.
void checkRecipe(const Preprocessing& p)
{
    const auto side = [](const char* field, int v) {
        if (v < 1 || v > kMaxSide)
            fieldError(field,
                       "is " + std::to_string(v) + ", expected 1.." + std::to_string(kMaxSide));
    };
    side("height", p.height);
    side("width", p.width);
    if (p.channels < 1 || p.channels > kMaxChannels)
        fieldError("channels", "is " + std::to_string(p.channels) + ", expected 1.." +
                                   std::to_string(kMaxChannels));
    const int maxShift = std::min(p.height, p.width) - 1;
    if (p.translate < 0 || p.translate > maxShift)
        fieldError("translate", "is " + std::to_string(p.translate) + ", expected 0.." +
                                    std::to_string(maxShift) + " (less than the image side)");
    if (!std::isfinite(p.brightnessDelta) || p.brightnessDelta < 0 || p.brightnessDelta > 255)
        fieldError("brightness_delta", "is " + num(p.brightnessDelta) + ", expected 0..255");
    if (!std::isfinite(p.contrastLower) || p.contrastLower < 0 || p.contrastLower > 100)
        fieldError("contrast_lower", "is " + num(p.contrastLower) + ", expected 0..100");
    if (!std::isfinite(p.contrastUpper) || p.contrastUpper < p.contrastLower ||
        p.contrastUpper > 100)
        fieldError("contrast_upper", "is " + num(p.contrastUpper) + ", expected contrast_lower (" +
                                         num(p.contrastLower) + ")..100");
    if (p.normalization == Preprocessing::Normalization::MeanStd) {
        const auto perChannel = [&](const char* field, const std::vector<double>& v,
                                    bool positive) {
            if (static_cast<int>(v.size()) != p.channels)
                fieldError(field, "has " + std::to_string(v.size()) +
                                      " values, expected one per channel (" +
                                      std::to_string(p.channels) + ") for mean_std normalisation");
            for (std::size_t c = 0; c < v.size(); ++c)
                if (!std::isfinite(v[c]) || (positive && v[c] <= 0))
                    fieldError(field, "value " + std::to_string(c) + " is " + num(v[c]) +
                                          (positive ? ", expected a positive number"
                                                    : ", expected a finite number"));
        };
        perChannel("mean", p.mean, false);
        perChannel("std", p.stddev, true);
    }
}

std::string typeName(const json& v)
{
    if (v.is_number_integer()) return "an integer";
    if (v.is_number()) return "a number";
    return std::string("a ") + v.type_name();
}

int intField(const json& j, const char* field, bool required, int fallback)
{
    if (!j.contains(field)) {
        if (required) fieldError(field, "is missing");
        return fallback;
    }
    const json& v = j.at(field);
    if (!v.is_number_integer()) fieldError(field, "must be an integer, got " + typeName(v));
    const auto x = v.get<std::int64_t>();
    if (x < -kMaxSide * 16 || x > kMaxSide * 16)
        fieldError(field, "is " + std::to_string(x) + ", far out of range");
    return static_cast<int>(x);
}

double numberField(const json& j, const char* field, double fallback)
{
    if (!j.contains(field)) return fallback;
    const json& v = j.at(field);
    if (!v.is_number()) fieldError(field, "must be a number, got " + typeName(v));
    return v.get<double>();
}

std::vector<double> numbersField(const json& j, const char* field)
{
    if (!j.contains(field)) return {};
    const json& v = j.at(field);
    if (!v.is_array()) fieldError(field, "must be an array of numbers, got " + typeName(v));
    std::vector<double> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_number())
            fieldError(field,
                       "element " + std::to_string(i) + " must be a number, got " + typeName(v[i]));
        out.push_back(v[i].get<double>());
    }
    return out;
}

} // namespace

PreprocessDesc preprocessDesc(const Preprocessing& p)
{
    PreprocessDesc d;
    d.height = p.height;
    d.width = p.width;
    d.channels = p.channels;
    d.normalization = static_cast<int>(p.normalization);
    d.mean = p.mean;
    d.stddev = p.stddev;
    return d;
}

Preprocessing preprocessingOf(const PreprocessDesc& d)
{
    Preprocessing p;
    p.height = d.height;
    p.width = d.width;
    p.channels = d.channels;
    p.normalization = static_cast<Preprocessing::Normalization>(d.normalization);
    p.mean = d.mean;
    p.stddev = d.stddev;
    return p;
}

const char* normalizationName(Preprocessing::Normalization n)
{
    switch (n) {
    case Preprocessing::Normalization::PerImage:
        return "per_image";
    case Preprocessing::Normalization::MeanStd:
        return "mean_std";
    case Preprocessing::Normalization::Scale:
        return "scale";
    }
    return "?";
}

std::string Preprocessing::toJson() const
{
    json j;
    j["height"] = height;
    j["width"] = width;
    j["channels"] = channels;
    j["translate"] = translate;
    j["flip"] = flip;
    j["brightness_delta"] = brightnessDelta;
    j["contrast_lower"] = contrastLower;
    j["contrast_upper"] = contrastUpper;
    j["normalization"] = normalizationName(normalization);
    j["mean"] = mean;
    j["std"] = stddev;
    return j.dump();
}

Preprocessing Preprocessing::fromJson(const std::string& text)
{
    json j;
    try {
        requireJsonDepth(text);
        j = json::parse(text);
    } catch (const json::exception& e) {
        throw InvalidArgument(std::string("preprocessing: not valid JSON: ") + e.what());
    }
    if (!j.is_object())
        throw InvalidArgument("preprocessing: expected a JSON object, got " + typeName(j));
    static const char* const known[] = {"height",
                                        "width",
                                        "channels",
                                        "translate",
                                        "flip",
                                        "brightness_delta",
                                        "contrast_lower",
                                        "contrast_upper",
                                        "normalization",
                                        "mean",
                                        "std"};
    for (const auto& item : j.items()) {
        bool ok = false;
        for (const char* k : known) ok = ok || item.key() == k;
        if (!ok) fieldError(item.key(), "is not a preprocessing field");
    }
    Preprocessing p;
    p.height = intField(j, "height", true, 0);
    p.width = intField(j, "width", true, 0);
    p.channels = intField(j, "channels", true, 0);
    p.translate = intField(j, "translate", false, 0);
    if (j.contains("flip")) {
        if (!j["flip"].is_boolean())
            fieldError("flip", "must be true or false, got " + typeName(j["flip"]));
        p.flip = j["flip"].get<bool>();
    }
    p.brightnessDelta = numberField(j, "brightness_delta", 0);
    p.contrastLower = numberField(j, "contrast_lower", 1);
    p.contrastUpper = numberField(j, "contrast_upper", 1);
    if (!j.contains("normalization")) fieldError("normalization", "is missing");
    const json& n = j["normalization"];
    if (!n.is_string()) fieldError("normalization", "must be a string, got " + typeName(n));
    const std::string name = n.get<std::string>();
    if (name == "per_image")
        p.normalization = Normalization::PerImage;
    else if (name == "mean_std")
        p.normalization = Normalization::MeanStd;
    else if (name == "scale")
        p.normalization = Normalization::Scale;
    else
        fieldError("normalization", "is \"" + name + "\", expected per_image, mean_std or scale");
    p.mean = numbersField(j, "mean");
    p.stddev = numbersField(j, "std");
    checkRecipe(p);
    return p;
}

void Preprocessing::validateFor(const Shape& source) const
{
    checkRecipe(*this);
    if (source.rank() != 3)
        throw InvalidArgument("preprocessing: source images must be [H, W, C], got " +
                              source.str());
    if (source[2] != channels)
        throw InvalidArgument("preprocessing: the recipe is for " + std::to_string(channels) +
                              "-channel images but the images have " + std::to_string(source[2]) +
                              " channels");
    if (source[0] < height || source[1] < width)
        throw InvalidArgument("preprocessing: the recipe's " + std::to_string(height) + "x" +
                              std::to_string(width) + " output does not fit in " +
                              std::to_string(source[0]) + "x" + std::to_string(source[1]) +
                              " source images (crops only, never enlarges)");
}

Preprocessing cifarDistortions(int size)
{
    if (size < 1 || size > 32)
        throw InvalidArgument("cifarDistortions: crop size " + std::to_string(size) +
                              " does not fit 32x32 CIFAR images (expected 1..32)");
    return distortedInputs({size, size, 3});
}

Preprocessing distortedInputs(const Shape& input)
{
    if (input.rank() != 3 || input[0] < 1 || input[1] < 1 || input[2] < 1)
        throw InvalidArgument("distortedInputs: the input must be [H, W, C], got " + input.str());
    Preprocessing p;
    p.height = static_cast<int>(input[0]);
    p.width = static_cast<int>(input[1]);
    p.channels = static_cast<int>(input[2]);
    p.flip = true;
    p.brightnessDelta = 63;
    p.contrastLower = 0.2;
    p.contrastUpper = 1.8;
    p.normalization = Preprocessing::Normalization::PerImage;
    return p;
}

void channelStatistics(const ImageSet& set, std::vector<double>& mean, std::vector<double>& stddev)
{
    const int c = static_cast<int>(set.channels);
    if (set.count < 1 || c < 1 ||
        set.pixels.size() != static_cast<std::size_t>(set.count * set.imageBytes()))
        throw InvalidArgument("channelStatistics: the image set is empty or inconsistent (" +
                              std::to_string(set.count) + " images of " + set.imageShape().str() +
                              ", " + std::to_string(set.pixels.size()) + " bytes)");
    // One histogram per channel: exact, and one increment per byte whatever the channel count.
    const auto channels = static_cast<std::size_t>(c);
    std::vector<std::uint64_t> hist(channels * 256);
    const std::uint8_t* px = set.pixels.data();
    const std::size_t n = set.pixels.size();
    for (std::size_t i = 0; i < n; i += channels)
        for (std::size_t k = 0; k < channels; ++k) ++hist[k * 256 + px[i + k]];
    std::vector<double> sum(channels), sq(channels);
    for (std::size_t k = 0; k < channels; ++k)
        for (int v = 0; v < 256; ++v) {
            sum[k] += static_cast<double>(hist[k * 256 + static_cast<std::size_t>(v)]) * v;
            sq[k] += static_cast<double>(hist[k * 256 + static_cast<std::size_t>(v)]) * v * v;
        }
    const double count = static_cast<double>(n / channels);
    mean.assign(channels, 0);
    stddev.assign(channels, 0);
    for (std::size_t k = 0; k < channels; ++k) {
        const double m = sum[k] / count;
        const double var = std::max(0.0, sq[k] / count - m * m);
        mean[k] = m / 255.0;
        // A constant channel carries no information to scale; dividing by 1 keeps it finite.
        stddev[k] = var > 0 ? std::sqrt(var) / 255.0 : 1.0;
    }
}

Preprocessing translateAndNormalize(const ImageSet& train, int translate)
{
    Preprocessing p;
    p.height = static_cast<int>(train.height);
    p.width = static_cast<int>(train.width);
    p.channels = static_cast<int>(train.channels);
    p.translate = translate;
    p.normalization = Preprocessing::Normalization::MeanStd;
    channelStatistics(train, p.mean, p.stddev);
    p.validateFor(train.imageShape());
    return p;
}

Preprocessing cifarPadCrop(const ImageSet& train, int translate)
{
    Preprocessing p = translateAndNormalize(train, translate);
    p.flip = true;
    return p;
}

} // namespace towers::engine
