#pragma once
// How the CUDA backend picks a convolution algorithm from cuDNN's measurements
// (cudnnFind...AlgorithmEx), as plain C++ over cuDNN's numbers, so that tests check the rules
// without a GPU (tst_cuda_host_logic); cuda_conv.cpp applies them.
//
//  * The fastest algorithm that ran, within the workspace limit, deterministic unless the user
//    allowed others (as PyTorch with torch.backends.cudnn.deterministic), and in exact float32
//    arithmetic (CUDNN_FMA_MATH) unless TF32 was allowed. Its math type goes on the convolution
//    descriptor with it: cuDNN needs both to run the algorithm it measured.
//  * Nothing usable because cuDNN does not support the case (statuses of the NOT_SUPPORTED family,
//    the 3000s of cuDNN 9, or every algorithm excluded by the rules above): NotSupported, and an
//    NHWC plan falls back to NCHW. Any other status (an execution failure, out of memory) is
//    Failed: an error naming the status, never a silent fallback.
#include <cstddef>
#include <span>
#include <string>

namespace towers::engine::cuda {

// cudnnStatus_t's categories are its thousands (cudnn_graph.h, CUDNN_STATUS_CATEGORY);
// cuda_conv.cpp checks these against the header.
constexpr int kCudnnSuccess = 0;
constexpr int kCudnnNotSupported = 3000;
constexpr bool isNotSupportedStatus(int status)
{
    return status / 1000 * 1000 == kCudnnNotSupported;
}

// One entry of a cudnnFind...AlgorithmEx result, in the rules' terms.
struct MeasuredAlgorithm
{
    int status = kCudnnSuccess; // of this algorithm's trial run
    std::size_t memory = 0;     // workspace bytes
    bool deterministic = true;  // determinism == CUDNN_DETERMINISTIC
    bool exactFloat = true;     // mathType == CUDNN_FMA_MATH (no TF32 tensor cores)
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

// `findStatus`: what cudnnFind...AlgorithmEx returned; `results`: its entries, fastest first.
inline AlgorithmVerdict chooseAlgorithm(int findStatus, std::span<const MeasuredAlgorithm> results,
                                        const AlgorithmRules& rules)
{
    if (findStatus != kCudnnSuccess)
        return {isNotSupportedStatus(findStatus) ? AlgorithmChoice::NotSupported
                                                 : AlgorithmChoice::Failed,
                -1, findStatus, "the measurement itself failed"};
    int unsupported = 0, failed = 0, tooLarge = 0, nondeterministic = 0, tf32 = 0;
    int firstFailure = kCudnnSuccess;
    for (std::size_t i = 0; i < results.size(); ++i) {
        const MeasuredAlgorithm& r = results[i];
        if (r.status != kCudnnSuccess) {
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
    if (why.empty()) why = "no algorithm";
    if (firstFailure != kCudnnSuccess) return {AlgorithmChoice::Failed, -1, firstFailure, why};
    return {AlgorithmChoice::NotSupported, -1, kCudnnSuccess, why};
}

} // namespace towers::engine::cuda
