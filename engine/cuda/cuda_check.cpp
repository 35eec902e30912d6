#include "engine/cuda/cuda_check.h"

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
    if (status == cudaErrorMemoryAllocation) throw DeviceOutOfMemory(text);
    throw BackendError(text);
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

DeviceGuard::DeviceGuard(int index)
{
    TOWERS_CUDA(cudaGetDevice(&m_previous));
    if (m_previous != index) TOWERS_CUDA(cudaSetDevice(index));
}

DeviceGuard::~DeviceGuard()
{
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != m_previous && m_previous >= 0)
        cudaSetDevice(m_previous);
}

} // namespace towers::engine::cuda
