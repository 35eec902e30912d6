#pragma once
// Where one tower's training step went, in milliseconds: the split that metrics.jsonl, the log and
// the GUI's Devices page show, so that a user sees whether a tower waits on the others (exposed
// communication) or on the data. The four parts add up to about the step's wall time.
#include <chrono>

namespace towers::engine {

// The clock the step's times are taken with, and milliseconds from a to b.
using StepClock = std::chrono::steady_clock;
inline double msBetween(StepClock::time_point a, StepClock::time_point b)
{
    return std::chrono::duration<double, std::milli>(b - a).count();
}

struct TowerTimes
{
    // Forward, loss and backward, less the time spent in collectives meanwhile. A GPU tower's is
    // its GPU's: the host waits for the stream before the clock stops.
    double computeMs = 0;
    // Communication not hidden behind backward: starting buckets (on the host, the tower that
    // completes a bucket averages it), waiting for the averages after backward and for the other
    // towers to agree that the step is finite, and, for a tower that finished its update first,
    // waiting for the last one.
    double commMs = 0;
    // Waiting for data: the trainer's wait for the batch (the same for every tower) and a GPU
    // tower's issuing of the copy of its slice to the device (the copy itself runs on the tower's
    // stream before forward, within compute: timing it apart needs CUDA events).
    double dataMs = 0;
    // The optimizer update (and the tower's share of the moving averages).
    double updateMs = 0;
};

} // namespace towers::engine
