// The op-case table's batch norms: the forward (training and inference) and the backward, the
// batch norm + activation ops (with and without saved state), and a batch norm folded into the
// weights before it. The other dense ops are in op_cases_dense.cpp.
#include "engine/selftest/op_cases_build.h"

namespace towers::engine::op_cases {

namespace {

// ---- batch norm ----

struct BatchNormCase
{
    BatchNormCase(std::string what_, Shape shape_, double epsilon_ = 1e-5, double momentum_ = 0.1)
        : what(std::move(what_)), shape(std::move(shape_)), epsilon(epsilon_), momentum(momentum_)
    {
    }
    std::string what;
    Shape shape;
    double epsilon = 1e-5, momentum = 0.1;

    BatchNormDesc desc() const { return makeBatchNormDesc(shape, epsilon, momentum); }
    std::string text() const
    {
        return shapeText(shape) + " eps " + number(epsilon) + " momentum " + number(momentum) +
               (what.empty() ? "" : " (" + what + ")");
    }
};

std::vector<BatchNormCase> batchNormCases()
{
    std::vector<BatchNormCase> all = {
        // Two rows: dx is of the order of epsilon / variance, a cancellation float32 resolves only
        // when epsilon is not too small.
        {"[N,C], two rows", {2, 3}, 0.1, 0.1},
        {"[N,C], odd sizes", {37, 19}, 1e-3, 0.2},
        {"odd sizes", {3, 5, 7, 3}},
        {"", {8, 16, 16, 64}, 1e-3, 0.2},
        {"", {4, 6, 6, 128}},
    };
    for (const auto& b : modelLayers().batchNorms) all.emplace_back(b.layer, b.x);
    return all;
}

// x, gamma, beta, running mean, running variance, dy.
std::vector<Tensor> batchNormInputs(const BatchNormDesc& d, Rng& rng)
{
    const std::int64_t c = d.channels();
    return {uniform(d.shape, rng, -2, 3), uniform({c}, rng, 0.5, 1.5), uniform({c}, rng, -0.5, 0.5),
            uniform({c}, rng, -0.5, 0.5), uniform({c}, rng, 0.5, 2),   uniform(d.shape, rng)};
}

void addBatchNorm(std::vector<OpCase>& cases)
{
    const Tolerance tol = Tolerance::reductions();
    const auto all = batchNormCases();
    for (const auto& b : all) {
        const BatchNormDesc d = b.desc();
        cases.push_back({"batch norm training forward", b.text(), tol,
                         [d](Rng& rng) { return batchNormInputs(d, rng); },
                         [d](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y, mean, var;
                             Tensor runMean = in[3].clone(), runVar = in[4].clone();
                             ops.batchNormForwardTraining(d, in[0], in[1], in[2], y, runMean,
                                                          runVar, mean, var);
                             return std::vector<OpOutput>{{"y", y},
                                                          {"saved mean", mean},
                                                          {"saved variance", var},
                                                          {"running mean", runMean},
                                                          {"running variance", runVar}};
                         }});
    }
    for (const auto& b : all) {
        const BatchNormDesc d = b.desc();
        cases.push_back({"batch norm inference forward", b.text(), tol,
                         [d](Rng& rng) { return batchNormInputs(d, rng); },
                         [d](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y;
                             ops.batchNormForwardInference(d, in[0], in[1], in[2], in[3], in[4], y);
                             return std::vector<OpOutput>{{"y", y}};
                         }});
    }
    // As a batch-norm layer runs in evaluation mode: with its activation, fused or composed.
    for (const auto& b : all)
        for (const bool relu : {true, false}) {
            const BatchNormDesc d = b.desc();
            const Activation act = relu ? Activation::Relu : Activation::None;
            cases.push_back(
                {"batch norm inference forward + activation", b.text() + (relu ? ", relu" : ""),
                 tol, [d](Rng& rng) { return batchNormInputs(d, rng); },
                 [d, act](Ops& ops, const std::vector<Tensor>& in) {
                     Tensor y;
                     ops.batchNormActForwardInference(d, in[0], in[1], in[2], in[3], in[4], act, y);
                     return std::vector<OpOutput>{{"y", y}};
                 }});
        }
    // Backward from the saved statistics the contract defines (the batch mean and biased
    // variance), computed here in float64.
    for (const auto& b : all) {
        const BatchNormDesc d = b.desc();
        cases.push_back(
            {"batch norm backward", b.text(), tol,
             [d](Rng& rng) {
                 auto in = batchNormInputs(d, rng);
                 Tensor y, mean, var;
                 Tensor runMean = in[3].clone(), runVar = in[4].clone();
                 referenceOps().batchNormForwardTraining(d, in[0], in[1], in[2], y, runMean, runVar,
                                                         mean, var);
                 in.push_back(roundedToFloat32(mean));
                 in.push_back(roundedToFloat32(var));
                 return in;
             },
             [d](Ops& ops, const std::vector<Tensor>& in) {
                 Tensor dx, dgamma, dbeta;
                 ops.batchNormBackward(d, in[0], in[5], in[1], in[6], in[7], dx, dgamma, dbeta);
                 return std::vector<OpOutput>{{"dx", dx}, {"dgamma", dgamma}, {"dbeta", dbeta}};
             }});
    }
}

// The path the batch-norm layers take in training: batchNormActForwardTraining, then
// batchNormActBackward with the state it saved, with and without ReLU (dy zero near the kinks);
// and batchNormActBackward without saved state, y an input, as after an evaluation forward.
void addBatchNormActivation(std::vector<OpCase>& cases)
{
    const Tolerance tol = Tolerance::reductions();
    // The pre-activation in float64, for the kinks.
    const auto preActivation = [](const BatchNormDesc& d, const std::vector<Tensor>& in) {
        Tensor y, mean, var;
        Tensor runMean = in[3].clone(), runVar = in[4].clone();
        referenceOps().batchNormForwardTraining(d, in[0], in[1], in[2], y, runMean, runVar, mean,
                                                var);
        return y;
    };
    for (const auto& b : batchNormCases())
        for (const bool relu : {true, false}) {
            const BatchNormDesc d = b.desc();
            const Activation act = relu ? Activation::Relu : Activation::None;
            cases.push_back({"batch norm training forward + backward",
                             b.text() + (relu ? ", relu" : ""), tol,
                             [d, relu, preActivation](Rng& rng) {
                                 auto in = batchNormInputs(d, rng);
                                 if (relu) zeroNearKinks(in[5], preActivation(d, in));
                                 return in;
                             },
                             [d, act](Ops& ops, const std::vector<Tensor>& in) {
                                 Tensor y, mean, var, saved, dx, dgamma, dbeta;
                                 Tensor runMean = in[3].clone(), runVar = in[4].clone();
                                 ops.batchNormActForwardTraining(d, in[0], in[1], in[2], act, y,
                                                                 runMean, runVar, mean, var, saved);
                                 ops.batchNormActBackward(d, in[0], y, in[5], act, in[1], mean, var,
                                                          saved, dx, dgamma, dbeta);
                                 return std::vector<OpOutput>{{"y", y},
                                                              {"saved mean", mean},
                                                              {"saved variance", var},
                                                              {"running mean", runMean},
                                                              {"running variance", runVar},
                                                              {"dx", dx},
                                                              {"dgamma", dgamma},
                                                              {"dbeta", dbeta}};
                             }});
        }
    for (const auto& b : batchNormCases()) {
        const BatchNormDesc d = b.desc();
        cases.push_back(
            {"batch norm backward without saved state", b.text() + ", relu", tol,
             [d](Rng& rng) {
                 auto in = batchNormInputs(d, rng);
                 Tensor z, mean, var, relu;
                 Tensor runMean = in[3].clone(), runVar = in[4].clone();
                 referenceOps().batchNormForwardTraining(d, in[0], in[1], in[2], z, runMean, runVar,
                                                         mean, var);
                 zeroNearKinks(in[5], z);
                 referenceOps().reluForward(z, relu);
                 in.push_back(roundedToFloat32(mean));
                 in.push_back(roundedToFloat32(var));
                 in.push_back(roundedToFloat32(relu));
                 return in;
             },
             [d](Ops& ops, const std::vector<Tensor>& in) {
                 Tensor dx, dgamma, dbeta;
                 ops.batchNormActBackward(d, in[0], in[8], in[5], Activation::Relu, in[1], in[6],
                                          in[7], Tensor(), dx, dgamma, dbeta);
                 return std::vector<OpOutput>{{"dx", dx}, {"dgamma", dgamma}, {"dbeta", dbeta}};
             }});
    }
}

} // namespace

// A batch norm folded into the weights before it, as evaluation runs a convolution followed by a
// batch norm: convolution and linear weights, with a bias and without.
void addBatchNormFolding(std::vector<OpCase>& cases)
{
    struct Fold
    {
        const char* name;
        Shape w;
        bool bias;
    };
    const std::vector<Fold> all = {
        {"3x3 conv [8,3,3,3], bias", {8, 3, 3, 3}, true},
        {"1x7 conv [16,4,1,7], no bias", {16, 4, 1, 7}, false},
        {"linear [10,20], bias", {10, 20}, true},
        {"3x3 conv [64,64,3,3], no bias (cifar10-resnet layer1.res)", {64, 64, 3, 3}, false},
    };
    for (const auto& f : all) {
        const Shape w = f.w;
        const bool bias = f.bias;
        cases.push_back({"batch norm folded into weights", f.name, Tolerance::elementwise(),
                         [w, bias](Rng& rng) {
                             const Shape c{w[0]};
                             std::vector<Tensor> in{uniform(w, rng), uniform(c, rng, 0.5, 1.5),
                                                    uniform(c, rng, -0.5, 0.5),
                                                    uniform(c, rng, -0.5, 0.5),
                                                    uniform(c, rng, 0.5, 2)};
                             if (bias) in.push_back(uniform(c, rng));
                             return in;
                         },
                         [bias](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor wOut, bOut;
                             ops.foldBatchNorm(in[0], bias ? in[5] : Tensor(), in[1], in[2], in[3],
                                               in[4], 1e-3, wOut, bOut);
                             return std::vector<OpOutput>{{"w", wOut}, {"b", bOut}};
                         }});
    }
}

void addBatchNormCases(std::vector<OpCase>& cases)
{
    addBatchNorm(cases);
    addBatchNormActivation(cases);
    addBatchNormFolding(cases);
}

} // namespace towers::engine::op_cases
