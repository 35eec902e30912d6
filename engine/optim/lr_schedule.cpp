#include "engine/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/errors.h"

namespace towers::engine {

namespace {

void require(bool ok, const std::string& field, const std::string& what)
{
    if (!ok) throw InvalidArgument("schedule." + field + ": " + what);
}

bool finite(double v)
{
    return std::isfinite(v);
}

} // namespace

std::vector<std::string> LrSchedule::fieldsOf(Kind kind)
{
    switch (kind) {
    case Kind::Constant:
        return {};
    case Kind::Exponential:
        return {"decayRate", "decayEpochs", "staircase"};
    case Kind::Step:
        return {"gamma", "milestones"};
    case Kind::Cosine:
        return {"warmupEpochs", "minLr"};
    case Kind::OneCycle:
        return {"warmupFraction", "anneal", "divFactor", "finalDivFactor"};
    }
    return {};
}

std::string LrSchedule::kindName(Kind kind)
{
    switch (kind) {
    case Kind::Constant:
        return "constant";
    case Kind::Exponential:
        return "exponential";
    case Kind::Step:
        return "step";
    case Kind::Cosine:
        return "cosine";
    case Kind::OneCycle:
        return "onecycle";
    }
    return "?";
}

LrSchedule::Kind LrSchedule::kindFromName(const std::string& name)
{
    for (Kind k : {Kind::Constant, Kind::Exponential, Kind::Step, Kind::Cosine, Kind::OneCycle})
        if (kindName(k) == name) return k;
    throw UnknownName("unknown learning-rate schedule '" + name +
                      "' (known: constant, exponential, step, cosine, onecycle)");
}

void LrSchedule::validate() const
{
    require(finite(lr) && lr > 0, "lr", "the learning rate must be a positive number");
    switch (kind) {
    case Kind::Constant:
        break;
    case Kind::Exponential:
        require(finite(decayRate) && decayRate > 0 && decayRate <= 1, "decayRate",
                "must be in (0, 1]");
        require(finite(decayEpochs) && decayEpochs > 0, "decayEpochs",
                "must be a positive number of epochs");
        break;
    case Kind::Step:
        require(finite(gamma) && gamma > 0 && gamma <= 1, "gamma", "must be in (0, 1]");
        for (std::size_t i = 0; i < milestones.size(); ++i) {
            require(milestones[i] > 0, "milestones", "epochs must be positive");
            require(i == 0 || milestones[i] > milestones[i - 1], "milestones",
                    "epochs must increase");
        }
        break;
    case Kind::Cosine:
        require(finite(warmupEpochs) && warmupEpochs >= 0, "warmupEpochs", "must be >= 0");
        require(finite(minLr) && minLr >= 0 && minLr <= lr, "minLr", "must be in [0, lr]");
        break;
    case Kind::OneCycle:
        require(finite(warmupFraction) && warmupFraction > 0 && warmupFraction < 1,
                "warmupFraction", "must be in (0, 1)");
        require(finite(divFactor) && divFactor >= 1, "divFactor", "must be >= 1");
        require(finite(finalDivFactor) && finalDivFactor >= 1, "finalDivFactor", "must be >= 1");
        break;
    }
}

double LrSchedule::at(std::int64_t step, std::int64_t stepsPerEpoch, std::int64_t totalSteps) const
{
    if (stepsPerEpoch < 1)
        throw InvalidArgument("learning-rate schedule: steps per epoch must be at least 1");
    if (totalSteps < 1)
        throw InvalidArgument("learning-rate schedule: total steps must be at least 1");
    if (step < 0) throw InvalidArgument("learning-rate schedule: negative step");
    const double s = double(step);
    switch (kind) {
    case Kind::Constant:
        return lr;
    case Kind::Exponential: {
        // TensorFlow: decay_steps = int(num_batches_per_epoch * NUM_EPOCHS_PER_DECAY).
        const double decaySteps = std::max(1.0, std::floor(double(stepsPerEpoch) * decayEpochs));
        const double e = staircase ? std::floor(s / decaySteps) : s / decaySteps;
        return lr * std::pow(decayRate, e);
    }
    case Kind::Step: {
        const std::int64_t epoch = step / stepsPerEpoch;
        const auto passed = std::count_if(milestones.begin(), milestones.end(),
                                          [&](std::int64_t m) { return epoch >= m; });
        return lr * std::pow(gamma, double(passed));
    }
    case Kind::Cosine: {
        const std::int64_t warm =
            std::min<std::int64_t>(totalSteps, std::llround(warmupEpochs * double(stepsPerEpoch)));
        if (step < warm) return lr * double(step + 1) / double(warm);
        const double span = double(std::max<std::int64_t>(1, totalSteps - warm));
        const double t = std::min(1.0, double(step - warm) / span);
        return minLr + (lr - minLr) * (1 + std::cos(std::numbers::pi * t)) / 2;
    }
    case Kind::OneCycle: {
        // PyTorch's OneCycleLR phases: up until step warmupFraction * total - 1, down until
        // step total - 1, each phase interpolating by its position within the phase.
        const double initial = lr / divFactor, last = initial / finalDivFactor;
        const double peakStep = warmupFraction * double(totalSteps) - 1;
        const double endStep = double(totalSteps) - 1;
        if (s <= peakStep) {
            const double pct = peakStep > 0 ? s / peakStep : 1.0;
            return initial + (lr - initial) * pct;
        }
        const double pct =
            endStep > peakStep ? std::min(1.0, (s - peakStep) / (endStep - peakStep)) : 1.0;
        if (cosineAnneal) return last + (lr - last) * (1 + std::cos(std::numbers::pi * pct)) / 2;
        return lr + (last - lr) * pct;
    }
    }
    return lr;
}

} // namespace towers::engine
