// The pictures of the Layers window (ui/widgets/layer_mosaic.h): each channel of a feature map a
// grey tile scaled over the whole layer, a feature vector one tile of cells, a colour input one
// colour tile, filters as a row per filter and a column per input channel in blue (negative) and
// red (positive), a colour first layer's filters as colour tiles; and the histogram's counts.
#include <QTest>

#include "ui/widgets/layer_mosaic.h"

using namespace towers;
using ui::activationMosaic;
using ui::filterMosaic;

namespace {

engine::LayerView view(const char* name, engine::Shape shape, std::vector<float> values)
{
    engine::LayerView v;
    v.name = name;
    v.shape = std::move(shape);
    v.values = std::move(values);
    engine::computeStatistics(v);
    return v;
}

int greyAt(const QImage& image, int x, int y)
{
    const QRgb c = image.pixel(x, y);
    return qRed(c) == qGreen(c) && qGreen(c) == qBlue(c) ? qRed(c) : -1;
}

} // namespace

class TestLayerMosaic : public QObject
{
    Q_OBJECT
private slots:
    void featureMapChannelsAreTiles()
    {
        // [2, 2, 4]: channel c at (y, x) is c * 10 + y * 2 + x; min 0, max 33.
        std::vector<float> values;
        for (int y = 0; y < 2; ++y)
            for (int x = 0; x < 2; ++x)
                for (int c = 0; c < 4; ++c) values.push_back(float(c * 10 + y * 2 + x));
        const auto v = view("conv1", {2, 2, 4}, values);
        const auto layout = ui::activationLayout(v);
        QCOMPARE(layout.tiles, 4);
        QCOMPARE(layout.columns, 2);
        const QImage m = activationMosaic(v);
        QCOMPARE(m.size(), QSize(2 * 3 + 1, 2 * 3 + 1)); // 2 x 2 tiles of 2 x 2, 1 pixel apart
        QCOMPARE(greyAt(m, 1, 1), 0);                    // channel 0, (0, 0): the minimum
        QCOMPARE(greyAt(m, 4 + 1, 4 + 1), 255);          // channel 3, (1, 1): the maximum
        QCOMPARE(greyAt(m, 4 + 0, 1), qRound(255 * 10 / 33.0));          // channel 1, (0, 0)
        QVERIFY(greyAt(m, 0, 0) != 0 && m.pixel(0, 0) == m.pixel(3, 3)); // the background
    }

    void vectorIsOneTile()
    {
        const auto v = view("fc1", {5}, {0, 1, 2, 3, 4});
        const QImage m = activationMosaic(v);
        QCOMPARE(m.size(), QSize(3 + 2, 2 + 2)); // ceil(sqrt 5) = 3 columns, 2 rows
        QCOMPARE(greyAt(m, 1, 1), 0);
        QCOMPARE(greyAt(m, 2, 2), 255); // value 4: row 1, column 1
    }

    void colourInputIsOneColourTile()
    {
        // [1, 2, 3]: a red pixel and a blue one.
        const auto v = view("input", {1, 2, 3}, {1, 0, 0, 0, 0, 1});
        const QImage m = activationMosaic(v);
        QCOMPARE(m.size(), QSize(2 + 2, 1 + 2));
        QCOMPARE(m.pixel(1, 1), qRgb(255, 0, 0));
        QCOMPARE(m.pixel(2, 1), qRgb(0, 0, 255));
        // The same values as a layer's three channels: three grey tiles.
        QCOMPARE(ui::activationLayout(view("conv", {1, 2, 3}, {1, 0, 0, 0, 0, 1})).tiles, 3);
    }

    void filtersRowPerFilterColumnPerChannel()
    {
        // [2 filters, 2 channels, 1, 1]: -1, 0.5 / 0, 1.
        const auto v = view("conv2.weight", {2, 2, 1, 1}, {-1, 0.5f, 0, 1});
        const QImage m = filterMosaic(v);
        QCOMPARE(m.size(), QSize(2 * 2 + 1, 2 * 2 + 1));
        QCOMPARE(m.pixel(1, 1), qRgb(0, 0, 255));     // -1: full blue
        QCOMPARE(m.pixel(3, 1), qRgb(255, 128, 128)); // 0.5: half red
        QCOMPARE(m.pixel(1, 3), qRgb(255, 255, 255)); // 0: white
        QCOMPARE(m.pixel(3, 3), qRgb(255, 0, 0));     // 1: full red
    }

    void oneChannelFiltersInASquare()
    {
        const QImage m = filterMosaic(view("conv1.weight", {4, 1, 1, 1}, {-1, 1, 0, 0.5f}));
        QCOMPARE(m.size(), QSize(2 * 2 + 1, 2 * 2 + 1));
        QCOMPARE(m.pixel(1, 1), qRgb(0, 0, 255));
        QCOMPARE(m.pixel(3, 1), qRgb(255, 0, 0));
        QCOMPARE(m.pixel(1, 3), qRgb(255, 255, 255));
    }

    void colourFiltersAreColourTiles()
    {
        // [1 filter, 3 channels, 1, 1]: red +1, green 0, blue -1.
        const QImage m = filterMosaic(view("conv1.weight", {1, 3, 1, 1}, {1, 0, -1}));
        QCOMPARE(m.size(), QSize(3, 3));
        QCOMPARE(m.pixel(1, 1), qRgb(255, 128, 1));
    }

    void histogramCounts()
    {
        const auto v = view("x", {6}, {0, 0, 0, 1, 2, 4});
        const QVector<double> h = ui::histogram(v, 4); // bins of width 1 over 0..4
        QCOMPARE(h, (QVector<double>{3, 1, 1, 1}));
        QCOMPARE(ui::histogram(view("flat", {2}, {7, 7}), 3), (QVector<double>{2, 0, 0}));
    }
};

QTEST_MAIN(TestLayerMosaic)
#include "tst_layer_mosaic.moc"
