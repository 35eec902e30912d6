// The CIFAR-10 network of TensorFlow's tutorial (cifar10.inference in the seeds), layer for layer:
// conv1 -> pool1 -> norm1 -> conv2 -> norm2 -> pool2 -> local3 -> local4 -> softmax_linear.
#include "engine/models/registry.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/lrn.h"
#include "engine/nn/pool2d.h"

namespace towers::engine {

std::unique_ptr<Model> buildCifar10Tutorial(int classes)
{
    // tf.nn.lrn(x, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75)
    constexpr int lrnRadius = 4;
    constexpr double lrnBias = 1.0, lrnAlpha = 0.001 / 9.0, lrnBeta = 0.75;
    auto conv = [](const char* name, std::int64_t in, double bias) {
        Conv2dOptions o;
        o.inChannels = in;
        o.outChannels = 64;
        o.kernelH = o.kernelW = 5;
        o.padding = Padding::Same;
        o.activation = Activation::Relu;
        o.weightInit = Init::truncatedNormal(5e-2);
        o.biasInit = Init::constant(bias);
        return std::make_unique<Conv2d>(name, o);
    };
    auto fc = [](const char* name, std::int64_t in, std::int64_t out, double stddev, double bias,
                 double wd, Activation act) {
        LinearOptions o;
        o.inFeatures = in;
        o.outFeatures = out;
        o.activation = act;
        o.weightInit = Init::truncatedNormal(stddev);
        o.biasInit = Init::constant(bias);
        o.weightDecay = wd;
        return std::make_unique<Linear>(name, o);
    };
    auto net = std::make_unique<Sequential>();
    net->add(conv("conv1", 3, 0.0));
    net->add(std::make_unique<MaxPool2d>("pool1", 3, 2, Padding::Same));
    net->add(std::make_unique<Lrn>("norm1", lrnRadius, lrnBias, lrnAlpha, lrnBeta));
    net->add(conv("conv2", 64, 0.1));
    net->add(std::make_unique<Lrn>("norm2", lrnRadius, lrnBias, lrnAlpha, lrnBeta));
    net->add(std::make_unique<MaxPool2d>("pool2", 3, 2, Padding::Same));
    net->add(std::make_unique<Flatten>("flatten"));
    net->add(fc("local3", 6 * 6 * 64, 384, 0.04, 0.1, 0.004, Activation::Relu));
    net->add(fc("local4", 384, 192, 0.04, 0.1, 0.004, Activation::Relu));
    net->add(fc("softmax_linear", 192, classes, 1.0 / 192.0, 0.0, 0.0, Activation::None));
    return std::make_unique<Model>("cifar10-tutorial", Shape{24, 24, 3}, classes, std::move(net));
}

} // namespace towers::engine
