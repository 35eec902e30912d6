#pragma once
// Exponential moving average of the trainable weights, as TensorFlow's
// ExponentialMovingAverage(decay, num_updates=global_step) in the tutorial: the evaluator reads
// the averages, which generalise better than the last weights.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/nn/layer.h"
#include "engine/ops/ops.h"

namespace towers::engine {

class Ema
{
public:
    // decay in (0, 1); the tutorial uses 0.9999. InvalidArgument otherwise.
    explicit Ema(double decay);

    double decay() const { return m_decay; }
    // min(decay, (1 + numUpdates) / (10 + numUpdates)): TensorFlow's warm-up of the average.
    double effectiveDecay(std::int64_t numUpdates) const;

    // Starts the averages as copies of the trainable parameters, on their device (TensorFlow
    // initialises each shadow variable to its variable's value).
    void reset(const std::vector<Parameter*>& params);
    // shadow -= (1 - d) * (shadow - value) for every trainable parameter, d =
    // effectiveDecay(numUpdates); numUpdates is the global step after the optimizer update.
    // With parts > 1 only the part-th of `parts` equal ranges of all the elements (parameters
    // concatenated in order) is updated, so that identical replicas can share the work; the result
    // does not depend on the split. Throws InvalidArgument if params do not match reset()'s.
    void update(const std::vector<Parameter*>& params, std::int64_t numUpdates, int part = 0,
                int parts = 1);
    // The same step with `ops` on the averages where they live (a GPU tower's: no copy to the
    // host), every parameter; ops' device must hold the averages and the parameters.
    // `skip` and `scalars`: as Optimizer::step's (the averages stay as they are where the flag
    // is set; the keep is the scalars' EmaKeep, as fillScalars(numUpdates) made it).
    void update(Ops& ops, const std::vector<Parameter*>& params, std::int64_t numUpdates,
                const Tensor& skip = {}, const Tensor& scalars = {});
    // The keep of update(numUpdates) in a step's scalars (StepScalars::EmaKeep).
    void fillScalars(StepScalars& scalars, std::int64_t numUpdates) const;
    // Whether the averages live on the host (the shared host update above applies).
    bool onHost() const;

    // "ema.<parameter>" for every trainable parameter, views of the averages.
    NamedTensors state() const;
    // Restores what state() gave (every "ema." tensor of `tensors`, matching the trainable
    // parameters' names, shapes and dtypes exactly) onto the parameters' device; InvalidArgument
    // naming the tensor otherwise, changing nothing then.
    void loadState(const NamedTensors& tensors, const std::vector<Parameter*>& params);
    // loadState's checks of the names, dtypes and shapes alone (a file's header: every tensor of
    // the state to come, "ema." names or not), before any value is read; InvalidArgument as
    // loadState's.
    static void checkState(const std::vector<SafeTensorEntry>& given,
                           const std::vector<Parameter*>& params);

    // The average of a parameter (UnknownName if there is none).
    const Tensor& average(const std::string& parameterName) const;
    bool empty() const { return m_order.empty(); }

private:
    Tensor& find(const Parameter& p);
    double m_decay;
    std::vector<std::string> m_order;
    std::unordered_map<std::string, Tensor> m_shadow;
};

// Puts the averages into a replica's trainable parameters for as long as it lives, then puts the
// live weights back (evaluation with the averaged weights, as the tutorial's evaluator).
class EmaSwap
{
public:
    EmaSwap(const Ema& ema, const std::vector<Parameter*>& params);
    ~EmaSwap();
    EmaSwap(const EmaSwap&) = delete;
    EmaSwap& operator=(const EmaSwap&) = delete;

private:
    std::vector<std::pair<Parameter*, Tensor>> m_saved;
};

} // namespace towers::engine
