#include "engine/models/blocks.h"

#include "engine/nn/batch_norm.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"

namespace towers::engine {

void addConv3x3BnRelu(Sequential& seq, const std::string& conv, const std::string& bn,
                      std::int64_t in, std::int64_t out)
{
    Conv2dOptions o;
    o.inChannels = in;
    o.outChannels = out;
    o.kernelH = o.kernelW = 3;
    o.padding = Padding::Same;
    o.bias = false;
    seq.add(std::make_unique<Conv2d>(conv, o));
    seq.add(std::make_unique<BatchNorm>(bn, out, 1e-5, 0.1, Activation::Relu));
}

void addDropoutClassifier(Sequential& seq, std::int64_t inFeatures, std::int64_t hidden,
                          double dropRate, std::int64_t classes)
{
    seq.add(std::make_unique<Flatten>("flatten"));
    LinearOptions fc1;
    fc1.inFeatures = inFeatures;
    fc1.outFeatures = hidden;
    fc1.activation = Activation::Relu;
    seq.add(std::make_unique<Linear>("fc1", fc1));
    seq.add(std::make_unique<Dropout>("drop1", dropRate));
    LinearOptions fc2;
    fc2.inFeatures = hidden;
    fc2.outFeatures = classes;
    seq.add(std::make_unique<Linear>("fc2", fc2));
}

} // namespace towers::engine
