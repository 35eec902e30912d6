// oneDNN 2-D convolution: argument checks, then the geometry's ConvPlan (conv_plan.h), built once
// per geometry, bias and activation and cached, runs the call. The single-direction calls and the
// training pair share the plans, so inference and training take the same algorithm.
#include "engine/cpu/conv_plan.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/winograd_5x5.h"

namespace towers::engine::cpu {

namespace {

ConvPlan& planFor(OneDnnOps& ops, const Conv2dDesc& d, bool bias, Activation act,
                  const char* direction)
{
    const std::string key = "conv " + d.win.str() + " out " + std::to_string(d.outChannels) +
                            (bias ? " bias" : "") + (act == Activation::Relu ? " relu" : "");
    ConvPlan* plan = nullptr;
    guarded("building a convolution", [&] {
        plan = &ops.cached<ConvPlan>(
            key, [&] { return std::make_shared<ConvPlan>(ops.dnnlEngine(), d, bias, act); });
    });
    // Towers' own Winograd runs no oneDNN primitive: it is recorded here for the per-layer profile.
    if (plan->algorithm() == ConvAlgorithm::Winograd5x5)
        ops.noteImplementation(key, std::string("convolution winograd 5x5 ") + direction,
                               "towers:winograd5x5:" + Winograd5x5::targetName());
    return *plan;
}

void checkForward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b)
{
    requireF32(x, "conv2d x");
    requireF32(w, "conv2d w");
    requireShape(x, d.inputShape(), "conv2d x");
    requireShape(w, d.weightShape(), "conv2d w");
    if (!b.empty()) {
        requireF32(b, "conv2d b");
        requireShape(b, Shape{d.outChannels}, "conv2d b");
    }
}

void checkGradient(const Conv2dDesc& d, const Tensor& dy)
{
    requireF32(dy, "conv2d dy");
    requireShape(dy, d.outputShape(), "conv2d dy");
}

} // namespace

void OneDnnOps::conv2dForward(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                              const Tensor& b, Tensor& y, Activation act)
{
    checkForward(d, x, w, b);
    Tensor::ensure(y, d.outputShape(), DType::Float32);
    ConvPlan& plan = planFor(*this, d, !b.empty(), act, "forward");
    guarded("running a convolution", [&] { plan.forward(m_stream, x, w, b, y, nullptr); });
}

void OneDnnOps::conv2dForwardTraining(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                      const Tensor& b, Tensor& y, Activation act, Tensor& saved)
{
    checkForward(d, x, w, b);
    Tensor::ensure(y, d.outputShape(), DType::Float32);
    ConvPlan& plan = planFor(*this, d, !b.empty(), act, "forward_training");
    guarded("running a convolution", [&] { plan.forward(m_stream, x, w, b, y, &saved); });
}

void OneDnnOps::conv2dBackwardData(const Conv2dDesc& d, const Tensor& dy, const Tensor& w,
                                   Tensor& dx)
{
    checkGradient(d, dy);
    requireF32(w, "conv2d w");
    requireShape(w, d.weightShape(), "conv2d w");
    Tensor::ensure(dx, d.inputShape(), DType::Float32);
    ConvPlan& plan = planFor(*this, d, false, Activation::None, "backward_data");
    ConvPlan::Gradients g;
    g.w = &w;
    g.dx = &dx;
    guarded("running a convolution backward-data", [&] { plan.backward(m_stream, dy, g); });
}

void OneDnnOps::conv2dBackwardWeights(const Conv2dDesc& d, const Tensor& x, const Tensor& dy,
                                      Tensor& dw, Tensor* db)
{
    requireF32(x, "conv2d x");
    requireShape(x, d.inputShape(), "conv2d x");
    checkGradient(d, dy);
    Tensor::ensure(dw, d.weightShape(), DType::Float32);
    if (db) Tensor::ensure(*db, Shape{d.outChannels}, DType::Float32);
    ConvPlan& plan = planFor(*this, d, db != nullptr, Activation::None, "backward_weights");
    ConvPlan::Gradients g;
    g.x = &x;
    g.dw = &dw;
    g.db = db;
    guarded("running a convolution backward-weights", [&] { plan.backward(m_stream, dy, g); });
}

void OneDnnOps::conv2dBackward(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                               const Tensor& y, const Tensor& dy, Activation act,
                               const Tensor& saved, Tensor* dx, Tensor& dw, Tensor* db)
{
    checkForward(d, x, w, Tensor());
    checkGradient(d, dy);
    if (act == Activation::Relu) {
        requireF32(y, "conv2d y");
        requireShape(y, d.outputShape(), "conv2d y");
    }
    if (!saved.empty()) requireDType(saved, DType::UInt8, "conv2d saved state");
    Tensor::ensure(dw, d.weightShape(), DType::Float32);
    if (db) Tensor::ensure(*db, Shape{d.outChannels}, DType::Float32);
    if (dx) Tensor::ensure(*dx, d.inputShape(), DType::Float32);
    ConvPlan& plan = planFor(*this, d, db != nullptr, act, "backward");
    ConvPlan::Gradients g;
    g.x = &x;
    g.w = &w;
    g.y = &y;
    g.saved = &saved;
    g.dx = dx;
    g.dw = &dw;
    g.db = db;
    guarded("running a convolution backward", [&] { plan.backward(m_stream, dy, g); });
}

std::string convolutionAlgorithm(Ops& ops, const Conv2dDesc& d)
{
    auto* dnn = dynamic_cast<OneDnnOps*>(&ops);
    if (!dnn)
        throw InvalidArgument("convolutionAlgorithm: '" + ops.name() +
                              "' is not the oneDNN backend");
    std::string name;
    guarded("choosing a convolution algorithm",
            [&] { name = convAlgorithmName(chooseConvAlgorithm(dnn->dnnlEngine(), d)); });
    return name;
}

} // namespace towers::engine::cpu
