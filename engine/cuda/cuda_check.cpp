#include "engine/cuda/cuda_check.h"

#include <cuda.h> // CUcontext, CUresult: the driver's cuCtxGetCurrent, had through the runtime

#include <sys/resource.h>

#include <cstdio>
#include <cstring>

namespace towers::engine::cuda {

namespace {
std::string where(const char* call, const char* file, int line)
{
    const char* base = std::strrchr(file, '/');
    return std::string(call) + " (" + (base ? base + 1 : file) + ":" + std::to_string(line) + ")";
}
} // namespace

void throwCuda(cudaError_t status, const char* call, const char* file, int line)
{
    cudaGetLastError(); // clear a non-sticky error so that the next call does not report it again
    const std::string text =
        std::string("CUDA error: ") + cudaGetErrorString(status) + " in " + where(call, file, line);
    if (status == cudaErrorMemoryAllocation) throw DeviceOutOfMemory(text + addressLimitNote());
    if (status == cudaErrorInitializationError) throw BackendError(text + addressLimitNote());
    throw BackendError(text);
}

std::string addressLimitNote()
{
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return {};
    char size[32];
    std::snprintf(size, sizeof size, "%.1f GiB", double(limit.rlim_cur) / double(1 << 30));
    return std::string(" (this process has an address-space limit, ulimit -v, of ") + size +
           ": CUDA sets address space aside for the GPUs' memory, far beyond what it uses, and "
           "may fail under one; 'ulimit -v unlimited' lifts it)";
}

void throwCudnn(cudnnStatus_t status, const char* call, const char* file, int line)
{
    std::string text = std::string("cuDNN error: ") + cudnnGetErrorString(status) + " in " +
                       where(call, file, line);
    // cuDNN 9 keeps the reason of the thread's last error, in its own words.
    char reason[512] = {};
    cudnnGetLastErrorString(reason, sizeof reason);
    if (reason[0]) text += ": " + std::string(reason);
    if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        throw DeviceOutOfMemory(text);
    throw BackendError(text);
}

void throwCublas(cublasStatus_t status, const char* call, const char* file, int line)
{
    const std::string text = std::string("cuBLAS error: ") + cublasGetStatusString(status) +
                             " in " + where(call, file, line);
    if (status == CUBLAS_STATUS_ALLOC_FAILED) throw DeviceOutOfMemory(text);
    throw BackendError(text);
}

int deviceToRestore() noexcept
{
    // The driver's cuCtxGetCurrent, through the runtime (the plugin links no libcuda): whether
    // the thread has a current context. Where it cannot be had, the device is put back as
    // before CUDA 12.
    using CtxGetCurrent = CUresult (*)(CUcontext*);
    static const CtxGetCurrent ctxGetCurrent = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault,
                                             &found) != cudaSuccess ||
            found != cudaDriverEntryPointSuccess) {
            cudaGetLastError();
            fn = nullptr;
        }
        return reinterpret_cast<CtxGetCurrent>(fn);
    }();
    int device = -1;
    if (cudaGetDevice(&device) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    if (ctxGetCurrent) {
        CUcontext current = nullptr;
        if (ctxGetCurrent(&current) != CUDA_SUCCESS || !current) return -1;
    }
    return device;
}

namespace {
// Makes `device` current, never throwing; a failure's error is cleared (not another call's).
void makeCurrent(int device) noexcept
{
    int now = -1;
    if (cudaGetDevice(&now) != cudaSuccess ||
        (now != device && cudaSetDevice(device) != cudaSuccess))
        cudaGetLastError();
}

void putBack(int previous) noexcept
{
    if (previous >= 0) makeCurrent(previous);
}
} // namespace

DeviceGuard::DeviceGuard(int index) : m_previous(deviceToRestore())
{
    int now = -1;
    TOWERS_CUDA(cudaGetDevice(&now));
    if (now != index) TOWERS_CUDA(cudaSetDevice(index));
}

DeviceGuard::~DeviceGuard()
{
    putBack(m_previous);
}

QuietDeviceGuard::QuietDeviceGuard(int index) noexcept : m_previous(deviceToRestore())
{
    makeCurrent(index);
}

QuietDeviceGuard::~QuietDeviceGuard()
{
    putBack(m_previous);
}

} // namespace towers::engine::cuda
