#pragma once
// Live device telemetry for the Devices page: utilisation, memory, temperature and power of each
// device over time. A source per kind of device (the CPU from /proc and /sys; GPUs from NVML once
// the GPU backend exists) returns samples keyed by device id; the page plots one curve per id, so a
// new device is new data, not a new widget.
#include <QString>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace towers::engine::monitor {
class Nvml;
}

namespace towers::app {

struct DeviceSample
{
    static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
    QString deviceId;           // DeviceDescription::id
    double time = 0;            // seconds, the caller's clock
    double utilisation = kNone; // percent busy, 0..100
    double memoryUsedBytes = kNone;
    double memoryTotalBytes = kNone;
    double temperatureC = kNone; // NaN: no sensor
    double powerW = kNone;       // NaN: no meter
};

class TelemetrySource
{
public:
    virtual ~TelemetrySource() = default;
    // One sample per device at time `now` (seconds, increasing). Quantities measured as rates
    // (utilisation, power) are NaN on the first call. Never throws: what cannot be read is NaN.
    virtual std::vector<DeviceSample> sample(double now) = 0;
};

// The CPU as device "cpu": utilisation from the "cpu" line of /proc/stat (busy share of the time
// between two samples: user + nice + system + irq + softirq + steal over all but guest time),
// memory in use from /proc/meminfo (MemTotal - MemAvailable), temperature from the hottest
// /sys/class/thermal zone of a CPU type (x86_pkg_temp, cpu*, *pkg*, k10temp, coretemp; any zone
// when none is typed), package power from the RAPL energy counter
// (/sys/class/powercap/intel-rapl:0/energy_uj, usually readable by root only).
class CpuTelemetry final : public TelemetrySource
{
public:
    // `root` replaces "/" (tests point it at a fake tree).
    explicit CpuTelemetry(QString root = QStringLiteral("/"));
    std::vector<DeviceSample> sample(double now) override;

private:
    QString m_root;
    bool m_haveStat = false;
    std::uint64_t m_busy = 0, m_total = 0;
    bool m_haveEnergy = false;
    double m_energyUj = 0, m_energyTime = 0;
};

// Every GPU NVML sees as device "gpu<index>": utilisation, memory used and total, temperature and
// power draw (see engine/monitor/nvml.h). No samples when NVML is not available.
class GpuTelemetry final : public TelemetrySource
{
public:
    explicit GpuTelemetry(const engine::monitor::Nvml& nvml);
    std::vector<DeviceSample> sample(double now) override;

private:
    const engine::monitor::Nvml& m_nvml;
};

// The samples of several sources, in order (the CPU's, then the GPUs').
class CombinedTelemetry final : public TelemetrySource
{
public:
    explicit CombinedTelemetry(std::vector<std::unique_ptr<TelemetrySource>> sources);
    std::vector<DeviceSample> sample(double now) override;

private:
    std::vector<std::unique_ptr<TelemetrySource>> m_sources;
};

// What the Devices page watches: the CPU and the process's NVML GPUs.
std::unique_ptr<TelemetrySource> makeDeviceTelemetry();

} // namespace towers::app
