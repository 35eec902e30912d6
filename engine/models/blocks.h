#pragma once
// Building blocks the model builders share.
#include <string>

#include "engine/nn/sequential.h"

namespace towers::engine {

// A 3x3 SAME convolution without bias (`conv`), batch norm (`bn`) and ReLU (`relu`), appended to
// `seq` under those layer names: the conv-BN-ReLU unit of the batch-norm models.
void addConv3x3BnRelu(Sequential& seq, const std::string& conv, const std::string& bn, const std::string& relu,
                      std::int64_t in, std::int64_t out);

} // namespace towers::engine
