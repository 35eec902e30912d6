#pragma once
// Building blocks the model builders share.
#include <string>

#include "engine/nn/sequential.h"

namespace towers::engine {

// A 3x3 SAME convolution without bias (`conv`) and batch norm with its ReLU fused (`bn`), appended
// to `seq` under those layer names: the conv-BN-ReLU unit of the batch-norm models.
void addConv3x3BnRelu(Sequential& seq, const std::string& conv, const std::string& bn,
                      std::int64_t in, std::int64_t out);

// The classifier head of the 28x28 models: flatten ("flatten"), fc `inFeatures` -> `hidden` with
// ReLU ("fc1"), dropout at `dropRate` ("drop1"), fc `hidden` -> `classes` ("fc2").
void addDropoutClassifier(Sequential& seq, std::int64_t inFeatures, std::int64_t hidden,
                          double dropRate, std::int64_t classes);

} // namespace towers::engine
