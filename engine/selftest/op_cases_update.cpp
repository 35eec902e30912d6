// The op-case table's optimizer updates: plain SGD, momentum, Adam(W) and the moving average's
// step, each with its skip flag absent, clear and set, and each also given a step's scalars where
// it computes; and gradient clipping by the global norm. The other dense ops are in
// op_cases_dense.cpp.
#include <functional>
#include <limits>

#include "engine/ops/step_scalars.h"
#include "engine/selftest/op_cases_build.h"

namespace towers::engine::op_cases {

namespace {

// ---- optimizer updates ----

// An update case's skip flag (op_list.h): none (an empty tensor), a flag holding 0 (the update
// happens) or a set one (the update changes nothing: its outputs are its inputs, bit for bit, on
// every backend as on the reference).
enum class SkipFlag
{
    None,
    Clear,
    Set,
};

std::string skipText(SkipFlag f)
{
    return f == SkipFlag::Clear ? ", skip flag 0" : f == SkipFlag::Set ? ", skip flag set" : "";
}

// The drawn inputs, then the flag when the case has one: a Float64 [1] like the float operands,
// so that each backend gets it in w's dtype.
std::vector<Tensor> withSkip(std::vector<Tensor> inputs, SkipFlag f)
{
    if (f != SkipFlag::None) inputs.push_back(scalar(f == SkipFlag::Set ? 1.0 : 0.0));
    return inputs;
}

// The flag of a call whose operands are the first `operands` inputs: the next one, or none.
Tensor skipOf(const std::vector<Tensor>& in, std::size_t operands)
{
    return in.size() > operands ? in[operands] : Tensor();
}

void addSgd(std::vector<OpCase>& cases, const Named& s, double lr, SkipFlag f)
{
    // g, w: axpy's cases' shapes (sgdUpdate is axpy(-lr, g, w) to the bit).
    const bool set = f == SkipFlag::Set;
    cases.push_back({"optimizer SGD update", s.text() + ", lr " + number(lr) + skipText(f),
                     Tolerance::elementwise(),
                     [s, f](Rng& rng) {
                         return withSkip({uniform(s.shape, rng), uniform(s.shape, rng)}, f);
                     },
                     [lr, set](Ops& ops, const std::vector<Tensor>& in) {
                         Tensor w = in[1].clone();
                         ops.sgdUpdate(lr, in[0], w, skipOf(in, 2), Tensor());
                         return std::vector<OpOutput>{{"w", w, set}};
                     }});
}

void addMomentum(std::vector<OpCase>& cases, const Named& s, const std::string& what,
                 const MomentumStep& step, SkipFlag f)
{
    // g, momentum buffer, w.
    const bool set = f == SkipFlag::Set;
    cases.push_back(
        {"optimizer momentum update",
         s.text() + ", " + what + ", lr " + number(step.lr) + skipText(f), Tolerance::elementwise(),
         [s, f](Rng& rng) {
             return withSkip({uniform(s.shape, rng), uniform(s.shape, rng), uniform(s.shape, rng)},
                             f);
         },
         [step, set](Ops& ops, const std::vector<Tensor>& in) {
             Tensor buf = in[1].clone(), w = in[2].clone();
             ops.momentumUpdate(step, in[0], buf, w, skipOf(in, 3), Tensor());
             return std::vector<OpOutput>{{"w", w, set}, {"buffer", buf, set}};
         }});
}

void addAdam(std::vector<OpCase>& cases, const Named& s, const std::string& what,
             const AdamStep& step, SkipFlag f)
{
    // g, m, v (non-negative), w.
    const bool set = f == SkipFlag::Set;
    cases.push_back({"optimizer Adam update",
                     s.text() + ", " + what + ", lr " + number(step.lr) + skipText(f),
                     Tolerance::elementwise(),
                     [s, f](Rng& rng) {
                         return withSkip({uniform(s.shape, rng), uniform(s.shape, rng, -0.1, 0.1),
                                          uniform(s.shape, rng, 0, 0.01), uniform(s.shape, rng)},
                                         f);
                     },
                     [step, set](Ops& ops, const std::vector<Tensor>& in) {
                         Tensor m = in[1].clone(), v = in[2].clone(), w = in[3].clone();
                         ops.adamUpdate(step, in[0], m, v, w, skipOf(in, 4), Tensor());
                         return std::vector<OpOutput>{{"w", w, set}, {"m", m, set}, {"v", v, set}};
                     }});
}

void addEma(std::vector<OpCase>& cases, const Named& s, double keep, SkipFlag f)
{
    // value, shadow.
    const bool set = f == SkipFlag::Set;
    cases.push_back({"moving average update", s.text() + ", keep " + number(keep) + skipText(f),
                     Tolerance::elementwise(),
                     [s, f](Rng& rng) {
                         return withSkip({uniform(s.shape, rng), uniform(s.shape, rng)}, f);
                     },
                     [keep, set](Ops& ops, const std::vector<Tensor>& in) {
                         Tensor shadow = in[1].clone();
                         ops.emaUpdate(keep, in[0], shadow, skipOf(in, 2), Tensor());
                         return std::vector<OpOutput>{{"shadow", shadow, set}};
                     }});
}

// The operands of an update (g, then the state and w: uniform, a second moment non-negative),
// then a step's scalars, then its flag. Each update given a step's scalars gets host arguments
// that say something else (a learning rate and keep of 0, Adam's step 1, momentum's first step the
// other way), so a backend that did not read the scalars where it computes would leave w as it
// is, or differ from the reference.
std::function<std::vector<Tensor>(Rng&)> withScalars(const Named& shape, int operands,
                                                     const StepScalars& v, SkipFlag f)
{
    return [shape, operands, v, f](Rng& rng) {
        std::vector<Tensor> in;
        for (int i = 0; i < operands; ++i)
            in.push_back(operands == 4 && i == 2 ? uniform(shape.shape, rng, 0, 0.01)
                                                 : uniform(shape.shape, rng));
        in.push_back(stepScalarsInput(v));
        return withSkip(in, f);
    };
}

OpCase fromScalars(OpCase c, std::size_t scalarsInput)
{
    c.keepDType = {scalarsInput};
    return c;
}

void addSgdFromScalars(std::vector<OpCase>& cases, const Named& s, SkipFlag f)
{
    const bool set = f == SkipFlag::Set;
    StepScalars v;
    v.values[StepScalars::LearningRate] = 0.37;
    cases.push_back(fromScalars({"optimizer SGD update",
                                 s.text() + ", lr 0.37 from the step's scalars" + skipText(f),
                                 Tolerance::elementwise(), withScalars(s, 2, v, f),
                                 [set](Ops& ops, const std::vector<Tensor>& in) {
                                     Tensor w = in[1].clone();
                                     ops.sgdUpdate(0.0, in[0], w, skipOf(in, 3), in[2]);
                                     return std::vector<OpOutput>{{"w", w, set}};
                                 }},
                                2));
}

void addMomentumFromScalars(std::vector<OpCase>& cases, const Named& s, bool first)
{
    StepScalars v;
    v.values[StepScalars::LearningRate] = 0.05;
    v.values[StepScalars::MomentumFirst] = first ? 1 : 0;
    const MomentumStep host{0.0, 0.9, 0, true, !first};
    cases.push_back(fromScalars({"optimizer momentum update",
                                 s.text() + ", Nesterov, lr 0.05" + (first ? ", first step" : "") +
                                     " from the step's scalars",
                                 Tolerance::elementwise(), withScalars(s, 3, v, SkipFlag::None),
                                 [host](Ops& ops, const std::vector<Tensor>& in) {
                                     Tensor buf = in[1].clone(), w = in[2].clone();
                                     ops.momentumUpdate(host, in[0], buf, w, Tensor(), in[3]);
                                     return std::vector<OpOutput>{{"w", w}, {"buffer", buf}};
                                 }},
                                3));
}

// `decay`: AdamW's decoupled weight decay, its factor from the scalars' learning rate (the host's
// is 0 here, so a decay computed from it would leave w undecayed and show).
void addAdamFromScalars(std::vector<OpCase>& cases, const Named& s, double decay)
{
    StepScalars v;
    v.values[StepScalars::LearningRate] = 0.01;
    const AdamCorrections k = adamCorrections(0.9, 0.999, 7);
    v.values[StepScalars::AdamCorrection1] = k.first;
    v.values[StepScalars::AdamCorrection2Sqrt] = k.secondSqrt;
    const AdamStep host{0.0, 0.9, 0.999, 1e-8, 1, decay};
    cases.push_back(
        fromScalars({"optimizer Adam update",
                     s.text() + ", step 7, lr 0.01 from the step's scalars" +
                         (decay > 0 ? ", AdamW's weight decay " + number(decay) : std::string()),
                     Tolerance::elementwise(), withScalars(s, 4, v, SkipFlag::None),
                     [host](Ops& ops, const std::vector<Tensor>& in) {
                         Tensor m = in[1].clone(), second = in[2].clone(), w = in[3].clone();
                         ops.adamUpdate(host, in[0], m, second, w, Tensor(), in[4]);
                         return std::vector<OpOutput>{{"w", w}, {"m", m}, {"v", second}};
                     }},
                    4));
}

void addEmaFromScalars(std::vector<OpCase>& cases, const Named& s)
{
    StepScalars v;
    v.values[StepScalars::EmaKeep] = 0.3;
    cases.push_back(
        fromScalars({"moving average update", s.text() + ", keep 0.3 from the step's scalars",
                     Tolerance::elementwise(), withScalars(s, 2, v, SkipFlag::None),
                     [](Ops& ops, const std::vector<Tensor>& in) {
                         Tensor shadow = in[1].clone();
                         ops.emaUpdate(0.0, in[0], shadow, Tensor(), in[2]);
                         return std::vector<OpOutput>{{"shadow", shadow}};
                     }},
                    2));
}

// Gradient clipping by the global norm: above the largest norm (scaled), below it, at it (scaled
// by maxNorm / (maxNorm + 1e-6), as PyTorch's), a zero norm and a NaN one (x left as it is), then
// the norm summed by the backend itself as a step does (sumSquares from 0, then clipToNorm).
void addClipping(std::vector<OpCase>& cases, const std::vector<Named>& shapes)
{
    struct Clip
    {
        std::string what;
        double sumSquares, maxNorm;
    };
    const std::vector<Clip> clips = {
        {"norm 10, at most 1", 100, 1},
        {"norm 0.5, at most 1 (unchanged)", 0.25, 1},
        {"norm 0, at most 5 (unchanged)", 0, 5},
        {"norm 2, at most 2", 4, 2},
        {"norm NaN (unchanged)", std::numeric_limits<double>::quiet_NaN(), 1},
    };
    for (std::size_t i = 0; i < clips.size(); ++i) {
        const Named s = shapes[i % shapes.size()];
        const Clip c = clips[i];
        OpCase oc{"gradient clipping", s.text() + ", " + c.what, Tolerance::elementwise(),
                  [s, c](Rng& rng) {
                      return std::vector<Tensor>{uniform(s.shape, rng), scalar(c.sumSquares)};
                  },
                  [c](Ops& ops, const std::vector<Tensor>& in) {
                      Tensor x = in[0].clone();
                      ops.clipToNorm(in[1], c.maxNorm, x);
                      return std::vector<OpOutput>{{"x", x}};
                  }};
        oc.keepDType = {1};
        cases.push_back(std::move(oc));
    }
    const Named s = shapes[0];
    cases.push_back({"gradient clipping", s.text() + ", its own norm summed first, at most 3",
                     Tolerance::elementwise(),
                     [s](Rng& rng) { return std::vector<Tensor>{uniform(s.shape, rng)}; },
                     [](Ops& ops, const std::vector<Tensor>& in) {
                         Tensor sum = scalar(0).copyTo(ops.device());
                         ops.sumSquares(in[0], 1.0, sum);
                         Tensor x = in[0].clone();
                         ops.clipToNorm(sum, 3.0, x);
                         return std::vector<OpOutput>{{"x", x}};
                     }});
}

void addUpdates(std::vector<OpCase>& cases)
{
    const std::vector<Named> shapes = {
        {"", {1000, 30}}, {"odd size", {7}}, {"a convolution's weights", {64, 3, 5, 5}}};
    // Each op's cases without a flag, then with a flag of 0 (on a convolution's weights) and a set
    // one (on the largest tensor: every block of a GPU's grid must skip).
    const Named clearShape = shapes[2], setShape = shapes[0];

    // Plain SGD on axpy's shapes, with axpy's step sizes as learning rates.
    const auto axpyShapes = elementwiseShapes();
    const double lrs[] = {0.37, 2.5, 1.0, 0.1, 5e-4};
    for (std::size_t i = 0; i < axpyShapes.size(); ++i)
        addSgd(cases, axpyShapes[i], lrs[i], SkipFlag::None);
    addSgd(cases, clearShape, 0.1, SkipFlag::Clear);
    addSgd(cases, setShape, 0.1, SkipFlag::Set);
    addSgdFromScalars(cases, clearShape, SkipFlag::None);
    addSgdFromScalars(cases, shapes[1], SkipFlag::Set);

    struct Momentum
    {
        std::string what;
        MomentumStep step;
    };
    const std::vector<Momentum> momenta = {
        {"first step", {0.05, 0.9, 0, false, true}},
        {"momentum 0.9", {0.05, 0.9, 0, false, false}},
        {"Nesterov", {0.1, 0.9, 0, true, false}},
        {"dampening 0.1", {0.5, 0.8, 0.1, false, false}},
        {"Nesterov, first step", {0.2, 0.9, 0, true, true}},
    };
    for (std::size_t i = 0; i < momenta.size(); ++i)
        addMomentum(cases, shapes[i % shapes.size()], momenta[i].what, momenta[i].step,
                    SkipFlag::None);
    addMomentum(cases, clearShape, momenta[1].what, momenta[1].step, SkipFlag::Clear);
    // A set flag on a first step leaves the buffer too (a first step would set it to g).
    addMomentum(cases, setShape, momenta[0].what, momenta[0].step, SkipFlag::Set);
    addMomentum(cases, setShape, momenta[2].what, momenta[2].step, SkipFlag::Set);
    addMomentumFromScalars(cases, clearShape, true);
    addMomentumFromScalars(cases, clearShape, false);

    struct Adam
    {
        std::string what;
        AdamStep step;
    };
    const std::vector<Adam> adams = {
        {"step 1", {1e-3, 0.9, 0.999, 1e-8, 1}},
        {"step 3", {0.05, 0.9, 0.999, 1e-8, 3}},
        {"step 1000, epsilon 1e-3", {0.01, 0.8, 0.99, 1e-3, 1000}},
        // AdamW: w shrinks by 1 - lr * decay (2.5 % here) before Adam's step.
        {"step 3, AdamW's weight decay 0.5", {0.05, 0.9, 0.999, 1e-8, 3, 0.5}},
    };
    for (std::size_t i = 0; i < adams.size(); ++i)
        addAdam(cases, shapes[i % shapes.size()], adams[i].what, adams[i].step, SkipFlag::None);
    addAdam(cases, clearShape, adams[1].what, adams[1].step, SkipFlag::Clear);
    addAdam(cases, setShape, adams[1].what, adams[1].step, SkipFlag::Set);
    addAdam(cases, setShape, adams[3].what, adams[3].step, SkipFlag::Set);
    addAdamFromScalars(cases, clearShape, 0);
    addAdamFromScalars(cases, clearShape, 0.5);

    // The moving average's step: TensorFlow's warm-up (keep 0.9 at update 0), a usual decay and
    // the extremes (keep 0 leaves the average, keep 1 copies the weights).
    const double keeps[] = {0.9, 1e-4, 0.0, 1.0};
    for (std::size_t i = 0; i < std::size(keeps); ++i)
        addEma(cases, shapes[i % shapes.size()], keeps[i], SkipFlag::None);
    addEma(cases, clearShape, 0.9, SkipFlag::Clear);
    // keep 1 would copy the weights: the set flag keeps the average.
    addEma(cases, setShape, 1.0, SkipFlag::Set);
    addEmaFromScalars(cases, clearShape);

    addClipping(cases, shapes);
}

} // namespace

void addUpdateCases(std::vector<OpCase>& cases)
{
    addUpdates(cases);
}

} // namespace towers::engine::op_cases
