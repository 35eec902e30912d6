#include "engine/models/registry.h"

namespace towers::engine {

const std::vector<ModelInfo>& modelRegistry()
{
    static const std::vector<ModelInfo> models = {
        {"cifar10-tutorial",
         "TensorFlow's CIFAR-10 tutorial network (the seeds): 2 conv + LRN + max-pool, fc 384, fc "
         "192, "
         "on 24x24 crops",
         {24, 24, 3},
         10,
         "cifar10",
         buildCifar10Tutorial},
        {"mnist-convnet",
         "the seeds' multi-GPU MNIST network: conv 64@5, conv 256@3, conv 512@3, dense 2048, dense "
         "1024, "
         "dropout 0.25",
         {28, 28, 1},
         10,
         "mnist",
         buildMnistConvnet},
        {"fashion-fast",
         "small fast network for 28x28 grayscale (default for Fashion-MNIST): 2 conv + batch norm, "
         "fc 128",
         {28, 28, 1},
         10,
         "fashion-mnist",
         buildFashionFast},
        {"fashion-wide",
         "wider network for 28x28 grayscale (the longer Fashion-MNIST recipe): 4 conv + batch "
         "norm, fc 256",
         {28, 28, 1},
         10,
         "fashion-mnist",
         buildFashionWide},
        {"cifar10-resnet",
         "small residual network with batch norm for 32x32 colour (half-width ResNet-9, the fast "
         "CIFAR-10 "
         "choice)",
         {32, 32, 3},
         10,
         "cifar10",
         buildCifar10Resnet},
    };
    return models;
}

const ModelInfo& findModel(const std::string& name)
{
    std::string known;
    for (const auto& m : modelRegistry()) {
        if (m.name == name) return m;
        known += (known.empty() ? "" : ", ") + m.name;
    }
    throw UnknownName("unknown model '" + name + "' (known models: " + known + ")");
}

std::unique_ptr<Model> createModel(const std::string& name, std::uint64_t seed)
{
    auto model = findModel(name).build();
    model->initialize(seed);
    return model;
}

} // namespace towers::engine
