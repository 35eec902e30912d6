#include "engine/nn/layer.h"

#include <cmath>

namespace towers::engine {

void Init::apply(Tensor& t, std::int64_t fanIn, std::int64_t fanOut, Rng& rng) const
{
    const std::int64_t n = t.numel();
    switch (kind) {
    case Kind::Constant:
        t.fill(value);
        break;
    case Kind::TruncatedNormal:
        for (std::int64_t i = 0; i < n; ++i) t.setAt(i, rng.truncatedNormal(value));
        break;
    case Kind::GlorotUniform: {
        const double a = std::sqrt(6.0 / static_cast<double>(fanIn + fanOut));
        for (std::int64_t i = 0; i < n; ++i) t.setAt(i, rng.uniform(-a, a));
        break;
    }
    case Kind::TorchDefault: {
        const double a = 1.0 / std::sqrt(static_cast<double>(fanIn));
        for (std::int64_t i = 0; i < n; ++i) t.setAt(i, rng.uniform(-a, a));
        break;
    }
    }
}

} // namespace towers::engine
