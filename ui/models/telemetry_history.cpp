#include "ui/models/telemetry_history.h"

#include <cmath>

namespace towers::ui {

TelemetryHistory::TelemetryHistory(int capacity, QObject* parent)
    : QObject(parent), m_capacity(std::max(2, capacity))
{
}

void TelemetryHistory::add(const std::vector<app::DeviceSample>& samples)
{
    for (const auto& s : samples) {
        int d = deviceIndex(s.deviceId);
        if (d < 0) {
            m_ids << s.deviceId;
            m_series.emplace_back();
            d = int(m_ids.size()) - 1;
            emit deviceAdded(s.deviceId, d);
        }
        const double value[MetricCount] = {s.utilisation, s.memoryUsedBytes / double(1LL << 30),
                                           s.temperatureC, s.powerW};
        for (int m = 0; m < MetricCount; ++m) {
            if (std::isnan(value[m])) continue;
            Series& series = m_series[std::size_t(d)][std::size_t(m)];
            series.t.push_back(s.time);
            series.v.push_back(value[m]);
            if (series.t.size() > m_capacity) {
                series.t.remove(0, series.t.size() - m_capacity);
                series.v.remove(0, series.v.size() - m_capacity);
            }
        }
    }
    emit sampled();
}

void TelemetryHistory::clear()
{
    m_ids.clear();
    m_series.clear();
    emit sampled();
}

const QVector<double>& TelemetryHistory::times(int device, Metric metric) const
{
    return m_series.at(std::size_t(device))[std::size_t(metric)].t;
}

const QVector<double>& TelemetryHistory::values(int device, Metric metric) const
{
    return m_series.at(std::size_t(device))[std::size_t(metric)].v;
}

bool TelemetryHistory::hasData(Metric metric) const
{
    for (const auto& d : m_series)
        if (!d[std::size_t(metric)].t.isEmpty()) return true;
    return false;
}

QString TelemetryHistory::title(Metric metric)
{
    switch (metric) {
    case Utilisation:
        return tr("Utilisation");
    case MemoryGiB:
        return tr("Memory in use");
    case TemperatureC:
        return tr("Temperature");
    case PowerW:
        return tr("Power");
    default:
        return {};
    }
}

QString TelemetryHistory::unit(Metric metric)
{
    switch (metric) {
    case Utilisation:
        return QStringLiteral("%");
    case MemoryGiB:
        return QStringLiteral("GiB");
    case TemperatureC:
        return QStringLiteral("°C");
    case PowerW:
        return QStringLiteral("W");
    default:
        return {};
    }
}

} // namespace towers::ui
