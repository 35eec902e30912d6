#include "ui/pages/layers_dialog.h"

#include <QCheckBox>
#include <QEvent>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QImageWriter>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "app/inference/layer_figures.h"
#include "ui/models/layer_table_model.h"
#include "ui/plots/bar_chart.h"
#include "ui/widgets/layer_mosaic.h"

namespace towers::ui {

namespace {

QString figure(double v)
{
    return app::layerFigure(v, 3, true);
}

enum Column
{
    Layer,
    Output,
    Mean,
    Deviation,
    Minimum,
    Maximum,
    Zeros,
    Dead, // channels zero on every one of many test images (setActivity)
    ColumnCount
};

constexpr int kBins = 20;

} // namespace

LayersDialog::LayersDialog(std::vector<engine::LayerView> outputs,
                           std::vector<engine::LayerView> filters, const QString& caption,
                           QWidget* parent)
    : QDialog(parent), m_outputs(std::move(outputs)), m_filters(std::move(filters))
{
    setWindowTitle(tr("Layers — what the network makes of the image"));
    auto* top = new QVBoxLayout(this);
    auto* captionLabel = new QLabel(caption, this);
    captionLabel->setWordWrap(true);
    captionLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    top->addWidget(captionLabel);

    auto* split = new QSplitter(Qt::Horizontal, this);
    m_table = new QTableWidget(int(m_outputs.size()), ColumnCount, split);
    m_table->setHorizontalHeaderLabels({tr("Layer"), tr("Output"), tr("Mean"), tr("Deviation"),
                                        tr("Min"), tr("Max"), tr("Zeros"), tr("Dead")});
    m_table->horizontalHeaderItem(Dead)->setToolTip(
        tr("Channels that are zero on every one of many test images: dead units, which pass "
           "nothing on whatever the input"));
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    const QLocale locale;
    for (int r = 0; r < int(m_outputs.size()); ++r) {
        const engine::LayerView& v = m_outputs[std::size_t(r)];
        const QStringList texts{QString::fromStdString(v.name),
                                shapeLabel(v.shape, false),
                                figure(v.mean),
                                figure(v.stddev),
                                figure(v.min),
                                figure(v.max),
                                locale.toString(100 * v.zeroFraction, 'f', 1) +
                                    QStringLiteral(" %"),
                                r == 0 ? QString() : tr("…")};
        const bool dead = v.name != "input" && v.zeroFraction >= kMostlyZeros;
        for (int c = 0; c < ColumnCount; ++c) {
            auto* item = new QTableWidgetItem(texts[c]);
            if (c >= Mean) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            item->setToolTip(QString::fromStdString(v.description));
            if (dead) {
                item->setForeground(palette().color(QPalette::Link));
                item->setToolTip(
                    tr("%1\n%2 % of its outputs are zero for this image: it passes almost nothing "
                       "on. If it stays so for every image, its units are dead, which a too high "
                       "learning rate can cause.")
                        .arg(QString::fromStdString(v.description))
                        .arg(locale.toString(100 * v.zeroFraction, 'f', 1)));
            }
            m_table->setItem(r, c, item);
        }
    }

    auto* right = new QWidget(split);
    auto* rl = new QVBoxLayout(right);
    rl->setContentsMargins(0, 0, 0, 0);
    m_detail = new QLabel(right);
    m_detail->setWordWrap(true);
    m_detail->setTextInteractionFlags(Qt::TextSelectableByMouse);
    rl->addWidget(m_detail);
    m_filtersBox = new QCheckBox(tr("Show the convolution's &filters instead"), right);
    m_filtersBox->setToolTip(
        tr("A row per filter, a column per input channel (one tile per filter over one channel, "
           "in colour over a colour image): negative weights blue, positive red, white zero"));
    auto* pictureRow = new QHBoxLayout;
    pictureRow->addWidget(m_filtersBox, 1);
    auto* save = new QPushButton(tr("&Save picture…"), right);
    save->setToolTip(tr("Writes the picture shown as an image file, four times larger"));
    pictureRow->addWidget(save);
    rl->addLayout(pictureRow);
    connect(save, &QPushButton::clicked, this, [this] {
        const QString name = QString::fromStdString(m_outputs[std::size_t(m_row)].name) +
                             (showsFilters() ? QStringLiteral("-filters") : QString()) +
                             QStringLiteral(".png");
        const QString path = QFileDialog::getSaveFileName(this, tr("Save the picture"), name,
                                                          tr("Images (*.png *.jpg *.bmp)"));
        QString error;
        if (!path.isEmpty() && !savePicture(path, 4, &error))
            m_detail->setText(m_detail->text() + QStringLiteral("<br>⚠ ") + error.toHtmlEscaped());
    });
    m_scroll = new QScrollArea(right);
    m_view = new QLabel(m_scroll);
    m_view->setAlignment(Qt::AlignCenter);
    m_scroll->setWidget(m_view);
    m_scroll->setWidgetResizable(true);
    m_scroll->setMinimumSize(320, 240);
    rl->addWidget(m_scroll, 3);
    m_histogram = new BarChart(tr("Distribution of the values"), Qt::Vertical, right);
    m_histogram->setValueLabel(tr("share"));
    m_histogram->setValueText(QString());
    m_histogram->setMinimumHeight(160);
    rl->addWidget(m_histogram, 1);
    split->addWidget(m_table);
    split->addWidget(right);
    split->setStretchFactor(0, 0);
    split->setStretchFactor(1, 1);
    top->addWidget(split, 1);
    m_split = split;
    fitTable(1100);
    // The picture follows the room it has.
    m_scroll->viewport()->installEventFilter(this);

    connect(m_table, &QTableWidget::currentCellChanged, this, [this](int row) { showLayer(row); });
    connect(m_filtersBox, &QCheckBox::toggled, this, [this] { showPicture(); });
    resize(1100, 700);
    // The first convolution's output, else the input.
    int first = 0;
    for (int r = 1; r < int(m_outputs.size()) && first == 0; ++r)
        if (filtersOf(r)) first = r;
    showLayer(first);
}

const engine::LayerView* LayersDialog::filtersOf(int row) const
{
    if (row <= 0 || row >= int(m_outputs.size())) return nullptr;
    const std::string weight = m_outputs[std::size_t(row)].name + ".weight";
    for (const auto& f : m_filters)
        if (f.name == weight) return &f;
    return nullptr;
}

void LayersDialog::fitTable(int total)
{
    // The table as wide as its columns; the pictures take the rest.
    m_table->resizeColumnsToContents();
    const int tableWidth = m_table->horizontalHeader()->length() + 2 * m_table->frameWidth() +
                           m_table->verticalScrollBar()->sizeHint().width();
    if (total <= 0)
        for (const int size : m_split->sizes()) total += size;
    m_split->setSizes({tableWidth, std::max(0, total - tableWidth)});
}

void LayersDialog::setActivity(const std::vector<engine::LayerActivity>& activity)
{
    const QLocale locale;
    m_deadChannels.assign(m_outputs.size(), -1);
    for (int r = 0; r < int(m_outputs.size()); ++r) {
        QTableWidgetItem* item = m_table->item(r, Dead);
        const engine::LayerView& v = m_outputs[std::size_t(r)];
        const auto it =
            std::find_if(activity.begin(), activity.end(),
                         [&](const engine::LayerActivity& a) { return a.name == v.name; });
        if (it == activity.end()) { // the input
            item->setText(QString());
            continue;
        }
        const auto dead = it->deadChannels();
        m_deadChannels[std::size_t(r)] = std::int64_t(dead.size());
        item->setText(
            tr("%1 of %2")
                .arg(locale.toString(qint64(dead.size())), locale.toString(it->channels())));
        item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        item->setToolTip(dead.empty()
                             ? tr("Every channel is active on some of the %1 test images")
                                   .arg(locale.toString(it->images))
                             : tr("%n channel(s) zero on every one of the %1 test images: %2",
                                  nullptr, int(dead.size()))
                                   .arg(locale.toString(it->images), app::channelList(dead, 40)));
        if (!dead.empty()) item->setForeground(palette().color(QPalette::Link));
    }
    fitTable();
}

void LayersDialog::setActivityNote(const QString& note)
{
    for (int r = 0; r < m_table->rowCount(); ++r) {
        QTableWidgetItem* item = m_table->item(r, Dead);
        item->setText(r == 0 ? QString() : QStringLiteral("–"));
        item->setToolTip(note);
    }
    fitTable();
}

bool LayersDialog::canShowFilters() const
{
    return filtersOf(m_row) != nullptr;
}

bool LayersDialog::showsFilters() const
{
    return canShowFilters() && m_filtersBox->isChecked();
}

void LayersDialog::setShowFilters(bool filters)
{
    m_filtersBox->setChecked(filters);
    showPicture();
}

void LayersDialog::showLayer(int row)
{
    if (row < 0 || row >= int(m_outputs.size())) return;
    // Through the table's current cell, whose change comes back here once.
    if (m_table->currentRow() != row) {
        m_table->setCurrentCell(row, 0);
        return;
    }
    m_row = row;
    m_filtersBox->setEnabled(canShowFilters());
    showPicture();
}

QString LayersDialog::detailText() const
{
    return m_detail->text();
}

void LayersDialog::showPicture()
{
    if (m_row < 0) return;
    const engine::LayerView& out = m_outputs[std::size_t(m_row)];
    const engine::LayerView* filters = showsFilters() ? filtersOf(m_row) : nullptr;
    const engine::LayerView& v = filters ? *filters : out;
    m_picture = filters ? filterMosaic(v) : activationMosaic(v);
    QString text =
        QStringLiteral("<b>%1</b> — %2<br>")
            .arg(QString::fromStdString(v.name).toHtmlEscaped(),
                 QString::fromStdString(filters ? v.description : out.description).toHtmlEscaped());
    if (filters)
        text += tr("Weights %1: mean %2, deviation %3, from %4 to %5.")
                    .arg(shapeLabel(v.shape, false), figure(v.mean), figure(v.stddev),
                         figure(v.min), figure(v.max));
    else if (v.shape.rank() == 3)
        text += tr("%1 channels of %2 × %3, one tile each; black is the layer's minimum (%4), "
                   "white its maximum (%5).")
                    .arg(v.name == "input" && v.shape[2] == 3 ? tr("3 colour")
                                                              : QString::number(v.shape[2]))
                    .arg(v.shape[0])
                    .arg(v.shape[1])
                    .arg(figure(v.min), figure(v.max));
    else
        text += tr("%1 values, one cell each, in order by rows; black is the minimum (%2), white "
                   "the maximum (%3).")
                    .arg(v.values.size())
                    .arg(figure(v.min), figure(v.max));
    m_detail->setText(text);

    const QVector<double> counts = histogram(v, kBins);
    QStringList labels;
    QVector<double> shares;
    const double width = (v.max - v.min) / kBins;
    // Bin centres with the decimals their spacing needs.
    const int decimals = width > 0 ? std::clamp(int(std::ceil(-std::log10(width))), 0, 6) : 2;
    const double scale = std::pow(10.0, decimals);
    for (int b = 0; b < counts.size(); ++b) {
        const double centre = v.min + (b + 0.5) * width;
        // The bin around zero reads "0", whichever side of zero its centre falls ("-0.0").
        labels << (std::round(centre * scale) == 0 ? QLocale().toString(0)
                                                   : QLocale().toString(centre, 'f', decimals));
        shares << (v.values.empty() ? 0 : counts[b] / double(v.values.size()));
    }
    m_histogram->setBars(labels, shares);
    scalePicture();
}

void LayersDialog::scalePicture()
{
    // Scaled by a whole factor, so that every value stays a sharp block of pixels.
    if (m_picture.isNull()) {
        m_view->setPixmap({});
        return;
    }
    const QSize room = m_scroll->viewport()->size() - QSize(4, 4);
    const int factor = std::clamp(std::min(room.width() / std::max(m_picture.width(), 1),
                                           room.height() / std::max(m_picture.height(), 1)),
                                  1, 16);
    m_view->setPixmap(QPixmap::fromImage(m_picture.scaled(
        m_picture.size() * factor, Qt::IgnoreAspectRatio, Qt::FastTransformation)));
}

bool LayersDialog::savePicture(const QString& path, int scale, QString* error) const
{
    QImageWriter writer(path);
    if (m_picture.isNull() ||
        !writer.write(m_picture.scaled(m_picture.size() * std::max(scale, 1), Qt::IgnoreAspectRatio,
                                       Qt::FastTransformation))) {
        if (error)
            *error = m_picture.isNull() ? tr("there is no picture to save")
                                        : tr("cannot write %1: %2").arg(path, writer.errorString());
        return false;
    }
    return true;
}

bool LayersDialog::eventFilter(QObject* watched, QEvent* event)
{
    if (watched == m_scroll->viewport() && event->type() == QEvent::Resize) scalePicture();
    return QDialog::eventFilter(watched, event);
}

} // namespace towers::ui
