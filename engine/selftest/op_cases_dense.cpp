// The op-case table's dense and element-wise ops: linear (forward, backward data, backward
// weights, the fused linearBackward), ReLU, add, dropout, the layout transposes and channel copies,
// the softmax cross-entropy loss, the sum of squares, axpy, and the preprocessing of dataset images
// into model input. The batch norms are in op_cases_norm.cpp, the optimizer updates (plain SGD,
// momentum, Adam, each also with its skip flag clear and set, and the moving average's step) in
// op_cases_update.cpp.
#include <cmath>
#include <cstdio>
#include <limits>

#include "engine/data/distortion_math.h"
#include "engine/ops/step_scalars.h"
#include "engine/selftest/op_cases_build.h"

namespace towers::engine::op_cases {

namespace {

Activation activation(bool relu)
{
    return relu ? Activation::Relu : Activation::None;
}

// ---- linear ----

struct LinearGeometry
{
    LinearGeometry(std::string what_, std::int64_t n_, std::int64_t in_, std::int64_t out_,
                   bool model_ = false, bool bias_ = true, bool relu_ = true)
        : what(std::move(what_)), n(n_), in(in_), out(out_), model(model_), bias(bias_), relu(relu_)
    {
    }
    std::string what;
    std::int64_t n = 1, in = 1, out = 1;
    bool model = false; // a model's layer: its own bias and activation only
    bool bias = true, relu = true;

    std::string text() const
    {
        char text[64];
        std::snprintf(text, sizeof text, "%lldx%lld->%lld", static_cast<long long>(n),
                      static_cast<long long>(in), static_cast<long long>(out));
        return text + (what.empty() ? "" : " (" + what + ")");
    }
};

std::vector<LinearGeometry> linearGeometries()
{
    std::vector<LinearGeometry> g = {
        {"odd sizes", 3, 7, 5},
        {"", 1, 1, 1},
        {"odd sizes", 5, 33, 17},
        {"", 6, 37, 19},
        {"parallel bias sums", 128, 64, 300},
        {"batch 1", 1, 2304, 384},
    };
    for (const auto& l : modelLayers().linears)
        g.emplace_back(l.layer, l.n, l.in, l.out, true, l.bias, l.relu);
    return g;
}

std::string variant(bool bias, bool relu)
{
    return std::string(bias ? ", bias" : ", no bias") + (relu ? ", relu" : "");
}

// x, w, b, dy; weights scaled by 1 / sqrt(in).
std::vector<Tensor> linearInputs(const LinearGeometry& g, Rng& rng)
{
    const double s = 1.0 / std::sqrt(double(g.in));
    return {uniform({g.n, g.in}, rng), uniform({g.out, g.in}, rng, -s, s),
            uniform({g.out}, rng, -0.5, 0.5), uniform({g.n, g.out}, rng)};
}

void addLinear(std::vector<OpCase>& cases, const std::vector<LinearGeometry>& geometries)
{
    const Tolerance tol = Tolerance::products();
    for (const auto& g : geometries) {
        std::vector<std::pair<bool, bool>> variants{{g.bias, g.relu}};
        if (!g.model) variants.push_back({false, false});
        for (const auto& [bias, relu] : variants)
            cases.push_back({"linear forward", g.text() + variant(bias, relu), tol,
                             [g](Rng& rng) { return linearInputs(g, rng); },
                             [bias, relu](Ops& ops, const std::vector<Tensor>& in) {
                                 Tensor y;
                                 ops.linearForward(in[0], in[1], bias ? in[2] : Tensor(), y,
                                                   activation(relu));
                                 return std::vector<OpOutput>{{"y", y}};
                             }});
    }
    for (const auto& g : geometries)
        cases.push_back({"linear backward data", g.text(), tol,
                         [g](Rng& rng) { return linearInputs(g, rng); },
                         [](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor dx;
                             ops.linearBackwardData(in[3], in[1], dx);
                             return std::vector<OpOutput>{{"dx", dx}};
                         }});
    for (const auto& g : geometries) {
        std::vector<bool> withDb{g.bias};
        if (!g.model) withDb.push_back(false);
        for (const bool db : withDb)
            cases.push_back({"linear backward weights", g.text() + (db ? ", db" : ", no db"), tol,
                             [g](Rng& rng) { return linearInputs(g, rng); },
                             [db](Ops& ops, const std::vector<Tensor>& in) {
                                 Tensor dw, dbias;
                                 ops.linearBackwardWeights(in[0], in[3], dw, db ? &dbias : nullptr);
                                 std::vector<OpOutput> out{{"dw", dw}};
                                 if (db) out.push_back({"db", dbias});
                                 return out;
                             }});
    }
    // linearBackward: y (the forward's output, which masks dy for ReLU) is an input computed in
    // float64, so both backends mask with the same values.
    struct Variant
    {
        bool bias, relu, dx;
    };
    for (const auto& g : geometries) {
        std::vector<Variant> variants{{g.bias, g.relu, true}};
        if (!g.model) {
            variants.push_back({true, true, false});
            variants.push_back({false, true, true});
            variants.push_back({true, false, true});
        }
        for (const auto& v : variants)
            cases.push_back(
                {"linear fused backward",
                 g.text() + variant(v.bias, v.relu) + (v.dx ? ", dx" : ", no dx"), tol,
                 [g, v](Rng& rng) {
                     auto in = linearInputs(g, rng);
                     Tensor y;
                     referenceOps().linearForward(in[0], in[1], v.bias ? in[2] : Tensor(), y,
                                                  activation(v.relu));
                     in.push_back(roundedToFloat32(y));
                     return in;
                 },
                 [v](Ops& ops, const std::vector<Tensor>& in) {
                     Tensor dx, dw, db;
                     ops.linearBackward(in[0], in[1], in[4], in[3], activation(v.relu),
                                        v.dx ? &dx : nullptr, dw, v.bias ? &db : nullptr);
                     std::vector<OpOutput> out;
                     if (v.dx) out.push_back({"dx", dx});
                     out.push_back({"dw", dw});
                     if (v.bias) out.push_back({"db", db});
                     return out;
                 }});
    }
}

// ---- element-wise ----

void addElementwise(std::vector<OpCase>& cases)
{
    const auto shapes = elementwiseShapes();
    for (const auto& s : shapes)
        cases.push_back({"relu forward", s.text(), Tolerance::exact(),
                         [s](Rng& rng) { return std::vector<Tensor>{uniform(s.shape, rng)}; },
                         [](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y;
                             ops.reluForward(in[0], y);
                             return std::vector<OpOutput>{{"y", y}};
                         }});
    cases.push_back(
        {"relu forward", shapes.back().text() + ", in place (y is x)", Tolerance::exact(),
         [s = shapes.back()](Rng& rng) { return std::vector<Tensor>{uniform(s.shape, rng)}; },
         [](Ops& ops, const std::vector<Tensor>& in) {
             Tensor y = in[0].clone();
             ops.reluForward(y, y);
             return std::vector<OpOutput>{{"y", y}};
         }});
    for (const auto& s : shapes)
        cases.push_back({"relu backward", s.text(), Tolerance::exact(),
                         [s](Rng& rng) {
                             Tensor y;
                             referenceOps().reluForward(uniform(s.shape, rng), y);
                             return std::vector<Tensor>{y, uniform(s.shape, rng)};
                         },
                         [](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor dx;
                             ops.reluBackward(in[0], in[1], dx);
                             return std::vector<OpOutput>{{"dx", dx}};
                         }});
    cases.push_back({"relu backward", shapes.back().text() + ", in place (dx is dy)",
                     Tolerance::exact(),
                     [s = shapes.back()](Rng& rng) {
                         Tensor y;
                         referenceOps().reluForward(uniform(s.shape, rng), y);
                         return std::vector<Tensor>{y, uniform(s.shape, rng)};
                     },
                     [](Ops& ops, const std::vector<Tensor>& in) {
                         Tensor dx = in[1].clone();
                         ops.reluBackward(in[0], dx, dx);
                         return std::vector<OpOutput>{{"dx", dx}};
                     }});
    for (const auto& s : shapes)
        cases.push_back(
            {"add", s.text(), Tolerance::elementwise(),
             [s](Rng& rng) {
                 return std::vector<Tensor>{uniform(s.shape, rng), uniform(s.shape, rng, -3, 3)};
             },
             [](Ops& ops, const std::vector<Tensor>& in) {
                 Tensor y;
                 ops.add(in[0], in[1], y);
                 return std::vector<OpOutput>{{"y", y}};
             }});
    cases.push_back(
        {"add", shapes.back().text() + ", in place (y is a)", Tolerance::elementwise(),
         [s = shapes.back()](Rng& rng) {
             return std::vector<Tensor>{uniform(s.shape, rng), uniform(s.shape, rng, -3, 3)};
         },
         [](Ops& ops, const std::vector<Tensor>& in) {
             Tensor y = in[0].clone();
             ops.add(y, in[1], y);
             return std::vector<OpOutput>{{"y", y}};
         }});

    // Dropout: the masks come from the counter-based hash (ops/dropout_mask.h), so they must
    // match bit for bit; the kept values are scaled by 1 / (1 - rate).
    const double rates[] = {0.25, 0.0, 0.5, 0.9, 0.4};
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        const Named s = shapes[i];
        const double rate = rates[i];
        const std::uint64_t seed = 1234 + i;
        cases.push_back({"dropout forward", s.text() + ", rate " + number(rate),
                         Tolerance::elementwise(),
                         [s](Rng& rng) { return std::vector<Tensor>{uniform(s.shape, rng)}; },
                         [rate, seed](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y, m;
                             ops.dropoutForward(in[0], rate, seed, y, m, Tensor());
                             return std::vector<OpOutput>{{"y", y}, {"mask", m, true}};
                         }});
    }
    // The step from a step's scalars (the seed then is dropoutSeed(seed, step)).
    {
        const Named s = shapes[4];
        StepScalars v;
        v.values[StepScalars::DropoutStep] = 4097;
        OpCase c{"dropout forward", s.text() + ", rate 0.5, step 4097 from the step's scalars",
                 Tolerance::elementwise(),
                 [s, v](Rng& rng) {
                     return std::vector<Tensor>{uniform(s.shape, rng), stepScalarsInput(v)};
                 },
                 [](Ops& ops, const std::vector<Tensor>& in) {
                     Tensor y, m;
                     ops.dropoutForward(in[0], 0.5, 99, y, m, in[1]);
                     return std::vector<OpOutput>{{"y", y}, {"mask", m, true}};
                 }};
        c.keepDType = {1};
        cases.push_back(c);
    }
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        const Named s = shapes[i];
        const double rate = rates[i];
        cases.push_back(
            {"dropout backward", s.text() + ", rate " + number(rate), Tolerance::elementwise(),
             [s, rate](Rng& rng) {
                 return std::vector<Tensor>{uniform(s.shape, rng), mask(s.shape, rng, 1 - rate)};
             },
             [rate](Ops& ops, const std::vector<Tensor>& in) {
                 Tensor dx;
                 ops.dropoutBackward(in[0], in[1], rate, dx);
                 return std::vector<OpOutput>{{"dx", dx}};
             }});
    }
    // Accumulated, scaled, into a sum that lives where x does (0.25 before: it must be kept).
    for (const auto& s : shapes)
        cases.push_back({"sum of squares",
                         s.text() + ", scale 0.5, onto 0.25",
                         {1e-6, 1e-4, 1e-4, 1e-6},
                         [s](Rng& rng) { return std::vector<Tensor>{uniform(s.shape, rng)}; },
                         [](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor sum = scalar(0.25).copyTo(ops.device());
                             ops.sumSquares(in[0], 0.5, sum);
                             return std::vector<OpOutput>{{"sum", sum}};
                         }});
    // The finiteness flag: none, a NaN, an infinity (at the start, the middle, the end), and a
    // flag set before that must stay set.
    struct Special
    {
        const char* what;
        float value;
        double where; // fraction of the tensor
        float flagBefore;
    };
    const Special specials[] = {
        {"all finite", 0.f, 0, 0.f},
        {"a NaN first", std::numeric_limits<float>::quiet_NaN(), 0, 0.f},
        {"an infinity in the middle", std::numeric_limits<float>::infinity(), 0.5, 0.f},
        {"minus infinity last", -std::numeric_limits<float>::infinity(), 1, 0.f},
        {"all finite, flag already set", 0.f, 0, 1.f},
    };
    for (std::size_t i = 0; i < std::size(specials); ++i) {
        const Named s = shapes[i % shapes.size()];
        const Special sp = specials[i];
        cases.push_back({"non-finite flag", s.text() + ", " + sp.what, Tolerance::elementwise(),
                         [s, sp](Rng& rng) {
                             Tensor x = uniform(s.shape, rng); // of the run's float type
                             const auto set = [](Tensor& t, std::int64_t at, double v) {
                                 if (t.dtype() == DType::Float32)
                                     t.data<float>()[at] = float(v);
                                 else
                                     t.data<double>()[at] = v;
                             };
                             if (sp.value != 0.f)
                                 set(x, std::int64_t(sp.where * double(x.numel() - 1)), sp.value);
                             Tensor flag({1}, x.dtype());
                             set(flag, 0, sp.flagBefore);
                             return std::vector<Tensor>{x, flag};
                         },
                         [](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor flag = in[1].clone();
                             ops.flagNonFinite(in[0], flag);
                             return std::vector<OpOutput>{{"flag", flag}};
                         }});
    }
    const double alphas[] = {-0.37, 2.5, 1.0, -1.0, 5e-4};
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        const Named s = shapes[i];
        const double alpha = alphas[i];
        cases.push_back(
            {"axpy", s.text() + ", alpha " + number(alpha), Tolerance::elementwise(),
             [s](Rng& rng) {
                 return std::vector<Tensor>{uniform(s.shape, rng), uniform(s.shape, rng)};
             },
             [alpha](Ops& ops, const std::vector<Tensor>& in) {
                 Tensor y = in[1].clone();
                 ops.axpy(alpha, in[0], y);
                 return std::vector<OpOutput>{{"y", y}};
             }});
    }
}

// ---- layouts ----

void addLayout(std::vector<OpCase>& cases)
{
    std::vector<Named> shapes = {
        {"one element", {1, 1, 1, 1}},
        {"odd sizes", {3, 5, 7, 2}},
        {"", {2, 3, 4, 5}},
        {"", {16, 24, 24, 8}},
    };
    for (const auto& f : modelLayers().flattens) shapes.push_back({f.layer, f.x});
    for (const auto& s : shapes)
        cases.push_back({"layout NHWC to NCHW", s.text(), Tolerance::exact(),
                         [s](Rng& rng) { return std::vector<Tensor>{uniform(s.shape, rng)}; },
                         [](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y;
                             ops.nhwcToNchw(in[0], y);
                             return std::vector<OpOutput>{{"y", y}};
                         }});
    for (const auto& s : shapes)
        cases.push_back({"layout NCHW to NHWC", s.text(), Tolerance::exact(),
                         [s](Rng& rng) { return std::vector<Tensor>{uniform(s.shape, rng)}; },
                         [](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y;
                             ops.nchwToNhwc(in[0], y);
                             return std::vector<OpOutput>{{"y", y}};
                         }});

    // To bfloat16 and back (evaluation's activations, ExecContext::bf16Activations): each value
    // rounded to nearest even at 8 bits, on every backend alike (a GPU's staged).
    for (const auto& s : shapes)
        cases.push_back(
            {"convert to bfloat16 and back", s.text(), Tolerance::exact(),
             [s](Rng& rng) { return std::vector<Tensor>{uniform(s.shape, rng, -5, 5)}; },
             [](Ops& ops, const std::vector<Tensor>& in) {
                 Tensor half, y;
                 ops.convertFloat(in[0], DType::BFloat16, half);
                 ops.convertFloat(half, in[0].dtype(), y);
                 return std::vector<OpOutput>{{"y", y}};
             }});

    // Channels of x into y's (a concatenation's part, or its gradient's): y keeps the rest.
    struct ChannelCopy
    {
        std::string what;
        Shape x;
        std::int64_t yChannels, xOffset, count, yOffset;
    };
    const std::vector<ChannelCopy> copies = {
        {"one channel", {1, 1, 1, 1}, 1, 0, 1, 0},
        {"odd sizes, into the middle", {3, 5, 7, 3}, 8, 0, 3, 2},
        {"out of the middle", {2, 3, 4, 9}, 4, 3, 4, 0},
        {"the last channels", {2, 6, 6, 5}, 12, 2, 3, 9},
        {"a 3x3 branch of an inception module", {16, 14, 14, 48}, 112, 0, 48, 32},
        {"its gradient", {16, 14, 14, 112}, 48, 32, 48, 0},
    };
    for (const auto& c : copies) {
        const Shape ys{c.x[0], c.x[1], c.x[2], c.yChannels};
        cases.push_back({"copy channels",
                         shapeText(c.x) + "[" + std::to_string(c.xOffset) + ":+" +
                             std::to_string(c.count) + "]->" + shapeText(ys) + "[" +
                             std::to_string(c.yOffset) + "] (" + c.what + ")",
                         Tolerance::exact(),
                         [c, ys](Rng& rng) {
                             return std::vector<Tensor>{uniform(c.x, rng), uniform(ys, rng)};
                         },
                         [c](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor y = in[1].clone();
                             ops.copyChannels(in[0], c.xOffset, c.count, y, c.yOffset);
                             return std::vector<OpOutput>{{"y", y}};
                         }});
    }
}

// ---- loss ----

struct LossCase
{
    std::string what;
    std::int64_t n = 1;
    int classes = 2;
    double range = 8;     // logits in [-range, range]
    double smoothing = 0; // label smoothing
    std::string text() const
    {
        char text[96];
        std::snprintf(text, sizeof text, "[%lld,%d] logits +-%g", static_cast<long long>(n),
                      classes, range);
        std::string s = text;
        if (smoothing > 0) s += ", label smoothing " + number(smoothing);
        return s + (what.empty() ? "" : " (" + what + ")");
    }
};

void addLoss(std::vector<OpCase>& cases)
{
    const Tolerance tol = Tolerance::reductions();
    const std::vector<LossCase> all = {
        {"batch 1, two classes", 1, 2, 4},
        {"", 7, 10, 8},
        {"a tutorial batch", 128, 10, 8},
        {"odd sizes", 37, 1001, 8},
        {"large logits", 16, 10, 60},
        {"cifar-100 classes", 64, 100, 4},
        {"", 7, 10, 8, 0.1},
        {"large logits", 16, 10, 60, 0.1},
        {"cifar-100 classes", 64, 100, 4, 0.3},
    };
    for (const auto& l : all)
        cases.push_back({"softmax cross-entropy forward", l.text(), tol,
                         [l](Rng& rng) {
                             return std::vector<Tensor>{
                                 uniform({l.n, l.classes}, rng, -l.range, l.range),
                                 labels(l.n, l.classes, rng)};
                         },
                         [l](Ops& ops, const std::vector<Tensor>& in) {
                             Tensor probs, loss;
                             ops.softmaxCrossEntropyForward(in[0], in[1], l.smoothing, probs, loss);
                             return std::vector<OpOutput>{{"loss", loss}, {"probs", probs}};
                         }});
    // Backward from probabilities computed in float64 (what a forward leaves).
    for (const auto& l : all) {
        const double scale = 1.0 / static_cast<double>(l.n);
        cases.push_back(
            {"softmax cross-entropy backward", l.text() + ", scale 1/" + number(double(l.n)), tol,
             [l](Rng& rng) {
                 const Tensor logits = uniform({l.n, l.classes}, rng, -l.range, l.range);
                 const Tensor lab = labels(l.n, l.classes, rng);
                 Tensor probs, loss;
                 referenceOps().softmaxCrossEntropyForward(logits, lab, 0.0, probs, loss);
                 return std::vector<Tensor>{roundedToFloat32(probs), lab};
             },
             [scale, l](Ops& ops, const std::vector<Tensor>& in) {
                 Tensor dlogits;
                 ops.softmaxCrossEntropyBackward(in[0], in[1], l.smoothing, scale, dlogits);
                 return std::vector<OpOutput>{{"dlogits", dlogits}};
             }});
    }
}

// ---- preprocessing ----

// Source images [count, sourceHeight, sourceWidth, channels] to a batch of model input
// [batch, height, width, channels], each row of the draws a random source (indices repeat when
// the batch is larger than the set), crop, translation by up to +-translate (beyond the image when
// translate is larger: some images all padding), flip, brightness and contrast (1 for a third of
// the rows: the normalisations that need no channel sums then take the other path).
struct PreprocessGeometry
{
    std::string what;
    std::int64_t count;
    int sourceHeight, sourceWidth, channels;
    int height, width;
    preprocess::Normalization normalization;
    std::int64_t batch;
    int translate = 0;
    bool flip = false;
    double brightness = 0; // up to +- this, on the 0..255 scale
    double contrastLower = 1, contrastUpper = 1;

    std::string text() const
    {
        static const char* const names[] = {"per image", "mean/std", "scale"};
        std::string t = shapeText({count, sourceHeight, sourceWidth, channels}) + "->" +
                        shapeText({batch, height, width, channels}) + ", " +
                        names[static_cast<int>(normalization)];
        if (translate) t += ", shift +-" + std::to_string(translate);
        if (flip) t += ", flip";
        if (brightness > 0) t += ", brightness +-" + number(brightness);
        if (contrastLower != 1 || contrastUpper != 1)
            t += ", contrast " + number(contrastLower) + ".." + number(contrastUpper);
        return t + (what.empty() ? "" : " (" + what + ")");
    }
};

// Float64 [batch, kDrawColumns]: rows that fit the source (packDraw's).
Tensor preprocessDraws(const PreprocessGeometry& g, Rng& rng)
{
    namespace pp = preprocess;
    Tensor draws({g.batch, pp::kDrawColumns}, DType::Float64);
    double* rows = draws.data<double>();
    const auto upTo = [&](int n) { return static_cast<int>(rng.below(std::uint64_t(n) + 1)); };
    for (std::int64_t r = 0; r < g.batch; ++r) {
        const auto index = static_cast<std::int64_t>(rng.below(std::uint64_t(g.count)));
        pp::ImageDraw d{};
        d.cropY = upTo(g.sourceHeight - g.height);
        d.cropX = upTo(g.sourceWidth - g.width);
        d.shiftY = upTo(2 * g.translate) - g.translate;
        d.shiftX = upTo(2 * g.translate) - g.translate;
        d.flip = g.flip && (rng.next() >> 63) != 0;
        d.brightness = g.brightness > 0 ? rng.uniform(-g.brightness, g.brightness) : 0.0;
        const bool contrast = (g.contrastLower != 1 || g.contrastUpper != 1) && rng.below(3) != 0;
        d.contrast = contrast ? rng.uniform(g.contrastLower, g.contrastUpper) : 1.0;
        pp::packDraw(index, d, rows + r * pp::kDrawColumns);
    }
    return draws;
}

void addPreprocess(std::vector<OpCase>& cases)
{
    using N = preprocess::Normalization;
    const std::vector<PreprocessGeometry> geometries = {
        {"cifar10-tutorial distortions", 5, 32, 32, 3, 24, 24, N::PerImage, 8, 0, true, 63, 0.2,
         1.8},
        {"pad and crop", 6, 32, 32, 3, 32, 32, N::MeanStd, 16, 4, true},
        {"batch 1", 4, 28, 28, 1, 28, 28, N::Scale, 1, 3},
        {"every distortion", 4, 28, 28, 1, 26, 25, N::MeanStd, 12, 3, true, 30, 0.5, 1.5},
        {"odd channels, shifts beyond the image", 3, 9, 11, 5, 7, 8, N::PerImage, 6, 12, true, 40,
         0.2, 1.8},
        {"odd channels", 3, 10, 10, 5, 10, 10, N::Scale, 7, 2, true, 20, 0.5, 1.5},
        {"one channel, shifts beyond the image", 2, 12, 12, 1, 9, 9, N::PerImage, 5, 15, true, 63,
         0.2, 1.8},
        {"crop only", 3, 32, 32, 3, 24, 24, N::PerImage, 3},
        {"64 channels", 3, 6, 7, 64, 5, 5, N::MeanStd, 4, 2, true, 10, 0.5, 1.5},
        {"every distortion", 5, 32, 32, 3, 28, 28, N::Scale, 9, 4, true, 63, 0.2, 1.8},
        {"wide", 2, 5, 40, 3, 5, 33, N::PerImage, 3, 6, true, 10, 0.5, 1.5},
        {"a large batch", 10, 32, 32, 3, 24, 24, N::PerImage, 200, 2, true, 63, 0.2, 1.8},
    };
    for (std::size_t i = 0; i < geometries.size(); ++i) {
        const PreprocessGeometry g = geometries[i];
        PreprocessDesc desc;
        desc.height = g.height;
        desc.width = g.width;
        desc.channels = g.channels;
        desc.normalization = static_cast<int>(g.normalization);
        if (g.normalization == N::MeanStd) {
            Rng stats(1000 + i); // the set's statistics: fixed per case
            for (int k = 0; k < g.channels; ++k) {
                desc.mean.push_back(stats.uniform(0.2, 0.6));
                desc.stddev.push_back(stats.uniform(0.1, 0.4));
            }
        }
        // The images and the draws; the draws go to every backend as Float64, as drawn. Bit for
        // bit: the images a GPU makes of the training set it holds (--gpu-data) are the loader's.
        OpCase c{
            "preprocess images", g.text(), Tolerance::exact(),
            [g](Rng& rng) {
                Tensor source = bytes({g.count, g.sourceHeight, g.sourceWidth, g.channels}, rng);
                return std::vector<Tensor>{source, preprocessDraws(g, rng)};
            },
            [desc](Ops& ops, const std::vector<Tensor>& in) {
                Tensor y;
                ops.preprocessImages(desc, in[0], in[1], y);
                return std::vector<OpOutput>{{"y", y}};
            }};
        c.keepDType = {1};
        cases.push_back(std::move(c));
    }
}

} // namespace

void addLinearCases(std::vector<OpCase>& cases)
{
    addLinear(cases, linearGeometries());
}

void addElementwiseCases(std::vector<OpCase>& cases)
{
    addElementwise(cases);
}

void addLayoutCases(std::vector<OpCase>& cases)
{
    addLayout(cases);
}

void addLossCases(std::vector<OpCase>& cases)
{
    addLoss(cases);
}

void addPreprocessCases(std::vector<OpCase>& cases)
{
    addPreprocess(cases);
}

} // namespace towers::engine::op_cases
