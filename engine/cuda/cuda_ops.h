#pragma once
// The CUDA execution context of one GPU: its stream, cuDNN and cuBLAS handles, the convolution
// workspace and the per-shape convolution plans (descriptors and the algorithms cuDNN measured
// fastest). Internal to the plugin; the engine sees it as an Ops.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "engine/gpu/gpu_backend.h"
#include "engine/ops/ops.h"

namespace towers::engine::cuda {

struct ConvPlan;

// A float32 tensor's device pointer, for the kernels' launchers and the libraries.
inline const float* floats(const Tensor& t)
{
    return static_cast<const float*>(t.raw());
}
inline float* floats(Tensor& t)
{
    return static_cast<float*>(t.raw());
}

class CudaOps final : public Ops
{
public:
    CudaOps(int index, const GpuOpsOptions& options);
    ~CudaOps() override;
    CudaOps(const CudaOps&) = delete;
    CudaOps& operator=(const CudaOps&) = delete;

    std::string name() const override { return "cuda"; }
    Device device() const override { return {DeviceKind::Cuda, m_device}; }
    void synchronize() override;
    void upload(const Tensor& src, Tensor& dst) override;

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

private:
    // A float32 tensor on this GPU, else InvalidArgument / Unsupported naming the argument.
    void requireHere(const Tensor& t, const char* what) const;
    void requireHere(std::initializer_list<std::pair<const Tensor*, const char*>> tensors) const;
    void ensure(Tensor& t, const Shape& shape, DType dtype = DType::Float32) const;
    // The workspace, grown to at least `bytes`.
    void* workspace(std::size_t bytes);
    ConvPlan& plan(const Conv2dDesc& d);
    // x (NHWC) with the pads cuDNN cannot express applied, or x itself.
    Tensor padded(const ConvPlan& p, const Tensor& x);
    // OIHW weights in cuDNN's OHWI filter layout.
    Tensor filterOhwi(const Conv2dDesc& d, const Tensor& w);

    int m_device;
    GpuOpsOptions m_options;
    cudaStream_t m_stream = nullptr;
    cudnnHandle_t m_cudnn = nullptr;
    cublasHandle_t m_cublas = nullptr;
    Tensor m_workspace;
    Tensor m_scalar; // a few device scalars (the loss's bad-row flag, sums)
    std::map<std::string, std::unique_ptr<ConvPlan>> m_plans;
};

} // namespace towers::engine::cuda
