// Local response normalisation across channels on NHWC float32: Towers' own kernels (lrn_hwy.h),
// not oneDNN's. oneDNN 2.6 has a JIT LRN only on AVX-512 and only for nhwc memory; everywhere else
// (AVX2 included) it runs lrn_ref, 100x slower (see ONEDNN-NOTES.md). Ours runs on the best
// instruction set the CPU has and beats the AVX-512 JIT kernel where there is one.
//
// The workspace is r = 1/s, one float32 per element (lrn_hwy.h): backward needs neither a
// division nor the forward's window sums.
#include "engine/cpu/cpu_common.h"
#include "engine/cpu/lrn_hwy.h"
#include "engine/cpu/simd_target.h"

namespace towers::engine::cpu {

namespace {

LrnGeometry geometry(const LrnDesc& d)
{
    LrnGeometry g;
    g.channels = d.shape[3];
    g.radius = d.depthRadius;
    g.bias = static_cast<float>(d.bias);
    g.alpha = static_cast<float>(d.alpha);
    g.beta = static_cast<float>(d.beta);
    return g;
}

std::int64_t workspaceBytes(const LrnDesc& d)
{
    return d.shape.numel() * static_cast<std::int64_t>(sizeof(float));
}

// "lrn fwd 128x12x12x64 r4": the label under which the backend reports the implementation.
std::string lrnLabel(const char* op, const LrnDesc& d)
{
    return std::string(op) + " " + dimsKey(d.shape) + " r" + std::to_string(d.depthRadius);
}

} // namespace

void OneDnnOps::lrnForwardImpl(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace)
{
    applySimdTargetLimit();
    if (x.dtype() == DType::BFloat16) { // evaluation's images: no workspace, no backward
        Tensor::ensure(y, d.shape, DType::BFloat16);
        workspace = Tensor();
        noteImplementation(lrnLabel("lrn fwd bf16", d),
                           "lrn forward_inference src:acdb dst:acdb bf16",
                           "towers:" + lrnTargetName());
        const LrnGeometry g = geometry(d);
        const auto* px = static_cast<const std::uint16_t*>(x.raw());
        auto* py = static_cast<std::uint16_t*>(y.raw());
        parallelItems(d.shape.numel() / g.channels, g.channels,
                      [&](std::int64_t begin, std::int64_t end) {
                          lrnForwardBf16Pixels(g, px, py, begin, end);
                      });
        return;
    }
    Tensor::ensure(y, d.shape, DType::Float32);
    Tensor::ensure(workspace, Shape{workspaceBytes(d)}, DType::UInt8);
    noteImplementation(lrnLabel("lrn fwd", d), "lrn forward_training src:acdb dst:acdb",
                       "towers:" + lrnTargetName());

    const LrnGeometry g = geometry(d);
    const float* px = x.data<float>();
    float* py = y.data<float>();
    float* r = static_cast<float*>(workspace.raw());
    parallelItems(
        d.shape.numel() / g.channels, g.channels,
        [&](std::int64_t begin, std::int64_t end) { lrnForwardPixels(g, px, py, r, begin, end); });
}

void OneDnnOps::lrnBackwardImpl(const LrnDesc& d, const Tensor& x, const Tensor& /*y*/,
                                const Tensor& dy, const Tensor& workspace, Tensor& dx)
{
    // y is not read (the workspace has what backward needs) but is checked all the same.
    requireDType(workspace, DType::UInt8, "lrn workspace");
    requireShape(workspace, Shape{workspaceBytes(d)},
                 "lrn workspace (from the oneDNN lrnForward of this descriptor)");
    applySimdTargetLimit();
    Tensor::ensure(dx, d.shape, DType::Float32);
    noteImplementation(lrnLabel("lrn bwd", d), "lrn backward_data src:acdb diff_dst:acdb",
                       "towers:" + lrnTargetName());

    const LrnGeometry g = geometry(d);
    const float* px = x.data<float>();
    const float* pdy = dy.data<float>();
    const float* r = static_cast<const float*>(workspace.raw());
    float* pdx = dx.data<float>();
    parallelItems(d.shape.numel() / g.channels, g.channels,
                  [&](std::int64_t begin, std::int64_t end) {
                      lrnBackwardPixels(g, px, pdy, r, pdx, begin, end);
                  });
}

} // namespace towers::engine::cpu
