#pragma once
// Model files (engine/models/model_file.h) the tests share.
#include <string>

namespace towers::test {

// fashion-fast written as a model file: the built-in network layer for layer, its names left to
// the defaults (conv1, bn1, pool1, ..., fc2).
std::string fashionFastDefinition(const std::string& name = "fast-file");

// A small network (12x12x3 in by default) with every layer type and option a model file offers: a
// strided convolution with explicit padding and its bias, LRN, batch norm without ReLU (after the
// LRN, so that the bias's gradient is no rounding noise around 0), max pooling with SAME padding, a
// residual block (conv-BN-ReLU, a named conv), a global max pool, dropout, a hidden linear layer
// with ReLU and Glorot weights, and the classifier. `input`: the JSON of [height, width, channels].
std::string everyLayerDefinition(const std::string& name = "every-layer",
                                 const std::string& input = "[12, 12, 3]");

} // namespace towers::test
