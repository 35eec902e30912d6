// The seeds' multi-GPU MNIST network (conv_net in the TensorFlow example). As in the seed, the
// convolutions use VALID padding and ReLU, while the two dense layers have no activation
// (tf.layers.dense's default); the seed's "dropout = 0.75" was meant as a keep probability, so
// the drop rate is 0.25. Initialisers are tf.layers' defaults: Glorot-uniform kernels, zero biases.
#include "engine/models/registry.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/pool2d.h"

namespace towers::engine {

std::unique_ptr<Model> buildMnistConvnet(int classes)
{
    auto conv = [](const char* name, std::int64_t in, std::int64_t out, int k) {
        Conv2dOptions o;
        o.inChannels = in;
        o.outChannels = out;
        o.kernelH = o.kernelW = k;
        o.padding = Padding::Valid;
        o.activation = Activation::Relu;
        o.weightInit = Init::glorotUniform();
        o.biasInit = Init::constant(0.0);
        return std::make_unique<Conv2d>(name, o);
    };
    auto dense = [](const char* name, std::int64_t in, std::int64_t out) {
        LinearOptions o;
        o.inFeatures = in;
        o.outFeatures = out;
        o.weightInit = Init::glorotUniform();
        o.biasInit = Init::constant(0.0);
        return std::make_unique<Linear>(name, o);
    };
    auto net = std::make_unique<Sequential>();
    net->add(conv("conv1", 1, 64, 5));                                    // 24x24x64
    net->add(std::make_unique<MaxPool2d>("pool1", 2, 2, Padding::Valid)); // 12x12
    net->add(conv("conv2", 64, 256, 3));                                  // 10x10x256
    net->add(conv("conv3", 256, 512, 3));                                 // 8x8x512
    net->add(std::make_unique<MaxPool2d>("pool2", 2, 2, Padding::Valid)); // 4x4
    net->add(std::make_unique<Flatten>("flatten"));                       // 8192
    net->add(dense("fc1", 4 * 4 * 512, 2048));
    net->add(std::make_unique<Dropout>("drop1", 0.25));
    net->add(dense("fc2", 2048, 1024));
    net->add(std::make_unique<Dropout>("drop2", 0.25));
    net->add(dense("fc3", 1024, classes));
    return std::make_unique<Model>("mnist-convnet", Shape{28, 28, 1}, classes, std::move(net));
}

} // namespace towers::engine
