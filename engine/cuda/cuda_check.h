#pragma once
// Turning CUDA, cuDNN and cuBLAS status codes into the engine's exceptions, with the call and the
// place named. Internal to the CUDA backend plugin.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "engine/errors.h"

namespace towers::engine::cuda {

[[noreturn]] void throwCuda(cudaError_t status, const char* call, const char* file, int line);

// "" without an address-space limit; else what one does to CUDA, said where CUDA ran out of
// memory or did not start: " (this process has an address-space limit, ulimit -v, of 8.0 GiB:
// ...)". CUDA sets address space aside for every GPU's memory, far beyond what it uses.
std::string addressLimitNote();
[[noreturn]] void throwCudnn(cudnnStatus_t status, const char* call, const char* file, int line);
[[noreturn]] void throwCublas(cublasStatus_t status, const char* call, const char* file, int line);

// The device a guard puts back when it ends: the calling thread's current device where a CUDA
// context is current on the thread, else -1. A thread that has chosen no device stays on the
// guard's: putting back the device 0 that cudaGetDevice reports for it would start a context on
// GPU 0 (since CUDA 12 cudaSetDevice initializes the device's primary context), hundreds of MB
// of GPU 0's memory for every process that computes on another GPU.
int deviceToRestore() noexcept;

// Makes `index` the calling thread's current device for the guard's lifetime; throws where CUDA
// cannot make it current.
class DeviceGuard
{
public:
    explicit DeviceGuard(int index);
    ~DeviceGuard();
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int m_previous = -1;
};

// The same, never throwing, for the paths that must not (destructors, a teardown, the end of a
// capture being given up): an error is cleared, to show at the next synchronisation.
class QuietDeviceGuard
{
public:
    explicit QuietDeviceGuard(int index) noexcept;
    ~QuietDeviceGuard();
    QuietDeviceGuard(const QuietDeviceGuard&) = delete;
    QuietDeviceGuard& operator=(const QuietDeviceGuard&) = delete;

private:
    int m_previous = -1;
};

} // namespace towers::engine::cuda

#define TOWERS_CUDA(call)                                                                          \
    do {                                                                                           \
        const cudaError_t towers_status_ = (call);                                                 \
        if (towers_status_ != cudaSuccess)                                                         \
            ::towers::engine::cuda::throwCuda(towers_status_, #call, __FILE__, __LINE__);          \
    } while (0)
#define TOWERS_CUDNN(call)                                                                         \
    do {                                                                                           \
        const cudnnStatus_t towers_status_ = (call);                                               \
        if (towers_status_ != CUDNN_STATUS_SUCCESS)                                                \
            ::towers::engine::cuda::throwCudnn(towers_status_, #call, __FILE__, __LINE__);         \
    } while (0)
#define TOWERS_CUBLAS(call)                                                                        \
    do {                                                                                           \
        const cublasStatus_t towers_status_ = (call);                                              \
        if (towers_status_ != CUBLAS_STATUS_SUCCESS)                                               \
            ::towers::engine::cuda::throwCublas(towers_status_, #call, __FILE__, __LINE__);        \
    } while (0)
// After a kernel launch: a bad configuration shows up here, a fault later (at a synchronisation).
#define TOWERS_CUDA_LAUNCHED() TOWERS_CUDA(cudaGetLastError())
