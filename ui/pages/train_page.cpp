#include "ui/pages/train_page.h"

#include <QDir>
#include <QFontDatabase>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QStyle>
#include <QTimer>
#include <QVBoxLayout>

#include <cmath>
#include <utility>

#include "app/runs/run_builder.h"
#include "app/runs/run_log_reader.h"
#include "app/runs/run_scanner.h"
#include "ui/plots/plot_theme.h"
#include "ui/plots/plot_widget.h"
#include "ui/plots/rate_plot.h"
#include "ui/widgets/open_folder.h"
#include "ui/widgets/path_label.h"

namespace towers::ui {

namespace {
enum LossSeries
{
    RawLoss,
    SmoothedLoss
};
enum SpeedSeries
{
    TotalSpeed
}; // then one per tower
} // namespace

TrainPage::TrainPage(QWidget* parent)
    : QWidget(parent), m_controller(new app::TrainingController(this))
{
    auto* top = new QVBoxLayout(this);
    auto* buttons = new QHBoxLayout;
    m_start = new QPushButton(paletteIcon(QStyle::SP_MediaPlay), tr("&Start"), this);
    m_pause = new QPushButton(paletteIcon(QStyle::SP_MediaPause), tr("&Pause"), this);
    m_stop = new QPushButton(paletteIcon(QStyle::SP_MediaStop), tr("S&top"), this);
    m_folder = new QPushButton(style()->standardIcon(QStyle::SP_DirOpenIcon),
                               tr("Open run &folder"), this);
    m_stop->setToolTip(tr("Stops after the current step and writes a checkpoint"));
    m_runLabel = new PathLabel(this);
    m_enqueue = new QPushButton(tr("Add to &queue"), this);
    m_enqueue->setObjectName(QStringLiteral("enqueue"));
    buttons->addWidget(m_start);
    buttons->addWidget(m_enqueue);
    buttons->addWidget(m_pause);
    buttons->addWidget(m_stop);
    buttons->addSpacing(12);
    buttons->addWidget(m_folder);
    buttons->addWidget(m_runLabel, 1);
    top->addLayout(buttons);
    auto* queueRow = new QHBoxLayout;
    m_queueLabel = new QLabel(this);
    m_queueLabel->setWordWrap(true);
    m_startQueued = new QPushButton(tr("Start &next"), this);
    m_startQueued->setToolTip(tr("Starts the queue's next run now"));
    m_clearQueue = new QPushButton(tr("C&lear queue"), this);
    queueRow->addWidget(m_queueLabel, 1);
    queueRow->addWidget(m_startQueued);
    queueRow->addWidget(m_clearQueue);
    top->addLayout(queueRow);

    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setTextVisible(false);
    top->addWidget(m_progress);
    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    top->addWidget(m_status);

    auto* split = new QSplitter(Qt::Vertical, this);
    auto* plots = new QWidget(split);
    auto* grid = new QGridLayout(plots);
    grid->setContentsMargins(0, 0, 0, 0);
    m_loss = new PlotWidget(tr("Loss"), plots);
    m_loss->setAxisLabels(tr("step"), tr("cross-entropy + weight decay"));
    m_loss->addSeries(tr("raw"), PlotWidget::SeriesStyle::raw());
    m_loss->addSeries(tr("smoothed"), PlotWidget::SeriesStyle::smoothed());
    // The evaluations' cross-entropy beside the training loss: a gap that opens is overfitting.
    m_loss->addSeries(tr("test cross-entropy"), PlotWidget::SeriesStyle::evaluations());
    m_accuracy = new PlotWidget(tr("Test accuracy"), plots);
    m_accuracy->setAxisLabels(tr("step"), tr("precision @ 1"));
    m_accuracy->setYRange(0, 1);
    m_accuracy->addSeries(tr("test set"), PlotWidget::SeriesStyle::evaluations());
    // Precision @ 5, for a run of more than 10 classes (EvalResult::hasTop5): shown with its
    // first evaluation.
    m_accuracy->addSeries(tr("test set, top 5"), PlotWidget::SeriesStyle::topFive());
    m_accuracy->setSeriesVisible(kTop5Series, false);
    m_speed = new PlotWidget(tr("Examples per second"), plots);
    m_speed->setAxisLabels(tr("step"), tr("examples/s"));
    PlotWidget::SeriesStyle total;
    total.width = 2;
    total.colorSlot = 1;
    m_speed->addSeries(tr("total"), total);
    m_lr = new PlotWidget(RatePlot::title(), plots);
    RatePlot::labelAxes(m_lr);
    RatePlot::setUpSeries(m_lr, 0);
    for (auto* p : {m_loss, m_accuracy, m_speed, m_lr})
        p->setEmptyMessage(tr("Start a run to see it here"));
    grid->addWidget(m_loss, 0, 0);
    grid->addWidget(m_accuracy, 0, 1);
    grid->addWidget(m_speed, 1, 0);
    grid->addWidget(m_lr, 1, 1);
    m_log = new QPlainTextEdit(split);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(20000);
    m_log->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_log->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_log->setPlaceholderText(
        tr("The trainer's log: one line every few steps, checkpoints, evaluations."));
    split->addWidget(plots);
    split->addWidget(m_log);
    split->setStretchFactor(0, 4);
    split->setStretchFactor(1, 1);
    top->addWidget(split, 1);

    connect(m_start, &QPushButton::clicked, this, &TrainPage::start);
    connect(m_enqueue, &QPushButton::clicked, this, &TrainPage::enqueue);
    connect(m_startQueued, &QPushButton::clicked, this, &TrainPage::startNextQueued);
    connect(m_clearQueue, &QPushButton::clicked, this, &TrainPage::clearQueue);
    connect(m_pause, &QPushButton::clicked, this, &TrainPage::togglePause);
    connect(m_stop, &QPushButton::clicked, this, &TrainPage::stop);
    connect(m_folder, &QPushButton::clicked, this, &TrainPage::openRunFolder);
    connect(m_controller, &app::TrainingController::stateChanged, this, &TrainPage::onStateChanged);
    connect(m_controller, &app::TrainingController::started, this, &TrainPage::onStarted);
    connect(m_controller, &app::TrainingController::pausedAt, this, [this] {
        onStateChanged(m_controller->state()); // "Pausing…" becomes "Paused at step N."
    });
    connect(m_controller, &app::TrainingController::eventsReady, this, &TrainPage::onEvents);
    connect(m_controller, &app::TrainingController::finished, this, &TrainPage::onFinished);
    onStateChanged(app::TrainingController::State::Idle);
}

TrainPage::~TrainPage() = default;

void TrainPage::setOptionsProvider(OptionsProvider provider)
{
    m_provider = std::move(provider);
    refreshStartability();
}

void TrainPage::refreshStartability()
{
    m_startError.clear();
    if (!m_provider) {
        m_startError = tr("nothing to train yet");
    } else {
        QString error;
        if (!m_provider(&error))
            m_startError = error.isEmpty() ? tr("the configuration is incomplete") : error;
    }
    onStateChanged(m_controller->state());
}

QString TrainPage::statusText() const
{
    return m_status->text();
}

void TrainPage::start()
{
    if (!m_provider) return;
    QString error;
    const auto options = m_provider(&error);
    if (!options) {
        emit errorOccurred(tr("Cannot start: %1").arg(error));
        return;
    }
    startSession(*options);
}

void TrainPage::enqueue()
{
    if (!m_provider) return;
    QString error;
    auto options = m_provider(&error);
    if (!options) {
        emit errorOccurred(tr("Cannot queue the run: %1").arg(error));
        return;
    }
    const auto& c = options->config;
    m_queue.push_back(std::move(*options));
    appendLog(
        tr("Queued run %1: %2 on %3, %n tower(s), learning rate %4, seed %5", nullptr, c.towers)
            .arg(m_queue.size())
            .arg(QString::fromStdString(c.model), QString::fromStdString(c.dataset))
            .arg(c.schedule.lr)
            .arg(c.seed));
    updateQueue();
}

void TrainPage::startNextQueued()
{
    if (m_queue.empty() || m_controller->isActive()) return;
    engine::SessionOptions next = std::move(m_queue.front());
    m_queue.pop_front();
    // A new folder's name carries the time its run starts, not the time it was queued.
    if (next.newFolder)
        next.runDirectory =
            app::proposedRunFolder(QString::fromStdString(next.runDirectory.parent_path().string()),
                                   QString::fromStdString(next.config.dataset),
                                   QString::fromStdString(next.config.model))
                .toStdString();
    startSession(std::move(next));
}

void TrainPage::clearQueue()
{
    if (m_queue.empty()) return;
    appendLog(tr("Cleared the queue: %n run(s) will not start", nullptr, int(m_queue.size())));
    m_queue.clear();
    m_queueHeld = false;
    updateQueue();
}

void TrainPage::updateQueue()
{
    const bool active = m_controller->isActive();
    m_enqueue->setVisible(active || !m_queue.empty());
    m_enqueue->setEnabled(m_startError.isEmpty());
    m_enqueue->setToolTip(m_startError.isEmpty()
                              ? tr("Queues a new run with the chosen data, model and "
                                   "hyperparameters, started when the runs before it end")
                              : tr("Cannot queue: %1").arg(m_startError));
    m_startQueued->setVisible(!m_queue.empty());
    m_startQueued->setEnabled(!active);
    m_clearQueue->setVisible(!m_queue.empty());
    m_queueLabel->setVisible(!m_queue.empty());
    if (m_queue.empty()) return;
    const auto& c = m_queue.front().config;
    QString text = tr("%n run(s) queued; next: %1 on %2, %3", nullptr, int(m_queue.size()))
                       .arg(QString::fromStdString(c.model), QString::fromStdString(c.dataset),
                            tr("%n tower(s)", nullptr, c.towers));
    if (m_queueHeld && !active)
        text += tr(" — waiting, as the last run was stopped: Start next continues the queue");
    m_queueLabel->setText(text);
}

bool TrainPage::startSession(engine::SessionOptions options)
{
    if (m_controller->isActive()) return false;
    if (const QString why = m_blocker ? m_blocker() : QString(); !why.isEmpty()) {
        emit errorOccurred(tr("The run did not start: %1").arg(why));
        return false;
    }
    m_queueHeld = false; // a run started: the queue follows it
    m_options = options;
    m_runDirectory = QString::fromStdString(options.runDirectory.string());
    m_outcomeText.clear();
    // The plots keep the last run's curves until this one has really started (onStarted): a
    // start that fails at once (its folder locked by another trainer) leaves them.
    m_history.reset(0, 0, options.config.examplesPerTowerStep());
    m_lastExamplesPerSec = 0;
    m_progress->setValue(0);
    // The log says "New run in …" once the session has started (onStarted), in the folder it
    // made: a start that fails at once says only that it failed.
    m_sessionStarted = false;
    m_heldLog.clear();
    m_runLabel->setPath(m_runDirectory);
    if (!m_controller->start(std::move(options))) return false;
    emit activeChanged(true); // runStarted follows once the session has started (onStarted)
    return true;
}

void TrainPage::togglePause()
{
    if (m_controller->state() == app::TrainingController::State::Paused)
        m_controller->resume();
    else
        m_controller->pause();
}

void TrainPage::stop()
{
    if (!m_queue.empty() && !m_queueHeld)
        appendLog(tr("The queue waits: %n run(s) will not start after this one", nullptr,
                     int(m_queue.size())));
    m_queueHeld = true;
    m_controller->stop();
    updateQueue();
}

void TrainPage::openRunFolder()
{
    if (m_runDirectory.isEmpty()) return;
    if (const QString why = openFolder(m_runDirectory); !why.isEmpty()) emit errorOccurred(why);
}

void TrainPage::onStateChanged(app::TrainingController::State state)
{
    using S = app::TrainingController::State;
    const bool idle = state == S::Idle;
    m_start->setEnabled(idle && m_startError.isEmpty());
    m_start->setToolTip(m_startError.isEmpty()
                            ? tr("Starts a new run with the chosen data, model and hyperparameters")
                            : tr("Cannot start: %1").arg(m_startError));
    m_pause->setEnabled(state == S::Running || state == S::Loading || state == S::Paused);
    m_pause->setText(state == S::Paused ? tr("&Resume") : tr("&Pause"));
    m_pause->setIcon(
        paletteIcon(state == S::Paused ? QStyle::SP_MediaPlay : QStyle::SP_MediaPause));
    m_stop->setEnabled(state == S::Running || state == S::Loading || state == S::Paused);
    m_folder->setEnabled(!m_runDirectory.isEmpty());
    updateQueue();
    switch (state) {
    case S::Idle: {
        const QString start =
            m_startError.isEmpty() ? QString() : tr("Cannot start: %1").arg(m_startError);
        m_status->setText(
            m_outcomeText.isEmpty()
                ? (start.isEmpty() ? tr("Ready.") : start)
                : (start.isEmpty() ? m_outcomeText : m_outcomeText + QStringLiteral(" ") + start));
        break;
    }
    case S::Loading:
        m_status->setText(tr("Loading the dataset and building the towers…"));
        break;
    case S::Running:
        updateProgress();
        break;
    case S::Paused:
        // The step the trainer itself paused at, once it has: the last drained report may be
        // older, and the step under way still finishes.
        m_status->setText(
            m_controller->pausedStep() < 0
                ? tr("Pausing: finishing the step under way…")
                : tr("Paused at step %1.").arg(QLocale().toString(m_controller->pausedStep())));
        break;
    case S::Stopping:
        m_status->setText(tr("Stopping: finishing the step and writing the checkpoint…"));
        break;
    }
}

void TrainPage::onStarted(const QString& runDirectory, qint64 startStep, qint64 totalSteps)
{
    m_runDirectory = runDirectory;
    m_runLabel->setPath(runDirectory);
    m_sessionStarted = true;
    appendLog(m_options.resume
                  ? tr("Resuming the run in %1").arg(runDirectory)
                  : tr("New run in %1: %2 on %3, %n tower(s)", nullptr, m_options.config.towers)
                        .arg(runDirectory, QString::fromStdString(m_options.config.model),
                             QString::fromStdString(m_options.config.dataset)));
    flushHeldLog();
    clearPlots();
    RatePlot::setUpSeries(m_lr, m_options.config.clipGradNorm);
    const bool validation = m_options.config.validation > 0;
    m_accuracy->setTitle(validation ? tr("Validation accuracy") : tr("Test accuracy"));
    m_accuracy->setSeriesName(0, validation ? tr("validation set") : tr("test set"));
    m_accuracy->setSeriesName(kTop5Series,
                              validation ? tr("validation set, top 5") : tr("test set, top 5"));
    m_loss->setSeriesName(2,
                          validation ? tr("validation cross-entropy") : tr("test cross-entropy"));
    // What the training loss holds: label smoothing raises its floor above the evaluations'
    // plain cross-entropy; AdamW's decay is the update's, not a term of the loss.
    const engine::TrainConfig& c = m_options.config;
    m_loss->setAxisLabels(
        tr("step"),
        (c.labelSmoothing > 0 ? tr("label-smoothed cross-entropy") : tr("cross-entropy")) +
            (c.optimizer.kind == "adamw" ? QString() : tr(" + weight decay")));
    m_history.reset(startStep, totalSteps, m_options.config.examplesPerTowerStep());
    if (startStep > 0) {
        // A resumed run: its curves from the start, as its logs have them up to the resume.
        const app::LoggedSteps logged = app::readLoggedSteps(runDirectory, startStep);
        plotSteps(logged.steps, logged.evaluations);
        m_history.standAt(startStep);
    }
    m_folder->setEnabled(true);
    emit runStarted(runDirectory);
    // Paused while loading: the status says so rather than "Step 0 of N".
    if (m_controller->state() != app::TrainingController::State::Paused) updateProgress();
}

void TrainPage::plotSteps(const std::vector<engine::StepMetrics>& reports,
                          const std::vector<engine::EvalResult>& evaluations)
{
    QVector<double> steps, raw, smooth, lr, speed, normSteps, norms;
    QVector<QVector<double>> towerSpeed;
    for (const auto& m : reports) {
        m_history.add(m);
        const qsizetype last = m_history.steps().size() - 1;
        steps << m_history.steps()[last];
        raw << m_history.loss()[last];
        smooth << m_history.smoothedLoss()[last];
        lr << m_history.learningRate()[last];
        if (const double norm = m_history.gradNorm()[last]; std::isfinite(norm)) {
            normSteps << steps.back();
            norms << norm;
        }
        speed << m_history.examplesPerSec()[last];
        const auto& towers = m_history.towerExamplesPerSec();
        towerSpeed.resize(towers.size());
        for (qsizetype t = 0; t < towers.size(); ++t) towerSpeed[t] << towers[t].last();
        m_lastExamplesPerSec = m.examplesPerSec;
    }
    if (!steps.isEmpty()) {
        m_loss->addPoints(RawLoss, steps, raw);
        m_loss->addPoints(SmoothedLoss, steps, smooth);
        m_lr->addPoints(RatePlot::LearningRate, steps, lr);
        m_lr->addPoints(RatePlot::GradientNorm, normSteps, norms);
        // A run that clips: its bound across the steps.
        RatePlot::setClipBound(m_lr, m_options.config.clipGradNorm, m_history.steps().front(),
                               steps.back());
        m_speed->addPoints(TotalSpeed, steps, speed);
        // One curve per tower; a single tower's curve would only repeat the total.
        if (towerSpeed.size() > 1) {
            while (m_speed->seriesCount() < towerSpeed.size() + 1) {
                PlotWidget::SeriesStyle s;
                s.colorSlot = m_speed->seriesCount() + 4;
                s.width = 1;
                m_speed->addSeries(tr("tower %1 (compute)").arg(m_speed->seriesCount() - 1), s);
            }
            for (qsizetype t = 0; t < towerSpeed.size(); ++t)
                m_speed->addPoints(int(t) + 1, steps, towerSpeed[t]);
        }
    }
    for (const auto& r : evaluations) {
        m_history.addEvaluation(r);
        m_accuracy->addPoint(0, double(r.step), r.precisionAt1); // the trainer logs it too
        if (r.hasTop5()) {
            m_accuracy->setSeriesVisible(kTop5Series, true);
            m_accuracy->setAxisLabels(tr("step"), tr("precision @ 1 and @ 5"));
            m_accuracy->addPoint(kTop5Series, double(r.step), r.precisionAt5);
        }
        m_loss->addPoint(2, double(r.step), r.meanCrossEntropy);
    }
}

void TrainPage::onEvents(const app::TrainingEvents& events)
{
    plotSteps(events.steps, events.evaluations);
    // Every report, so that the Devices page's timeline has each one.
    for (const auto& m : events.steps) {
        if (!m.towerTimes.empty()) {
            emit towerTimes(m.step, m.towerTimes);
            continue;
        }
        std::vector<engine::TowerTimes> computeOnly(m.towerComputeMs.size());
        for (std::size_t t = 0; t < computeOnly.size(); ++t)
            computeOnly[t].computeMs = m.towerComputeMs[t];
        if (!computeOnly.empty()) emit towerTimes(m.step, computeOnly);
    }
    // The trainer's lines from while its session was made follow the line that says it started.
    for (const auto& line : events.logLines)
        if (m_sessionStarted)
            appendLog(line);
        else
            m_heldLog << line;
    for (const auto& [file, step] : events.checkpoints) emit checkpointWritten(file, step);
    if (m_controller->state() == app::TrainingController::State::Running) updateProgress();
}

void TrainPage::onFinished(app::TrainingWorker::Outcome outcome, const QString& message)
{
    using O = app::TrainingWorker::Outcome;
    flushHeldLog(); // a session that never started: its notes, then why
    // A divergence repeats on a resume (the same checkpoint, data and rate): what to change.
    const QString failure =
        outcome == O::Failed && app::isDivergence(message)
            ? tr("%1. A resume would diverge again: start a new run with a lower learning rate "
                 "(Find… beside it suggests one) or a maximum gradient norm (Model & "
                 "hyperparameters).")
                  .arg(message)
            : message;
    appendLog(outcome == O::Failed ? tr("Training failed: %1").arg(failure)
                                   : tr("Training %1.").arg(message));
    if (outcome == O::Failed) emit errorOccurred(tr("Training failed: %1").arg(failure));
    // The trainer's own last step: the last metrics drained are every few steps, older.
    const qint64 step =
        m_controller->finalStep() >= 0 ? m_controller->finalStep() : m_history.lastStep();
    m_outcomeText =
        outcome == O::Failed     ? tr("Failed: %1").arg(failure)
        : outcome == O::Finished ? tr("Finished: %1 steps.").arg(QLocale().toString(step))
        // Stopped while the session was made (the data loading, the towers being built): no
        // step ran, no checkpoint was written.
        : m_controller->finalStep() < 0
            ? tr("Stopped before the first step: nothing was trained or saved.")
            : tr("Stopped at step %1; the checkpoint is saved (resume it from Runs & checkpoints).")
                  .arg(QLocale().toString(step));
    if (outcome == O::Finished) m_progress->setValue(1000);
    emit runFinished(outcome, message, m_runDirectory);
    emit activeChanged(false);
    refreshStartability();
    // The queue's next run, once what follows this one's end has run (a run stopped holds it).
    if (!m_queue.empty() && !m_queueHeld && outcome != O::Stopped)
        QTimer::singleShot(0, this, [this] {
            if (!m_queueHeld) startNextQueued();
        });
}

void TrainPage::updateProgress()
{
    const auto total = m_history.totalSteps();
    if (total <= 0) return;
    m_progress->setValue(int(std::lround(m_history.progress() * 1000)));
    const QLocale locale;
    QString text = tr("Step %1 of %2 · epoch %3")
                       .arg(locale.toString(m_history.lastStep()), locale.toString(total),
                            locale.toString(m_history.lastEpoch(), 'f', 2));
    if (m_lastExamplesPerSec > 0)
        text += tr(" · %1 examples/s").arg(locale.toString(m_lastExamplesPerSec, 'f', 0));
    if (const double norm = m_history.lastGradNorm(); std::isfinite(norm))
        text += tr(" · gradient norm %1").arg(locale.toString(norm, 'g', 3));
    if (const auto eta = m_history.etaSeconds())
        text += tr(" · about %1 left").arg(durationText(*eta));
    m_status->setText(text);
}

void TrainPage::appendLog(const QString& line)
{
    m_log->appendPlainText(line);
    emit logMessage(line);
}

void TrainPage::flushHeldLog()
{
    const QStringList held = std::exchange(m_heldLog, {});
    for (const QString& line : held) appendLog(line);
}

void TrainPage::clearPlots()
{
    m_loss->clearData();
    m_accuracy->clearData();
    m_accuracy->setSeriesVisible(kTop5Series, false);
    m_accuracy->setAxisLabels(tr("step"), tr("precision @ 1"));
    m_lr->clearData();
    while (m_speed->seriesCount() > 1) {
        // Per-tower curves belong to one run.
        m_speed->clearSeries();
        PlotWidget::SeriesStyle total;
        total.width = 2;
        total.colorSlot = 1;
        m_speed->addSeries(tr("total"), total);
    }
    m_speed->clearData();
}

} // namespace towers::ui
