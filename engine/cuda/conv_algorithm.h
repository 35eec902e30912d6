#pragma once
// How the CUDA backend picks a convolution algorithm from cuDNN's ranking of them, as plain C++
// over cuDNN's numbers, so that tests check the rules without a GPU (tst_cuda_host_logic);
// cuda_conv.cpp applies them. The ranking is cuDNN's heuristics (cudnnGet...Algorithm_v7: nothing
// runs, so every process on the same GPU and libraries chooses the same algorithms and a run
// repeats bitwise, as PyTorch's default), or with --cudnn-benchmark its measurement
// (cudnnFind...AlgorithmEx: the fastest, which timing noise may change from process to process,
// as torch.backends.cudnn.benchmark).
//
//  * The first algorithm in the ranking that cuDNN can run, within the workspace limit,
//    deterministic unless the user allowed others (as PyTorch with
//    torch.backends.cudnn.deterministic), and in exact float32 arithmetic (CUDNN_FMA_MATH) unless
//    TF32 was allowed. Its math type goes on the convolution descriptor with it: cuDNN needs both
//    to run the algorithm it ranked.
//  * Nothing usable because cuDNN does not support the case (statuses of the NOT_SUPPORTED family,
//    the 3000s of cuDNN 9, but those that say the installation cannot run cuDNN at all, or every
//    algorithm excluded by the rules above): NotSupported, and an NHWC plan falls back to NCHW.
//    Any other status (an execution failure, out of memory, a driver or library cuDNN cannot
//    use) is Failed: an error naming the status, never a silent fallback.
//  * An algorithm that cuDNN ranked but then refused to run (its first run's status
//    isRefusedRunStatus) is passed over when the pass ranks again, as PyTorch's algorithm iterator
//    does; when none is left, NotSupported (NCHW for an NHWC plan).
#include <cstddef>
#include <span>
#include <string>

namespace towers::engine::cuda {

// cudnnStatus_t's categories are its thousands (cudnn_graph.h, CUDNN_STATUS_CATEGORY);
// cuda_conv.cpp checks these against the header.
constexpr int kCudnnSuccess = 0;
constexpr int kCudnnNotSupported = 3000;
// NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER ... NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE: not the case
// but the installation (driver, runtime, architecture, a library missing), which no other layout
// mends.
constexpr int kCudnnIncompatibleDriver = 3005;
constexpr int kCudnnSublibraryUnavailable = 3009;
// INTERNAL_ERROR_HOST_ALLOCATION_FAILED (the old ALLOC_FAILED): what a measured algorithm reports
// when the workspace it was given is too small for it.
constexpr int kCudnnWorkspaceTooSmall = 4003;
constexpr bool isInstallationStatus(int status)
{
    return status >= kCudnnIncompatibleDriver && status <= kCudnnSublibraryUnavailable;
}
constexpr bool isNotSupportedStatus(int status)
{
    return status / 1000 * 1000 == kCudnnNotSupported && !isInstallationStatus(status);
}

// The status of an algorithm's first run after which the pass takes the next algorithm of the
// ranking instead of failing: not supported, a parameter cuDNN took exception to for this
// algorithm (the 2000s: a pointer's alignment, ...), an execution failure (the 5000s). Out of
// memory, a library not initialised and an installation cuDNN cannot use are errors still.
constexpr bool isRefusedRunStatus(int status)
{
    const int category = status / 1000 * 1000;
    return isNotSupportedStatus(status) || category == 2000 || category == 5000;
}

// One entry of cuDNN's ranking, in the rules' terms.
struct MeasuredAlgorithm
{
    int status = kCudnnSuccess;  // of this algorithm's trial run, or of asking its workspace size
    std::size_t memory = 0;      // workspace bytes
    bool deterministic = true;   // determinism == CUDNN_DETERMINISTIC
    bool exactFloat = true;      // mathType == CUDNN_FMA_MATH (no TF32 tensor cores)
    bool refusedWhenRun = false; // its first run on this plan was refused (isRefusedRunStatus)
};

struct AlgorithmRules
{
    std::size_t workspaceLimit = 0;
    bool deterministicOnly = true;
    bool allowTf32 = false;
};

enum class AlgorithmChoice
{
    Chosen,
    NotSupported,
    Failed,
};

struct AlgorithmVerdict
{
    AlgorithmChoice choice = AlgorithmChoice::NotSupported;
    int index = -1;  // Chosen: the entry
    int status = 0;  // Failed: the status that says why (the measurement's, or an algorithm's)
    std::string why; // otherwise: what cuDNN offered and why none was taken
};

// `findStatus`: what cudnnFind...AlgorithmEx or cudnnGet...Algorithm_v7 returned; `results`: its
// entries, best first.
inline AlgorithmVerdict chooseAlgorithm(int findStatus, std::span<const MeasuredAlgorithm> results,
                                        const AlgorithmRules& rules)
{
    if (findStatus != kCudnnSuccess)
        return {isNotSupportedStatus(findStatus) ? AlgorithmChoice::NotSupported
                                                 : AlgorithmChoice::Failed,
                -1, findStatus, "cuDNN's ranking itself failed"};
    int unsupported = 0, failed = 0, tooLarge = 0, nondeterministic = 0, tf32 = 0, refused = 0;
    int firstFailure = kCudnnSuccess;
    for (std::size_t i = 0; i < results.size(); ++i) {
        const MeasuredAlgorithm& r = results[i];
        if (r.refusedWhenRun) {
            ++refused;
        } else if (r.status == kCudnnWorkspaceTooSmall) {
            ++tooLarge; // it ran out of the workspace it was measured with
        } else if (r.status != kCudnnSuccess) {
            if (isNotSupportedStatus(r.status)) {
                ++unsupported;
            } else {
                ++failed;
                if (firstFailure == kCudnnSuccess) firstFailure = r.status;
            }
        } else if (r.memory > rules.workspaceLimit) {
            ++tooLarge;
        } else if (rules.deterministicOnly && !r.deterministic) {
            ++nondeterministic;
        } else if (!rules.allowTf32 && !r.exactFloat) {
            ++tf32;
        } else {
            return {AlgorithmChoice::Chosen, int(i), kCudnnSuccess, {}};
        }
    }
    std::string why;
    auto count = [&](int n, const std::string& what) {
        if (n) why += (why.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    };
    count(unsupported, "not supported");
    count(failed, "failed");
    count(tooLarge, "needing more workspace than the limit");
    count(nondeterministic, "not deterministic");
    count(tf32, "using TF32");
    count(refused, "refused when run");
    if (why.empty()) why = "no algorithm";
    if (firstFailure != kCudnnSuccess) return {AlgorithmChoice::Failed, -1, firstFailure, why};
    return {AlgorithmChoice::NotSupported, -1, kCudnnSuccess, why};
}

} // namespace towers::engine::cuda
