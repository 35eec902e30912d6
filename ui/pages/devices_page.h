#pragma once
// The Devices page: the CPU and every GPU (a table of data, app::listDevices()), with a check
// box to include each as a tower; what this build can do (no GPU backend yet: CPU towers, their
// number and threads); the precision of the towers' arithmetic (bfloat16 only where their
// backend runs it, else the entry disabled with the reason); for GPU towers, whether the training
// set is held on the GPUs, how the gradients are averaged and whether the steps are captured as
// CUDA graphs, and the gradient bucket size of
// every run of two towers or more; live utilisation, memory, temperature
// and power history of every device (one curve per device, added as data arrives); and during
// training where each tower's step goes (data wait, compute, exposed communication, update): a
// stacked bar per tower for the latest step, a timeline of the last reports, and a verdict in words
// (balanced, waiting on the data, waiting on the others, unbalanced) so that a user sees what the
// towers wait on.
#include <QWidget>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "engine/ops/precision.h"
#include "engine/train/tower_times.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QGroupBox;
class QLabel;
class QSpinBox;
class QSplitter;
class QTableView;
class QTimer;

namespace towers::app {
class TelemetrySource;
}

namespace towers::ui {

class DeviceModel;
class PlotWidget;
class StackedBarChart;
class TelemetryHistory;

class DevicesPage : public QWidget
{
    Q_OBJECT
public:
    explicit DevicesPage(QWidget* parent = nullptr);
    ~DevicesPage() override;

    DeviceModel* deviceModel() const { return m_devices; }
    TelemetryHistory* history() const { return m_history; }

    // The towers of a new run: one per checked GPU when GPUs are checked, else the CPU towers.
    int towers() const;
    int threadsPerTower() const; // 0 = the cores shared out
    // The checked GPUs (CUDA numbers, one tower each), empty when the towers run on the CPU.
    std::vector<int> selectedGpus() const;
    void setTowers(int towers);
    void setThreadsPerTower(int threads);
    // The precision of a new run (--precision). Bfloat16 can be chosen only where the towers'
    // backend runs it (CPU towers on a CPU with AVX512_BF16 or AMX); elsewhere its entry is
    // disabled with bf16Unavailable() as its tooltip, and a run set to it gets float32.
    engine::Precision precision() const;
    void setPrecision(engine::Precision precision);
    // Why bfloat16 cannot be chosen for the towers as they are set up now; "" when it can.
    QString bf16Unavailable() const;
    QComboBox* precisionChoice() const { return m_precision; }
    // GPU towers' training data (TrainConfig::gpuData, --gpu-data): "auto" holds the training set
    // on each GPU and makes the distorted images there when it fits, "off" copies the host's
    // batches. A value other than these gives "auto". Can be changed only with GPU towers.
    std::string gpuData() const;
    void setGpuData(const std::string& gpuData);
    QComboBox* gpuDataChoice() const { return m_gpuData; }
    // GPU towers' gradient averaging (TrainConfig::allreduce, --allreduce): "auto" on the GPUs
    // (NCCL, a same-GPU kernel), "host" through host copies. A value other than these gives
    // "auto". Can be changed only with GPU towers.
    std::string allreduce() const;
    void setAllreduce(const std::string& allreduce);
    QComboBox* allreduceChoice() const { return m_allreduce; }
    // GPU towers' CUDA graphs (TrainConfig::cudaGraphs, --cuda-graphs): checked, the GPU
    // towers' steps are captured once warm and replayed; unchecked, issued op by op. Can be
    // changed only with GPU towers.
    bool cudaGraphs() const;
    void setCudaGraphs(bool on);
    QCheckBox* cudaGraphsCheck() const { return m_cudaGraphs; }
    // GPU towers' TF32 tensor cores for float32 (TrainConfig::allowTf32, --tf32) and convolution
    // algorithms measured by cuDNN (TrainConfig::cudnnBenchmark, --cudnn-benchmark): unchecked by
    // default; can be changed only with GPU towers (a run on CPU towers gets neither).
    bool tf32() const;
    void setTf32(bool on);
    QCheckBox* tf32Check() const { return m_tf32; }
    bool cudnnBenchmark() const;
    void setCudnnBenchmark(bool on);
    QCheckBox* cudnnBenchmarkCheck() const { return m_cudnnBenchmark; }
    // MiB of gradients per bucket (TrainConfig::bucketMb, --bucket-mb; 0 = one collective after
    // backward), for CPU and GPU towers alike; clamped to 0..TrainConfig::kMaxBucketMb.
    double bucketMb() const;
    void setBucketMb(double mib);
    QDoubleSpinBox* bucketSize() const { return m_bucketMb; }
    // False while a run is going: its towers are fixed.
    void setTowerSetupEnabled(bool enabled);

    // Where telemetry comes from (default: app::CpuTelemetry); sampled every `intervalMs`.
    void setTelemetrySource(std::unique_ptr<app::TelemetrySource> source);
    void setSamplingInterval(int intervalMs);
    void sampleNow();
    PlotWidget* telemetryPlot(int metric) const { return m_telemetryPlots.at(std::size_t(metric)); }

    // The parts of a tower's step, in the order they happen and are stacked.
    enum TowerPart
    {
        DataPart,
        ComputePart,
        CommunicationPart,
        UpdatePart,
        TowerPartCount
    };

    // Where each tower's time went in one reported step (Trainer StepMetrics::towerTimes).
    void showTowerTimes(std::int64_t step, const std::vector<engine::TowerTimes>& towerTimes);
    void clearTowerTimes();
    // The latest step: a bar per tower, its segments in TowerPart order, slow towers outlined.
    StackedBarChart* towerChart() const { return m_towerChart; }
    // The last kTimelineReports reports, a column per report, of timelineTower().
    StackedBarChart* towerTimeline() const { return m_towerTimeline; }
    // The tower the timeline shows; -1: the towers' mean.
    int timelineTower() const;
    QComboBox* timelineChoice() const { return m_timelineChoice; }
    void setTimelineTower(int tower);
    // The verdict in words beside the charts (rich text).
    QString verdict() const;

    // Towers whose time exceeds 1.25 x the median of the other towers' times (none with fewer
    // than two towers). The page applies it to each tower's mean compute time over the last
    // kBalanceWindow reports, so one noisy step does not flag a tower.
    static std::vector<bool> slowTowers(const std::vector<double>& ms);
    // What each tower's mean split (over the last kBalanceWindow reports) shows, in plain words: a
    // wait is named only when it takes at least kWaitShare of the step.
    static QString verdictFor(const std::vector<engine::TowerTimes>& mean);
    static constexpr int kBalanceWindow = 10;
    static constexpr int kTimelineReports = 60;
    static constexpr double kWaitShare = 0.20;

signals:
    void towerSetupChanged(int towers, int threadsPerTower);
    void precisionChanged();
    // The training data, the gradient averaging, the CUDA graphs or the bucket size changed.
    void towerOptionsChanged();

private:
    // The constructor's steps, in order. The Devices box: the device table, the GPU note, the
    // tower settings beside the towers' sharing options.
    QGroupBox* makeDevicesBox();
    // The CPU towers, their threads and precision, and the summary below them.
    QFormLayout* makeTowerForm(QGroupBox* devicesBox);
    // The GPU towers' options and the gradient bucket size.
    QFormLayout* makeSharingForm(QGroupBox* devicesBox);
    void selectDefaultTowerOptions(); // a default TrainConfig's sharing options
    // The live telemetry beside where each tower's step goes.
    QSplitter* makeChartsSplitter();
    QGroupBox* makeTelemetryBox(QSplitter* split); // a plot per metric
    // The latest step's bars, the timeline of recent reports and the verdict.
    QGroupBox* makeTowerBox(QSplitter* split);
    // The history, the tower settings, the timer and the timeline choice to the page.
    void connectSignals();
    void fillDeviceTable(); // the devices found, the table as tall as its rows

    void onDeviceAdded(const QString& id, int index);
    void onSampled();
    void updateSummary();
    void updatePrecisionChoice();
    void updateEnabled(); // which tower settings apply to the towers as they are set up now
    void updateTimeline();

    DeviceModel* m_devices;
    TelemetryHistory* m_history;
    std::unique_ptr<app::TelemetrySource> m_source;
    QTimer* m_timer;
    double m_clockStart = -1;
    QTableView* m_table;
    QLabel* m_gpuNote;
    QSpinBox* m_towers;
    QSpinBox* m_threads;
    QComboBox* m_precision;
    QComboBox* m_gpuData;
    QComboBox* m_allreduce;
    QCheckBox* m_cudaGraphs;
    QCheckBox* m_tf32;
    QCheckBox* m_cudnnBenchmark;
    QDoubleSpinBox* m_bucketMb;
    bool m_setupEnabled = true;       // setTowerSetupEnabled
    QString m_bf16OnCpu, m_bf16OnGpu; // why bf16 does not run there, "" where it does
    QLabel* m_summary;
    std::vector<PlotWidget*> m_telemetryPlots;
    StackedBarChart* m_towerChart;
    QComboBox* m_timelineChoice;
    StackedBarChart* m_towerTimeline;
    QLabel* m_balance;
    struct Report
    {
        std::int64_t step;
        std::vector<engine::TowerTimes> towers;
    };
    std::deque<Report> m_reports; // the last kTimelineReports
};

} // namespace towers::ui
