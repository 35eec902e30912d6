#pragma once
// The devices table of the Devices page: one row per device (app::listDevices(): the CPU, then
// every GPU), a check box to include it as a tower, its name, memory, compute capability or
// instruction set, and cores. GPUs are rows of data: a GPU backend adds entries, not widgets.
#include <QAbstractTableModel>

#include <vector>

#include "app/devices/device_list.h"

namespace towers::ui {

class DeviceModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column
    {
        Use,
        Device,
        Memory,
        Capability,
        Cores,
        ColumnCount
    };
    enum Role
    {
        DeviceIdRole = Qt::UserRole + 1
    };

    explicit DeviceModel(QObject* parent = nullptr);

    // Replaces the devices; every device starts included. With no GPU the CPU is always included
    // (its check box is shown checked and cannot be cleared).
    void setDevices(std::vector<app::DeviceDescription> devices);
    const std::vector<app::DeviceDescription>& devices() const { return m_devices; }
    bool isIncluded(int row) const { return m_included.at(std::size_t(row)); }
    void setIncluded(int row, bool included);
    // The ids of the included devices, in row order.
    QStringList includedIds() const;
    // The included GPUs CUDA sees (a run's towers take their cudaNumber), in row order.
    std::vector<app::DeviceDescription> includedGpus() const;
    int gpuCount() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

signals:
    void inclusionChanged();

private:
    bool isLocked(int row) const;

    std::vector<app::DeviceDescription> m_devices;
    std::vector<bool> m_included;
};

// "15.6 GiB"
QString bytesLabel(double bytes);

} // namespace towers::ui
