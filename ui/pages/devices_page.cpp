#include "ui/pages/devices_page.h"

#include <QDateTime>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "app/devices/device_list.h"
#include "app/devices/telemetry.h"
#include "ui/models/device_model.h"
#include "ui/models/telemetry_history.h"
#include "ui/plots/bar_chart.h"
#include "ui/plots/plot_widget.h"

namespace towers::ui {

DevicesPage::DevicesPage(QWidget* parent)
    : QWidget(parent), m_devices(new DeviceModel(this)), m_history(new TelemetryHistory(600, this)),
      m_source(app::makeDeviceTelemetry()), m_timer(new QTimer(this))
{
    auto* top = new QVBoxLayout(this);

    auto* devicesBox = new QGroupBox(tr("Devices"), this);
    auto* devicesLayout = new QVBoxLayout(devicesBox);
    m_table = new QTableView(devicesBox);
    m_table->setModel(m_devices);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(DeviceModel::Device, QHeaderView::Stretch);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    devicesLayout->addWidget(m_table);
    m_gpuNote = new QLabel(app::gpuBackendNote(), devicesBox);
    m_gpuNote->setWordWrap(true);
    m_gpuNote->setVisible(!app::gpuBackendAvailable());
    QFont bold = m_gpuNote->font();
    bold.setBold(true);
    m_gpuNote->setFont(bold);
    devicesLayout->addWidget(m_gpuNote);

    auto* towerForm = new QFormLayout;
    towerForm->setFieldGrowthPolicy(QFormLayout::FieldsStayAtSizeHint);
    const int cores = std::max(1, app::listDevices().front().logicalCores);
    m_towers = new QSpinBox(devicesBox);
    m_towers->setRange(1, std::max(64, cores));
    m_towers->setToolTip(
        tr("Replicas of the model, each on its own slice of every batch; their gradients "
           "are averaged every step"));
    m_threads = new QSpinBox(devicesBox);
    m_threads->setRange(0, std::max(64, cores));
    m_threads->setSpecialValueText(tr("share the cores"));
    m_threads->setToolTip(tr("oneDNN threads of each CPU tower; 0 shares the cores out evenly"));
    towerForm->addRow(tr("CPU &towers:"), m_towers);
    towerForm->addRow(tr("&Threads per tower:"), m_threads);
    m_summary = new QLabel(devicesBox);
    m_summary->setWordWrap(true);
    towerForm->addRow(QString(), m_summary);
    devicesLayout->addLayout(towerForm);
    top->addWidget(devicesBox);

    auto* split = new QSplitter(Qt::Horizontal, this);
    auto* telemetryBox = new QGroupBox(tr("Live telemetry (last 10 minutes)"), split);
    auto* grid = new QGridLayout(telemetryBox);
    for (int m = 0; m < TelemetryHistory::MetricCount; ++m) {
        auto metric = TelemetryHistory::Metric(m);
        auto* plot = new PlotWidget(TelemetryHistory::title(metric), telemetryBox);
        plot->setAxisLabels(tr("seconds"), TelemetryHistory::unit(metric));
        plot->setEmptyMessage(tr("no sensor readable"));
        if (metric == TelemetryHistory::Utilisation) plot->setYRange(0, 100);
        grid->addWidget(plot, m / 2, m % 2);
        m_telemetryPlots.push_back(plot);
    }
    auto* towerBox = new QGroupBox(tr("Step time per tower"), split);
    auto* towerLayout = new QVBoxLayout(towerBox);
    m_towerChart = new BarChart(tr("Forward + backward, latest step"), Qt::Vertical, towerBox);
    m_towerChart->setValueLabel(tr("ms"));
    m_towerChart->setValueText(QStringLiteral("%1"), 1, 1);
    m_towerHistory = new PlotWidget(tr("Per tower over the run"), towerBox);
    m_towerHistory->setAxisLabels(tr("step"), tr("ms"));
    m_towerHistory->setEmptyMessage(tr("Shown while training runs"));
    m_balance =
        new QLabel(tr("Start a run to see how evenly the towers share the work."), towerBox);
    m_balance->setWordWrap(true);
    towerLayout->addWidget(m_towerChart, 1);
    towerLayout->addWidget(m_towerHistory, 1);
    towerLayout->addWidget(m_balance);
    split->addWidget(telemetryBox);
    split->addWidget(towerBox);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    top->addWidget(split, 1);

    connect(m_history, &TelemetryHistory::deviceAdded, this, &DevicesPage::onDeviceAdded);
    connect(m_history, &TelemetryHistory::sampled, this, &DevicesPage::onSampled);
    connect(m_towers, &QSpinBox::valueChanged, this, &DevicesPage::updateSummary);
    connect(m_threads, &QSpinBox::valueChanged, this, &DevicesPage::updateSummary);
    connect(m_devices, &DeviceModel::inclusionChanged, this, &DevicesPage::updateSummary);
    connect(m_timer, &QTimer::timeout, this, &DevicesPage::sampleNow);

    m_devices->setDevices(app::listDevices());
    // As tall as its rows: one per device.
    m_table->setFixedHeight(m_table->horizontalHeader()->sizeHint().height() +
                            m_table->verticalHeader()->defaultSectionSize() *
                                std::max(1, m_devices->rowCount()) +
                            2 * m_table->frameWidth() + 2);
    updateSummary();
    m_timer->start(1000);
    sampleNow();
}

DevicesPage::~DevicesPage() = default;

int DevicesPage::towers() const
{
    const auto gpus = selectedGpus();
    return gpus.empty() ? m_towers->value() : int(gpus.size());
}

std::vector<int> DevicesPage::selectedGpus() const
{
    std::vector<int> gpus;
    for (const QString& id : m_devices->includedIds())
        if (id.startsWith(QLatin1String("gpu"))) gpus.push_back(id.mid(3).toInt());
    return gpus;
}

int DevicesPage::threadsPerTower() const
{
    return m_threads->value();
}

void DevicesPage::setTowers(int towers)
{
    m_towers->setValue(towers);
}

void DevicesPage::setThreadsPerTower(int threads)
{
    m_threads->setValue(threads);
}

void DevicesPage::setTowerSetupEnabled(bool enabled)
{
    m_towers->setEnabled(enabled);
    m_threads->setEnabled(enabled);
    m_table->setEnabled(enabled);
}

void DevicesPage::setTelemetrySource(std::unique_ptr<app::TelemetrySource> source)
{
    m_source = std::move(source);
    m_history->clear();
    for (auto* plot : m_telemetryPlots) plot->clearSeries();
    m_clockStart = -1;
}

void DevicesPage::setSamplingInterval(int intervalMs)
{
    m_timer->start(intervalMs);
}

void DevicesPage::sampleNow()
{
    if (!m_source) return;
    const double now = double(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
    if (m_clockStart < 0) m_clockStart = now;
    m_history->add(m_source->sample(now - m_clockStart));
}

void DevicesPage::onDeviceAdded(const QString& id, int index)
{
    QString name = id;
    for (const auto& d : m_devices->devices())
        if (d.id == id) name = d.kind == app::DeviceDescription::Kind::Cpu ? tr("CPU") : d.name;
    for (auto* plot : m_telemetryPlots) {
        PlotWidget::SeriesStyle style;
        style.colorSlot = index;
        plot->addSeries(name, style);
    }
}

void DevicesPage::onSampled()
{
    for (int m = 0; m < TelemetryHistory::MetricCount; ++m) {
        auto* plot = m_telemetryPlots[std::size_t(m)];
        for (int d = 0; d < plot->seriesCount() && d < m_history->deviceIds().size(); ++d)
            plot->setData(d, m_history->times(d, TelemetryHistory::Metric(m)),
                          m_history->values(d, TelemetryHistory::Metric(m)));
    }
}

void DevicesPage::updateSummary()
{
    if (const auto gpus = selectedGpus(); !gpus.empty()) {
        QStringList names;
        for (int g : gpus) names << tr("GPU %1").arg(g);
        m_summary->setText(tr("%n tower(s), one per checked GPU: %1", nullptr, int(gpus.size()))
                               .arg(names.join(QStringLiteral(", "))));
        m_towers->setEnabled(false);
        m_threads->setEnabled(false);
        emit towerSetupChanged(int(gpus.size()), threadsPerTower());
        return;
    }
    m_towers->setEnabled(m_table->isEnabled()); // CPU towers again (unless a run is going)
    m_threads->setEnabled(m_table->isEnabled());
    const int cores = std::max(1, app::listDevices().front().logicalCores);
    const int t = towers();
    const int threads = threadsPerTower() > 0 ? threadsPerTower() : std::max(1, cores / t);
    const int used = t * threads;
    QString text = tr("%n tower(s)", nullptr, t) + QStringLiteral(" × ") +
                   tr("%n thread(s)", nullptr, threads) + QStringLiteral(" = ") +
                   tr("%1 of %2 logical cores").arg(used).arg(cores);
    if (used > cores)
        text += QStringLiteral(" — ") +
                tr("more threads than cores: the towers will slow each other down");
    m_summary->setText(text);
    emit towerSetupChanged(t, threadsPerTower());
}

std::vector<bool> DevicesPage::slowTowers(const std::vector<double>& ms)
{
    std::vector<bool> slow(ms.size(), false);
    if (ms.size() < 2) return slow;
    for (std::size_t i = 0; i < ms.size(); ++i) {
        std::vector<double> others;
        for (std::size_t j = 0; j < ms.size(); ++j)
            if (j != i) others.push_back(ms[j]);
        std::sort(others.begin(), others.end());
        const std::size_t n = others.size();
        const double median = n % 2 ? others[n / 2] : 0.5 * (others[n / 2 - 1] + others[n / 2]);
        slow[i] = ms[i] > 1.25 * median;
    }
    return slow;
}

void DevicesPage::showTowerTimes(std::int64_t step, const std::vector<double>& towerComputeMs)
{
    m_recentTowerMs.push_back(towerComputeMs);
    if (int(m_recentTowerMs.size()) > kBalanceWindow)
        m_recentTowerMs.erase(m_recentTowerMs.begin());
    std::vector<double> mean(towerComputeMs.size(), 0.0);
    for (std::size_t t = 0; t < mean.size(); ++t) {
        int n = 0;
        for (const auto& r : m_recentTowerMs)
            if (t < r.size()) {
                mean[t] += r[t];
                ++n;
            }
        mean[t] /= std::max(1, n);
    }
    const auto slow = slowTowers(mean);
    QStringList labels;
    QVector<double> values;
    for (std::size_t i = 0; i < towerComputeMs.size(); ++i) {
        labels << tr("tower %1").arg(i);
        values << towerComputeMs[i];
    }
    m_towerChart->setBars(labels, values, QVector<bool>(slow.begin(), slow.end()));
    while (m_towerHistory->seriesCount() < int(towerComputeMs.size()))
        m_towerHistory->addSeries(tr("tower %1").arg(m_towerHistory->seriesCount()));
    for (std::size_t i = 0; i < towerComputeMs.size(); ++i)
        m_towerHistory->addPoint(int(i), double(step), towerComputeMs[i]);

    if (towerComputeMs.size() < 2) {
        m_balance->setText(tr("One tower: nothing to balance."));
        return;
    }
    const auto [fast, slowest] = std::minmax_element(mean.begin(), mean.end());
    QStringList slowNames;
    for (std::size_t i = 0; i < slow.size(); ++i)
        if (slow[i]) slowNames << tr("tower %1").arg(i);
    const QString means =
        tr("over the last %n report(s), the slowest tower averages %1 ms and the fastest %2 ms",
           nullptr, int(m_recentTowerMs.size()))
            .arg(*slowest, 0, 'f', 1)
            .arg(*fast, 0, 'f', 1);
    m_balance->setText(slowNames.isEmpty() ? tr("Balanced: %1.").arg(means)
                                           : tr("<b>Unbalanced:</b> %1 more than 25 % slower than "
                                                "the others (%2); every step waits "
                                                "for the slowest tower.")
                                                 .arg(slowNames.join(QStringLiteral(", ")), means));
}

void DevicesPage::clearTowerTimes()
{
    m_recentTowerMs.clear();
    m_towerChart->clear();
    m_towerHistory->clearSeries();
    m_balance->setText(tr("Start a run to see how evenly the towers share the work."));
}

} // namespace towers::ui
