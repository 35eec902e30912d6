#include "app/devices/telemetry.h"

#include "app/devices/device_list.h"
#include "engine/monitor/nvml.h"

#include <QDir>
#include <QFile>

namespace towers::app {

namespace {

QByteArray readSmallFile(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.read(64 * 1024);
}

bool isCpuZone(const QString& type)
{
    const QString t = type.toLower();
    return t.contains(QLatin1String("pkg")) || t.startsWith(QLatin1String("cpu")) ||
           t.contains(QLatin1String("k10temp")) || t.contains(QLatin1String("coretemp")) ||
           t.startsWith(QLatin1String("x86"));
}

} // namespace

CpuTelemetry::CpuTelemetry(QString root) : m_root(std::move(root))
{
    if (!m_root.endsWith(QLatin1Char('/'))) m_root += QLatin1Char('/');
}

std::vector<DeviceSample> CpuTelemetry::sample(double now)
{
    DeviceSample s;
    s.deviceId = QStringLiteral("cpu");
    s.time = now;

    // /proc/stat: "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
    const QByteArray stat = readSmallFile(m_root + QStringLiteral("proc/stat"));
    for (const QByteArray& line : stat.split('\n')) {
        if (!line.startsWith("cpu ")) continue;
        const QList<QByteArray> f = line.simplified().split(' ');
        if (f.size() < 5) break;
        std::uint64_t v[8] = {};
        for (int i = 0; i < 8 && i + 1 < f.size(); ++i) v[i] = f[i + 1].toULongLong();
        const std::uint64_t idle = v[3] + v[4];
        const std::uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        const std::uint64_t total = busy + idle;
        if (m_haveStat && total > m_total && busy >= m_busy)
            s.utilisation = 100.0 * double(busy - m_busy) / double(total - m_total);
        m_haveStat = true;
        m_busy = busy;
        m_total = total;
        break;
    }

    // /proc/meminfo: "MemTotal:  131072000 kB"
    double memTotal = DeviceSample::kNone, memAvailable = DeviceSample::kNone;
    const QByteArray meminfo = readSmallFile(m_root + QStringLiteral("proc/meminfo"));
    for (const QByteArray& line : meminfo.split('\n')) {
        const QList<QByteArray> f = line.simplified().split(' ');
        if (f.size() < 2) continue;
        if (f[0] == "MemTotal:") memTotal = f[1].toDouble() * 1024.0;
        if (f[0] == "MemAvailable:") memAvailable = f[1].toDouble() * 1024.0;
    }
    s.memoryTotalBytes = memTotal;
    if (!std::isnan(memTotal) && !std::isnan(memAvailable))
        s.memoryUsedBytes = memTotal - memAvailable;

    // Thermal zones (millidegrees Celsius).
    const QDir thermal(m_root + QStringLiteral("sys/class/thermal"));
    double cpuTemp = DeviceSample::kNone, anyTemp = DeviceSample::kNone;
    for (const QString& zone :
         thermal.entryList({QStringLiteral("thermal_zone*")}, QDir::Dirs | QDir::System)) {
        bool ok = false;
        const double milli =
            readSmallFile(thermal.filePath(zone + QStringLiteral("/temp"))).trimmed().toDouble(&ok);
        if (!ok) continue;
        const double c = milli / 1000.0;
        const QString type = QString::fromUtf8(
            readSmallFile(thermal.filePath(zone + QStringLiteral("/type"))).trimmed());
        if (isCpuZone(type)) cpuTemp = std::isnan(cpuTemp) ? c : std::max(cpuTemp, c);
        anyTemp = std::isnan(anyTemp) ? c : std::max(anyTemp, c);
    }
    s.temperatureC = std::isnan(cpuTemp) ? anyTemp : cpuTemp;

    // RAPL package energy (microjoules, a wrapping counter).
    bool ok = false;
    const double energy =
        readSmallFile(m_root + QStringLiteral("sys/class/powercap/intel-rapl:0/energy_uj"))
            .trimmed()
            .toDouble(&ok);
    if (ok) {
        if (m_haveEnergy && now > m_energyTime && energy >= m_energyUj)
            s.powerW = (energy - m_energyUj) * 1e-6 / (now - m_energyTime);
        m_haveEnergy = true;
        m_energyUj = energy;
        m_energyTime = now;
    }
    return {s};
}

GpuTelemetry::GpuTelemetry(const engine::monitor::Nvml& nvml) : m_nvml(nvml) {}

std::vector<DeviceSample> GpuTelemetry::sample(double now)
{
    std::vector<DeviceSample> out;
    for (const auto& g : m_nvml.gpus()) {
        const auto r = m_nvml.read(g.index);
        DeviceSample s;
        s.deviceId = QStringLiteral("gpu%1").arg(g.index);
        s.time = now;
        s.utilisation = r.utilisation;
        s.memoryUsedBytes = r.memoryUsed;
        s.memoryTotalBytes = r.memoryTotal;
        s.temperatureC = r.temperatureC;
        s.powerW = r.powerW;
        out.push_back(s);
    }
    return out;
}

CombinedTelemetry::CombinedTelemetry(std::vector<std::unique_ptr<TelemetrySource>> sources)
    : m_sources(std::move(sources))
{
}

std::vector<DeviceSample> CombinedTelemetry::sample(double now)
{
    std::vector<DeviceSample> out;
    for (auto& source : m_sources) {
        auto part = source->sample(now);
        out.insert(out.end(), part.begin(), part.end());
    }
    return out;
}

std::unique_ptr<TelemetrySource> makeDeviceTelemetry()
{
    std::vector<std::unique_ptr<TelemetrySource>> sources;
    sources.push_back(std::make_unique<CpuTelemetry>());
    sources.push_back(std::make_unique<GpuTelemetry>(nvml()));
    return std::make_unique<CombinedTelemetry>(std::move(sources));
}

} // namespace towers::app
