#include "model_files.h"

namespace towers::test {

std::string fashionFastDefinition(const std::string& name)
{
    return R"({"name": ")" + name + R"(", "input": [28, 28, 1], "layers": [
        {"type": "conv2d", "filters": 32, "bias": false},
        {"type": "batchnorm", "relu": true},
        {"type": "maxpool", "size": 2},
        {"type": "conv2d", "filters": 64, "kernel": 3, "bias": false},
        {"type": "batchnorm", "relu": true},
        {"type": "maxpool"},
        {"type": "flatten"},
        {"type": "linear", "units": 128, "activation": "relu"},
        {"type": "dropout", "rate": 0.25},
        {"type": "linear", "units": "classes"}]})";
}

std::string everyLayerDefinition(const std::string& name, const std::string& input)
{
    return R"({"name": ")" + name + R"(", "description": "every layer type", "input": )" + input +
           R"(,
      "layers": [
        {"type": "conv2d", "filters": 6, "kernel": 3, "stride": 2, "padding": 1,
         "weight_init": {"normal": 0.2}, "bias_init": {"constant": 0.05}, "weight_decay": 0.01},
        {"type": "lrn", "radius": 2, "bias": 1, "alpha": 0.1, "beta": 0.75},
        {"type": "batchnorm", "epsilon": 0.001, "momentum": 0.2},
        {"type": "maxpool", "size": 3, "stride": 1, "padding": "same"},
        {"type": "residual", "layers": [
            {"type": "conv2d", "filters": 6, "bias": false, "name": "inner"},
            {"type": "batchnorm", "relu": true}]},
        {"type": "avgpool", "size": 3, "stride": 2, "padding": "same"},
        {"type": "conv2d", "filters": 8, "kernel": 1, "padding": "valid", "activation": "relu"},
        {"type": "concat", "branches": [
            [{"type": "conv2d", "filters": 4, "kernel": [1, 3], "activation": "relu"}],
            [{"type": "maxpool", "size": 3, "stride": 1, "padding": "same"},
             {"type": "conv2d", "filters": 3, "kernel": 3, "bias": false, "name": "tower"}],
            []]},
        {"type": "avgpool", "global": true},
        {"type": "flatten"},
        {"type": "dropout", "rate": 0.2},
        {"type": "linear", "units": 12, "activation": "relu", "weight_init": "glorot"},
        {"type": "linear", "units": "classes", "bias": false}],
      "augmentation": {"translate": 2, "flip": false},
      "recipe": {"optimizer": {"kind": "adam"}, "lr": 0.002, "schedule": {"kind": "constant"},
                 "steps": 300, "batchPerTower": 16, "labelSmoothing": 0.05}})";
}

} // namespace towers::test
