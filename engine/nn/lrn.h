#pragma once
#include "engine/nn/layer.h"

namespace towers::engine {

// Local response normalisation across channels, TensorFlow's tf.nn.lrn semantics.
class Lrn final : public Layer
{
public:
    Lrn(std::string name, int depthRadius, double bias, double alpha, double beta);

    std::string kind() const override { return "lrn"; }
    std::string describe() const override;
    Shape outputShape(const Shape& input) const override;
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    bool takesBf16() const override { return true; }
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;

    int depthRadius() const { return m_radius; }
    double bias() const { return m_bias; }
    double alpha() const { return m_alpha; }
    double beta() const { return m_beta; }

private:
    int m_radius;
    double m_bias, m_alpha, m_beta;
    Tensor m_workspace;
};

} // namespace towers::engine
