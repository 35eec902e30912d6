#include "ui/widgets/layer_mosaic.h"

#include <algorithm>
#include <cmath>

namespace towers::ui {

namespace {

constexpr QRgb kBackground = qRgb(40, 40, 48);

int gridColumns(int tiles, int tileWidth, int tileHeight)
{
    // About square overall: columns x tileWidth ~ rows x tileHeight.
    const double aspect = double(tileHeight) / std::max(tileWidth, 1);
    return std::clamp(int(std::ceil(std::sqrt(tiles * aspect))), 1, std::max(tiles, 1));
}

QImage canvas(const MosaicLayout& l)
{
    const int rows = (l.tiles + l.columns - 1) / std::max(l.columns, 1);
    QImage image(l.columns * (l.tileWidth + 1) + 1, rows * (l.tileHeight + 1) + 1,
                 QImage::Format_RGB32);
    image.fill(kBackground);
    return image;
}

int grey(double v, double lo, double hi)
{
    return hi > lo ? std::clamp(int(std::lround(255 * (v - lo) / (hi - lo))), 0, 255) : 128;
}

QRgb diverging(double v, double scale)
{
    const double t = scale > 0 ? std::clamp(v / scale, -1.0, 1.0) : 0.0;
    const int fade = int(std::lround(255 * (1 - std::abs(t))));
    return t >= 0 ? qRgb(255, fade, fade) : qRgb(fade, fade, 255);
}

bool colourInput(const engine::LayerView& v)
{
    return v.name == "input" && v.shape.rank() == 3 && v.shape[2] == 3;
}

} // namespace

MosaicLayout activationLayout(const engine::LayerView& v)
{
    MosaicLayout l;
    if (v.shape.rank() == 3) {
        l.tileHeight = int(v.shape[0]);
        l.tileWidth = int(v.shape[1]);
        l.tiles = colourInput(v) ? 1 : int(v.shape[2]);
    } else {
        const auto n = v.values.size();
        l.tiles = n ? 1 : 0;
        l.tileWidth = int(std::ceil(std::sqrt(double(n))));
        l.tileHeight =
            l.tileWidth ? int((n + std::size_t(l.tileWidth) - 1) / std::size_t(l.tileWidth)) : 0;
    }
    l.columns = gridColumns(l.tiles, l.tileWidth, l.tileHeight);
    return l;
}

QImage activationMosaic(const engine::LayerView& v)
{
    const MosaicLayout l = activationLayout(v);
    if (l.tiles == 0 || v.values.empty()) return {};
    QImage image = canvas(l);
    if (v.shape.rank() != 3) {
        for (std::size_t i = 0; i < v.values.size(); ++i) {
            const int g = grey(v.values[i], v.min, v.max);
            image.setPixel(1 + int(i % std::size_t(l.tileWidth)),
                           1 + int(i / std::size_t(l.tileWidth)), qRgb(g, g, g));
        }
        return image;
    }
    const int h = l.tileHeight, w = l.tileWidth, c = int(v.shape[2]);
    for (int tile = 0; tile < l.tiles; ++tile) {
        const int x0 = 1 + (tile % l.columns) * (w + 1), y0 = 1 + (tile / l.columns) * (h + 1);
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const std::size_t at = std::size_t((y * w + x) * c);
                if (colourInput(v)) {
                    image.setPixel(x0 + x, y0 + y,
                                   qRgb(grey(v.values[at], v.min, v.max),
                                        grey(v.values[at + 1], v.min, v.max),
                                        grey(v.values[at + 2], v.min, v.max)));
                    continue;
                }
                const int g = grey(v.values[at + std::size_t(tile)], v.min, v.max);
                image.setPixel(x0 + x, y0 + y, qRgb(g, g, g));
            }
    }
    return image;
}

QImage filterMosaic(const engine::LayerView& v)
{
    if (v.shape.rank() != 4 || v.values.empty()) return {};
    const int o = int(v.shape[0]), in = int(v.shape[1]), kh = int(v.shape[2]), kw = int(v.shape[3]);
    const double scale = std::max(std::abs(v.min), std::abs(v.max));
    const bool colour = in == 3;
    // One tile per filter in an about square grid over one channel or a colour image; else a
    // row per filter and a column per input channel.
    const bool perFilter = in == 1 || colour;
    MosaicLayout l;
    l.tileWidth = kw;
    l.tileHeight = kh;
    l.tiles = perFilter ? o : o * in;
    l.columns = perFilter ? gridColumns(o, kw, kh) : in;
    QImage image = canvas(l);
    for (int f = 0; f < o; ++f)
        for (int ch = 0; ch < (perFilter ? 1 : in); ++ch) {
            const int tile = perFilter ? f : f * in + ch;
            const int x0 = 1 + (tile % l.columns) * (kw + 1),
                      y0 = 1 + (tile / l.columns) * (kh + 1);
            for (int y = 0; y < kh; ++y)
                for (int x = 0; x < kw; ++x) {
                    const auto at = [&](int c) {
                        return double(v.values[std::size_t(((f * in + c) * kh + y) * kw + x)]);
                    };
                    if (colour) {
                        // Each channel's weight as that colour's brightness around mid-grey.
                        const auto level = [&](int c) {
                            return scale > 0
                                       ? std::clamp(int(std::lround(128 + 127 * at(c) / scale)), 0,
                                                    255)
                                       : 128;
                        };
                        image.setPixel(x0 + x, y0 + y, qRgb(level(0), level(1), level(2)));
                    } else {
                        image.setPixel(x0 + x, y0 + y, diverging(at(ch), scale));
                    }
                }
        }
    return image;
}

QVector<double> histogram(const engine::LayerView& v, int bins)
{
    QVector<double> counts(std::max(bins, 1), 0.0);
    const double width = (v.max - v.min) / counts.size();
    for (float x : v.values) {
        const int bin = width > 0 ? std::min(int((x - v.min) / width), int(counts.size()) - 1) : 0;
        counts[std::max(bin, 0)] += 1;
    }
    return counts;
}

} // namespace towers::ui
