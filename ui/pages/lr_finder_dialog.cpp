#include "ui/pages/lr_finder_dialog.h"

#include <QDialogButtonBox>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QTimer>
#include <QVBoxLayout>

#include <cmath>

#include "ui/plots/plot_widget.h"

namespace towers::ui {

namespace {

QString lrText(double lr)
{
    return QLocale().toString(lr, 'g', 3);
}

} // namespace

LrFinderDialog::LrFinderDialog(const engine::TrainConfig& config,
                               std::shared_ptr<const engine::Dataset> dataset,
                               const engine::LrRangeOptions& options, QWidget* parent)
    : QDialog(parent), m_steps(options.steps)
{
    setWindowTitle(tr("Find a learning rate"));
    auto* top = new QVBoxLayout(this);
    auto* intro = new QLabel(
        tr("The range test: %1 steps of %2 on %3 (%4 × %5 examples per step), from %6, "
           "the learning rate rising from %7 to %8 until the loss runs away. Where the loss falls "
           "fastest is a good learning rate (with one-cycle, the peak). Nothing is written.")
            .arg(options.steps)
            .arg(QString::fromStdString(config.model), QString::fromStdString(config.dataset),
                 tr("%n tower(s)", nullptr, config.towers))
            .arg(config.accumulate > 1
                     ? tr("%1 × %2 accumulated").arg(config.batchPerTower).arg(config.accumulate)
                     : QString::number(config.batchPerTower))
            .arg(config.initFrom.empty()
                     ? tr("the seed's weights")
                     : tr("the weights of %1").arg(QString::fromStdString(config.initFrom)),
                 lrText(options.minLr), lrText(options.maxLr)),
        this);
    intro->setWordWrap(true);
    top->addWidget(intro);
    m_plot = new PlotWidget(tr("Loss against the learning rate"), this);
    m_plot->setAxisLabels(tr("log₁₀ learning rate"), tr("loss"));
    m_plot->addSeries(tr("loss"), PlotWidget::SeriesStyle::raw());
    m_plot->addSeries(tr("smoothed"), PlotWidget::SeriesStyle::smoothed());
    PlotWidget::SeriesStyle mark;
    mark.markers = true;
    mark.colorSlot = 3;
    m_plot->addSeries(tr("suggestion"), mark);
    m_plot->setEmptyMessage(tr("Taking the first steps…"));
    m_plot->setMinimumSize(560, 320);
    top->addWidget(m_plot, 1);
    m_status = new QLabel(tr("Starting…"), this);
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    top->addWidget(m_status);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    m_stop = buttons->addButton(tr("&Stop"), QDialogButtonBox::ActionRole);
    m_use = buttons->addButton(tr("&Use the suggestion"), QDialogButtonBox::AcceptRole);
    m_use->setEnabled(false);
    top->addWidget(buttons);
    connect(m_stop, &QPushButton::clicked, this, &LrFinderDialog::stop);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_use, &QPushButton::clicked, this, [this] {
        if (m_result && m_result->suggestedLr > 0) {
            emit learningRateChosen(m_result->suggestedLr);
            accept();
        }
    });
    m_timer = new QTimer(this);
    m_timer->setInterval(100);
    connect(m_timer, &QTimer::timeout, this, &LrFinderDialog::drain);
    m_timer->start();

    const auto shared = m_shared;
    m_job.start(
        [shared, config, dataset, options] {
            struct Done
            {
                Shared& s;
                ~Done() { s.running = false; } // returned or thrown
            } done{*shared};
            return engine::runLrRangeTest(config, *dataset, options,
                                          [shared](const engine::LrRangePoint& p) {
                                              std::lock_guard lock(shared->mutex);
                                              shared->points.push_back(p);
                                              return !shared->stop.load();
                                          });
        },
        [this](const app::JobResult<engine::LrRangeResult>& r) {
            finished(r);
            emit testEnded();
        });
}

LrFinderDialog::~LrFinderDialog()
{
    m_shared->stop = true; // the worker ends after its step; its result is dropped
}

void LrFinderDialog::stop()
{
    m_shared->stop = true;
    m_stop->setEnabled(false);
}

QString LrFinderDialog::statusText() const
{
    return m_status->text();
}

void LrFinderDialog::drain()
{
    std::vector<engine::LrRangePoint> points;
    {
        std::lock_guard lock(m_shared->mutex);
        points.swap(m_shared->points);
    }
    for (const auto& p : points) {
        m_plot->addPoint(0, std::log10(p.lr), p.loss);
        m_plot->addPoint(1, std::log10(p.lr), p.smoothed);
    }
    if (!points.empty() && !m_result)
        m_status->setText(tr("Step %1 of %2: learning rate %3, loss %4")
                              .arg(points.back().step + 1)
                              .arg(m_steps)
                              .arg(lrText(points.back().lr))
                              .arg(QLocale().toString(points.back().smoothed, 'f', 4)));
}

void LrFinderDialog::finished(const app::JobResult<engine::LrRangeResult>& r)
{
    drain();
    m_timer->stop();
    m_stop->setEnabled(false);
    if (!r.ok()) {
        m_status->setText(tr("<b>The test could not run:</b> %1").arg(r.error.toHtmlEscaped()));
        return;
    }
    m_result = *r.value;
    const engine::LrRangeResult& res = *m_result;
    QString text;
    if (res.diverged && !res.points.empty())
        text = tr("The loss ran away at a learning rate of %1. ").arg(lrText(res.points.back().lr));
    else if (res.stopped)
        text = tr("Stopped after %1 steps. ").arg(res.points.size());
    if (res.suggestedLr <= 0) {
        m_status->setText(text + tr("No suggestion: %1.").arg(QString::fromStdString(res.note)));
        return;
    }
    for (const auto& p : res.points)
        if (p.lr == res.suggestedLr) m_plot->addPoint(2, std::log10(p.lr), p.smoothed);
    text += tr("<b>Suggested learning rate: %1</b> (%2); the lowest loss at a learning rate of %3.")
                .arg(lrText(res.suggestedLr), QString::fromStdString(res.note).toHtmlEscaped(),
                     lrText(res.minimumLr));
    m_status->setText(text);
    m_use->setText(tr("&Use %1").arg(lrText(res.suggestedLr)));
    m_use->setEnabled(true);
    m_use->setDefault(true);
}

} // namespace towers::ui
