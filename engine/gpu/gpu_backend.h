#pragma once
// The GPU backend as the engine sees it. Its implementation (CUDA runtime, cuDNN, cuBLAS, NCCL) is
// a plugin, libtowers-cuda.so, loaded at run time with dlopen: programs built with it still start,
// and the CPU package still installs, on machines without any NVIDIA library. No CUDA header
// appears here.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/ops/ops.h"
#include "engine/ops/precision.h"
#include "engine/tensor/device_memory.h"

namespace towers::engine {

struct GpuDeviceInfo
{
    int index = 0;
    std::string name; // "NVIDIA H100 80GB HBM3"
    int computeMajor = 0, computeMinor = 0;
    std::uint64_t totalMemory = 0; // bytes
    int multiprocessors = 0;
    std::string pciBusId; // "0000:41:00.0", matches NVML's
};

struct GpuOpsOptions
{
    // Let cuDNN and cuBLAS use TF32 tensor cores for float32 (10-bit mantissa in the products).
    bool allowTf32 = false;
    // Let cuDNN choose convolution algorithms whose results may differ from run to run (atomic
    // additions in some backward passes) when it measures them fastest. Off: only the ones cuDNN
    // reports deterministic, as PyTorch with torch.backends.cudnn.deterministic.
    bool allowNondeterministic = false;
    // --cudnn-benchmark: each convolution's algorithm is the fastest of cuDNN's measurement
    // (cudnnFind...AlgorithmEx), as torch.backends.cudnn.benchmark; timing noise may make another
    // process choose another one, whose results differ in the last bits. Off: the first of cuDNN's
    // heuristic ranking that the rules allow, the same in every process (a run repeats bitwise).
    bool measureAlgorithms = false;
    // BFloat16 (--precision bf16): convolutions (cuDNN) and matrix products (cuBLAS) read bfloat16
    // copies of their operands and accumulate in float32 (a convolution's output is bfloat16, then
    // float32 again, as autocast leaves it); everything else float32. Needs compute capability 8.0
    // (makeOps refuses with Unsupported saying so on an older GPU).
    Precision precision = Precision::Float32;
    // Every convolution in NCHW from the start (the data transposed around cuDNN), as where cuDNN
    // has no NHWC algorithm for a shape: for tests of that path, which no shape may take on a
    // given GPU otherwise.
    bool convolutionsInNchw = false;
};

// "" when a GPU of compute capability major.minor runs --precision bf16 (8.0 and later), else
// why not, naming the GPU (`gpu`: "cuda:1", "GPU 0, Tesla T4"): the words of the plugin's refusal
// and of TrainConfig::precisionUnavailable alike.
inline std::string bf16UnavailableOn(const std::string& gpu, int major, int minor)
{
    if (major >= 8) return {};
    return "--precision bf16 needs a GPU of compute capability 8.0 or later (Ampere, Ada, Hopper, "
           "Blackwell); " +
           gpu + " is " + std::to_string(major) + "." + std::to_string(minor);
}

class GpuBackend
{
public:
    virtual ~GpuBackend() = default;

    // "CUDA runtime 13.0, driver 13.0, cuDNN 9.19.0, cuBLAS 13.1.0, NCCL 2.28.3"
    virtual std::string versions() const = 0;
    // The usable GPUs (0 when there are none: see unavailableReason()).
    virtual int deviceCount() const = 0;
    // Why deviceCount() is 0, in words ("no NVIDIA driver is loaded", ...); empty otherwise.
    virtual std::string unavailableReason() const = 0;
    // What GPU `index` is, without starting a CUDA context on it (listing the GPUs or checking
    // their compute capability takes no memory on them, nor on another user's GPU).
    // InvalidArgument for an index out of range.
    virtual GpuDeviceInfo deviceInfo(int index) const = 0;
    // The bytes free on GPU `index` now, as CUDA reports them: this starts CUDA's context on it
    // (hundreds of MB of its memory, kept until the process ends), so ask only of a GPU this
    // process is about to use. 0 when CUDA cannot say. InvalidArgument for an index out of range.
    virtual std::uint64_t freeMemory(int index) const = 0;
    // GPU `index`'s PCI bus id ("0000:41:00.0"; "" when CUDA cannot say), without starting a CUDA
    // context on it (freeMemory does): what matches CUDA's numbers, which
    // CUDA_VISIBLE_DEVICES may narrow and reorder, with NVML's, which it does not. InvalidArgument
    // for an index out of range.
    virtual std::string pciBusId(int index) const = 0;
    // The allocator and copies of the GPUs' memory (also registered for DeviceKind::Cuda).
    virtual DeviceMemory& memory() = 0;
    // An execution context on one GPU: its own stream, cuDNN and cuBLAS handles and workspace.
    // Ops take and return tensors on that GPU (InvalidArgument for a tensor elsewhere).
    virtual std::unique_ptr<Ops> makeOps(int device, const GpuOpsOptions& options) = 0;
    // Waits until every op issued on the device has finished; a device fault surfaces here as
    // BackendError.
    virtual void synchronize(int device) = 0;

    // The NCCL world when several processes train together (mpirun/srun): this process's ranks are
    // global ranks firstRank .. firstRank + deviceOfRank.size() - 1 of worldSize. shareId is called
    // once by every process, collectively: it broadcasts `bytes` bytes (the ncclUniqueId) from the
    // process that holds global rank 0 (whose buffer is filled in before the call) to every
    // process.
    struct NcclWorld
    {
        int worldSize = 0;
        int firstRank = 0;
        std::function<void(void* bytes, std::size_t size)> shareId;
        // Optional: true on every process when `mine` is true on any (ProcessGroup::any), called
        // once by every process after shareId, whatever failed, to agree before any starts NCCL.
        std::function<bool(bool mine)> anyRefuses;
    };

    // Collectives between towers whose tensors stay on their GPUs: rank r on GPU deviceOfRank[r].
    // NCCL (one communicator, one rank per GPU) when the GPUs are distinct; a reduction kernel
    // on the GPU when every rank shares one GPU. nullptr with the reason in `whyNot` otherwise
    // (a mix, more ranks than the kernel takes, NCCL failing to start): the caller then averages
    // through the host. The same determinism as the host's: every rank receives bitwise the same
    // mean. Works on float32 tensors of the ranks' GPUs (InvalidArgument otherwise). abort(), from
    // any thread, releases the ranks waiting in a collective within moments (NCCL: every
    // communicator aborted once, after the calls in progress have returned).
    //
    // With a `world` (several processes): NCCL only, one rank per GPU, this process's ranks being
    // global ranks firstRank + r of the world. Every process calls this, collectively, and each
    // calls world->shareId exactly once whatever fails, before or after (so that none is left
    // waiting in it); the process of global rank 0 shares an id of zeros when it cannot start,
    // and the others then return nullptr at once. size() is the local ranks; allReduceMean is the
    // mean over all worldSize ranks (ncclAvg: every rank of every process receives bitwise the
    // same values); barrier waits for every rank of the world (an NCCL collective); broadcast
    // takes root 0 only, global rank 0, whose tensors every rank of the world receives (another
    // root: InvalidArgument). Two towers of this process on one GPU: nullptr ("two towers of this
    // process on GPU g: NCCL takes one rank per GPU"); NCCL refusing two processes on one GPU, a
    // process that never joins (2 minutes) or an NCCL failure: nullptr with NCCL's reason. With
    // anyRefuses, a process that cannot join (its own towers, checked only there) keeps every
    // process from starting NCCL ("another process of the world cannot start NCCL"); one failing
    // inside NCCL's start can still leave the others waiting for it until that limit. The caller
    // agrees on the outcome (ProcessGroup::any) before using the communicator, and falls back to
    // averaging through the host everywhere when any process has none.
    // InvalidArgument (after shareId) for no ranks, a GPU out of range, or ranks outside the
    // world; at once for a world without shareId. An exception of shareId goes to the caller.
    // abort() aborts this process's NCCL communicators only: the other processes learn of the
    // failure through the caller (ProcessGroup::announceFailure) and abort theirs.
    virtual std::unique_ptr<Communicator> makeCommunicator(const std::vector<int>& deviceOfRank,
                                                           std::string* whyNot,
                                                           const NcclWorld* world = nullptr) = 0;
};

// The ABI the plugin is built for: the plugin exports
//   extern "C" GpuBackend* towers_cuda_backend(int abi, const char* buildId, char* error, size_t n)
// and refuses (returning nullptr with the reason in `error`) unless both match what the program
// was built with, since it shares the engine's classes (Tensor, Ops) by layout.
constexpr int kGpuBackendAbi = 18;
#ifndef TOWERS_BUILD_VERSION
#define TOWERS_BUILD_VERSION "unknown"
#endif
// The plugin shares classes by layout, so it must come from the same version built by the same
// compiler; both sides compile this.
inline const char* gpuBackendBuildId()
{
    return "towers " TOWERS_BUILD_VERSION " " __VERSION__;
}

// Loads the CUDA backend once, thread-safely, and returns it, or nullptr with the reason in
// `whyNot` (this build has no CUDA backend; the plugin or a library it needs is missing; it
// failed to start). It is found at $TOWERS_CUDA_PLUGIN when set, else next to the program's build
// tree, else in the installed plugin folder; NVIDIA's libraries it links are loaded first from
// where NVIDIA's packages and wheels put them (engine/gpu/nvidia_libraries.h), and one found
// nowhere is named in `whyNot` with how to get it. The plugin is never unloaded.
GpuBackend* cudaBackend(std::string* whyNot = nullptr);

// Sets CUDA_DEVICE_ORDER=PCI_BUS_ID unless the user chose an order, so that CUDA numbers the GPUs
// in NVML's order. cudaBackend() does it too, but setenv is not safe against another thread's
// getenv: programs call this first thing in main(), before any thread exists, which makes
// cudaBackend()'s call a no-op that writes nothing.
void setCudaDeviceOrder();

} // namespace towers::engine
