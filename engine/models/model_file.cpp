// Reading model files: the checks of a definition's fields and layers against the shape flowing
// through them (LayerList), modelFromDefinition, readModelFile, and the line of the text a mistake
// points at (mistakeLine). Writing them is in model_file_writer.cpp.
#include "engine/models/model_file.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <variant>

#include <nlohmann/json.hpp>

#include "engine/errors.h"
#include "engine/io/json_depth.h"
#include "engine/models/model_file_names.h"
#include "engine/nn/batch_norm.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/lrn.h"
#include "engine/nn/pool2d.h"

namespace towers::engine {

namespace {

using Json = nlohmann::json;

// The largest sizes a model file may ask for: far above any sensible network, low enough that a
// typing slip is refused before it allocates.
constexpr std::int64_t kMaxWidth = 65536; // filters, units
constexpr int kMaxKernel = 64;
constexpr std::int64_t kMaxInputSide = 4096;
constexpr std::int64_t kMaxInputChannels = 64;
constexpr int kMaxDepth = 8; // blocks (residual, concat) inside blocks
// A layer's weights at most (1 GiB of float32): a typing slip is refused before it allocates.
constexpr std::int64_t kMaxLayerWeights = std::int64_t(1) << 28;
// A model file's size at most: a network of a thousand layers takes a few hundred KiB.
constexpr std::uintmax_t kMaxFileBytes = 4 << 20;

// Where in the file a value is, for messages: "layers[2] (conv2)".
struct Place
{
    std::string where; // the source: a file's path, "the run's configuration"
    std::string path;  // "layers[2] (conv2)", "" for the top level

    [[noreturn]] void fail(const std::string& field, const std::string& what) const
    {
        std::string at = where + ": ";
        if (!path.empty()) at += path + ": ";
        if (!field.empty()) at += field + ": ";
        throw InvalidArgument(at + what);
    }
};

void rejectUnknown(const Json& obj, const std::set<std::string>& known, const Place& at)
{
    for (const auto& [key, value] : obj.items())
        if (!known.count(key)) {
            std::string list;
            for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
            at.fail(key, "unknown field (this one takes " + list + ")");
        }
}

std::int64_t intField(const Json& obj, const char* key, std::int64_t fallback, std::int64_t min,
                      std::int64_t max, const Place& at)
{
    const auto it = obj.find(key);
    if (it == obj.end()) return fallback;
    if (!it->is_number_integer() || it->get<std::int64_t>() < min || it->get<std::int64_t>() > max)
        at.fail(key, "expected an integer from " + std::to_string(min) + " to " +
                         std::to_string(max) + ", got " + it->dump());
    return it->get<std::int64_t>();
}

double numberField(const Json& obj, const char* key, double fallback, double min, double max,
                   bool maxIncluded, const Place& at)
{
    const auto it = obj.find(key);
    if (it == obj.end()) return fallback;
    const double v = it->is_number() ? it->get<double>() : NAN;
    if (!(v >= min && (maxIncluded ? v <= max : v < max))) {
        std::ostringstream range;
        range << min << (maxIncluded ? " to " : " to below ") << max;
        at.fail(key, "expected a number from " + range.str() + ", got " + it->dump());
    }
    return v;
}

bool boolField(const Json& obj, const char* key, bool fallback, const Place& at)
{
    const auto it = obj.find(key);
    if (it == obj.end()) return fallback;
    if (!it->is_boolean()) at.fail(key, "expected true or false, got " + it->dump());
    return it->get<bool>();
}

std::string stringField(const Json& obj, const char* key, const std::string& fallback,
                        const Place& at)
{
    const auto it = obj.find(key);
    if (it == obj.end()) return fallback;
    if (!it->is_string()) at.fail(key, "expected a string, got " + it->dump());
    return it->get<std::string>();
}

// "relu" or "none"; a batch norm's "relu": true is the same as "activation": "relu".
Activation activationField(const Json& obj, const Place& at)
{
    const std::string a = stringField(obj, "activation", "none", at);
    if (a == "relu") return Activation::Relu;
    if (a != "none") at.fail("activation", "expected \"relu\" or \"none\", got \"" + a + "\"");
    return Activation::None;
}

// "torch" (PyTorch's default, U(+-1/sqrt(fan_in))), "glorot", {"normal": stddev} (TensorFlow's
// truncated normal) or {"constant": value}.
Init initField(const Json& obj, const char* key, const Place& at)
{
    const auto it = obj.find(key);
    if (it == obj.end()) return Init::torchDefault();
    if (it->is_string()) {
        if (*it == "torch") return Init::torchDefault();
        if (*it == "glorot") return Init::glorotUniform();
    } else if (it->is_object() && it->size() == 1) {
        const auto& [kind, value] = *it->items().begin();
        if (value.is_number() && std::isfinite(value.get<double>())) {
            if (kind == "normal" && value.get<double>() > 0)
                return Init::truncatedNormal(value.get<double>());
            if (kind == "constant") return Init::constant(value.get<double>());
        }
    }
    at.fail(key,
            "expected \"torch\", \"glorot\", {\"normal\": stddev > 0} or {\"constant\": value}, "
            "got " +
                it->dump());
}

// Refuses a wrong name at `at`, and one of `taken`, which it joins.
void checkName(const std::string& name, std::set<std::string>& taken, const Place& at,
               bool dots = false)
{
    if (const std::string problem = nameProblem(name, dots); !problem.empty())
        at.fail("name", problem);
    if (!taken.insert(name).second) at.fail("name", "\"" + name + "\" names another layer too");
}

// The layers of a definition, checked against the shape flowing through them; `build` makes
// them again for each replica with the classes of the run.
class LayerList
{
public:
    LayerList(const Json& layers, const Shape& input, const Place& at) : m_where(at.where)
    {
        std::set<std::string> taken;
        std::map<std::string, int> counts;
        Shape out = input;
        m_specs = parse(layers, "layers", out, taken, counts, 0);
        if (m_specs.empty()) at.fail("layers", "a network needs at least one layer");
        for (std::size_t i = 0; i + 1 < m_specs.size(); ++i)
            if (m_specs[i].classes)
                Place{at.where, m_specs[i].path}.fail(
                    "units", "\"classes\" is for the last layer, the classifier");
        const Spec& last = m_specs.back();
        if (last.type != "linear" || !last.classes)
            Place{at.where, last.path}.fail(
                "", "the last layer must be the classifier: a linear layer with \"units\": "
                    "\"classes\" (one output per class of the dataset)");
    }

    // The layers at the top level (a residual block counts as one).
    std::size_t size() const { return m_specs.size(); }

    std::unique_ptr<Sequential> build(int classes) const
    {
        auto net = std::make_unique<Sequential>();
        for (const Spec& s : m_specs) net->add(s.make(classes));
        return net;
    }

private:
    // One layer, checked: `make` builds it (with `classes` outputs for the classifier) from the
    // options read once from the file.
    struct Spec
    {
        std::string type, name, path;
        bool classes = false;
        std::function<std::unique_ptr<Layer>(int classes)> make;
    };

    std::vector<Spec> parse(const Json& layers, const std::string& field, Shape& shape,
                            std::set<std::string>& taken, std::map<std::string, int>& counts,
                            int depth) const
    {
        const Place top{m_where, ""};
        if (!layers.is_array())
            top.fail(field, "expected an array of layers, got " + layers.dump());
        std::vector<Spec> specs;
        for (std::size_t i = 0; i < layers.size(); ++i) {
            const Json& l = layers[i];
            const std::string at = field + "[" + std::to_string(i) + "]";
            if (!l.is_object()) top.fail(at, "expected a layer object, got " + l.dump());
            const auto type = l.find("type");
            if (type == l.end() || !type->is_string() || !layerTypes().count(*type))
                top.fail(at, "\"type\": expected one of " + typeList() +
                                 (type == l.end() ? std::string(", got none")
                                                  : ", got " + type->dump()));
            Spec s;
            s.type = *type;
            s.name = defaultLayerName(s.type, ++counts[s.type]);
            if (l.contains("name")) s.name = stringField(l, "name", "", Place{m_where, at});
            s.path = at + " (" + s.name + ")";
            const Place p{m_where, s.path};
            checkName(s.name, taken, p);
            try {
                layerFor(s, l, shape, taken, counts, depth, p);
            } catch (const InvalidArgument& e) {
                const std::string what = e.what();
                if (what.starts_with(m_where + ": ")) throw;
                p.fail("", what);
            }
            specs.push_back(std::move(s));
        }
        return specs;
    }

    // Reads a layer's options `o` into s.make, checks its input, and moves `shape` to its output.
    void layerFor(Spec& s, const Json& o, Shape& shape, std::set<std::string>& taken,
                  std::map<std::string, int>& counts, int depth, const Place& p) const
    {
        const bool image = shape.rank() == 4;
        auto needImage = [&] {
            if (!image)
                p.fail("", "takes images [H, W, C], but its input is " + featuresText(shape) +
                               " (a " + s.type + " layer goes before the flatten)");
        };
        // A block (residual, concat) takes an image, inside at most kMaxDepth - 1 others.
        auto needBlockRoom = [&] {
            needImage();
            if (depth + 1 >= kMaxDepth)
                p.fail("", "blocks (residual, concat) nest at most " +
                               std::to_string(kMaxDepth - 1) + " deep");
        };
        const std::string name = s.name;
        if (s.type == "conv2d") {
            rejectUnknown(o,
                          {"type", "name", "filters", "kernel", "stride", "padding", "bias",
                           "activation", "weight_init", "bias_init", "weight_decay"},
                          p);
            needImage();
            if (!o.contains("filters")) p.fail("filters", "missing (the output channels)");
            Conv2dOptions c;
            c.inChannels = shape[3];
            c.outChannels = intField(o, "filters", 0, 1, kMaxWidth, p);
            kernelField(o, c.kernelH, c.kernelW, p);
            c.stride = int(intField(o, "stride", 1, 1, kMaxKernel, p));
            c.padding = paddingField(o, c.pads, p);
            c.bias = boolField(o, "bias", true, p);
            c.activation = activationField(o, p);
            c.weightInit = initField(o, "weight_init", p);
            c.biasInit = initField(o, "bias_init", p);
            c.weightDecay = numberField(o, "weight_decay", 0, 0, 1, true, p);
            checkWeights(c.outChannels * c.inChannels * c.kernelH * c.kernelW, p);
            s.make = [name, c](int) { return std::make_unique<Conv2d>(name, c); };
        } else if (s.type == "batchnorm") {
            rejectUnknown(o, {"type", "name", "relu", "epsilon", "momentum"}, p);
            needImage();
            const std::int64_t channels = shape[3];
            const Activation relu =
                boolField(o, "relu", false, p) ? Activation::Relu : Activation::None;
            const double epsilon = numberField(o, "epsilon", 1e-5, 1e-12, 1, true, p);
            const double momentum = numberField(o, "momentum", 0.1, 0, 1, true, p);
            s.make = [=](int) {
                return std::make_unique<BatchNorm>(name, channels, epsilon, momentum, relu);
            };
        } else if (s.type == "maxpool" || s.type == "avgpool") {
            rejectUnknown(o, {"type", "name", "size", "stride", "padding", "global"}, p);
            needImage();
            const bool max = s.type == "maxpool";
            if (boolField(o, "global", false, p)) {
                if (o.contains("size") || o.contains("stride") || o.contains("padding"))
                    p.fail("global", "a global pool takes no size, stride or padding");
                s.make = [name, max](int) -> std::unique_ptr<Layer> {
                    if (max) return MaxPool2d::global(name);
                    return AvgPool2d::global(name);
                };
            } else {
                const int size = int(intField(o, "size", 2, 1, kMaxKernel, p));
                const int stride = int(intField(o, "stride", size, 1, kMaxKernel, p));
                const std::string pad = stringField(o, "padding", "valid", p);
                if (pad != "valid" && pad != "same")
                    p.fail("padding", "expected \"same\" or \"valid\", got \"" + pad + "\"");
                const Padding padding = pad == "same" ? Padding::Same : Padding::Valid;
                s.make = [=](int) -> std::unique_ptr<Layer> {
                    if (max) return std::make_unique<MaxPool2d>(name, size, stride, padding);
                    return std::make_unique<AvgPool2d>(name, size, stride, padding);
                };
            }
        } else if (s.type == "lrn") {
            rejectUnknown(o, {"type", "name", "radius", "bias", "alpha", "beta"}, p);
            needImage();
            const int radius = int(intField(o, "radius", 5, 0, 64, p));
            const double bias = numberField(o, "bias", 1, 1e-6, 1e6, true, p);
            const double alpha = numberField(o, "alpha", 1, 0, 1e6, true, p);
            const double beta = numberField(o, "beta", 0.5, 0, 10, true, p);
            s.make = [=](int) { return std::make_unique<Lrn>(name, radius, bias, alpha, beta); };
        } else if (s.type == "flatten") {
            rejectUnknown(o, {"type", "name"}, p);
            needImage();
            s.make = [name](int) { return std::make_unique<Flatten>(name); };
        } else if (s.type == "linear") {
            rejectUnknown(o,
                          {"type", "name", "units", "bias", "activation", "weight_init",
                           "bias_init", "weight_decay"},
                          p);
            if (image)
                p.fail("",
                       "takes features, but its input is the image " + imageText(shape) +
                           ": put a {\"type\": \"flatten\"} (or a global avgpool or maxpool and a "
                           "flatten) before it");
            const auto units = o.find("units");
            if (units == o.end()) p.fail("units", "missing (the outputs, or \"classes\")");
            s.classes = units->is_string() && *units == "classes";
            LinearOptions l;
            l.inFeatures = shape[1];
            l.outFeatures = s.classes ? 0 : intField(o, "units", 0, 1, kMaxWidth, p);
            l.bias = boolField(o, "bias", true, p);
            l.activation = activationField(o, p);
            l.weightInit = initField(o, "weight_init", p);
            l.biasInit = initField(o, "bias_init", p);
            l.weightDecay = numberField(o, "weight_decay", 0, 0, 1, true, p);
            checkWeights(l.outFeatures * l.inFeatures, p); // the classifier's: in build()
            const bool classes = s.classes;
            s.make = [name, l, classes](int outputs) {
                LinearOptions mine = l;
                if (classes) mine.outFeatures = outputs;
                if (mine.outFeatures * mine.inFeatures > kMaxLayerWeights)
                    throw InvalidArgument(name + ": " + std::to_string(outputs) + " classes of " +
                                          std::to_string(mine.inFeatures) +
                                          " features each: more weights than a layer may have (" +
                                          std::to_string(kMaxLayerWeights) + ")");
                return std::make_unique<Linear>(name, mine);
            };
        } else if (s.type == "dropout") {
            rejectUnknown(o, {"type", "name", "rate"}, p);
            if (!o.contains("rate")) p.fail("rate", "missing (the share of values dropped)");
            const double rate = numberField(o, "rate", 0, 0, 1, false, p);
            s.make = [name, rate](int) { return std::make_unique<Dropout>(name, rate); };
        } else if (s.type == "residual") {
            rejectUnknown(o, {"type", "name", "layers"}, p);
            needBlockRoom();
            if (!o.contains("layers")) p.fail("layers", "missing (the block's layers)");
            Shape inner = shape;
            auto body = std::make_shared<const std::vector<Spec>>(
                parse(o.at("layers"), s.path + ": layers", inner, taken, counts, depth + 1));
            if (body->empty()) p.fail("layers", "a residual block needs at least one layer");
            if (inner != shape)
                p.fail("", "its layers turn " + imageText(shape) + " into " +
                               featuresOrImage(inner) +
                               "; a residual block adds its input to their output, so they must "
                               "keep the shape (padding \"same\", stride 1, as many filters as "
                               "channels)");
            s.make = [name, body](int classes) {
                auto seq = std::make_unique<Sequential>(name);
                for (const Spec& b : *body) seq->add(b.make(classes));
                return std::make_unique<Residual>(name, std::move(seq));
            };
            return;
        } else if (s.type == "concat") {
            rejectUnknown(o, {"type", "name", "branches"}, p);
            needBlockRoom();
            const auto branches = o.find("branches");
            if (branches == o.end()) p.fail("branches", "missing (arrays of layers, side by side)");
            if (!branches->is_array() || branches->size() < 2)
                p.fail("branches", "expected two or more arrays of layers (an empty one passes the "
                                   "input through), got " +
                                       branches->dump());
            auto parts = std::make_shared<std::vector<std::vector<Spec>>>();
            std::int64_t channels = 0;
            for (std::size_t b = 0; b < branches->size(); ++b) {
                const std::string field = s.path + ": branches[" + std::to_string(b) + "]";
                Shape inner = shape;
                parts->push_back(parse((*branches)[b], field, inner, taken, counts, depth + 1));
                if (inner.rank() != 4 || inner[1] != shape[1] || inner[2] != shape[2])
                    Place{m_where, field}.fail(
                        "", "turns " + imageText(shape) + " into " + featuresOrImage(inner) +
                                "; the branches are joined along the channels, so each must keep "
                                "the height and width (padding \"same\", stride 1)");
                channels += inner[3];
            }
            s.make = [name, parts](int classes) {
                std::vector<std::unique_ptr<Sequential>> seqs;
                for (std::size_t b = 0; b < parts->size(); ++b) {
                    auto seq = std::make_unique<Sequential>(name + ".branch" + std::to_string(b));
                    for (const Spec& l : (*parts)[b]) seq->add(l.make(classes));
                    seqs.push_back(std::move(seq));
                }
                return std::make_unique<Concat>(name, std::move(seqs));
            };
            shape = Shape{shape[0], shape[1], shape[2], channels};
            return;
        }
        if (s.classes) {
            shape = Shape{1, 2}; // the classes are the dataset's; the last layer (checked above)
            return;
        }
        // The layer's own shape rules (a window larger than the image, ...).
        shape = s.make(2)->outputShape(shape);
        if (shape.numel() == 0) p.fail("", "leaves nothing of its input " + featuresOrImage(shape));
    }

    static void checkWeights(std::int64_t weights, const Place& p)
    {
        if (weights > kMaxLayerWeights)
            p.fail("", std::to_string(weights) + " weights, more than a layer may have (" +
                           std::to_string(kMaxLayerWeights) + ")");
    }

    // A square kernel's side (3 by default), or [height, width].
    static void kernelField(const Json& o, int& kh, int& kw, const Place& p)
    {
        const auto it = o.find("kernel");
        if (it == o.end() || !it->is_array()) {
            kh = kw = int(intField(o, "kernel", 3, 1, kMaxKernel, p));
            return;
        }
        const auto side = [](const Json& v) {
            return v.is_number_integer() && v.get<std::int64_t>() >= 1 &&
                   v.get<std::int64_t>() <= kMaxKernel;
        };
        if (it->size() != 2 || !side((*it)[0]) || !side((*it)[1]))
            p.fail("kernel", "expected a side or [height, width], each from 1 to " +
                                 std::to_string(kMaxKernel) + ", got " + it->dump());
        kh = (*it)[0].get<int>();
        kw = (*it)[1].get<int>();
    }

    // "same" (the default), "valid", or the zeros added on each side.
    static Padding paddingField(const Json& o, ExplicitPads& pads, const Place& p)
    {
        const auto it = o.find("padding");
        if (it == o.end()) return Padding::Same;
        if (it->is_string() && (*it == "same" || *it == "valid"))
            return *it == "same" ? Padding::Same : Padding::Valid;
        if (it->is_number_integer() && it->get<std::int64_t>() >= 0 &&
            it->get<std::int64_t>() <= kMaxKernel) {
            const int n = it->get<int>();
            pads = {n, n, n, n};
            return Padding::Explicit;
        }
        p.fail("padding", "expected \"same\", \"valid\" or the zeros added on each side (0 to " +
                              std::to_string(kMaxKernel) + "), got " + it->dump());
    }

    static std::string imageText(const Shape& s)
    {
        return std::to_string(s[1]) + "x" + std::to_string(s[2]) + "x" + std::to_string(s[3]);
    }
    static std::string featuresText(const Shape& s) { return std::to_string(s[1]) + " features"; }
    static std::string featuresOrImage(const Shape& s)
    {
        return s.rank() == 4 ? imageText(s) : featuresText(s);
    }

    std::string m_where;
    std::vector<Spec> m_specs;
};

Json parseDefinition(const std::string& text, const Place& top)
{
    Json o;
    try {
        requireJsonDepth(text);
        o = Json::parse(text);
    } catch (const Json::exception& e) {
        top.fail("", std::string("not valid JSON: ") + e.what());
    }
    if (!o.is_object())
        top.fail("", "expected a JSON object with \"name\", \"input\" and \"layers\"");
    return o;
}

Shape inputOf(const Json& o, const Place& top)
{
    const auto it = o.find("input");
    if (it == o.end()) top.fail("input", "missing ([height, width, channels] of the images)");
    const bool ok =
        it->is_array() && it->size() == 3 && std::all_of(it->begin(), it->end(), [](const Json& d) {
            return d.is_number_integer() && d.get<std::int64_t>() >= 1;
        });
    if (!ok || (*it)[0].get<std::int64_t>() > kMaxInputSide ||
        (*it)[1].get<std::int64_t>() > kMaxInputSide ||
        (*it)[2].get<std::int64_t>() > kMaxInputChannels)
        top.fail("input", "expected [height, width, channels] (sides 1 to " +
                              std::to_string(kMaxInputSide) + ", channels 1 to " +
                              std::to_string(kMaxInputChannels) + "), got " + it->dump());
    return Shape{(*it)[0].get<std::int64_t>(), (*it)[1].get<std::int64_t>(),
                 (*it)[2].get<std::int64_t>()};
}

ModelAugmentation augmentationOf(const Json& o, const Place& top)
{
    ModelAugmentation a; // no shift, flips where the dataset allows them
    const auto it = o.find("augmentation");
    if (it == o.end()) return a;
    const Place p{top.where, "augmentation"};
    if (!it->is_object()) top.fail("augmentation", "expected an object, got " + it->dump());
    rejectUnknown(*it, {"kind", "translate", "flip"}, p);
    const std::string kind = stringField(*it, "kind", "translate", p);
    if (kind == "distorted-inputs") {
        if (it->contains("translate"))
            p.fail("translate",
                   "is for \"kind\": \"translate\" (distorted-inputs crops at random)");
        a.kind = ModelAugmentation::Kind::DistortedInputs;
    } else if (kind != "translate") {
        p.fail("kind", "expected \"translate\" or \"distorted-inputs\", got \"" + kind + "\"");
    }
    a.translate = int(intField(*it, "translate", 0, 0, 64, p));
    a.flip = boolField(*it, "flip", true, p);
    return a;
}

} // namespace

ModelInfo modelFromDefinition(const std::string& text, const std::string& where)
{
    const Place top{where, ""};
    const Json o = parseDefinition(text, top);
    rejectUnknown(
        o, {"name", "description", "input", "layers", "dataset", "augmentation", "recipe"}, top);
    if (!o.contains("name")) top.fail("name", "missing (what runs and checkpoints call it)");
    ModelInfo info;
    info.name = stringField(o, "name", "", top);
    {
        std::set<std::string> none;
        checkName(info.name, none, Place{where, ""}, true);
    }
    if (builtInName(info.name))
        top.fail("name", "\"" + info.name + "\" is a built-in model's; name yours otherwise");
    info.description = stringField(o, "description", "", top);
    info.inputShape = inputOf(o, top);
    info.defaultDataset = stringField(o, "dataset", "", top);
    if (!o.contains("layers")) top.fail("layers", "missing (the network's layers, in order)");
    auto layers = std::make_shared<const LayerList>(
        o.at("layers"), Shape{1, info.inputShape[0], info.inputShape[1], info.inputShape[2]}, top);
    const std::string name = info.name;
    const Shape input = info.inputShape;
    info.build = [layers, name, input](int classes) {
        return std::make_unique<Model>(name, input, classes, layers->build(classes));
    };
    // What `towers-cli models` lists: the layers' own descriptions are in the table.
    if (info.description.empty())
        info.description =
            "your network from a model file: " + std::to_string(layers->size()) + " layers";
    // Unless its "recipe" says otherwise.
    info.recipe = modelFileRecipe();
    info.augmentation = augmentationOf(o, top);
    if (const auto r = o.find("recipe"); r != o.end()) {
        if (!r->is_object()) top.fail("recipe", "expected an object, got " + r->dump());
        info.recipeJson = r->dump();
    }
    info.definition = o.dump();
    return info;
}

ModelRecipe modelFileRecipe()
{
    return nesterovOneCycle(0.1, 0.15, 128, 10, 500, 50);
}

std::string canonicalModelDefinition(const std::string& text, const std::string& where)
{
    return modelFromDefinition(text, where).definition;
}

const ModelInfo& readModelFile(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw IoError("model file '" + path.string() + "' is a folder");
    if (!in) throw IoError("cannot read the model file '" + path.string() + "'");
    if (const auto size = std::filesystem::file_size(path, ec); !ec && size > kMaxFileBytes)
        throw IoError("model file '" + path.string() + "': " + std::to_string(size) +
                      " bytes, more than a model file may have (" + std::to_string(kMaxFileBytes) +
                      ")");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw IoError("cannot read the model file '" + path.string() + "'");
    try {
        return keepModel(modelFromDefinition(text.str(), path.string()));
    } catch (const InvalidArgument& e) {
        throw IoError(e.what()); // the file is wrong, not the command line
    }
}

namespace {

// Where the values of a JSON text begin, by path ("layers", 3, "kernel"): a scan of the text's
// structure, counting lines. Meant for text that parsed; any other ends the scan without a hang
// (every step reads at least one character).
class JsonLines
{
public:
    using Step = std::variant<std::string, std::size_t>;

    explicit JsonLines(const std::string& text) : m_text(text) {}

    // The line of the deepest value along `path` that the text has (0 for none).
    int lineOf(const std::vector<Step>& path)
    {
        m_pos = 0;
        m_line = 1;
        m_best = 0;
        m_path = &path;
        value(0, true);
        return m_best;
    }

private:
    void space()
    {
        while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos])))
            if (m_text[m_pos++] == '\n') ++m_line;
    }
    std::string string() // at the opening quote; the raw characters, escapes kept
    {
        std::string out;
        ++m_pos;
        while (m_pos < m_text.size() && m_text[m_pos] != '"') {
            if (m_text[m_pos] == '\\') out += m_text[m_pos++];
            if (m_pos < m_text.size()) out += m_text[m_pos++];
        }
        ++m_pos;
        return out;
    }
    // The value at m_pos, `depth` steps along the path; `onPath`: the steps so far are the path's.
    void value(std::size_t depth, bool onPath)
    {
        space();
        if (onPath && depth > 0) m_best = m_line;
        const bool deeper = onPath && depth < m_path->size();
        if (m_pos >= m_text.size()) return;
        const char c = m_text[m_pos];
        if (c == '{' || c == '[') {
            ++m_pos;
            std::size_t index = 0;
            for (space(); m_pos < m_text.size() && m_text[m_pos] != (c == '{' ? '}' : ']');
                 space()) {
                if (m_text[m_pos] == ',') {
                    ++m_pos;
                    continue;
                }
                bool match = false;
                if (c == '{') {
                    const std::string key = string();
                    space();
                    ++m_pos; // ':'
                    const auto* step =
                        deeper ? std::get_if<std::string>(&(*m_path)[depth]) : nullptr;
                    match = step && *step == key;
                } else {
                    const auto* step =
                        deeper ? std::get_if<std::size_t>(&(*m_path)[depth]) : nullptr;
                    match = step && *step == index++;
                }
                value(depth + 1, match);
            }
            ++m_pos;
        } else if (c == '"') {
            (void)string();
        } else {
            const std::size_t start = m_pos;
            while (m_pos < m_text.size() && m_text[m_pos] != '\0' &&
                   !std::strchr(",]} \t\r\n", m_text[m_pos]))
                ++m_pos;
            if (m_pos == start) ++m_pos; // a character no JSON value starts with
        }
    }

    const std::string& m_text;
    std::size_t m_pos = 0;
    int m_line = 1, m_best = 0;
    const std::vector<Step>* m_path = nullptr;
};

} // namespace

int mistakeLine(const std::string& text, const std::string& where, const std::string& message)
{
    if (!message.starts_with(where + ": ")) return 0;
    static const std::regex parse(R"(parse error at line (\d+), column \d+)");
    std::smatch m;
    if (std::regex_search(message, m, parse)) return std::stoi(m[1].str());
    // "layers[3] (conv2): ", "branches[1][0] (conv5): ", then perhaps "kernel: ".
    static const std::regex step(R"(^([A-Za-z_]+)((?:\[\d+\])+)(?: \([^)]*\))?: )");
    static const std::regex field(R"(^([A-Za-z_]+): )");
    static const std::regex index(R"(\[(\d+)\])");
    std::vector<JsonLines::Step> path;
    std::string rest = message.substr(where.size() + 2);
    while (std::regex_search(rest, m, step)) {
        path.emplace_back(m[1].str());
        const std::string indices = m[2].str();
        for (auto it = std::sregex_iterator(indices.begin(), indices.end(), index);
             it != std::sregex_iterator(); ++it)
            path.emplace_back(static_cast<std::size_t>(std::stoul((*it)[1].str())));
        rest = m.suffix().str();
    }
    if (std::regex_search(rest, m, field)) path.emplace_back(m[1].str());
    if (path.empty()) return 0;
    return JsonLines(text).lineOf(path);
}

bool namesModelFile(const std::string& model)
{
    return model.find('/') != std::string::npos || model.ends_with(".json");
}

} // namespace towers::engine
