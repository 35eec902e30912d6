// A wider network for 28x28 grayscale images, for the longer Fashion-MNIST recipe (about 94%):
// two VGG-style stages of two 3x3 convolutions with batch norm (32 then 64 filters), each followed
// by 2x2 max pooling, then fc 256 with dropout 0.4 and the classifier. PyTorch's default
// initialisation. About 4.7 times fashion-fast's arithmetic per example.
#include "engine/models/blocks.h"
#include "engine/models/registry.h"
#include "engine/nn/pool2d.h"

namespace towers::engine {

std::unique_ptr<Model> buildFashionWide(int classes)
{
    auto net = std::make_unique<Sequential>();
    auto conv = [&](int i, std::int64_t in, std::int64_t out) {
        const std::string n = std::to_string(i);
        addConv3x3BnRelu(*net, "conv" + n, "bn" + n, in, out);
    };
    conv(1, 1, 32);
    conv(2, 32, 32);
    net->add(std::make_unique<MaxPool2d>("pool1", 2, 2, Padding::Valid)); // 14x14x32
    conv(3, 32, 64);
    conv(4, 64, 64);
    net->add(std::make_unique<MaxPool2d>("pool2", 2, 2, Padding::Valid)); // 7x7x64
    addDropoutClassifier(*net, 7 * 7 * 64, 256, 0.4, classes);
    return std::make_unique<Model>("fashion-wide", Shape{28, 28, 1}, classes, std::move(net));
}

} // namespace towers::engine
