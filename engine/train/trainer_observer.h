#pragma once
// What a running Trainer reports. Every callback is made on the thread that runs Trainer::run,
// between steps (the towers are idle then); a GUI worker copies what it needs into its own
// buffer and returns quickly.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "engine/train/evaluation.h"
#include "engine/train/tower_times.h"

namespace towers::engine {

struct StepMetrics
{
    std::int64_t step = 0;   // global steps done (1 after the first step)
    double epoch = 0;        // step / steps per epoch
    double loss = 0;         // total loss (cross-entropy + weight decay), mean over the towers
    double crossEntropy = 0; // its cross-entropy part
    // The averaged gradients' global norm, before clipping when the run clips them
    // (TrainConfig::clipGradNorm > 0); NaN for a step that was not finite.
    double gradNorm = std::numeric_limits<double>::quiet_NaN();
    double lr = 0;                      // the learning rate this step used
    double examplesPerSec = 0;          // global batch / step time
    double secPerBatch = 0;             // step time / towers (the tutorial's log line)
    double stepMs = 0;                  // wall time of the step, data wait included
    double dataWaitMs = 0;              // waiting for the input pipeline (BatchSource::lastWaitMs)
    double computeMs = 0;               // forward + backward of the slowest tower
    double allReduceMs = 0;             // communication the slowest tower's backward did not hide
    double updateMs = 0;                // optimizer update (and EMA) of the slowest tower
    std::vector<double> towerComputeMs; // forward + backward of each tower
    // Where each tower's step went: compute, exposed communication, data wait (the batch wait
    // included) and update.
    std::vector<TowerTimes> towerTimes;
    std::int64_t totalSteps = 0; // the run's length
    double elapsedSeconds = 0;   // wall time of this run() so far, pauses excluded
    double etaSeconds = 0;       // estimated time to the last step at this run's pace so far
};

class TrainerObserver
{
public:
    virtual ~TrainerObserver() = default;
    // Every config.logEvery steps and at the last step.
    virtual void onStep(const StepMetrics& metrics) { (void)metrics; }
    virtual void onEvaluation(const EvalResult& result) { (void)result; }
    // A human-readable line (the tutorial's "step 10, loss = 2.30 (...)", checkpoints, resume).
    // The run's end is not one: run()'s Outcome and onFinished/onStopped say it, and each front
    // end words it once.
    virtual void onLog(const std::string& line) { (void)line; }
    virtual void onCheckpoint(const std::filesystem::path& file, std::int64_t step)
    {
        (void)file;
        (void)step;
    }
    virtual void onPaused(std::int64_t step) { (void)step; }
    virtual void onResumed(std::int64_t step) { (void)step; }
    // The run reached its last step, or stopped early (TrainConfig::patience).
    virtual void onFinished(std::int64_t step) { (void)step; }
    // A stop was requested; the checkpoint of `step` was written.
    virtual void onStopped(std::int64_t step) { (void)step; }
    // The run failed (run() then throws the error).
    virtual void onFailed(const std::string& message) { (void)message; }
};

} // namespace towers::engine
