#pragma once
// NVIDIA's management library (NVML), loaded at run time with dlopen("libnvidia-ml.so.1") and
// never linked, so Towers runs where there is no NVIDIA driver. Each symbol is looked up with
// fallbacks to its older names (nvmlInit_v2 -> nvmlInit, ..._v3 -> _v2 -> v1), as nvtop does.
// Nothing here throws or crashes on a failure: a library that is missing, a symbol that is not
// there, an init that fails or a query a GPU does not support makes that figure "not available"
// (NaN, -1 or empty), with the reason kept for the user.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace towers::engine::monitor {

// What does not change while the process runs.
struct GpuInfo
{
    int index = 0;
    std::string name;               // "NVIDIA H100 80GB HBM3"
    std::int64_t memoryTotal = 0;   // bytes; 0 when unknown
    int ccMajor = -1, ccMinor = -1; // compute capability; -1 when unknown
    std::string computeCapability() const
    {
        return ccMajor < 0 ? std::string()
                           : std::to_string(ccMajor) + "." + std::to_string(ccMinor);
    }
};

// One reading of a GPU; NaN for what could not be read.
struct GpuReading
{
    static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
    double utilisation = kNone; // percent of time a kernel ran, 0..100
    double memoryUsed = kNone;  // bytes, all processes
    double memoryTotal = kNone; // bytes
    double temperatureC = kNone;
    double powerW = kNone;      // draw
    double powerLimitW = kNone; // the enforced limit
    double smClockMHz = kNone;
    double pcieTxBytesPerS = kNone; // NVML samples these over ~20 ms
    double pcieRxBytesPerS = kNone;
};

class Nvml
{
public:
    // Loads and initialises `library` (default: $TOWERS_NVML_LIBRARY, else "libnvidia-ml.so.1").
    // Never throws; see available().
    explicit Nvml(const std::string& library = {});
    ~Nvml();
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;

    bool available() const;
    // Why NVML is not available ("libnvidia-ml.so.1 not found: no NVIDIA driver", "nvmlInit
    // failed: Driver Not Loaded", ...), empty when it is.
    const std::string& unavailableReason() const { return m_reason; }
    // "580.65.06", or "" when unknown.
    std::string driverVersion() const;
    // The GPUs NVML sees, in its order; empty when not available. A GPU whose handle cannot be
    // had is left out.
    const std::vector<GpuInfo>& gpus() const { return m_gpus; }
    // The index (GpuInfo::index) of the GPU at PCI bus id `busId` ("0000:41:00.0", as CUDA gives
    // it), -1 when none of gpus() is there or NVML cannot look bus ids up (findsByPciBusId()).
    int indexOfPciBusId(const std::string& busId) const;
    bool findsByPciBusId() const;
    // A reading of GPU `index` (a GpuInfo::index of gpus(): NVML's index, which has gaps where a
    // GPU's handle could not be had). All NaN for an unknown index or when not available.
    GpuReading read(int index) const;
    // Bytes of GPU `index`'s memory that process `pid` (0: this process) uses: 0 when it uses none,
    // NaN when that cannot be read. Separate from read() because listing the GPU's processes is
    // the costliest query, and the periodic telemetry does not need it.
    double processMemory(int index, int pid = 0) const;

private:
    // Where GPU `index` (GpuInfo::index) is in gpus(), -1 when it is not there.
    int position(int index) const;
    struct Api;
    std::unique_ptr<Api> m_api;
    std::string m_reason;
    std::vector<GpuInfo> m_gpus;
};

} // namespace towers::engine::monitor
