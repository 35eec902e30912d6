#pragma once
// The Classify page's "Layers…" window: what each layer of the network made of the classified
// image (Classifier::layerOutputs), as NVIDIA DIGITS showed it. A table of the layers with their
// output's shape, mean, deviation, range and share of zeros (a layer that is all but all zeros
// after its ReLU is marked); the chosen layer's output as a mosaic of its channels, and, for a
// convolution, its filters; the distribution of its values; the channels dead over many test
// images (setActivity). Non-modal: the page stays usable.
#include <QDialog>
#include <QImage>

#include <vector>

#include "engine/train/classifier.h"

class QCheckBox;
class QLabel;
class QScrollArea;
class QSplitter;
class QTableWidget;

namespace towers::ui {

class BarChart;

class LayersDialog : public QDialog
{
    Q_OBJECT
public:
    // `outputs`: the input, then each layer's output; `filters`: every convolution's weights
    // (parameter "<layer>.weight"); `caption`: the image and its answer.
    LayersDialog(std::vector<engine::LayerView> outputs, std::vector<engine::LayerView> filters,
                 const QString& caption, QWidget* parent = nullptr);

    QTableWidget* table() const { return m_table; }
    // Fills the Dead column: per layer, the channels zero on every one of many images
    // (Classifier::layerActivity), with their numbers as its tooltip.
    void setActivity(const std::vector<engine::LayerActivity>& activity);
    // The Dead column is not to be had (no test set): why, as its tooltip.
    void setActivityNote(const QString& note);
    // The dead channels setActivity gave layer `row`; -1 before it, and for the input.
    std::int64_t deadChannels(int row) const
    {
        return row >= 0 && std::size_t(row) < m_deadChannels.size()
                   ? m_deadChannels[std::size_t(row)]
                   : -1;
    }
    // Shows layer `row` of the table (0: the input).
    void showLayer(int row);
    int shownLayer() const { return m_row; }
    // Shows the chosen convolution's filters instead of its output (when it has filters).
    void setShowFilters(bool filters);
    bool canShowFilters() const;
    bool showsFilters() const;
    // The picture shown, at one pixel per value (the window scales it up).
    const QImage& picture() const { return m_picture; }
    QString detailText() const;
    BarChart* histogramChart() const { return m_histogram; }
    // Writes the picture shown, `scale` times larger (every value a sharp block), as an image
    // file of the format its name says (PNG...); false with `error` set when it cannot.
    bool savePicture(const QString& path, int scale = 4, QString* error = nullptr) const;

    // A layer whose output is at least this share zeros is marked: it passes almost nothing on.
    static constexpr double kMostlyZeros = 0.99;

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    const engine::LayerView* filtersOf(int row) const;
    // Makes the chosen layer's picture, its text and its histogram, then scalePicture().
    void showPicture();
    // Shows the picture scaled to the room the window gives it.
    void scalePicture();
    // The table as wide as its columns, of `total` (0: the splitter's width now).
    void fitTable(int total = 0);

    std::vector<engine::LayerView> m_outputs, m_filters;
    std::vector<std::int64_t> m_deadChannels;
    int m_row = -1;
    QImage m_picture;
    QSplitter* m_split;
    QTableWidget* m_table;
    QLabel* m_detail;
    QCheckBox* m_filtersBox;
    QScrollArea* m_scroll;
    QLabel* m_view;
    BarChart* m_histogram;
};

} // namespace towers::ui
