#pragma once
// The models Towers knows, registered by name (an explicit list, no static initialisers).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/model.h"

namespace towers::engine {

struct ModelInfo
{
    std::string name;
    std::string description;
    Shape inputShape; // [H, W, C]
    int numClasses = 10;
    std::string defaultDataset; // the dataset it is meant for
    std::function<std::unique_ptr<Model>()> build;
};

const std::vector<ModelInfo>& modelRegistry();
// Throws UnknownName listing the known models.
const ModelInfo& findModel(const std::string& name);
// Builds and initialises a model.
std::unique_ptr<Model> createModel(const std::string& name, std::uint64_t seed = 1);

// The builders (models/<name>.cpp).
std::unique_ptr<Model> buildCifar10Tutorial();
std::unique_ptr<Model> buildMnistConvnet();
std::unique_ptr<Model> buildFashionFast();
std::unique_ptr<Model> buildFashionWide();
std::unique_ptr<Model> buildCifar10Resnet();

} // namespace towers::engine
