#include "engine/backends.h"

#include <algorithm>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/cpu/onednn_ops.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"

namespace towers::engine {

namespace {

GpuBackend& usableGpuBackend()
{
    std::string why;
    GpuBackend* gpu = cudaBackend(&why);
    if (!gpu) throw Unsupported("the cuda backend: " + why);
    if (gpu->deviceCount() == 0) throw Unsupported("the cuda backend: " + gpu->unavailableReason());
    return *gpu;
}

} // namespace

const std::vector<std::string>& backendNames()
{
    static const std::vector<std::string> names{"onednn", "reference", "cuda"};
    return names;
}

std::string backendNamesText(const std::string& lastJoin)
{
    const auto& names = backendNames();
    std::string text;
    for (std::size_t i = 0; i < names.size(); ++i)
        text += (i == 0 ? "" : i + 1 == names.size() ? lastJoin : ", ") + names[i];
    return text;
}

bool isBackendName(const std::string& name)
{
    const auto& names = backendNames();
    return std::find(names.begin(), names.end(), name) != names.end();
}

void requireBackendName(const std::string& name)
{
    if (!isBackendName(name))
        throw UnknownName("unknown backend '" + name + "' (known: " + backendNamesText() + ")");
}

bool isHostBackend(const std::string& name)
{
    requireBackendName(name);
    return name != "cuda";
}

std::unique_ptr<Ops> makeBackendOps(const std::string& name, const BackendOptions& options)
{
    requireBackendName(name);
    if (name == "onednn") return cpu::makeOneDnnOps(options.precision);
    if (name == "reference") {
        if (options.precision != Precision::Float32)
            throw Unsupported("--precision " + std::string(precisionName(options.precision)) +
                              " runs on the onednn and cuda backends: the reference backend is "
                              "the float32 and float64 oracle");
        return makeReferenceOps();
    }
    GpuOpsOptions gpu;
    gpu.allowTf32 = options.allowTf32;
    gpu.precision = options.precision;
    gpu.measureAlgorithms = options.measureAlgorithms;
    auto ops = usableGpuBackend().makeOps(options.gpu, gpu);
    ops->setHostFallback([] { return cpu::makeOneDnnOps(); });
    return ops;
}

std::string describeBackend(const std::string& name, const BackendOptions& options)
{
    requireBackendName(name);
    if (name == "onednn") {
        const auto* v = dnnl::version();
        return "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
               std::to_string(v->patch) +
               (options.precision == Precision::BFloat16 ? "; bf16" : "");
    }
    if (name == "reference") return name;
    GpuBackend& gpu = usableGpuBackend();
    return "cuda (" + gpu.deviceInfo(options.gpu).name + "; " + gpu.versions() +
           (options.allowTf32 ? "; TF32" : "") +
           (options.measureAlgorithms ? "; cuDNN benchmark" : "") +
           (options.precision == Precision::BFloat16 ? "; bf16" : "") + ")";
}

} // namespace towers::engine
