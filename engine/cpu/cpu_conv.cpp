// oneDNN 2-D convolution: argument checks, then the geometry's ConvPlan (conv_plan.h), built once
// per geometry, bias and activation and cached, runs the call. The single-direction calls and the
// training pair share the plans, so inference and training take the same algorithm; but in bf16,
// where evaluation's forward may choose differently (ConvUse), it has a plan of its own.
#include "engine/cpu/conv_plan.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/winograd_5x5.h"

namespace towers::engine::cpu {

namespace {

ConvPlan& planFor(OneDnnOps& ops, const Conv2dDesc& d, bool bias, Activation act,
                  const char* direction, ConvUse use = ConvUse::Training)
{
    const bool bf16 = ops.precision() == Precision::BFloat16;
    const std::string key = "conv " + d.win.str() + " out " + std::to_string(d.outChannels) +
                            (bias ? " bias" : "") + (act == Activation::Relu ? " relu" : "") +
                            (bf16 ? " bf16" : "") +
                            (bf16 && use == ConvUse::Evaluation ? " evaluation" : "");
    ConvPlan* plan = nullptr;
    guarded("building a convolution", [&] {
        plan = &ops.cached<ConvPlan>(key, [&] {
            return std::make_shared<ConvPlan>(ops.dnnlEngine(), d, bias, act, ops.precision(), use);
        });
    });
    // Towers' own Winograd runs no oneDNN primitive: it is recorded here for the per-layer profile.
    if (const WinogradConv* wino = plan->towersWinograd())
        ops.noteImplementation(key, "convolution " + wino->algorithm() + " " + direction,
                               wino->implementation());
    return *plan;
}

} // namespace

void OneDnnOps::conv2dForwardImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                  const Tensor& b, Tensor& y, Activation act)
{
    ConvPlan& plan = planFor(*this, d, !b.empty(), act, "forward", ConvUse::Evaluation);
    // Evaluation's bfloat16 y where the plan computes in bfloat16; a convolution that stays
    // float32 in bf16 (a single input channel, a shape oneDNN runs only by a reference loop in
    // bfloat16) writes float32 as in training, which costs no conversion (op_list.h lets it).
    const bool bf16 =
        d.outputDType == DType::BFloat16 && plan.algorithm() == ConvAlgorithm::DirectBf16;
    Tensor::ensure(y, d.outputShape(), bf16 ? DType::BFloat16 : DType::Float32);
    guarded("running a convolution", [&] { plan.forward(m_stream, x, w, b, y, nullptr); });
}

void OneDnnOps::conv2dForwardTrainingImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                          const Tensor& b, Tensor& y, Activation act, Tensor& saved)
{
    Tensor::ensure(y, d.outputShape(), DType::Float32);
    ConvPlan& plan = planFor(*this, d, !b.empty(), act, "forward_training");
    guarded("running a convolution", [&] { plan.forward(m_stream, x, w, b, y, &saved); });
}

void OneDnnOps::conv2dBackwardDataImpl(const Conv2dDesc& d, const Tensor& dy, const Tensor& w,
                                       Tensor& dx)
{
    Tensor::ensure(dx, d.inputShape(), DType::Float32);
    ConvPlan& plan = planFor(*this, d, false, Activation::None, "backward_data");
    ConvPlan::Gradients g;
    g.w = &w;
    g.dx = &dx;
    guarded("running a convolution backward-data", [&] { plan.backward(m_stream, dy, g); });
}

void OneDnnOps::conv2dBackwardWeightsImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& dy,
                                          Tensor& dw, Tensor* db)
{
    Tensor::ensure(dw, d.weightShape(), DType::Float32);
    if (db) Tensor::ensure(*db, Shape{d.outChannels}, DType::Float32);
    ConvPlan& plan = planFor(*this, d, db != nullptr, Activation::None, "backward_weights");
    ConvPlan::Gradients g;
    g.x = &x;
    g.dw = &dw;
    g.db = db;
    guarded("running a convolution backward-weights", [&] { plan.backward(m_stream, dy, g); });
}

void OneDnnOps::conv2dBackwardImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                   const Tensor& y, const Tensor& dy, Activation act,
                                   const Tensor& saved, Tensor* dx, Tensor& dw, Tensor* db)
{
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

std::string convolutionAlgorithm(Ops& ops, const Conv2dDesc& d, ConvUse use)
{
    auto* dnn = dynamic_cast<OneDnnOps*>(&ops);
    if (!dnn)
        throw InvalidArgument("convolutionAlgorithm: '" + ops.name() +
                              "' is not the oneDNN backend");
    std::string name;
    guarded("choosing a convolution algorithm", [&] {
        name = convAlgorithmName(chooseConvAlgorithm(dnn->dnnlEngine(), d, dnn->precision(), use));
    });
    return name;
}

} // namespace towers::engine::cpu
