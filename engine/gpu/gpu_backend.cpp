#include "engine/gpu/gpu_backend.h"

#include "engine/gpu/nvidia_libraries.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace towers::engine {

namespace {

#ifndef TOWERS_CUDA_PLUGIN_BUILD_PATH
#define TOWERS_CUDA_PLUGIN_BUILD_PATH ""
#endif
#ifndef TOWERS_CUDA_PLUGIN_RELATIVE_PATH
#define TOWERS_CUDA_PLUGIN_RELATIVE_PATH ""
#endif

// The folder of the running executable ("/usr/bin"), or empty.
std::string executableFolder()
{
    std::vector<char> buffer(4096);
    const ssize_t n = readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
    if (n <= 0) return {};
    std::string path(buffer.data(), static_cast<std::size_t>(n));
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// $TOWERS_CUDA_PLUGIN (`chosen`) alone when set, else the build tree's and the installed plugin.
std::vector<std::string> candidates(const char* chosen)
{
    std::vector<std::string> paths;
    if (chosen && *chosen) {
        paths.emplace_back(chosen); // an explicit choice is the only place looked at
        return paths;
    }
    if (*TOWERS_CUDA_PLUGIN_BUILD_PATH) paths.emplace_back(TOWERS_CUDA_PLUGIN_BUILD_PATH);
    if (const auto folder = executableFolder();
        !folder.empty() && *TOWERS_CUDA_PLUGIN_RELATIVE_PATH)
        // "/usr/lib/towers/libtowers-cuda.so", not "/usr/bin/../lib/...": the folder of
        // /proc/self/exe has no symbolic link left, so ".." can go lexically.
        paths.push_back(
            (std::filesystem::path(folder) / TOWERS_CUDA_PLUGIN_RELATIVE_PATH).lexically_normal());
    return paths;
}

struct Loaded
{
    GpuBackend* backend = nullptr;
    std::string whyNot;
};

Loaded load()
{
    Loaded result;
    const char* chosen = std::getenv("TOWERS_CUDA_PLUGIN");
    const bool explicitChoice = chosen && *chosen;
    if (!TOWERS_HAS_CUDA && !explicitChoice) {
        result.whyNot =
            "this build of Towers has no CUDA backend (it was configured without the CUDA "
            "toolkit)";
        return result;
    }
    setCudaDeviceOrder();
    const auto paths = candidates(chosen);
    std::string tried;
    for (const auto& path : paths) {
        // A missing file is "not here" (but an explicit choice is loaded whatever, so that its
        // error is the answer); a file that fails to load (a missing libcudnn, say) is the answer,
        // since that is what the user must fix.
        if (!explicitChoice && access(path.c_str(), F_OK) != 0) {
            tried += (tried.empty() ? "" : ", ") + path;
            continue;
        }
        // NVIDIA's libraries where their packages and wheels put them, loaded first by their
        // full paths; one that is nowhere is named with how to get it.
        if (const auto missing = preloadNvidiaLibraries(path); !missing.empty()) {
            result.whyNot = "the CUDA backend " + path + " cannot load: " + missing;
            return result;
        }
        void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            const char* e = dlerror();
            result.whyNot =
                "the CUDA backend " + path + " could not be loaded: " + (e ? e : "unknown error");
            return result;
        }
        using Entry = GpuBackend* (*)(int, const char*, char*, std::size_t);
        auto entry = reinterpret_cast<Entry>(dlsym(handle, "towers_cuda_backend"));
        if (!entry) {
            result.whyNot = path + " is not a Towers CUDA backend (no towers_cuda_backend symbol)";
            return result;
        }
        char error[1024] = {};
        result.backend = entry(kGpuBackendAbi, gpuBackendBuildId(), error, sizeof error);
        if (!result.backend) {
            result.whyNot = "the CUDA backend " + path + " failed to start: " + error;
            return result;
        }
        registerDeviceMemory(DeviceKind::Cuda, &result.backend->memory());
        return result;
    }
    result.whyNot = "the CUDA backend plugin (libtowers-cuda.so) is not installed; looked in " +
                    (tried.empty() ? std::string("no place") : tried);
    return result;
}

} // namespace

void setCudaDeviceOrder()
{
    // Number the GPUs in PCI bus order, as NVML does, so that "GPU 1" is the same card in
    // `towers-cli devices`, on the Devices page and in --gpus (unless the user chose an order).
    // With the variable already set, glibc's setenv changes nothing.
    setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
}

GpuBackend* cudaBackend(std::string* whyNot)
{
    static std::once_flag once;
    static Loaded loaded;
    std::call_once(once, [] { loaded = load(); });
    if (!loaded.backend && whyNot) *whyNot = loaded.whyNot;
    return loaded.backend;
}

} // namespace towers::engine
