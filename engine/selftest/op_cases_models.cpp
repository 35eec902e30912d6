// The registered models' layers whose shapes the op-case table checks, model by model: a model
// added to the registry adds its layers here (tst_op_cases checks that every registered model has
// cases). Batches are small (1 to 8): the geometry is what matters, and the reference computes in
// double with plain loops.
#include "engine/selftest/op_cases_build.h"

namespace towers::engine::op_cases {

namespace {

ModelLayers makeModelLayers()
{
    const Padding same = Padding::Same, valid = Padding::Valid;
    ModelLayers m;
    auto conv = [&](std::string layer, Shape x, std::int64_t outC, int k, Padding p, bool bias,
                    bool relu) {
        m.convolutions.push_back({std::move(layer), std::move(x), outC, k, p, bias, relu});
    };
    auto pool = [&](std::string layer, Shape x, int k, int stride, Padding p) {
        m.pools.push_back({std::move(layer), std::move(x), k, stride, p});
    };
    auto linear = [&](std::string layer, std::int64_t n, std::int64_t in, std::int64_t out,
                      bool bias, bool relu) {
        m.linears.push_back({std::move(layer), n, in, out, bias, relu});
    };
    auto batchNorm = [&](std::string layer, Shape x) {
        m.batchNorms.push_back({std::move(layer), std::move(x)});
    };
    auto flatten = [&](std::string layer, Shape x) {
        m.flattens.push_back({std::move(layer), std::move(x)});
    };

    // cifar10-tutorial: the seeds' network.
    conv("cifar10-tutorial conv1", {4, 24, 24, 3}, 64, 5, same, true, true);
    pool("cifar10-tutorial pool1", {4, 24, 24, 64}, 3, 2, same);
    m.lrns.push_back({"cifar10-tutorial norm1", {4, 12, 12, 64}, 4, 1.0, 0.001 / 9, 0.75});
    conv("cifar10-tutorial conv2", {4, 12, 12, 64}, 64, 5, same, true, true);
    pool("cifar10-tutorial pool2", {4, 12, 12, 64}, 3, 2, same);
    flatten("cifar10-tutorial flatten", {8, 6, 6, 64});
    linear("cifar10-tutorial local3", 8, 2304, 384, true, true);
    linear("cifar10-tutorial local4", 8, 384, 192, true, true);
    linear("cifar10-tutorial softmax_linear", 8, 192, 10, true, false);

    // mnist-convnet: VALID convolutions, large channel counts, dropout between dense layers.
    conv("mnist-convnet conv1", {2, 28, 28, 1}, 64, 5, valid, true, true);
    pool("mnist-convnet pool1", {2, 24, 24, 64}, 2, 2, valid);
    conv("mnist-convnet conv2", {2, 12, 12, 64}, 256, 3, valid, true, true);
    conv("mnist-convnet conv3", {1, 10, 10, 256}, 512, 3, valid, true, true);
    pool("mnist-convnet pool2", {2, 8, 8, 512}, 2, 2, valid);
    flatten("mnist-convnet flatten", {2, 4, 4, 512});
    linear("mnist-convnet fc1", 2, 8192, 2048, true, false);
    linear("mnist-convnet fc2", 4, 2048, 1024, true, false);
    linear("mnist-convnet fc3", 4, 1024, 10, true, false);

    // fashion-fast: convolution + batch norm + ReLU blocks.
    conv("fashion-fast conv1", {4, 28, 28, 1}, 32, 3, same, false, false);
    batchNorm("fashion-fast bn1", {4, 28, 28, 32});
    pool("fashion-fast pool1", {4, 28, 28, 32}, 2, 2, valid);
    conv("fashion-fast conv2", {4, 14, 14, 32}, 64, 3, same, false, false);
    batchNorm("fashion-fast bn2", {4, 14, 14, 64});
    flatten("fashion-fast flatten", {8, 7, 7, 64});
    linear("fashion-fast fc1", 8, 3136, 128, true, true);
    linear("fashion-fast fc2", 8, 128, 10, true, false);

    // fashion-wide: the same blocks, twice as many.
    conv("fashion-wide conv2", {2, 28, 28, 32}, 32, 3, same, false, false);
    conv("fashion-wide conv4", {2, 14, 14, 64}, 64, 3, same, false, false);
    linear("fashion-wide fc1", 8, 3136, 256, true, true);

    // cifar10-resnet: residual blocks up to 256 channels, a global max-pool, no bias at the end.
    conv("cifar10-resnet prep", {2, 32, 32, 3}, 32, 3, same, false, false);
    conv("cifar10-resnet layer1", {1, 32, 32, 32}, 64, 3, same, false, false);
    conv("cifar10-resnet layer1.res", {2, 16, 16, 64}, 64, 3, same, false, false);
    conv("cifar10-resnet layer2", {1, 16, 16, 64}, 128, 3, same, false, false);
    conv("cifar10-resnet layer3", {2, 8, 8, 128}, 256, 3, same, false, false);
    conv("cifar10-resnet layer3.res", {2, 4, 4, 256}, 256, 3, same, false, false);
    batchNorm("cifar10-resnet layer3.res bn", {2, 4, 4, 256});
    pool("cifar10-resnet pool", {2, 4, 4, 256}, 4, 4, valid);
    flatten("cifar10-resnet flatten", {4, 1, 1, 256});
    linear("cifar10-resnet fc", 8, 256, 10, false, false);
    return m;
}

} // namespace

const ModelLayers& modelLayers()
{
    static const ModelLayers layers = makeModelLayers();
    return layers;
}

} // namespace towers::engine::op_cases
