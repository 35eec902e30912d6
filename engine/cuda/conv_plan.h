#pragma once
// A convolution shape as cuDNN runs it: NHWC tensors, OHWI filter, symmetric pads (the rest of
// TensorFlow's asymmetric SAME padding is applied to the input first), and the algorithms cuDNN
// measured fastest for it, found once and kept.
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/ops/descriptors.h"

namespace towers::engine::cuda {

struct ConvPlan
{
    Conv2dDesc desc;
    // The input as cuDNN sees it: padded by extraTop/Left/Bottom/Right beyond the symmetric pads.
    std::int64_t paddedH = 0, paddedW = 0;
    int extraTop = 0, extraLeft = 0, extraBottom = 0, extraRight = 0;
    int padH = 0, padW = 0; // symmetric, given to cuDNN
    bool needsPadding() const { return extraTop || extraLeft || extraBottom || extraRight; }

    // NHWC tensors and an OHWI filter first; NCHW tensors and the OIHW filter as stored when cuDNN
    // has no algorithm for the NHWC form of this shape (the data is then transposed around it).
    bool nchw = false;
    void useNchw();

    // CUDNN_DATA_FLOAT, or CUDNN_DATA_BFLOAT16 in bf16 (x, w and y; the convolution computes in
    // float).
    cudnnDataType_t dataType = CUDNN_DATA_FLOAT;
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;

    bool haveForward = false, haveBackwardData = false, haveBackwardFilter = false;
    cudnnConvolutionFwdAlgo_t forward{};
    cudnnConvolutionBwdDataAlgo_t backwardData{};
    cudnnConvolutionBwdFilterAlgo_t backwardFilter{};
    std::size_t forwardWorkspace = 0, backwardDataWorkspace = 0, backwardFilterWorkspace = 0;
    // The math type each pass's algorithm was measured with: set on `conv` before the pass runs
    // (one descriptor serves the three passes). `measureMath` is what cuDNN may choose among: FMA
    // (exact float32), or tensor ops when TF32 is allowed or the data is bfloat16.
    cudnnMathType_t measureMath = CUDNN_FMA_MATH;
    cudnnMathType_t forwardMath = CUDNN_FMA_MATH, backwardDataMath = CUDNN_FMA_MATH,
                    backwardFilterMath = CUDNN_FMA_MATH;
    void setMath(cudnnMathType_t math);

    // Per pass (forward, backward data, backward filter): whether its algorithm has run, and the
    // algorithms cuDNN ranked but refused to run on a first run (passed over when the pass ranks
    // again; conv_algorithm.h), with the first refusal's status. A change of layout forgets them.
    enum Pass
    {
        Forward,
        BackwardData,
        BackwardFilter,
    };
    struct PassRuns
    {
        bool ran = false;
        std::vector<int> refused;
        cudnnStatus_t firstRefusal = CUDNN_STATUS_SUCCESS;
    };
    PassRuns runs[3];

    ConvPlan(const Conv2dDesc& d, bool allowTf32, bool bf16);
    ~ConvPlan();
    ConvPlan(const ConvPlan&) = delete;
    ConvPlan& operator=(const ConvPlan&) = delete;

private:
    void release() noexcept;
};

} // namespace towers::engine::cuda
