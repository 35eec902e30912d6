#pragma once
// The recent history of every device's telemetry (utilisation, memory, temperature, power), fed
// by app::TelemetrySource samples. Devices appear when their first sample arrives (deviceAdded),
// so the Devices page grows one curve per device per plot without knowing how many there are.
#include <QObject>
#include <QStringList>
#include <QVector>

#include <array>
#include <vector>

#include "app/devices/telemetry.h"

namespace towers::ui {

class TelemetryHistory : public QObject
{
    Q_OBJECT
public:
    enum Metric
    {
        Utilisation,
        MemoryGiB,
        TemperatureC,
        PowerW,
        MetricCount
    };

    // Keeps the last `capacity` samples of each device.
    explicit TelemetryHistory(int capacity = 600, QObject* parent = nullptr);

    // Appends samples (one per device); a sample's NaN fields add no point to that metric.
    void add(const std::vector<app::DeviceSample>& samples);
    void clear();

    QStringList deviceIds() const { return m_ids; }
    int deviceIndex(const QString& id) const { return int(m_ids.indexOf(id)); }
    // The points of one metric of one device, oldest first.
    const QVector<double>& times(int device, Metric metric) const;
    const QVector<double>& values(int device, Metric metric) const;
    // True when any device has a point of this metric (a sensor exists).
    bool hasData(Metric metric) const;
    int capacity() const { return m_capacity; }

    static QString title(Metric metric);
    static QString unit(Metric metric);

signals:
    void deviceAdded(const QString& id, int index);
    void sampled();

private:
    struct Series
    {
        QVector<double> t, v;
    };
    int m_capacity;
    QStringList m_ids;
    std::vector<std::array<Series, MetricCount>> m_series;
};

} // namespace towers::ui
