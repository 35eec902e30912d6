#pragma once
// The reference backend: naive loops, float32 and float64, sums accumulated in double. Slow and
// obviously right; every other backend is compared against it. Each op family lives in its own
// file (ref_conv.cpp, ref_pool.cpp, ...).
#include "engine/ops/ops.h"

namespace towers::engine::reference {

class ReferenceOps : public Ops
{
public:
    std::string name() const override { return "reference"; }
    Device device() const override { return Device::host(); }

    void conv2dForward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b,
                       Tensor& y, Activation act) override;
    void conv2dBackwardData(const Conv2dDesc& d, const Tensor& dy, const Tensor& w,
                            Tensor& dx) override;
    void conv2dBackwardWeights(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw,
                               Tensor* db) override;

    void maxPoolForward(const Pool2dDesc& d, const Tensor& x, Tensor& y,
                        Tensor& workspace) override;
    void maxPoolBackward(const Pool2dDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                         const Tensor& workspace, Tensor& dx) override;

    void lrnForward(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace) override;
    void lrnBackward(const LrnDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                     const Tensor& workspace, Tensor& dx) override;

    void linearForward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                       Activation act) override;
    void linearBackwardData(const Tensor& dy, const Tensor& w, Tensor& dx) override;
    void linearBackwardWeights(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db) override;

    void reluForward(const Tensor& x, Tensor& y) override;
    void reluBackward(const Tensor& y, const Tensor& dy, Tensor& dx) override;
    void add(const Tensor& a, const Tensor& b, Tensor& y) override;
    void dropoutForward(const Tensor& x, double rate, std::uint64_t seed, Tensor& y,
                        Tensor& mask) override;
    void dropoutBackward(const Tensor& dy, const Tensor& mask, double rate, Tensor& dx) override;

    void batchNormForwardTraining(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, Tensor& y, Tensor& runningMean,
                                  Tensor& runningVar, Tensor& saveMean, Tensor& saveVar) override;
    void batchNormForwardInference(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& runningMean,
                                   const Tensor& runningVar, Tensor& y) override;
    void batchNormBackward(const BatchNormDesc& d, const Tensor& x, const Tensor& dy,
                           const Tensor& gamma, const Tensor& saveMean, const Tensor& saveVar,
                           Tensor& dx, Tensor& dgamma, Tensor& dbeta) override;

    void nhwcToNchw(const Tensor& x, Tensor& y) override;
    void nchwToNhwc(const Tensor& x, Tensor& y) override;

    double softmaxCrossEntropyForward(const Tensor& logits, const Tensor& labels,
                                      Tensor& probs) override;
    void softmaxCrossEntropyBackward(const Tensor& probs, const Tensor& labels, double scale,
                                     Tensor& dlogits) override;

    double sumSquares(const Tensor& x) override;
    void axpy(double alpha, const Tensor& x, Tensor& y) override;

    void momentumUpdate(const MomentumStep& s, const Tensor& g, Tensor& buf, Tensor& w) override;
    void adamUpdate(const AdamStep& s, const Tensor& g, Tensor& m, Tensor& v, Tensor& w) override;
};

// Throws Unsupported unless t is Float32 or Float64; all float arguments of one call must share a
// dtype (InvalidArgument otherwise).
void requireFloat(const Tensor& t, const char* what);

} // namespace towers::engine::reference
