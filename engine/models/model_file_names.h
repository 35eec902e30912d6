#pragma once
// Private to engine/models: the names of a model file's layers and networks, which reading
// (model_file.cpp) and writing (model_file_writer.cpp) share.
#include <map>
#include <string>

#include "engine/models/registry.h"

namespace towers::engine {

// A name: what a layer's parameters are called in checkpoints ("<name>.weight"), so unique in the
// network, none of the checkpoint's own prefixes, and without dots (a module of the PyTorch twin,
// python/towers_torch.py). A model's name may have dots. What is wrong with `name` ("" for
// nothing).
inline std::string nameProblem(const std::string& name, bool dots)
{
    const std::string chars =
        std::string("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") +
        (dots ? "." : "");
    if (name.empty() || name.size() > 64 || name.find_first_not_of(chars) != std::string::npos ||
        name.front() == '.' || name.back() == '.')
        return std::string("expected 1 to 64 letters, digits, '_' or '-'") +
               (dots ? " or '.' (not first or last)" : "") + ", got \"" + name + "\"";
    for (const char* reserved : {"ema", "optim"})
        if (name == reserved)
            return "\"" + name + "\" is kept for the checkpoint's own tensors (" + reserved +
                   ".*); choose another";
    return {};
}

// Whether `name` is a built-in model's, which a model file's network may not take.
inline bool builtInName(const std::string& name)
{
    for (const ModelInfo& m : modelRegistry())
        if (m.name == name) return true;
    return false;
}

// The layer types, each with the default name prefix of its layers (numbered from 1 per type).
inline const std::map<std::string, std::string>& layerTypes()
{
    static const std::map<std::string, std::string> types = {
        {"conv2d", "conv"},  {"batchnorm", "bn"},    {"maxpool", "pool"}, {"avgpool", "avgpool"},
        {"lrn", "norm"},     {"flatten", "flatten"}, {"linear", "fc"},    {"dropout", "drop"},
        {"residual", "res"}, {"concat", "concat"}};
    return types;
}

// The name a file's layer gets when it gives none: the type's prefix numbered per type in file
// order ("conv1", "bn2"), the first flatten plain "flatten".
inline std::string defaultLayerName(const std::string& type, int n)
{
    const std::string& prefix = layerTypes().at(type);
    return type == "flatten" && n == 1 ? prefix : prefix + std::to_string(n);
}

inline std::string typeList()
{
    std::string list;
    for (const auto& [type, prefix] : layerTypes()) list += (list.empty() ? "" : ", ") + type;
    return list;
}

} // namespace towers::engine
