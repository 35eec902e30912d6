#pragma once
// How the figures of a look inside a network (engine::LayerView) read, the same in
// `towers-cli classify --layers` and the Classify page's Layers window.
#include <QString>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace towers::app {

// A figure with `decimals` in fixed point where that reads, else with an exponent (1.23e-05,
// 4.50e+06); in the C locale, or the user's with `localized`.
QString layerFigure(double value, int decimals, bool localized = false);
// Channel numbers (dead ones, say), the first `shown` of them: "3, 17, 40 and 12 more".
QString channelList(const std::vector<std::int64_t>& channels, std::size_t shown);

} // namespace towers::app
