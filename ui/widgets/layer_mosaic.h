#pragma once
// Pictures of what a layer holds (engine::LayerView), for the Layers window of the Classify page:
// a feature map [H, W, C] as C grey tiles of H x W side by side, a feature vector [F] as one tile
// of cells, and convolution filters [O, I, kH, kW] as a grid of kH x kW tiles (a row per filter,
// a column per input channel; one tile per filter, in a square, when I is 1, and in colour when
// I is 3), negative weights blue and positive red. Tiles are 1 pixel apart on a dark background;
// one scale serves a whole layer, so tiles compare.
#include <QImage>

#include "engine/train/classifier.h"

namespace towers::ui {

// How a layer's tiles are laid out: `tiles` of tileWidth x tileHeight in `columns` columns.
struct MosaicLayout
{
    int tiles = 0, tileWidth = 0, tileHeight = 0, columns = 0;
};

MosaicLayout activationLayout(const engine::LayerView& view);
// Grey 0 (the layer's minimum) to 255 (its maximum); a colour input ([H, W, 3] named "input")
// is one colour tile.
QImage activationMosaic(const engine::LayerView& view);
// White is 0, full blue and red the largest magnitude.
QImage filterMosaic(const engine::LayerView& view);

// `bins` counts of view.values between its minimum and maximum (the last bin takes the maximum).
QVector<double> histogram(const engine::LayerView& view, int bins);

} // namespace towers::ui
