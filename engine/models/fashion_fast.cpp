// A small, fast network for 28x28 grayscale images (the default for Fashion-MNIST): two 3x3
// convolutions with batch norm and max pooling, then fc 128 and the classifier. PyTorch's default
// initialisation.
#include "engine/models/blocks.h"
#include "engine/models/registry.h"
#include "engine/nn/pool2d.h"

namespace towers::engine {

std::unique_ptr<Model> buildFashionFast(int classes)
{
    auto net = std::make_unique<Sequential>();
    auto convBlock = [&](int i, std::int64_t in, std::int64_t out) {
        const std::string n = std::to_string(i);
        addConv3x3BnRelu(*net, "conv" + n, "bn" + n, in, out);
        net->add(std::make_unique<MaxPool2d>("pool" + n, 2, 2, Padding::Valid));
    };
    convBlock(1, 1, 32);  // 14x14x32
    convBlock(2, 32, 64); // 7x7x64
    addDropoutClassifier(*net, 7 * 7 * 64, 128, 0.25, classes);
    return std::make_unique<Model>("fashion-fast", Shape{28, 28, 1}, classes, std::move(net));
}

} // namespace towers::engine
