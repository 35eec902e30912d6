#include "engine/models/blocks.h"

#include "engine/nn/batch_norm.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/relu.h"

namespace towers::engine {

void addConv3x3BnRelu(Sequential& seq, const std::string& conv, const std::string& bn, const std::string& relu,
                      std::int64_t in, std::int64_t out)
{
    Conv2dOptions o;
    o.inChannels = in;
    o.outChannels = out;
    o.kernel = 3;
    o.padding = Padding::Same;
    o.bias = false;
    seq.add(std::make_unique<Conv2d>(conv, o));
    seq.add(std::make_unique<BatchNorm>(bn, out));
    seq.add(std::make_unique<Relu>(relu));
}

} // namespace towers::engine
