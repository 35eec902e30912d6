#include "ui/screenshot_tour.h"

#include <QCheckBox>
#include <QDir>
#include <QPixmap>
#include <QPointer>
#include <QTemporaryDir>
#include <QTimer>
#include <cstdio>
#include <memory>

#include "app/inference/image_files.h"
#include "ui/main_window.h"
#include "ui/models/sample_image_model.h"
#include "ui/pages/classify_page.h"
#include "ui/pages/data_page.h"
#include "ui/pages/devices_page.h"
#include "ui/pages/import_images_dialog.h"
#include "ui/pages/layers_dialog.h"
#include "ui/pages/lr_finder_dialog.h"
#include "ui/pages/model_file_editor.h"
#include "ui/pages/model_page.h"
#include "ui/pages/runs_page.h"
#include "ui/pages/train_page.h"
#include "ui/widgets/hyperparameter_form.h"

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
    // Every page shows the dataset: without one the tour would wait at each step for nothing.
    connect(window->dataPage(), &DataPage::datasetUnavailable, this, [this](const QString& why) {
        if (m_stopped || m_index >= m_steps.size()) return;
        std::fprintf(stderr, "screenshot tour: stopped, as no dataset can be shown: %s\n",
                     qPrintable(why));
        m_stopped = true;
        m_poll->stop();
        emit finished(1);
    });
}

ScreenshotTour::~ScreenshotTour()
{
    delete m_scratch;
}

void ScreenshotTour::addStandardSteps()
{
    MainWindow* w = m_window;
    w->setCloseQuestionAnswer(true);
    addStep({QStringLiteral("data"),
             [w] { w->showPage(MainWindow::Data); },
             [w] { return !w->dataPage()->isBusy() && w->dataPage()->loadedDataset() != nullptr; },
             60000,
             {},
             {}});
    addStep({QStringLiteral("data-distortions"),
             [w] {
                 if (auto* box = w->dataPage()->findChild<QCheckBox*>()) box->setChecked(true);
             },
             [w] { return w->dataPage()->sampleModel()->isDistorted(); },
             5000,
             [w] {
                 if (auto* box = w->dataPage()->findChild<QCheckBox*>()) box->setChecked(false);
             },
             {}});
    addStep({QStringLiteral("model"), [w] { w->showPage(MainWindow::Model); }, {}, 1000, {}, {}});
    // A short run on two CPU towers: enough steps and evaluations for every plot to show a curve.
    addStep({QStringLiteral("train"),
             [w] {
                 w->devicesPage()->setTowers(2);
                 w->devicesPage()->setThreadsPerTower(1);
                 auto c = w->modelPage()->form()->config();
                 c.steps = 600;
                 c.epochs = 0;
                 c.evalEvery = 100;
                 c.logEvery = 10;
                 c.checkpointEvery = 200;
                 w->modelPage()->form()->setConfig(c);
                 w->showPage(MainWindow::Train);
                 w->trainPage()->start();
             },
             [w] { return w->trainPage()->history().evalSteps().size() >= 3; },
             240000,
             {},
             {}});
    addStep({QStringLiteral("devices"),
             [w] { w->showPage(MainWindow::Devices); },
             {},
             1000,
             [w] { w->trainPage()->stop(); },
             {}});
    addStep({QStringLiteral("runs"),
             [w] { w->showPage(MainWindow::Runs); },
             [w] {
                 return !w->trainPage()->isActive() && !w->runsPage()->isBusy() &&
                        !w->runsPage()->selectedCheckpoint().isEmpty();
             },
             60000,
             {},
             {}});
    addStep({QStringLiteral("classify"),
             [w] { w->classifyWith(w->runsPage()->selectedCheckpoint()); },
             [w] {
                 auto* page = w->classifyPage();
                 if (!page->hasClassifier() || page->isBusy()) return false;
                 if (page->topClasses().empty()) {
                     page->classifySetImage(7);
                     return false;
                 }
                 return true;
             },
             60000,
             {},
             {}});
    addStep({QStringLiteral("classify-test-set"),
             [w] { w->classifyPage()->classifyWholeSet(); },
             [w] {
                 auto* page = w->classifyPage();
                 if (page->isBusy() || !page->predictions()) return false;
                 page->showSurestMistakes();
                 return true;
             },
             120000,
             {},
             {}});
    // Import images…: the dialog on a folder of class folders (some of the loaded test images as
    // PNG files in a scratch folder; nothing is imported).
    auto dialog = std::make_shared<QPointer<ImportImagesDialog>>();
    addStep(
        {QStringLiteral("import-images"),
         [this, w, dialog] {
             m_scratch = new QTemporaryDir;
             const auto data = w->dataPage()->loadedDataset();
             const QString root = m_scratch->filePath(QStringLiteral("My Clothes"));
             if (data) {
                 const engine::ImageSet& test = data->test;
                 for (int c = 0; c < 4 && c < int(data->classNames.size()); ++c) {
                     QString folder = QString::fromStdString(data->classNames[std::size_t(c)]);
                     folder.replace(QLatin1Char('/'), QLatin1Char('-'));
                     QDir().mkpath(root + QLatin1Char('/') + folder);
                     int written = 0;
                     for (std::int64_t i = 0; i < test.count && written < 40 + 7 * c; ++i)
                         if (test.labels[std::size_t(i)] == c)
                             app::toQImage(test, i).save(
                                 root + QStringLiteral("/%1/%2.png").arg(folder).arg(written++));
                 }
             }
             *dialog = new ImportImagesDialog(m_scratch->filePath(QStringLiteral("data")), w);
             (*dialog)->setSource(root);
             (*dialog)->show();
         },
         [dialog] { return *dialog && (*dialog)->isVisible() && !(*dialog)->isScanning(); }, 5000,
         [this, dialog] {
             delete dialog->data();
             delete m_scratch;
             m_scratch = nullptr;
         },
         [dialog]() -> QWidget* { return dialog->data(); }});
    // Layers…: what each layer made of the image the Classify page classified.
    auto layers = std::make_shared<QPointer<LayersDialog>>();
    addStep({QStringLiteral("layers"),
             [w, layers] {
                 w->showPage(MainWindow::Classify);
                 *layers = w->classifyPage()->openLayers();
             },
             [layers] { return *layers && (*layers)->isVisible(); }, 5000,
             [layers] { delete layers->data(); },
             [layers]() -> QWidget* { return layers->data(); }});
    // Find… beside the learning rate: the range test on the loaded dataset, finished.
    auto finder = std::make_shared<QPointer<LrFinderDialog>>();
    addStep({QStringLiteral("lr-find"),
             [w, finder] {
                 w->showPage(MainWindow::Model);
                 *finder = w->findLearningRate();
             },
             [finder] { return *finder && !(*finder)->isRunning(); }, 120000,
             [finder] { delete finder->data(); },
             [finder]() -> QWidget* { return finder->data(); }});
    // Edit… beside the model: the chosen model as a model file's text, checked.
    auto editor = std::make_shared<QPointer<ModelFileEditor>>();
    addStep({QStringLiteral("edit-network"),
             [w, editor] {
                 w->showPage(MainWindow::Model);
                 ModelPage* page = w->modelPage();
                 *editor = new ModelFileEditor(page->model(), page->modelFilePath(), w);
                 (*editor)->show();
             },
             [editor] { return *editor && (*editor)->isVisible() && !(*editor)->isChecking(); },
             5000, [editor] { delete editor->data(); },
             [editor]() -> QWidget* { return editor->data(); }});
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
    if (m_stopped) return;
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
        std::fprintf(stderr,
                     "screenshot tour: %s: not ready after %d ms, taking the picture anyway\n",
                     qPrintable(s.name), s.timeoutMs);
        ++m_failures;
    }
    QTimer::singleShot(kSettleMs, this, &ScreenshotTour::shoot);
}

void ScreenshotTour::shoot()
{
    if (m_stopped) return;
    const Step& s = m_steps[m_index];
    const QString file = QDir(m_dir).filePath(
        QStringLiteral("%1-%2.png").arg(m_index + 1, 2, 10, QLatin1Char('0')).arg(s.name));
    QWidget* subject = s.subject ? s.subject() : nullptr;
    if (!(subject ? subject : static_cast<QWidget*>(m_window))->grab().save(file)) {
        std::fprintf(stderr, "screenshot tour: cannot write %s\n", qPrintable(file));
        ++m_failures;
    }
    if (s.after) s.after();
    ++m_index;
    QTimer::singleShot(0, this, &ScreenshotTour::runStep);
}

} // namespace towers::ui
