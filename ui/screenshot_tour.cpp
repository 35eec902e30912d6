#include "ui/screenshot_tour.h"

#include <QCheckBox>
#include <QDir>
#include <QPixmap>
#include <QTimer>
#include <cstdio>

#include "ui/main_window.h"
#include "ui/models/sample_image_model.h"
#include "ui/pages/data_page.h"

namespace towers::ui {

namespace {
constexpr int kPollMs = 100;
constexpr int kSettleMs = 600; // plots and views finish their queued redraws
} // namespace

ScreenshotTour::ScreenshotTour(MainWindow* window, QString directory, QObject* parent)
    : QObject(parent), m_window(window), m_dir(std::move(directory)), m_poll(new QTimer(this))
{
    m_poll->setInterval(kPollMs);
    connect(m_poll, &QTimer::timeout, this, &ScreenshotTour::poll);
}

void ScreenshotTour::addStandardSteps()
{
    MainWindow* w = m_window;
    addStep({QStringLiteral("data"), [w] { w->showPage(MainWindow::Data); },
             [w] { return !w->dataPage()->isBusy() && w->dataPage()->loadedDataset() != nullptr; }, 60000, {}});
    addStep({QStringLiteral("data-distortions"),
             [w] {
                 if (auto* box = w->dataPage()->findChild<QCheckBox*>()) box->setChecked(true);
             },
             [w] { return w->dataPage()->sampleModel()->isDistorted(); }, 5000,
             [w] {
                 if (auto* box = w->dataPage()->findChild<QCheckBox*>()) box->setChecked(false);
             }});
    addStep({QStringLiteral("model"), [w] { w->showPage(MainWindow::Model); }, [] { return true; }, 1000, {}});
    addStep({QStringLiteral("devices"), [w] { w->showPage(MainWindow::Devices); }, [] { return true; }, 1000, {}});
}

void ScreenshotTour::start()
{
    if (!QDir().mkpath(m_dir)) {
        std::fprintf(stderr, "screenshot tour: cannot create %s\n", qPrintable(m_dir));
        emit finished(1);
        return;
    }
    m_index = 0;
    runStep();
}

void ScreenshotTour::runStep()
{
    if (m_index >= m_steps.size()) {
        emit finished(m_failures);
        return;
    }
    const Step& s = m_steps[m_index];
    std::fprintf(stderr, "screenshot tour: %s\n", qPrintable(s.name));
    if (s.prepare) s.prepare();
    m_waitedMs = 0;
    m_poll->start();
}

void ScreenshotTour::poll()
{
    const Step& s = m_steps[m_index];
    m_waitedMs += kPollMs;
    const bool ready = !s.ready || s.ready();
    if (!ready && m_waitedMs < s.timeoutMs) return;
    m_poll->stop();
    if (!ready) {
        std::fprintf(stderr, "screenshot tour: %s: not ready after %d ms, taking the picture anyway\n",
                     qPrintable(s.name), s.timeoutMs);
        ++m_failures;
    }
    QTimer::singleShot(kSettleMs, this, &ScreenshotTour::shoot);
}

void ScreenshotTour::shoot()
{
    const Step& s = m_steps[m_index];
    const QString file = QDir(m_dir).filePath(QStringLiteral("%1-%2.png").arg(m_index + 1, 2, 10, QLatin1Char('0')).arg(s.name));
    if (!m_window->grab().save(file)) {
        std::fprintf(stderr, "screenshot tour: cannot write %s\n", qPrintable(file));
        ++m_failures;
    }
    if (s.after) s.after();
    ++m_index;
    QTimer::singleShot(0, this, &ScreenshotTour::runStep);
}

} // namespace towers::ui
