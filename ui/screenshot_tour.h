#pragma once
// `towers --screenshot-tour DIR`: drives the real window through its pages, waits at each for
// its work to settle (dataset loaded, training points on the plots, a test set classified) and
// saves a screenshot of the whole window (or of the step's dialog) per step as DIR/NN-<name>.png.
// tools/screenshots.sh runs it under Xvfb to produce docs/screenshots/. Without --settings it keeps
// its settings and its run in a folder of its own, removed at the end (towers_main.cpp): the
// user's settings and runs are not touched.
#include <QObject>
#include <QString>

#include <functional>
#include <vector>

class QTemporaryDir;
class QTimer;
class QWidget;

namespace towers::ui {

class MainWindow;

class ScreenshotTour : public QObject
{
    Q_OBJECT
public:
    struct Step
    {
        QString name;                  // file name part
        std::function<void()> prepare; // switch page, press buttons
        std::function<bool()> ready;   // polled until true (or timeout)
        int timeoutMs = 20000;
        std::function<void()> after; // after the screenshot
        // What to photograph when not the whole window (a dialog); null: the window.
        std::function<QWidget*()> subject;
    };

    ScreenshotTour(MainWindow* window, QString directory, QObject* parent = nullptr);
    ~ScreenshotTour() override;
    void addStep(Step step) { m_steps.push_back(std::move(step)); }
    // The standard tour through every page.
    void addStandardSteps();
    void start();

signals:
    // `failures`: steps whose condition timed out or whose file could not be written.
    void finished(int failures);

private:
    void runStep();
    void poll();
    void shoot();

    MainWindow* m_window;
    QString m_dir;
    std::vector<Step> m_steps;
    std::size_t m_index = 0;
    int m_failures = 0;
    bool m_stopped = false; // no dataset to show: finished(1) was emitted
    int m_waitedMs = 0;
    QTimer* m_poll;
    QTemporaryDir* m_scratch = nullptr; // the image folder of the import step
};

} // namespace towers::ui
