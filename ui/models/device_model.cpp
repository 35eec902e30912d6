#include "ui/models/device_model.h"

#include <QLocale>

namespace towers::ui {

QString bytesLabel(double bytes)
{
    if (!(bytes > 0)) return QStringLiteral("–");
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        ++u;
    }
    return QStringLiteral("%1 %2").arg(QLocale().toString(bytes, 'f', u == 0 ? 0 : 1),
                                       QLatin1String(units[u]));
}

DeviceModel::DeviceModel(QObject* parent) : QAbstractTableModel(parent) {}

void DeviceModel::setDevices(std::vector<app::DeviceDescription> devices)
{
    beginResetModel();
    m_devices = std::move(devices);
    m_included.clear();
    for (const auto& d : m_devices) m_included.push_back(d.trainable);
    endResetModel();
    emit inclusionChanged();
}

int DeviceModel::gpuCount() const
{
    int n = 0;
    for (const auto& d : m_devices) n += d.kind == app::DeviceDescription::Kind::Gpu;
    return n;
}

bool DeviceModel::isLocked(int row) const
{
    // Without a GPU to train on, the CPU is the only place towers can run; a GPU this build cannot
    // train on stays out.
    const auto& d = m_devices[std::size_t(row)];
    if (!d.trainable) return true;
    if (d.kind != app::DeviceDescription::Kind::Cpu) return false;
    for (const auto& other : m_devices)
        if (other.kind == app::DeviceDescription::Kind::Gpu && other.trainable) return false;
    return true;
}

void DeviceModel::setIncluded(int row, bool included)
{
    if (row < 0 || row >= rowCount() || isLocked(row) || m_included[std::size_t(row)] == included)
        return;
    m_included[std::size_t(row)] = included;
    const QModelIndex i = index(row, Use);
    emit dataChanged(i, i, {Qt::CheckStateRole});
    emit inclusionChanged();
}

std::vector<app::DeviceDescription> DeviceModel::includedGpus() const
{
    std::vector<app::DeviceDescription> gpus;
    for (std::size_t i = 0; i < m_devices.size(); ++i)
        if (m_included[i] && m_devices[i].kind == app::DeviceDescription::Kind::Gpu &&
            m_devices[i].cudaNumber >= 0)
            gpus.push_back(m_devices[i]);
    return gpus;
}

QStringList DeviceModel::includedIds() const
{
    QStringList ids;
    for (std::size_t i = 0; i < m_devices.size(); ++i)
        if (m_included[i]) ids << m_devices[i].id;
    return ids;
}

int DeviceModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_devices.size());
}

int DeviceModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant DeviceModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& d = m_devices[std::size_t(index.row())];
    const bool cpu = d.kind == app::DeviceDescription::Kind::Cpu;
    if (role == DeviceIdRole) return d.id;
    if (role == Qt::CheckStateRole && index.column() == Use)
        return m_included[std::size_t(index.row())] ? Qt::Checked : Qt::Unchecked;
    if (role == Qt::ToolTipRole && index.column() == Use && isLocked(index.row()))
        return d.trainable ? tr("With no GPU to train on, the towers run on the CPU.")
               : !d.notTrainable.isEmpty()
                   ? d.notTrainable
                   : tr("Monitored only: this build of Towers has no GPU backend to train on it.");
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Use:
            // NVML's number; CUDA's, which --gpus takes, beside it where CUDA_VISIBLE_DEVICES
            // makes them differ.
            return cpu ? tr("CPU") : app::gpuLabel(d);
        case Device:
            return d.name;
        case Memory:
            return bytesLabel(double(d.memoryBytes));
        case Capability:
            return cpu ? (d.isa.isEmpty() ? QStringLiteral("–")
                          : d.simdTarget.isEmpty()
                              ? tr("oneDNN %1").arg(d.isa)
                              : tr("oneDNN %1, Towers %2").arg(d.isa, d.simdTarget))
                       : tr("compute %1").arg(d.computeCapability);
        case Cores:
            return cpu ? QLocale().toString(d.logicalCores) : QStringLiteral("–");
        default:
            return {};
        }
    }
    if (role == Qt::TextAlignmentRole && (index.column() == Memory || index.column() == Cores))
        return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

bool DeviceModel::setData(const QModelIndex& index, const QVariant& value, int role)
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid) ||
        role != Qt::CheckStateRole || index.column() != Use || isLocked(index.row()))
        return false;
    setIncluded(index.row(), value.value<Qt::CheckState>() == Qt::Checked);
    return true;
}

Qt::ItemFlags DeviceModel::flags(const QModelIndex& index) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return Qt::NoItemFlags;
    Qt::ItemFlags f = Qt::ItemIsSelectable | Qt::ItemIsEnabled | Qt::ItemNeverHasChildren;
    if (index.column() == Use && !isLocked(index.row())) f |= Qt::ItemIsUserCheckable;
    return f;
}

QVariant DeviceModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Use:
        return tr("Use as tower");
    case Device:
        return tr("Device");
    case Memory:
        return tr("Memory");
    case Capability:
        return tr("Kernels / compute capability");
    case Cores:
        return tr("Cores");
    default:
        return {};
    }
}

} // namespace towers::ui
