#include "ui/pages/devices_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardItemModel>
#include <QStyle>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "app/devices/device_list.h"
#include "app/devices/telemetry.h"
#include "engine/train/train_config.h"
#include "ui/models/device_model.h"
#include "ui/models/telemetry_history.h"
#include "ui/plots/plot_widget.h"
#include "ui/plots/stacked_bar_chart.h"
#include "ui/widgets/wheel_guard.h"

namespace towers::ui {

namespace {

// A tower's parts in TowerPart order.
QVector<double> partsOf(const engine::TowerTimes& t)
{
    return {t.dataMs, t.computeMs, t.commMs, t.updateMs};
}

double totalOf(const engine::TowerTimes& t)
{
    return std::max(0.0, t.dataMs) + std::max(0.0, t.computeMs) + std::max(0.0, t.commMs) +
           std::max(0.0, t.updateMs);
}

// The mean of each part over `times`.
engine::TowerTimes meanOf(const std::vector<engine::TowerTimes>& times)
{
    engine::TowerTimes m;
    for (const auto& t : times) {
        m.dataMs += t.dataMs;
        m.computeMs += t.computeMs;
        m.commMs += t.commMs;
        m.updateMs += t.updateMs;
    }
    const double n = double(std::max<std::size_t>(1, times.size()));
    m.dataMs /= n;
    m.computeMs /= n;
    m.commMs /= n;
    m.updateMs /= n;
    return m;
}

QString percent(double share)
{
    return QString::number(std::lround(100 * share));
}

// "tower 0", "towers 0 and 2", "towers 0, 2 and 3".
QString towerNames(const std::vector<std::size_t>& towers)
{
    if (towers.size() == 1) return DevicesPage::tr("tower %1").arg(towers.front());
    QStringList numbers;
    for (std::size_t t = 0; t + 1 < towers.size(); ++t) numbers << QString::number(towers[t]);
    return DevicesPage::tr("towers %1 and %2")
        .arg(numbers.join(QStringLiteral(", ")))
        .arg(towers.back());
}

QString capitalised(QString s)
{
    if (!s.isEmpty()) s[0] = s[0].toUpper();
    return s;
}

// MiB as a user writes them: "25", "0.5", not "25.00".
class MibSpinBox : public QDoubleSpinBox
{
public:
    using QDoubleSpinBox::QDoubleSpinBox;

protected:
    QString textFromValue(double value) const override
    {
        QString text = QDoubleSpinBox::textFromValue(value);
        const QString point = locale().decimalPoint();
        if (text.contains(point)) {
            while (text.endsWith(QLatin1Char('0'))) text.chop(1);
            if (text.endsWith(point)) text.chop(point.size());
        }
        return text;
    }
};

// A choice of the towers' sharing options (a TrainConfig string per item), explained by `tip`.
QComboBox* optionChoice(QWidget* parent, const QList<QPair<QString, QString>>& items,
                        const QString& tip)
{
    auto* box = new QComboBox(parent);
    for (const auto& [text, value] : items) box->addItem(text, value);
    box->setToolTip(tip);
    return box;
}

// Selects the item of `value`; one this build does not know (a run saved by another version)
// gives the first, the default.
void selectOption(QComboBox* box, const std::string& value)
{
    box->setCurrentIndex(std::max(0, box->findData(QString::fromStdString(value))));
}

const char* const kNoRunText = QT_TRANSLATE_NOOP(
    "towers::ui::DevicesPage", "Start a run to see where each tower's step goes: data, compute, "
                               "communication, update.");

} // namespace

DevicesPage::DevicesPage(QWidget* parent)
    : QWidget(parent), m_devices(new DeviceModel(this)), m_history(new TelemetryHistory(600, this)),
      m_source(app::makeDeviceTelemetry()), m_timer(new QTimer(this))
{
    auto* top = new QVBoxLayout(this);
    top->addWidget(makeDevicesBox());
    top->addWidget(makeChartsSplitter(), 1);
    connectSignals();
    fillDeviceTable();
    updateSummary();
    m_timer->start(1000);
    sampleNow();
    guardWheel(this); // the wheel scrolls the page; a box takes it only once it has the focus
}

QGroupBox* DevicesPage::makeDevicesBox()
{
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
    // It may name commands to install NVIDIA's libraries: let them be copied.
    m_gpuNote->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_gpuNote->setVisible(!app::gpuBackendAvailable());
    QFont bold = m_gpuNote->font();
    bold.setBold(true);
    m_gpuNote->setFont(bold);
    devicesLayout->addWidget(m_gpuNote);

    QFormLayout* towerForm = makeTowerForm(devicesBox);
    QFormLayout* sharingForm = makeSharingForm(devicesBox);
    selectDefaultTowerOptions();

    auto* settingsRow = new QHBoxLayout;
    settingsRow->addLayout(towerForm);
    settingsRow->addSpacing(4 *
                            std::max(6, style()->pixelMetric(QStyle::PM_LayoutHorizontalSpacing)));
    settingsRow->addLayout(sharingForm);
    settingsRow->addStretch(1);
    devicesLayout->addLayout(settingsRow);
    return devicesBox;
}

QFormLayout* DevicesPage::makeTowerForm(QGroupBox* devicesBox)
{
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
    m_precision = new QComboBox(devicesBox);
    m_precision->addItem(tr("float32"), QVariant::fromValue(int(engine::Precision::Float32)));
    m_precision->addItem(tr("bfloat16 mixed"),
                         QVariant::fromValue(int(engine::Precision::BFloat16)));
    m_bf16OnCpu = QString::fromStdString(
        engine::TrainConfig::precisionUnavailable("onednn", engine::Precision::BFloat16));
    m_bf16OnGpu = QString::fromStdString(
        engine::TrainConfig::precisionUnavailable("cuda", engine::Precision::BFloat16));
    towerForm->addRow(tr("CPU to&wers:"), m_towers);
    towerForm->addRow(tr("&Threads per tower:"), m_threads);
    towerForm->addRow(tr("&Precision:"), m_precision);
    m_summary = new QLabel(devicesBox);
    m_summary->setWordWrap(true);
    towerForm->addRow(QString(), m_summary);
    return towerForm;
}

QFormLayout* DevicesPage::makeSharingForm(QGroupBox* devicesBox)
{
    // How the towers share the work: beside the towers, so that the page keeps its height.
    auto* sharingForm = new QFormLayout;
    sharingForm->setFieldGrowthPolicy(QFormLayout::FieldsStayAtSizeHint);
    const QString gpuOnly = tr("<p><i>For GPU towers: check a GPU above.</i></p>");
    m_gpuData = optionChoice(
        devicesBox,
        {{tr("on the GPUs, where it fits"), QStringLiteral("auto")},
         {tr("batches from the host"), QStringLiteral("off")}},
        tr("<p><b>on the GPUs, where it fits</b>: each GPU keeps the training set as bytes "
           "(when it takes at most a quarter of the GPU's free memory) and makes the distorted "
           "images itself, the same images as the host would make.</p><p><b>batches from the "
           "host</b>: the host makes every batch and copies it to the GPUs.</p>") +
            gpuOnly);
    m_allreduce = optionChoice(
        devicesBox,
        {{tr("on the GPUs"), QStringLiteral("auto")},
         {tr("through the host"), QStringLiteral("host")}},
        tr("<p>How the towers average their gradients every step.</p><p><b>on the GPUs</b>: "
           "NCCL between GPUs, a kernel when towers share a GPU (through the host where the "
           "backend cannot).</p><p><b>through the host</b>: the gradients are copied to the host "
           "and averaged there (the classic multi-GPU design; slower).</p>") +
            gpuOnly);
    m_cudaGraphs = new QCheckBox(tr("CUDA &graphs"), devicesBox);
    m_cudaGraphs->setToolTip(
        tr("<p>Each GPU tower records its step (forward, backward and update) as a CUDA graph "
           "once it has run one step of that shape, and replays it every step after: one launch "
           "instead of one per op, so the GPU waits less on the host. With two towers or more "
           "the step is recorded in parts, and the gradients' averages start between them as "
           "backward runs.</p><p>The results are bitwise the same either way. Where a capture "
           "fails the run goes on op by op and its log says so.</p>") +
        gpuOnly);
    m_tf32 = new QCheckBox(tr("T&F32 tensor cores"), devicesBox);
    m_tf32->setToolTip(
        tr("<p>Lets cuDNN and cuBLAS multiply float32 on TF32 tensor cores (10-bit mantissas in "
           "the products, float32 sums): faster on Ampere and later, less exact. Off, float32 is "
           "float32. bf16 precision uses tensor cores either way.</p>") +
        gpuOnly);
    m_cudnnBenchmark = new QCheckBox(tr("&Measure cuDNN algorithms"), devicesBox);
    m_cudnnBenchmark->setToolTip(
        tr("<p>Each convolution runs the algorithm that cuDNN measures fastest for its shape, "
           "as PyTorch's cudnn.benchmark. Timing noise may make another run choose another "
           "algorithm, so runs may then differ in their last bits.</p><p>Off, cuDNN's "
           "heuristics choose, the same in every run: a run repeats, and resumes, "
           "bitwise.</p>") +
        gpuOnly);
    m_bucketMb = new MibSpinBox(devicesBox);
    m_bucketMb->setRange(0, engine::TrainConfig::kMaxBucketMb);
    m_bucketMb->setDecimals(2);
    m_bucketMb->setSingleStep(5);
    m_bucketMb->setSuffix(tr(" MiB"));
    m_bucketMb->setSpecialValueText(tr("none (all after backward)"));
    m_bucketMb->setToolTip(
        tr("<p>With two towers or more, the gradients are averaged in groups of about this many "
           "MiB, each as soon as backward has produced it, so that the averaging overlaps "
           "backward; 0 averages them all at once after backward.</p><p>The results are the same "
           "whatever the size; only the speed changes.</p>"));
    sharingForm->addRow(tr("Training &data:"), m_gpuData);
    sharingForm->addRow(tr("Gradient &averaging:"), m_allreduce);
    sharingForm->addRow(QString(), m_cudaGraphs);
    sharingForm->addRow(QString(), m_tf32);
    sharingForm->addRow(QString(), m_cudnnBenchmark);
    sharingForm->addRow(tr("Gradient &buckets:"), m_bucketMb);
    return sharingForm;
}

void DevicesPage::selectDefaultTowerOptions()
{
    const engine::TrainConfig defaults;
    setGpuData(defaults.gpuData);
    setAllreduce(defaults.allreduce);
    setCudaGraphs(defaults.cudaGraphs);
    setTf32(defaults.allowTf32);
    setCudnnBenchmark(defaults.cudnnBenchmark);
    setBucketMb(defaults.bucketMb);
}

QSplitter* DevicesPage::makeChartsSplitter()
{
    auto* split = new QSplitter(Qt::Horizontal, this);
    QGroupBox* telemetryBox = makeTelemetryBox(split);
    QGroupBox* towerBox = makeTowerBox(split);
    split->addWidget(telemetryBox);
    split->addWidget(towerBox);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    return split;
}

QGroupBox* DevicesPage::makeTelemetryBox(QSplitter* split)
{
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
    return telemetryBox;
}

QGroupBox* DevicesPage::makeTowerBox(QSplitter* split)
{
    auto* towerBox = new QGroupBox(tr("Where each tower's step goes"), split);
    auto* towerLayout = new QVBoxLayout(towerBox);
    const QStringList partNames{tr("data wait"), tr("compute"), tr("communication"), tr("update")};
    // Compute blue, communication orange, data purple, update green; red marks a slow tower.
    const QVector<int> partColors{4, 0, 1, 2};
    m_towerChart = new StackedBarChart(tr("Latest step"), Qt::Horizontal, towerBox);
    m_towerChart->setSegments(partNames, partColors);
    m_towerChart->setUnit(tr("ms"));
    m_towerChart->setValueTextsVisible(true);
    m_towerChart->setEmptyMessage(tr("Shown while training runs"));
    m_towerChart->setToolTip(
        tr("<p>Each tower's latest step, in the order it happens:</p>"
           "<p><b>data wait</b>: waiting for the batch (and a GPU tower's copy of its slice);<br>"
           "<b>compute</b>: forward, loss and backward (with CUDA graphs, a GPU tower's "
           "whole replayed step, the update included);<br><b>communication</b>: averaging the "
           "gradients, where backward does not hide it, and waiting for the other towers;<br>"
           "<b>update</b>: the optimizer step.</p><p>A tower outlined in red computes more than "
           "25 % longer than the others. Hover a bar for its values.</p>"));
    m_timelineChoice = new QComboBox(towerBox);
    m_timelineChoice->addItem(tr("the towers' mean"), -1);
    m_timelineChoice->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    auto* timelineRow = new QHBoxLayout;
    auto* timelineLabel = new QLabel(tr("Time&line of"), towerBox);
    timelineLabel->setBuddy(m_timelineChoice);
    timelineRow->addWidget(timelineLabel);
    timelineRow->addWidget(m_timelineChoice);
    timelineRow->addStretch(1);
    m_towerTimeline = new StackedBarChart(tr("Recent reports"), Qt::Vertical, towerBox);
    m_towerTimeline->setSegments(partNames, partColors);
    m_towerTimeline->setUnit(tr("ms"));
    m_towerTimeline->setKeyLabel(tr("step"));
    m_towerTimeline->setLegendVisible(false); // the bars' legend above says the colours
    m_towerTimeline->setEmptyMessage(tr("Shown while training runs"));
    m_balance = new QLabel(tr(kNoRunText), towerBox);
    m_balance->setWordWrap(true);
    m_balance->setTextFormat(Qt::RichText);
    m_balance->setToolTip(tr("Judged on each tower's mean over the last %n report(s); a part is "
                             "named when it takes %1 % of the step or more.",
                             nullptr, kBalanceWindow)
                              .arg(percent(kWaitShare)));
    towerLayout->addWidget(m_towerChart, 1);
    towerLayout->addLayout(timelineRow);
    towerLayout->addWidget(m_towerTimeline, 1);
    towerLayout->addWidget(m_balance);
    return towerBox;
}

void DevicesPage::connectSignals()
{
    connect(m_history, &TelemetryHistory::deviceAdded, this, &DevicesPage::onDeviceAdded);
    connect(m_history, &TelemetryHistory::sampled, this, &DevicesPage::onSampled);
    connect(m_towers, &QSpinBox::valueChanged, this, &DevicesPage::updateSummary);
    connect(m_threads, &QSpinBox::valueChanged, this, &DevicesPage::updateSummary);
    connect(m_devices, &DeviceModel::inclusionChanged, this, &DevicesPage::updateSummary);
    connect(m_precision, &QComboBox::currentIndexChanged, this,
            [this] { emit precisionChanged(); });
    connect(m_gpuData, &QComboBox::currentIndexChanged, this,
            [this] { emit towerOptionsChanged(); });
    connect(m_allreduce, &QComboBox::currentIndexChanged, this,
            [this] { emit towerOptionsChanged(); });
    connect(m_cudaGraphs, &QCheckBox::toggled, this, [this] { emit towerOptionsChanged(); });
    connect(m_tf32, &QCheckBox::toggled, this, [this] { emit towerOptionsChanged(); });
    connect(m_cudnnBenchmark, &QCheckBox::toggled, this, [this] { emit towerOptionsChanged(); });
    connect(m_bucketMb, &QDoubleSpinBox::valueChanged, this,
            [this] { emit towerOptionsChanged(); });
    connect(m_timer, &QTimer::timeout, this, &DevicesPage::sampleNow);
    connect(m_timelineChoice, &QComboBox::currentIndexChanged, this, &DevicesPage::updateTimeline);
}

void DevicesPage::fillDeviceTable()
{
    m_devices->setDevices(app::listDevices());
    // As tall as its rows: one per device.
    m_table->setFixedHeight(m_table->horizontalHeader()->sizeHint().height() +
                            m_table->verticalHeader()->defaultSectionSize() *
                                std::max(1, m_devices->rowCount()) +
                            2 * m_table->frameWidth() + 2);
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
    for (const auto& d : m_devices->includedGpus()) gpus.push_back(d.cudaNumber);
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

engine::Precision DevicesPage::precision() const
{
    return engine::Precision(m_precision->currentData().toInt());
}

void DevicesPage::setPrecision(engine::Precision precision)
{
    const int i = m_precision->findData(QVariant::fromValue(int(precision)));
    const auto* model = qobject_cast<const QStandardItemModel*>(m_precision->model());
    // An entry that cannot be chosen here (a run saved on another machine) gives float32.
    if (i >= 0 && model->item(i)->isEnabled())
        m_precision->setCurrentIndex(i);
    else
        m_precision->setCurrentIndex(0);
}

std::string DevicesPage::gpuData() const
{
    return m_gpuData->currentData().toString().toStdString();
}

void DevicesPage::setGpuData(const std::string& gpuData)
{
    selectOption(m_gpuData, gpuData);
}

std::string DevicesPage::allreduce() const
{
    return m_allreduce->currentData().toString().toStdString();
}

void DevicesPage::setAllreduce(const std::string& allreduce)
{
    selectOption(m_allreduce, allreduce);
}

bool DevicesPage::cudaGraphs() const
{
    return m_cudaGraphs->isChecked();
}

void DevicesPage::setCudaGraphs(bool on)
{
    m_cudaGraphs->setChecked(on);
}

bool DevicesPage::tf32() const
{
    return m_tf32->isChecked();
}

void DevicesPage::setTf32(bool on)
{
    m_tf32->setChecked(on);
}

bool DevicesPage::cudnnBenchmark() const
{
    return m_cudnnBenchmark->isChecked();
}

void DevicesPage::setCudnnBenchmark(bool on)
{
    m_cudnnBenchmark->setChecked(on);
}

double DevicesPage::bucketMb() const
{
    return m_bucketMb->value();
}

void DevicesPage::setBucketMb(double mib)
{
    m_bucketMb->setValue(mib); // clamped to the range
}

QString DevicesPage::bf16Unavailable() const
{
    return selectedGpus().empty() ? m_bf16OnCpu : m_bf16OnGpu;
}

void DevicesPage::updatePrecisionChoice()
{
    auto* model = qobject_cast<QStandardItemModel*>(m_precision->model());
    const int i = m_precision->findData(QVariant::fromValue(int(engine::Precision::BFloat16)));
    QStandardItem* bf16 = model->item(i);
    const QString why = bf16Unavailable();
    bf16->setEnabled(why.isEmpty());
    QString tip = tr(
        "<p><b>float32</b>: everything in float32.</p><p><b>bfloat16 mixed</b>: convolutions "
        "and matrix products read bfloat16 copies of their inputs and accumulate in float32; "
        "the weights, the optimizer state, the loss and the checkpoints stay float32 (no loss "
        "scaling). CPU towers, on a CPU with AVX512_BF16 or AMX; GPU towers, on a GPU of compute "
        "capability 8.0 or later.</p>");
    if (!why.isEmpty())
        tip += tr("<p>Not available for these towers: %1</p>").arg(why.toHtmlEscaped());
    m_precision->setToolTip(tip);
    bf16->setToolTip(why.isEmpty() ? tr("Convolutions and matrix products in bfloat16, "
                                        "accumulating in float32; the weights stay float32")
                                   : why);
    if (!why.isEmpty() && m_precision->currentIndex() == i) m_precision->setCurrentIndex(0);
}

void DevicesPage::setTowerSetupEnabled(bool enabled)
{
    m_setupEnabled = enabled;
    m_table->setEnabled(enabled);
    updateEnabled();
}

void DevicesPage::updateEnabled()
{
    // CPU towers have a count and threads; GPU towers one tower per GPU, their data, their
    // averaging, their CUDA graphs, TF32 and cuDNN's algorithms; both have a precision and
    // gradient buckets.
    const bool gpu = !selectedGpus().empty();
    m_towers->setEnabled(m_setupEnabled && !gpu);
    m_threads->setEnabled(m_setupEnabled && !gpu);
    m_precision->setEnabled(m_setupEnabled);
    m_gpuData->setEnabled(m_setupEnabled && gpu);
    m_allreduce->setEnabled(m_setupEnabled && gpu);
    m_cudaGraphs->setEnabled(m_setupEnabled && gpu);
    m_tf32->setEnabled(m_setupEnabled && gpu);
    m_cudnnBenchmark->setEnabled(m_setupEnabled && gpu);
    m_bucketMb->setEnabled(m_setupEnabled);
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
    updatePrecisionChoice();
    if (const auto gpus = m_devices->includedGpus(); !gpus.empty()) {
        QStringList names;
        for (const auto& d : gpus) names << app::gpuLabel(d);
        m_summary->setText(tr("%n tower(s), one per checked GPU: %1", nullptr, int(gpus.size()))
                               .arg(names.join(QStringLiteral(", "))));
        updateEnabled();
        emit towerSetupChanged(int(gpus.size()), threadsPerTower());
        return;
    }
    updateEnabled(); // CPU towers again
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

int DevicesPage::timelineTower() const
{
    return m_timelineChoice->currentData().toInt();
}

void DevicesPage::setTimelineTower(int tower)
{
    const int i = m_timelineChoice->findData(tower);
    if (i >= 0) m_timelineChoice->setCurrentIndex(i);
}

QString DevicesPage::verdict() const
{
    return m_balance->text();
}

QString DevicesPage::verdictFor(const std::vector<engine::TowerTimes>& mean)
{
    const std::size_t n = mean.size();
    if (n == 0) return tr(kNoRunText);
    std::vector<double> total(n);
    for (std::size_t t = 0; t < n; ++t) total[t] = totalOf(mean[t]);
    auto share = [&](double ms, std::size_t t) {
        return total[t] > 0 ? std::max(0.0, ms) / total[t] : 0.0;
    };
    auto meanShare = [&](auto part) {
        double sum = 0;
        for (std::size_t t = 0; t < n; ++t) sum += share(part(mean[t]), t);
        return sum / double(n);
    };
    const double dataShare = meanShare([](const auto& t) { return t.dataMs; });
    const double computeShare = meanShare([](const auto& t) { return t.computeMs; });
    const double updateShare = meanShare([](const auto& t) { return t.updateMs; });

    QStringList findings;
    if (dataShare >= kWaitShare)
        // The count chooses the form (one tower: "the tower waits for its batch").
        findings << tr("<b>Waiting on the data:</b> the tower(s) wait(s) for their batch %1 % of "
                       "the step: the input pipeline is the bottleneck.",
                       nullptr, int(n))
                        .arg(percent(dataShare));

    // Communication every tower sees (the slowest tower's: it waits for no one) is the averaging
    // itself; a tower's communication beyond it is time spent waiting for the others.
    double common = mean.front().commMs;
    for (const auto& t : mean) common = std::min(common, t.commMs);
    common = std::max(0.0, common);
    std::vector<std::size_t> waiting;
    double lowWait = 1, highWait = 0, waitingCompute = 0;
    if (n >= 2)
        for (std::size_t t = 0; t < n; ++t) {
            const double w = share(mean[t].commMs - common, t);
            if (w < kWaitShare) continue;
            waiting.push_back(t);
            lowWait = std::min(lowWait, w);
            highWait = std::max(highWait, w);
            waitingCompute += mean[t].computeMs;
        }
    std::vector<double> compute(n);
    for (std::size_t t = 0; t < n; ++t) compute[t] = mean[t].computeMs;
    const auto slow = slowTowers(compute);
    const std::size_t slowest =
        std::size_t(std::max_element(compute.begin(), compute.end()) - compute.begin());
    if (!waiting.empty()) {
        const QString range = percent(lowWait) == percent(highWait)
                                  ? percent(highWait)
                                  : percent(lowWait) + QStringLiteral("–") + percent(highWait);
        QString text = tr("<b>Waiting on the others:</b> %1 wait(s) on the others %2 % of "
                          "their step (communication)",
                          nullptr, int(waiting.size()))
                           .arg(capitalised(towerNames(waiting)), range);
        waitingCompute /= double(waiting.size());
        const bool slowestWaits =
            std::find(waiting.begin(), waiting.end(), slowest) != waiting.end();
        if (!slowestWaits && waitingCompute > 0 && compute[slowest] >= 1.1 * waitingCompute)
            text += tr(": tower %1 computes %2 % longer")
                        .arg(slowest)
                        .arg(percent(compute[slowest] / waitingCompute - 1));
        findings << text + QLatin1Char('.');
    } else if (std::find(slow.begin(), slow.end(), true) != slow.end()) {
        std::vector<std::size_t> slowOnes;
        for (std::size_t t = 0; t < n; ++t)
            if (slow[t]) slowOnes.push_back(t);
        findings << tr("<b>Unbalanced:</b> %1 compute(s) more than 25 % longer than the "
                       "others; every step waits for the slowest tower.",
                       nullptr, int(slowOnes.size()))
                        .arg(capitalised(towerNames(slowOnes)));
    }
    double commonShare = 0;
    for (std::size_t t = 0; t < n; ++t) commonShare += share(common, t);
    commonShare /= double(n);
    if (commonShare >= kWaitShare)
        findings << tr("<b>Communication-bound:</b> averaging the gradients takes %1 % of the "
                       "step beyond what backward hides.")
                        .arg(percent(commonShare));
    else if (waiting.empty()) {
        // Neither the averaging alone nor the waiting alone, but the two together.
        std::vector<std::size_t> communicating;
        double highComm = 0;
        for (std::size_t t = 0; t < n; ++t)
            if (const double c = share(mean[t].commMs, t); c >= kWaitShare) {
                communicating.push_back(t);
                highComm = std::max(highComm, c);
            }
        if (!communicating.empty())
            findings << tr("<b>Waiting on communication:</b> %1 spend(s) up to %2 % of their "
                           "step averaging gradients and waiting for the others.",
                           nullptr, int(communicating.size()))
                            .arg(capitalised(towerNames(communicating)), percent(highComm));
    }
    if (!findings.isEmpty()) return findings.join(QLatin1Char(' '));

    if (n == 1)
        return tr("<b>One tower:</b> compute %1 % of its step, data wait %2 %, update %3 %; "
                  "nothing to balance.")
            .arg(percent(computeShare), percent(dataShare), percent(updateShare));
    const auto [fast, slowestMs] = std::minmax_element(compute.begin(), compute.end());
    return tr("<b>Balanced:</b> the towers compute %1 % of their step (the slowest %2 ms, the "
              "fastest %3 ms) and no wait reaches %4 %.")
        .arg(percent(computeShare))
        .arg(*slowestMs, 0, 'f', 1)
        .arg(*fast, 0, 'f', 1)
        .arg(percent(kWaitShare));
}

void DevicesPage::showTowerTimes(std::int64_t step, const std::vector<engine::TowerTimes>& towers)
{
    if (towers.empty()) return;
    m_reports.push_back({step, towers});
    while (int(m_reports.size()) > kTimelineReports) m_reports.pop_front();

    // Each tower's mean over the last kBalanceWindow reports.
    const std::size_t n = towers.size();
    std::vector<std::vector<engine::TowerTimes>> recent(n);
    int window = 0;
    for (auto r = m_reports.rbegin(); r != m_reports.rend() && window < kBalanceWindow;
         ++r, ++window)
        for (std::size_t t = 0; t < n && t < r->towers.size(); ++t)
            recent[t].push_back(r->towers[t]);
    std::vector<engine::TowerTimes> mean(n);
    std::vector<double> compute(n);
    for (std::size_t t = 0; t < n; ++t) {
        mean[t] = meanOf(recent[t]);
        compute[t] = mean[t].computeMs;
    }
    const auto slow = slowTowers(compute);

    QStringList labels;
    QVector<QVector<double>> values;
    for (std::size_t t = 0; t < n; ++t) {
        labels << tr("tower %1").arg(t);
        values << partsOf(towers[t]);
    }
    m_towerChart->setBars(labels, values, QVector<bool>(slow.begin(), slow.end()));

    for (int t = m_timelineChoice->count() - 1; t < int(n); ++t)
        m_timelineChoice->addItem(tr("tower %1").arg(t), t);
    updateTimeline();
    m_balance->setText(verdictFor(mean));
}

void DevicesPage::updateTimeline()
{
    const int tower = timelineTower();
    QVector<double> keys;
    QVector<QVector<double>> values;
    for (const auto& r : m_reports) {
        if (tower >= int(r.towers.size())) continue;
        keys << double(r.step);
        values << partsOf(tower < 0 ? meanOf(r.towers) : r.towers[std::size_t(tower)]);
    }
    m_towerTimeline->setColumns(keys, values);
    m_towerTimeline->setTitle(keys.size() <= 1 ? tr("Latest report")
                                               : tr("Last %1 reports").arg(keys.size()));
}

void DevicesPage::clearTowerTimes()
{
    m_reports.clear();
    m_towerChart->clear();
    m_towerTimeline->clear();
    {
        const QSignalBlocker block(m_timelineChoice);
        while (m_timelineChoice->count() > 1) m_timelineChoice->removeItem(1);
        m_timelineChoice->setCurrentIndex(0);
    }
    m_balance->setText(tr(kNoRunText));
}

} // namespace towers::ui
