#pragma once
// Learning-rate schedules: the learning rate of a step as a pure function of (step, steps per
// epoch, total steps), so a resumed run continues exactly where it stopped.
#include <cstdint>
#include <string>
#include <vector>

namespace towers::engine {

struct LrSchedule
{
    enum class Kind
    {
        // lr
        Constant,
        // the tutorial's: lr * decayRate ^ floor(step / decaySteps) (TensorFlow's
        // exponential_decay, staircase), decaySteps = int(stepsPerEpoch * decayEpochs); without
        // staircase the exponent is step / decaySteps
        Exponential,
        // lr * gamma ^ (number of milestones <= epoch), epoch = floor(step / stepsPerEpoch)
        // (PyTorch's MultiStepLR stepped once per epoch)
        Step,
        // linear warm-up lr * (step + 1) / W over W = round(warmupEpochs * stepsPerEpoch) steps,
        // then minLr + (lr - minLr) * (1 + cos(pi * (step - W) / (totalSteps - W))) / 2
        // (PyTorch's LinearLR then CosineAnnealingLR)
        Cosine,
        // linear from lr / divFactor up to lr over the first warmupFraction of the steps, then
        // down to lr / divFactor / finalDivFactor (about 0), linearly or by a half cosine (the
        // phase boundaries of PyTorch's OneCycleLR)
        OneCycle,
    };
    Kind kind = Kind::Constant;
    double lr = 0.1; // the base learning rate (the peak for one-cycle)

    double decayRate = 0.1, decayEpochs = 350; // exponential (the tutorial's values)
    bool staircase = true;
    double gamma = 0.1;                          // step
    std::vector<std::int64_t> milestones;        // step: epochs, increasing
    double warmupEpochs = 0, minLr = 0;          // cosine
    double warmupFraction = 0.3;                 // one-cycle
    bool cosineAnneal = true;                    // one-cycle: cosine (true) or linear way down
    double divFactor = 25, finalDivFactor = 1e4; // one-cycle (PyTorch's defaults)

    // The learning rate for global step `step` (0-based) of a run of `totalSteps` steps with
    // `stepsPerEpoch` steps per epoch. Throws InvalidArgument for stepsPerEpoch < 1 or
    // totalSteps < 1 (needed by cosine and one-cycle).
    double at(std::int64_t step, std::int64_t stepsPerEpoch, std::int64_t totalSteps) const;
    // Throws InvalidArgument naming the field ("schedule.decayRate: ...") for nonsense values.
    void validate() const;

    // "constant", "exponential", "step", "cosine", "onecycle".
    static std::string kindName(Kind kind);
    // The fields `kind` uses, by their names in a training configuration's "schedule" object
    // (exponential: "decayRate", "decayEpochs", "staircase"; one-cycle: "warmupFraction",
    // "anneal", "divFactor", "finalDivFactor"; ...), besides the rate.
    static std::vector<std::string> fieldsOf(Kind kind);
    // Throws UnknownName listing the known kinds.
    static Kind kindFromName(const std::string& name);
};

} // namespace towers::engine
