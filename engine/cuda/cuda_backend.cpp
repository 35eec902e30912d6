// The plugin's entry point and the GpuBackend it returns: the GPUs, their memory (stream_memory.h:
// stream-ordered allocations on the running op's stream, from CUDA's per-device pool where the GPU
// has one) and copies, and the execution contexts (CudaOps).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/cuda/communicators.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/stream_memory.h"
#include "engine/gpu/gpu_backend.h"

namespace towers::engine::cuda {

namespace {

std::string versionText(int v, int majorDiv, int minorDiv)
{
    return std::to_string(v / majorDiv) + "." + std::to_string(v % majorDiv / minorDiv);
}

// On a thread with no context current, makes `home` (>= 0) current for the scope: the CUDA
// runtime would otherwise start (and keep) GPU 0's primary context for the call.
class PinnedDeviceScope
{
public:
    explicit PinnedDeviceScope(int home) noexcept
    {
        if (home >= 0 && deviceToRestore() < 0) m_guard.emplace(home);
    }

private:
    std::optional<QuietDeviceGuard> m_guard;
};

// The engine's view of the GPUs' memory (tensors allocate, free, zero and copy through it):
// stream_memory.h does the work, on the running op's stream where there is one.
class CudaMemory final : public DeviceMemory
{
public:
    void* allocate(int index, std::size_t bytes) override { return allocateDevice(index, bytes); }
    void release(int index, void* p) noexcept override { releaseDevice(index, p); }
    void* allocatePinned(std::size_t bytes) override
    {
        const PinnedDeviceScope scope(m_pinnedDevice.load());
        void* p = nullptr;
        // Portable: page-locked for every GPU's context, since a batch feeds several towers.
        if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
            cudaGetLastError();
            return nullptr; // plain memory does, more slowly
        }
        return p;
    }
    void releasePinned(void* p) noexcept override
    {
        const PinnedDeviceScope scope(m_pinnedDevice.load());
        cudaFreeHost(p);
    }
    void setPinnedDevice(int index) noexcept override { m_pinnedDevice.store(index); }
    // An execution context's device, when none was set (DeviceMemory::setPinnedDevice).
    void usesDevice(int index) noexcept
    {
        int unset = -1;
        m_pinnedDevice.compare_exchange_strong(unset, index);
    }
    void setZero(int index, void* p, std::size_t bytes) override { setZeroDevice(index, p, bytes); }
    void copy(void* dst, const Device& dstDevice, const void* src, const Device& srcDevice,
              std::size_t bytes) override
    {
        copyDevice(dst, dstDevice, src, srcDevice, bytes);
    }

private:
    std::atomic<int> m_pinnedDevice{-1};
};

class CudaBackend final : public GpuBackend
{
public:
    CudaBackend()
    {
        int count = 0;
        const cudaError_t status = cudaGetDeviceCount(&count);
        int driver = 0;
        cudaDriverGetVersion(&driver);
        if (driver == 0) {
            cudaGetLastError();
            m_reason = "no NVIDIA driver is installed (libcuda.so.1 was not found)";
            count = 0;
        } else if (status != cudaSuccess) {
            cudaGetLastError();
            m_reason = std::string("CUDA reports no usable GPU: ") + cudaGetErrorString(status) +
                       addressLimitNote();
            count = 0;
        } else if (count == 0) {
            m_reason = "CUDA reports no GPU";
        }
        m_count = count;
        // Which GPUs have stream-ordered memory pools (cudaMalloc and cudaFree for the others).
        configureDeviceMemory(m_count);
    }

    std::string versions() const override
    {
        int runtime = 0, driver = 0;
        cudaRuntimeGetVersion(&runtime);
        cudaDriverGetVersion(&driver);
        const std::size_t cudnn = cudnnGetVersion();
        int cublasMajor = 0, cublasMinor = 0, cublasPatch = 0;
        cublasGetProperty(MAJOR_VERSION, &cublasMajor);
        cublasGetProperty(MINOR_VERSION, &cublasMinor);
        cublasGetProperty(PATCH_LEVEL, &cublasPatch);
        int nccl = 0;
        ncclGetVersion(&nccl);
        std::string text = "CUDA runtime " + versionText(runtime, 1000, 10);
        text += driver ? ", driver " + versionText(driver, 1000, 10) : std::string(", no driver");
        text += ", cuDNN " + std::to_string(cudnn / 10000) + "." +
                std::to_string(cudnn % 10000 / 100) + "." + std::to_string(cudnn % 100);
        text += ", cuBLAS " + std::to_string(cublasMajor) + "." + std::to_string(cublasMinor) +
                "." + std::to_string(cublasPatch);
        text += ", NCCL " + std::to_string(nccl / 10000) + "." +
                std::to_string(nccl % 10000 / 100) + "." + std::to_string(nccl % 100);
        return text;
    }

    int deviceCount() const override { return m_count; }
    std::string unavailableReason() const override { return m_reason; }

    GpuDeviceInfo deviceInfo(int index) const override
    {
        requireIndex(index);
        cudaDeviceProp prop{};
        TOWERS_CUDA(cudaGetDeviceProperties(&prop, index));
        GpuDeviceInfo info;
        info.index = index;
        info.name = prop.name;
        info.computeMajor = prop.major;
        info.computeMinor = prop.minor;
        info.totalMemory = prop.totalGlobalMem;
        info.multiprocessors = prop.multiProcessorCount;
        info.pciBusId = pciBusId(index);
        return info;
    }

    std::uint64_t freeMemory(int index) const override
    {
        requireIndex(index);
        // On a thread of its own: it sets GPU `index` current and ends, so no caller's current
        // device is switched back (a cudaSetDevice(0) to restore the default would start a context
        // on GPU 0 too, since CUDA 12, for a process that never uses it).
        std::uint64_t result = 0;
        std::thread ask([index, &result] {
            std::size_t freeBytes = 0, total = 0;
            if (cudaSetDevice(index) == cudaSuccess &&
                cudaMemGetInfo(&freeBytes, &total) == cudaSuccess)
                result = freeBytes;
            else
                cudaGetLastError(); // CUDA cannot say: 0
        });
        ask.join();
        return result;
    }

    std::string pciBusId(int index) const override
    {
        requireIndex(index);
        char bus[32] = {};
        if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) != cudaSuccess) {
            cudaGetLastError();
            return {};
        }
        return bus;
    }

    DeviceMemory& memory() override { return m_memory; }

    std::unique_ptr<Ops> makeOps(int device, const GpuOpsOptions& options) override
    {
        requireIndex(device);
        m_memory.usesDevice(device);
        return std::make_unique<CudaOps>(device, options);
    }

    void synchronize(int device) override
    {
        requireIndex(device);
        // On a thread capturing this GPU's work, a device-wide wait would invalidate the capture.
        if (const StreamBinding& c = currentCaptureBinding(); c.stream && c.device == device)
            throw Unsupported("synchronize cuda:" + std::to_string(device) +
                              " during a capture: captured work does not run until replayed");
        DeviceGuard guard(device);
        TOWERS_CUDA(cudaDeviceSynchronize());
    }

    std::unique_ptr<Communicator> makeCommunicator(const std::vector<int>& deviceOfRank,
                                                   std::string* whyNot,
                                                   const NcclWorld* world) override
    {
        // Checked after the id is shared: the other processes must not be left waiting in it.
        if (world) return makeNcclWorldCommunicator(deviceOfRank, *world, m_count, whyNot);
        if (deviceOfRank.empty()) throw InvalidArgument("a communicator needs at least one rank");
        for (int d : deviceOfRank) requireIndex(d);
        bool oneDevice = true;
        for (int d : deviceOfRank) oneDevice = oneDevice && d == deviceOfRank.front();
        if (oneDevice)
            return makeSameDeviceCommunicator(deviceOfRank.front(), int(deviceOfRank.size()),
                                              whyNot);
        return makeNcclCommunicator(deviceOfRank, whyNot);
    }

private:
    void requireIndex(int index) const
    {
        if (index < 0 || index >= m_count)
            throw InvalidArgument("there is no GPU " + std::to_string(index) +
                                  " (this machine has " + std::to_string(m_count) + ")");
    }

    int m_count = 0;
    std::string m_reason;
    CudaMemory m_memory;
};

} // namespace

} // namespace towers::engine::cuda

extern "C" __attribute__((visibility("default"))) towers::engine::GpuBackend*
towers_cuda_backend(int abi, const char* buildId, char* error, std::size_t errorSize)
{
    using namespace towers::engine;
    auto fail = [&](const std::string& why) -> GpuBackend* {
        if (error && errorSize) std::snprintf(error, errorSize, "%s", why.c_str());
        return nullptr;
    };
    if (abi != kGpuBackendAbi)
        return fail("it was built for plugin ABI " + std::to_string(kGpuBackendAbi) +
                    ", the program for " + std::to_string(abi));
    if (!buildId || std::strcmp(buildId, gpuBackendBuildId()) != 0)
        return fail(std::string("it was built as '") + gpuBackendBuildId() + "', the program as '" +
                    (buildId ? buildId : "?") + "'; install matching versions");
    static std::once_flag once;
    static cuda::CudaBackend* backend = nullptr;
    static std::string startError;
    std::call_once(once, [] {
        try {
            backend = new cuda::CudaBackend(); // lives as long as the process: never unloaded
            // The plugin's own copy of the tensor code allocates through its own registry.
            registerDeviceMemory(DeviceKind::Cuda, &backend->memory());
        } catch (const std::exception& e) {
            startError = e.what();
        }
    });
    if (!backend) return fail(startError);
    return backend;
}
