#include "engine/ops/descriptors.h"

#include <algorithm>

#include "engine/errors.h"

namespace towers::engine {

std::string Window2d::str() const
{
    return "input " + Shape{n, h, w, c}.str() + " kernel " + std::to_string(kh) + "x" +
           std::to_string(kw) + " stride " + std::to_string(sh) + "x" + std::to_string(sw) +
           " pads t" + std::to_string(padTop) + " l" + std::to_string(padLeft) + " b" +
           std::to_string(padBottom) + " r" + std::to_string(padRight);
}

namespace {

void padsFor(std::int64_t in, int k, int s, Padding padding, int explicitBefore, int explicitAfter,
             std::int64_t& out, int& before, int& after)
{
    switch (padding) {
    case Padding::Same: {
        out = (in + s - 1) / s;
        const std::int64_t total = std::max<std::int64_t>((out - 1) * s + k - in, 0);
        before = static_cast<int>(total / 2);
        after = static_cast<int>(total - total / 2);
        break;
    }
    case Padding::Valid:
        if (k > in)
            throw ShapeError("VALID window of size " + std::to_string(k) +
                             " does not fit an input of size " + std::to_string(in));
        out = (in - k) / s + 1;
        before = after = 0;
        break;
    case Padding::Explicit:
        if (explicitBefore < 0 || explicitAfter < 0) throw InvalidArgument("negative padding");
        if (explicitBefore >= k || explicitAfter >= k)
            throw InvalidArgument("padding must be smaller than the window");
        if (in + explicitBefore + explicitAfter < k)
            throw ShapeError("window of size " + std::to_string(k) +
                             " does not fit the padded input");
        out = (in + explicitBefore + explicitAfter - k) / s + 1;
        before = explicitBefore;
        after = explicitAfter;
        break;
    }
}

} // namespace

Window2d makeWindow2d(const Shape& x, int kh, int kw, int sh, int sw, Padding padding,
                      ExplicitPads pads)
{
    if (x.rank() != 4) throw ShapeError("expected an NHWC input of rank 4, got " + x.str());
    for (int i = 0; i < 4; ++i)
        if (x[i] <= 0) throw ShapeError("input shape " + x.str() + " has a zero dimension");
    if (kh <= 0 || kw <= 0) throw InvalidArgument("window size must be positive");
    if (sh <= 0 || sw <= 0) throw InvalidArgument("stride must be positive");
    Window2d w;
    w.n = x[0];
    w.h = x[1];
    w.w = x[2];
    w.c = x[3];
    w.kh = kh;
    w.kw = kw;
    w.sh = sh;
    w.sw = sw;
    padsFor(w.h, kh, sh, padding, pads.top, pads.bottom, w.oh, w.padTop, w.padBottom);
    padsFor(w.w, kw, sw, padding, pads.left, pads.right, w.ow, w.padLeft, w.padRight);
    return w;
}

Conv2dDesc makeConv2dDesc(const Shape& x, std::int64_t outChannels, int kh, int kw, int sh, int sw,
                          Padding padding, ExplicitPads pads)
{
    if (outChannels <= 0) throw InvalidArgument("convolution needs at least one output channel");
    return {makeWindow2d(x, kh, kw, sh, sw, padding, pads), outChannels};
}

Pool2dDesc makePool2dDesc(const Shape& x, int kh, int kw, int sh, int sw, Padding padding,
                          ExplicitPads pads)
{
    return {makeWindow2d(x, kh, kw, sh, sw, padding, pads)};
}

LrnDesc makeLrnDesc(const Shape& x, int depthRadius, double bias, double alpha, double beta)
{
    if (x.rank() != 4 || x.numel() == 0)
        throw ShapeError("LRN expects a non-empty NHWC input, got " + x.str());
    if (depthRadius < 0) throw InvalidArgument("LRN depth radius must be >= 0");
    if (!(bias > 0) || alpha < 0 || beta < 0)
        throw InvalidArgument("LRN needs bias > 0, alpha >= 0 and beta >= 0");
    return {x, depthRadius, bias, alpha, beta};
}

BatchNormDesc makeBatchNormDesc(const Shape& x, double epsilon, double momentum)
{
    if ((x.rank() != 2 && x.rank() != 4) || x.numel() == 0)
        throw ShapeError("batch norm expects a non-empty [N, C] or [N, H, W, C] input, got " +
                         x.str());
    if (!(epsilon > 0)) throw InvalidArgument("batch norm epsilon must be positive");
    if (momentum < 0 || momentum > 1)
        throw InvalidArgument("batch norm momentum must be in [0, 1]");
    return {x, epsilon, momentum};
}

} // namespace towers::engine
