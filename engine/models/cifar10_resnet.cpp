// A half-width ResNet-9 (the DAWNBench / airbench family) for 32x32 colour images:
// prep -> layer1 (+ residual) -> layer2 -> layer3 (+ residual) -> global max pool -> fc.
// Convolutions are 3x3 without bias, each followed by batch norm and ReLU.
#include "engine/models/blocks.h"
#include "engine/models/registry.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/pool2d.h"

namespace towers::engine {

namespace {

// conv -> bn with its ReLU, named "<prefix>.conv", "<prefix>.bn".
void addConvBn(Sequential& seq, const std::string& prefix, std::int64_t in, std::int64_t out)
{
    addConv3x3BnRelu(seq, prefix + ".conv", prefix + ".bn", in, out);
}

void addLayer(Sequential& net, const std::string& name, std::int64_t in, std::int64_t out,
              bool residual)
{
    addConvBn(net, name, in, out);
    net.add(std::make_unique<MaxPool2d>(name + ".pool", 2, 2, Padding::Valid));
    if (residual) {
        auto body = std::make_unique<Sequential>(name + ".res");
        addConvBn(*body, name + ".res1", out, out);
        addConvBn(*body, name + ".res2", out, out);
        net.add(std::make_unique<Residual>(name + ".res", std::move(body)));
    }
}

} // namespace

std::unique_ptr<Model> buildCifar10Resnet(int classes)
{
    auto net = std::make_unique<Sequential>();
    addConvBn(*net, "prep", 3, 32);           // 32x32x32
    addLayer(*net, "layer1", 32, 64, true);   // 16x16x64
    addLayer(*net, "layer2", 64, 128, false); // 8x8x128
    addLayer(*net, "layer3", 128, 256, true); // 4x4x256
    net->add(MaxPool2d::global("pool"));      // 1x1x256
    net->add(std::make_unique<Flatten>("flatten"));
    LinearOptions fc;
    fc.inFeatures = 256;
    fc.outFeatures = classes;
    fc.bias = false;
    net->add(std::make_unique<Linear>("fc", fc));
    return std::make_unique<Model>("cifar10-resnet", Shape{32, 32, 3}, classes, std::move(net));
}

} // namespace towers::engine
