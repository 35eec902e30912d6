// Writing a network as a model file (modelFileText) and naming the file's network
// (modelNameForFile). Reading model files is in model_file.cpp.
#include "engine/models/model_file.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/errors.h"
#include "engine/models/model_file_names.h"
#include "engine/nn/batch_norm.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/linear.h"
#include "engine/nn/lrn.h"
#include "engine/nn/pool2d.h"

namespace towers::engine {

namespace {

using Json = nlohmann::json;

// "my-cifar10-resnet": a name for the user's version of `name`, 64 characters at most.
std::string mine(const std::string& name)
{
    return ("my-" + name).substr(0, 64);
}

// Writing a network as a model file: the mirror of LayerList's reading, every option a layer was
// made with that differs from the file's default for it.
using OrderedJson = nlohmann::ordered_json;

OrderedJson initJson(const Init& init)
{
    switch (init.kind) {
    case Init::Kind::TorchDefault:
        return "torch";
    case Init::Kind::GlorotUniform:
        return "glorot";
    case Init::Kind::TruncatedNormal:
        return OrderedJson{{"normal", init.value}};
    case Init::Kind::Constant:
        return OrderedJson{{"constant", init.value}};
    }
    throw Error("an initialiser of unknown kind");
}

// The options conv2d and linear layers share.
void addWeightOptions(OrderedJson& o, bool bias, Activation activation, const Init& weightInit,
                      const Init& biasInit, double weightDecay)
{
    if (!bias) o["bias"] = false;
    if (activation == Activation::Relu) o["activation"] = "relu";
    if (weightInit.kind != Init::Kind::TorchDefault) o["weight_init"] = initJson(weightInit);
    if (bias && biasInit.kind != Init::Kind::TorchDefault) o["bias_init"] = initJson(biasInit);
    if (weightDecay != 0) o["weight_decay"] = weightDecay;
}

class LayerWriter
{
public:
    // The entries of `layers`; `classifier`: the last of them is written as the classifier.
    OrderedJson entries(const Sequential& layers, bool classifier)
    {
        OrderedJson out = OrderedJson::array();
        const auto& list = layers.layers();
        for (std::size_t i = 0; i < list.size(); ++i)
            out.push_back(entry(*list[i], classifier && i + 1 == list.size()));
        return out;
    }

private:
    OrderedJson entry(const Layer& layer, bool classifier)
    {
        const std::string type = layer.kind();
        if (!layerTypes().count(type))
            throw InvalidArgument(layer.name() + ": a " + type +
                                  " layer has no model file type (they are " + typeList() + ")");
        if (classifier && type != "linear")
            throw InvalidArgument(layer.name() +
                                  ": a model file's last layer is a linear classifier, not a " +
                                  type + " layer");
        OrderedJson o;
        o["type"] = type;
        // A model file's names have no dots ("layer1.res1.conv" is "layer1_res1_conv"); the name
        // the layer would get anyway is left out.
        std::string name = layer.name();
        std::replace(name.begin(), name.end(), '.', '_');
        if (name != defaultLayerName(type, ++m_counts[type])) o["name"] = name;
        if (const auto* c = dynamic_cast<const Conv2d*>(&layer)) {
            const Conv2dOptions& opt = c->options();
            o["filters"] = opt.outChannels;
            o["kernel"] = opt.kernelH == opt.kernelW ? OrderedJson(opt.kernelH)
                                                     : OrderedJson{opt.kernelH, opt.kernelW};
            if (opt.stride != 1) o["stride"] = opt.stride;
            if (opt.padding == Padding::Valid) o["padding"] = "valid";
            if (opt.padding == Padding::Explicit) {
                const ExplicitPads& p = opt.pads;
                if (p.top != p.left || p.top != p.bottom || p.top != p.right)
                    throw InvalidArgument(layer.name() +
                                          ": a model file pads every side alike, this layer not");
                o["padding"] = p.top;
            }
            addWeightOptions(o, opt.bias, opt.activation, opt.weightInit, opt.biasInit,
                             opt.weightDecay);
        } else if (const auto* b = dynamic_cast<const BatchNorm*>(&layer)) {
            if (b->activation() == Activation::Relu) o["relu"] = true;
            if (b->epsilon() != 1e-5) o["epsilon"] = b->epsilon();
            if (b->momentum() != 0.1) o["momentum"] = b->momentum();
        } else if (const auto* m = dynamic_cast<const Pool2d*>(&layer)) {
            if (m->isGlobal()) {
                o["global"] = true;
            } else {
                o["size"] = m->kernel();
                if (m->stride() != m->kernel()) o["stride"] = m->stride();
                if (m->padding() == Padding::Same) o["padding"] = "same";
            }
        } else if (const auto* n = dynamic_cast<const Lrn*>(&layer)) {
            o["radius"] = n->depthRadius();
            o["bias"] = n->bias();
            o["alpha"] = n->alpha();
            o["beta"] = n->beta();
        } else if (const auto* l = dynamic_cast<const Linear*>(&layer)) {
            const LinearOptions& opt = l->options();
            o["units"] = classifier ? OrderedJson("classes") : OrderedJson(opt.outFeatures);
            addWeightOptions(o, opt.bias, opt.activation, opt.weightInit, opt.biasInit,
                             opt.weightDecay);
        } else if (const auto* d = dynamic_cast<const Dropout*>(&layer)) {
            o["rate"] = d->rate();
        } else if (const auto* r = dynamic_cast<const Residual*>(&layer)) {
            o["layers"] = entries(r->body(), false);
        } else if (const auto* k = dynamic_cast<const Concat*>(&layer)) {
            OrderedJson branches = OrderedJson::array();
            for (const auto& branch : k->branches()) branches.push_back(entries(*branch, false));
            o["branches"] = branches;
        }
        return o;
    }

    std::map<std::string, int> m_counts;
};

// `value` on one line, with a space after each ':' and ',' as people write JSON.
std::string oneLine(const OrderedJson& value)
{
    std::string out;
    if (value.is_object()) {
        for (const auto& [key, v] : value.items())
            out += (out.empty() ? "{" : ", ") + OrderedJson(key).dump() + ": " + oneLine(v);
        return out.empty() ? "{}" : out + "}";
    }
    if (value.is_array()) {
        for (const auto& v : value) out += (out.empty() ? "[" : ", ") + oneLine(v);
        return out.empty() ? "[]" : out + "]";
    }
    return value.dump();
}

// The layers a line each, a block's own layers indented under it (a concat's, each branch's in
// brackets of their own).
void writeLayers(std::string& out, const OrderedJson& layers, const std::string& indent)
{
    for (std::size_t i = 0; i < layers.size(); ++i) {
        OrderedJson layer = layers[i];
        const auto body = layer.find("layers");
        const auto branches = layer.find("branches");
        if (body != layer.end()) {
            const OrderedJson inner = *body;
            layer.erase("layers");
            std::string head = oneLine(layer);
            head.pop_back(); // the '}'
            out += indent + head + ", \"layers\": [\n";
            writeLayers(out, inner, indent + "  ");
            out += indent + "]}";
        } else if (branches != layer.end()) {
            const OrderedJson parts = *branches;
            layer.erase("branches");
            std::string head = oneLine(layer);
            head.pop_back();
            out += indent + head + ", \"branches\": [\n";
            for (std::size_t b = 0; b < parts.size(); ++b) {
                if (parts[b].empty()) {
                    out += indent + "  []";
                } else {
                    out += indent + "  [\n";
                    writeLayers(out, parts[b], indent + "    ");
                    out += indent + "  ]";
                }
                out += b + 1 < parts.size() ? ",\n" : "\n";
            }
            out += indent + "]}";
        } else {
            out += indent + oneLine(layer);
        }
        out += i + 1 < layers.size() ? ",\n" : "\n";
    }
}

} // namespace

std::string modelFileText(const ModelInfo& info, const std::string& name, const std::string& recipe)
{
    if (const std::string problem = nameProblem(name, true); !problem.empty())
        throw InvalidArgument("the network's name: " + problem);
    if (builtInName(name))
        throw InvalidArgument("the network's name: \"" + name +
                              "\" is a built-in model's; name yours otherwise");
    const std::unique_ptr<Model> model = buildModel(info);
    OrderedJson layers = LayerWriter().entries(model->net(), true);

    std::string description = info.description;
    if (info.definition.empty()) {
        description += " (from the built-in " + info.name + ")";
    } else {
        // A model file's own description, not the one made up for it.
        const Json d = Json::parse(info.definition);
        description = d.value("description", std::string());
    }
    const Shape& in = info.inputShape;
    std::string out = "{\n  \"name\": " + OrderedJson(name).dump() + ",\n";
    if (!description.empty())
        out += "  \"description\": " + OrderedJson(description).dump() + ",\n";
    out += "  \"input\": " + oneLine(OrderedJson{in[0], in[1], in[2]}) + ",\n";
    if (!info.defaultDataset.empty())
        out += "  \"dataset\": " + OrderedJson(info.defaultDataset).dump() + ",\n";
    out += "  \"layers\": [\n";
    writeLayers(out, layers, "    ");
    out += "  ],\n";
    OrderedJson augmentation;
    if (info.augmentation.kind == ModelAugmentation::Kind::DistortedInputs)
        augmentation["kind"] = "distorted-inputs";
    else
        augmentation["translate"] = info.augmentation.translate;
    augmentation["flip"] = info.augmentation.flip;
    out += "  \"augmentation\": " + oneLine(augmentation);
    if (!recipe.empty()) {
        const OrderedJson r = OrderedJson::parse(recipe);
        std::string fields;
        for (const auto& [key, value] : r.items())
            fields += (fields.empty() ? "" : ",\n") + std::string("    ") +
                      OrderedJson(key).dump() + ": " + oneLine(value);
        out += ",\n  \"recipe\": {\n" + fields + "\n  }";
    }
    return out + "\n}\n";
}

std::string modelNameForFile(const std::filesystem::path& file, const std::string& from)
{
    const std::string stem = file.stem().string();
    return nameProblem(stem, true).empty() && !builtInName(stem) ? stem : mine(from);
}

} // namespace towers::engine
