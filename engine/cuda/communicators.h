#pragma once
// The GPU backend's communicators (see GpuBackend::makeCommunicator): NCCL across GPUs (of this
// process, or of a world of several), and a reduction kernel for towers sharing one GPU. Internal
// to the plugin.
#include <memory>
#include <string>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/gpu/gpu_backend.h"

namespace towers::engine::cuda {

std::unique_ptr<Communicator> makeNcclCommunicator(const std::vector<int>& devices,
                                                   std::string* whyNot);
// This process's part of an NCCL world of several processes (see GpuBackend::makeCommunicator):
// world.shareId called exactly once, whatever fails.
std::unique_ptr<Communicator> makeNcclWorldCommunicator(const std::vector<int>& devices,
                                                        const GpuBackend::NcclWorld& world,
                                                        int deviceCount, std::string* whyNot);
std::unique_ptr<Communicator> makeSameDeviceCommunicator(int device, int ranks,
                                                         std::string* whyNot);

// The most ranks the same-device kernel takes: its pointer table is a kernel argument
// (kMaxRanksPerDevice of kernels.h).
constexpr int kMaxSameDeviceRanks = 16;

} // namespace towers::engine::cuda
