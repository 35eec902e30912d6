#pragma once
// The Devices page: the CPU and every GPU (a table of data, app::listDevices()), with a check
// box to include each as a tower; what this build can do (no GPU backend yet: CPU towers, their
// number and threads); live utilisation, memory, temperature and power history of every device
// (one curve per device, added as data arrives); and during training the step time of each tower,
// the slow ones highlighted so an unbalanced tower stands out.
#include <QWidget>

#include <memory>
#include <vector>

class QLabel;
class QSpinBox;
class QTableView;
class QTimer;

namespace towers::app {
class TelemetrySource;
}

namespace towers::ui {

class BarChart;
class DeviceModel;
class PlotWidget;
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
    // False while a run is going: its towers are fixed.
    void setTowerSetupEnabled(bool enabled);

    // Where telemetry comes from (default: app::CpuTelemetry); sampled every `intervalMs`.
    void setTelemetrySource(std::unique_ptr<app::TelemetrySource> source);
    void setSamplingInterval(int intervalMs);
    void sampleNow();
    PlotWidget* telemetryPlot(int metric) const { return m_telemetryPlots.at(std::size_t(metric)); }

    // The forward + backward time of each tower in one step (Trainer StepMetrics).
    void showTowerTimes(std::int64_t step, const std::vector<double>& towerComputeMs);
    void clearTowerTimes();
    BarChart* towerChart() const { return m_towerChart; }
    PlotWidget* towerHistoryPlot() const { return m_towerHistory; }
    // Towers whose time exceeds 1.25 x the median of the other towers' times (none with fewer
    // than two towers). The page applies it to each tower's mean over the last kBalanceWindow
    // reports, so one noisy step does not flag a tower.
    static std::vector<bool> slowTowers(const std::vector<double>& ms);
    static constexpr int kBalanceWindow = 10;

signals:
    void towerSetupChanged(int towers, int threadsPerTower);

private:
    void onDeviceAdded(const QString& id, int index);
    void onSampled();
    void updateSummary();

    DeviceModel* m_devices;
    TelemetryHistory* m_history;
    std::unique_ptr<app::TelemetrySource> m_source;
    QTimer* m_timer;
    double m_clockStart = -1;
    QTableView* m_table;
    QLabel* m_gpuNote;
    QSpinBox* m_towers;
    QSpinBox* m_threads;
    QLabel* m_summary;
    std::vector<PlotWidget*> m_telemetryPlots;
    BarChart* m_towerChart;
    PlotWidget* m_towerHistory;
    QLabel* m_balance;
    std::vector<std::vector<double>> m_recentTowerMs;
};

} // namespace towers::ui
