#pragma once
// "Find a learning rate…" (the Model page's, beside the learning rate): the learning-rate range
// test (engine::runLrRangeTest, as `towers-cli lr-find`) with the pages' configuration on the
// loaded dataset, off the UI thread, its loss drawn against the rate as it comes; then the
// suggestion, which "Use" puts in the form. Stop ends the test early; closing the window stops
// it too. Nothing is written.
#include <QDialog>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "app/jobs/latest_job.h"
#include "engine/train/lr_range_test.h"

class QLabel;
class QPushButton;
class QTimer;

namespace towers::ui {

class PlotWidget;

class LrFinderDialog : public QDialog
{
    Q_OBJECT
public:
    LrFinderDialog(const engine::TrainConfig& config,
                   std::shared_ptr<const engine::Dataset> dataset,
                   const engine::LrRangeOptions& options = {}, QWidget* parent = nullptr);
    ~LrFinderDialog() override;

    bool isRunning() const { return m_job.isRunning(); }
    // Whether the test still trains, asked from anywhere, even after this window is gone (its
    // worker ends after the step under way).
    std::function<bool()> runningProbe() const
    {
        return [shared = m_shared] { return shared->running.load(); };
    }
    // The finished test (nullopt while it runs, or when it failed: statusText() says why).
    const std::optional<engine::LrRangeResult>& result() const { return m_result; }
    PlotWidget* plot() const { return m_plot; }
    QString statusText() const;
    QPushButton* useButton() const { return m_use; }
    void stop();

signals:
    // "Use": the rate to put in the form.
    void learningRateChosen(double lr);
    // The test has ended (finished, stopped or failed): the cores are free again.
    void testEnded();

private:
    struct Shared
    {
        std::mutex mutex;
        std::vector<engine::LrRangePoint> points; // taken, not yet drawn
        std::atomic<bool> stop{false};
        std::atomic<bool> running{true}; // until the worker has returned
    };
    void drain();
    void finished(const app::JobResult<engine::LrRangeResult>& r);

    std::shared_ptr<Shared> m_shared = std::make_shared<Shared>();
    app::LatestJob<engine::LrRangeResult> m_job{this};
    std::optional<engine::LrRangeResult> m_result;
    int m_steps;
    PlotWidget* m_plot;
    QLabel* m_status;
    QPushButton* m_stop;
    QPushButton* m_use;
    QTimer* m_timer;
};

} // namespace towers::ui
