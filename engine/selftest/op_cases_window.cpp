// The op-case table's sliding-window ops: convolution (forward, backward data, backward weights,
// the training pair conv2dForwardTraining + conv2dBackward, and conv2dBackward without saved
// state), max pooling and LRN. Small geometries take every variant (bias or not, ReLU or not, dx
// or not); the registered models' layers, at a small batch, take the variant the layer runs.
#include <cmath>
#include <cstdio>

#include "engine/selftest/op_cases_build.h"

namespace towers::engine::op_cases {

namespace {

// "5x5 s1 same", "3x2 s2x1 pads t1 l0 b2 r1"
std::string windowText(int kh, int kw, int sh, int sw, Padding padding, const ExplicitPads& p)
{
    char text[96];
    int n = std::snprintf(text, sizeof text, "%dx%d s%d", kh, kw, sh);
    if (sw != sh) n += std::snprintf(text + n, sizeof text - std::size_t(n), "x%d", sw);
    if (padding == Padding::Explicit)
        std::snprintf(text + n, sizeof text - std::size_t(n), " pads t%d l%d b%d r%d", p.top,
                      p.left, p.bottom, p.right);
    else
        std::snprintf(text + n, sizeof text - std::size_t(n), "%s",
                      padding == Padding::Same ? " same" : " valid");
    return text;
}

// ---- convolution ----

struct ConvGeometry
{
    ConvGeometry(std::string what_, Shape x_, std::int64_t outC_, int kh_, int kw_, int sh_,
                 int sw_, Padding padding_, ExplicitPads pads_ = {}, bool model_ = false,
                 bool bias_ = true, bool relu_ = true)
        : what(std::move(what_)), x(std::move(x_)), outC(outC_), kh(kh_), kw(kw_), sh(sh_), sw(sw_),
          padding(padding_), pads(pads_), model(model_), bias(bias_), relu(relu_)
    {
    }
    std::string what; // where it comes from or what is special about it
    Shape x;
    std::int64_t outC = 1;
    int kh = 1, kw = 1, sh = 1, sw = 1;
    Padding padding = Padding::Same;
    ExplicitPads pads;
    bool model = false; // a model's layer: its own bias and activation only
    bool bias = true, relu = true;

    Conv2dDesc desc() const { return makeConv2dDesc(x, outC, kh, kw, sh, sw, padding, pads); }
    std::string text() const
    {
        return windowText(kh, kw, sh, sw, padding, pads) + " " + shapeText(x) + "->" +
               std::to_string(outC);
    }
};

std::vector<ConvGeometry> convGeometries()
{
    const Padding same = Padding::Same, valid = Padding::Valid, expl = Padding::Explicit;
    std::vector<ConvGeometry> g = {
        {"", {2, 7, 6, 3}, 4, 3, 3, 1, 1, same, {}},
        {"odd sizes, SAME pads 2/2 and 1/2", {2, 9, 8, 5}, 3, 5, 5, 2, 2, same, {}},
        {"SAME pads 1/2, batch 1", {1, 8, 7, 3}, 2, 4, 4, 1, 1, same, {}},
        {"unused last column", {2, 7, 8, 3}, 4, 3, 3, 2, 2, valid, {}},
        {"1x1", {2, 5, 6, 5}, 6, 1, 1, 1, 1, same, {}},
        {"1x1 strided, batch 1", {1, 5, 5, 3}, 2, 1, 1, 2, 2, valid, {}},
        {"", {1, 6, 7, 5}, 3, 5, 5, 1, 1, valid, {}},
        {"non-square kernel and stride", {2, 7, 6, 3}, 4, 3, 2, 2, 1, expl, {1, 0, 2, 1}},
        {"Inception's 1x7", {2, 9, 9, 8}, 6, 1, 7, 1, 1, same, {}},
        {"Inception's 7x1", {2, 9, 9, 6}, 8, 7, 1, 1, 1, same, {}},
        {"even kernel, SAME pads 0/0", {1, 6, 6, 5}, 3, 2, 2, 2, 2, same, {}},
        {"a partial channel block", {2, 6, 6, 20}, 20, 3, 3, 1, 1, same, {}},
        // Where oneDNN's or Towers' Winograd run (tests/engine/tst_ops_fused.cpp).
        {"Winograd 5x5, 48 filters", {3, 9, 7, 16}, 48, 5, 5, 1, 1, valid, {}},
        {"Winograd 5x5, 80 filters", {2, 8, 9, 32}, 80, 5, 5, 1, 1, expl, {1, 3, 2, 0}},
        {"Winograd 5x5, 225 tiles", {1, 30, 30, 16}, 16, 5, 5, 1, 1, same, {}},
        {"Winograd 3x3", {4, 16, 16, 64}, 64, 3, 3, 1, 1, same, {}},
        {"3x3 valid, 32 to 80 channels", {8, 12, 12, 32}, 80, 3, 3, 1, 1, valid, {}},
    };
    for (const auto& c : modelLayers().convolutions)
        g.emplace_back(c.layer, c.x, c.outChannels, c.kernel, c.kernel, 1, 1, c.padding,
                       ExplicitPads{}, true, c.bias, c.relu);
    return g;
}

std::string variant(bool bias, bool relu)
{
    return std::string(bias ? ", bias" : ", no bias") + (relu ? ", relu" : "");
}

std::string origin(const ConvGeometry& g)
{
    return g.what.empty() ? "" : " (" + g.what + ")";
}

Activation activation(bool relu)
{
    return relu ? Activation::Relu : Activation::None;
}

// Inputs x, w, b, dy; weights scaled by 1 / sqrt(fan-in) so outputs stay near 1.
std::vector<Tensor> convInputs(const Conv2dDesc& d, Rng& rng)
{
    const double s = 1.0 / std::sqrt(double(d.win.c * d.win.kh * d.win.kw));
    return {uniform(d.inputShape(), rng), uniform(d.weightShape(), rng, -s, s),
            uniform({d.outChannels}, rng, -0.2, 0.2), uniform(d.outputShape(), rng)};
}

// The pre-activation in float64, from float64 inputs.
Tensor convPreActivation(const Conv2dDesc& d, const std::vector<Tensor>& in, bool bias)
{
    Tensor z;
    referenceOps().conv2dForward(d, in[0], in[1], bias ? in[2] : Tensor(), z, Activation::None);
    return z;
}

void addConvolution(std::vector<OpCase>& cases, const std::vector<ConvGeometry>& geometries)
{
    const Tolerance tol = Tolerance::products();
    for (const auto& g : geometries) {
        const Conv2dDesc d = g.desc();
        auto inputs = [d](Rng& rng) { return convInputs(d, rng); };
        std::vector<std::pair<bool, bool>> variants{{g.bias, g.relu}};
        if (!g.model) variants.push_back({false, false});
        for (const auto& [bias, relu] : variants)
            cases.push_back({"conv2d forward", g.text() + variant(bias, relu) + origin(g), tol,
                             inputs, [d, bias, relu](Ops& ops, const std::vector<Tensor>& in) {
                                 Tensor y;
                                 ops.conv2dForward(d, in[0], in[1], bias ? in[2] : Tensor(), y,
                                                   activation(relu));
                                 return std::vector<OpOutput>{{"y", y}};
                             }});
    }
    for (const auto& g : geometries) {
        const Conv2dDesc d = g.desc();
        cases.push_back({"conv2d backward data", g.text() + origin(g), tol,
                         [d](Rng& rng) { return convInputs(d, rng); },
                         [d](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor dx;
                             ops.conv2dBackwardData(d, in[3], in[1], dx);
                             return std::vector<OpOutput>{{"dx", dx}};
                         }});
    }
    for (const auto& g : geometries) {
        const Conv2dDesc d = g.desc();
        std::vector<bool> withDb{g.bias};
        if (!g.model) withDb.push_back(false);
        for (const bool db : withDb)
            cases.push_back(
                {"conv2d backward weights", g.text() + (db ? ", db" : ", no db") + origin(g), tol,
                 [d](Rng& rng) { return convInputs(d, rng); },
                 [d, db](Ops& ops, const std::vector<Tensor>& in) {
                     Tensor dw, dbias;
                     ops.conv2dBackwardWeights(d, in[0], in[3], dw, db ? &dbias : nullptr);
                     std::vector<OpOutput> out{{"dw", dw}};
                     if (db) out.push_back({"db", dbias});
                     return out;
                 }});
    }
    // The path the layers take in training: conv2dForwardTraining, then conv2dBackward with the
    // state it saved, the ReLU mask from the backend's own y (so dy is zero near the kinks).
    for (const auto& g : geometries) {
        const Conv2dDesc d = g.desc();
        struct Variant
        {
            bool bias, relu, dx;
        };
        std::vector<Variant> variants{{g.bias, g.relu, true}};
        if (!g.model) variants.push_back({false, false, false});
        for (const auto& v : variants)
            cases.push_back(
                {"conv2d training forward + backward",
                 g.text() + variant(v.bias, v.relu) + (v.dx ? ", dx" : ", no dx") + origin(g), tol,
                 [d, v](Rng& rng) {
                     auto in = convInputs(d, rng);
                     if (v.relu) zeroNearKinks(in[3], convPreActivation(d, in, v.bias));
                     return in;
                 },
                 [d, v](Ops& ops, const std::vector<Tensor>& in) {
                     const Tensor b = v.bias ? in[2] : Tensor();
                     Tensor y, saved, dx, dw, db;
                     ops.conv2dForwardTraining(d, in[0], in[1], b, y, activation(v.relu), saved);
                     ops.conv2dBackward(d, in[0], in[1], y, in[3], activation(v.relu), saved,
                                        v.dx ? &dx : nullptr, dw, v.bias ? &db : nullptr);
                     std::vector<OpOutput> out{{"y", y}};
                     if (v.dx) out.push_back({"dx", dx});
                     out.push_back({"dw", dw});
                     if (v.bias) out.push_back({"db", db});
                     return out;
                 }});
    }
    // conv2dBackward alone, without saved state (as after an evaluation forward): y is an input,
    // so both backends mask with the same values.
    for (const auto& g : geometries) {
        if (g.model) continue;
        const Conv2dDesc d = g.desc();
        cases.push_back({"conv2d backward without saved state",
                         g.text() + ", bias, relu" + origin(g), tol,
                         [d](Rng& rng) {
                             auto in = convInputs(d, rng);
                             Tensor y;
                             referenceOps().reluForward(convPreActivation(d, in, true), y);
                             in.push_back(roundedToFloat32(y));
                             return in;
                         },
                         [d](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor dx, dw, db;
                             ops.conv2dBackward(d, in[0], in[1], in[4], in[3], Activation::Relu,
                                                Tensor(), &dx, dw, &db);
                             return std::vector<OpOutput>{{"dx", dx}, {"dw", dw}, {"db", db}};
                         }});
    }
}

// ---- max pooling ----

enum class PoolValues
{
    Distinct, // no ties
    Negative, // distinct and all below zero: a pad counted as 0 would win
    Ties,     // whole numbers 0..2: the first maximum in scan order must win
};

struct PoolGeometry
{
    PoolGeometry(std::string what_, Shape x_, int kh_, int kw_, int sh_, int sw_, Padding padding_,
                 ExplicitPads pads_ = {}, PoolValues values_ = PoolValues::Distinct)
        : what(std::move(what_)), x(std::move(x_)), kh(kh_), kw(kw_), sh(sh_), sw(sw_),
          padding(padding_), pads(pads_), values(values_)
    {
    }
    std::string what;
    Shape x;
    int kh = 1, kw = 1, sh = 1, sw = 1;
    Padding padding = Padding::Same;
    ExplicitPads pads;
    PoolValues values = PoolValues::Distinct;

    Pool2dDesc desc() const { return makePool2dDesc(x, kh, kw, sh, sw, padding, pads); }
    std::string text() const
    {
        return windowText(kh, kw, sh, sw, padding, pads) + " " + shapeText(x) +
               (what.empty() ? "" : " (" + what + ")");
    }
};

std::vector<PoolGeometry> poolGeometries()
{
    const Padding same = Padding::Same, valid = Padding::Valid, expl = Padding::Explicit;
    std::vector<PoolGeometry> g = {
        {"SAME pads 1/1 and 0/1", {2, 7, 8, 3}, 3, 3, 2, 2, same, {}},
        {"SAME pads 0/1, batch 1", {1, 8, 8, 4}, 3, 3, 2, 2, same, {}},
        {"unused last row and column", {1, 7, 7, 2}, 2, 2, 2, 2, valid, {}},
        {"overlapping windows", {1, 5, 6, 3}, 3, 3, 1, 1, same, {}},
        {"non-square kernel and stride", {2, 6, 5, 2}, 3, 2, 2, 1, expl, {1, 1, 2, 0}},
        {"every value negative: pads never win",
         {2, 7, 8, 3},
         3,
         3,
         2,
         2,
         same,
         {},
         PoolValues::Negative},
        {"ties: the first maximum wins", {2, 9, 9, 4}, 3, 3, 2, 2, same, {}, PoolValues::Ties},
        {"ties in overlapping windows", {1, 6, 5, 3}, 3, 3, 1, 1, same, {}, PoolValues::Ties},
        {"67 channels: whole vectors and a tail on every SIMD width",
         {1, 6, 7, 67},
         3,
         3,
         2,
         2,
         same},
        {"ties across 67 channels", {1, 5, 5, 67}, 3, 3, 2, 2, same, {}, PoolValues::Ties},
        {"ties in 2x2 windows across 19 channels",
         {2, 6, 7, 19},
         2,
         2,
         2,
         2,
         valid,
         {},
         PoolValues::Ties},
        {"2x2 SAME on odd sizes: windows cut by the edge",
         {1, 5, 7, 19},
         2,
         2,
         2,
         2,
         same,
         {},
         PoolValues::Ties},
        {"17x17 window: more positions than a byte indexes", {1, 18, 17, 3}, 17, 17, 1, 1, valid},
    };
    for (const auto& p : modelLayers().pools)
        g.emplace_back(p.layer, p.x, p.kernel, p.kernel, p.stride, p.stride, p.padding);
    return g;
}

std::vector<Tensor> poolInputs(const Pool2dDesc& d, PoolValues values, Rng& rng)
{
    Tensor x = values == PoolValues::Ties       ? levels(d.inputShape(), rng, 3)
               : values == PoolValues::Negative ? distinct(d.inputShape(), rng, -2, -1)
                                                : distinct(d.inputShape(), rng);
    return {x, uniform(d.outputShape(), rng)};
}

void addPooling(std::vector<OpCase>& cases, const std::vector<PoolGeometry>& geometries)
{
    // The forward selects: exact. Backward sums the gradients of overlapping windows.
    for (const auto& g : geometries) {
        const Pool2dDesc d = g.desc();
        const PoolValues values = g.values;
        cases.push_back({"max-pool forward", g.text(), Tolerance::exact(),
                         [d, values](Rng& rng) { return poolInputs(d, values, rng); },
                         [d](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y, ws;
                             ops.maxPoolForward(d, in[0], y, ws);
                             return std::vector<OpOutput>{{"y", y}};
                         }});
    }
    for (const auto& g : geometries) {
        const Pool2dDesc d = g.desc();
        const PoolValues values = g.values;
        cases.push_back({"max-pool forward + backward", g.text(), Tolerance::elementwise(),
                         [d, values](Rng& rng) { return poolInputs(d, values, rng); },
                         [d](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y, ws, dx;
                             ops.maxPoolForward(d, in[0], y, ws);
                             ops.maxPoolBackward(d, in[0], y, in[1], ws, dx);
                             return std::vector<OpOutput>{{"y", y, true}, {"dx", dx}};
                         }});
    }
}

// Average pooling on the max-pool geometries (pads do not count: a SAME border window averages
// fewer elements) and a global one. Sums of up to a window's elements (forward) or of the shares
// of up to as many windows (backward), in another order: a reduction's tolerance.
void addAveragePooling(std::vector<OpCase>& cases, std::vector<PoolGeometry> geometries)
{
    geometries.push_back({"global, 64 channels", {3, 7, 7, 64}, 7, 7, 7, 7, Padding::Valid});
    for (const auto& g : geometries) {
        const Pool2dDesc d = g.desc();
        cases.push_back(
            {"average-pool forward", g.text(), Tolerance::reductions(),
             [d](Rng& rng) { return std::vector<Tensor>{distinct(d.inputShape(), rng)}; },
             [d](Ops& ops, const std::vector<Tensor>& in) {
                 Tensor y;
                 ops.avgPoolForward(d, in[0], y);
                 return std::vector<OpOutput>{{"y", y}};
             }});
    }
    for (const auto& g : geometries) {
        const Pool2dDesc d = g.desc();
        cases.push_back(
            {"average-pool backward", g.text(), Tolerance::reductions(),
             [d](Rng& rng) { return std::vector<Tensor>{uniform(d.outputShape(), rng)}; },
             [d](Ops& ops, const std::vector<Tensor>& in) {
                 Tensor dx;
                 ops.avgPoolBackward(d, in[0], dx);
                 return std::vector<OpOutput>{{"dx", dx}};
             }});
    }
}

// ---- LRN ----

struct LrnGeometry
{
    LrnGeometry(std::string what_, Shape x_, int radius_, double bias_, double alpha_, double beta_,
                double range_ = 2)
        : what(std::move(what_)), x(std::move(x_)), radius(radius_), bias(bias_), alpha(alpha_),
          beta(beta_), range(range_)
    {
    }
    std::string what;
    Shape x;
    int radius = 2;
    double bias = 1, alpha = 1, beta = 0.5;
    double range = 2; // x in [-range, range]

    LrnDesc desc() const { return makeLrnDesc(x, radius, bias, alpha, beta); }
    std::string text() const
    {
        char params[96];
        std::snprintf(params, sizeof params, "r%d bias %g alpha %.3g beta %g ", radius, bias, alpha,
                      beta);
        return params + shapeText(x) + (what.empty() ? "" : " (" + what + ")");
    }
};

std::vector<LrnGeometry> lrnGeometries()
{
    std::vector<LrnGeometry> g = {
        {"", {2, 3, 4, 5}, 2, 1.0, 0.3, 0.75},
        {"radius 0", {1, 2, 3, 4}, 0, 2.0, 0.5, 0.5},
        {"", {1, 3, 3, 12}, 4, 1.0, 0.1, 0.75},
        {"radius wider than the channels", {1, 2, 2, 3}, 5, 1.0, 0.2, 1.0},
        {"", {2, 2, 2, 16}, 1, 0.5, 1.0, 0.6},
        {"one channel", {2, 2, 2, 1}, 3, 1.0, 0.5, 0.75},
        // Whole vectors and a tail of 3 channels on every SIMD width.
        {"batch 1, a vector tail", {1, 2, 3, 67}, 7, 1.0, 0.05, 0.75},
        {"300 channels", {1, 1, 2, 300}, 9, 2.0, 0.02, 0.9},
        {"12x12x64, strong alpha", {2, 12, 12, 64}, 4, 1.0, 0.05, 0.75},
    };
    for (const auto& l : modelLayers().lrns)
        g.emplace_back(l.layer, l.x, l.radius, l.bias, l.alpha, l.beta, 3);
    return g;
}

void addLrn(std::vector<OpCase>& cases, const std::vector<LrnGeometry>& geometries)
{
    const Tolerance tol = Tolerance::reductions();
    for (const auto& g : geometries) {
        const LrnDesc d = g.desc();
        const double range = g.range;
        cases.push_back({"LRN forward", g.text(), tol,
                         [d, range](Rng& rng) {
                             return std::vector<Tensor>{uniform(d.shape, rng, -range, range)};
                         },
                         [d](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y, ws;
                             ops.lrnForward(d, in[0], y, ws);
                             return std::vector<OpOutput>{{"y", y}};
                         }});
    }
    for (const auto& g : geometries) {
        const LrnDesc d = g.desc();
        const double range = g.range;
        cases.push_back({"LRN forward + backward", g.text(), tol,
                         [d, range](Rng& rng) {
                             Tensor x = uniform(d.shape, rng, -range, range);
                             return std::vector<Tensor>{x, uniform(d.shape, rng)};
                         },
                         [d](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y, ws, dx;
                             ops.lrnForward(d, in[0], y, ws);
                             ops.lrnBackward(d, in[0], y, in[1], ws, dx);
                             return std::vector<OpOutput>{{"y", y}, {"dx", dx}};
                         }});
    }
}

} // namespace

void addConvolutionCases(std::vector<OpCase>& cases)
{
    addConvolution(cases, convGeometries());
}

void addPoolingCases(std::vector<OpCase>& cases)
{
    addPooling(cases, poolGeometries());
    addAveragePooling(cases, poolGeometries());
}

void addLrnCases(std::vector<OpCase>& cases)
{
    addLrn(cases, lrnGeometries());
}

} // namespace towers::engine::op_cases
