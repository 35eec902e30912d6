#include "engine/optim/optimizer.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"

namespace towers::engine {

namespace {

void requireLearningRate(double lr)
{
    if (!(lr >= 0) || !std::isfinite(lr))
        throw InvalidArgument("learning rate must be a finite number >= 0, got " +
                              std::to_string(lr));
}

} // namespace

void Optimizer::step(Ops& ops, const std::vector<Parameter*>& params, double lr, const Tensor& skip,
                     const Tensor& scalars)
{
    requireLearningRate(lr);
    for (auto* p : params) {
        if (!p->trainable) continue;
        if (p->grad.empty())
            throw InvalidArgument("parameter '" + p->name +
                                  "' has no gradient: run backward first");
    }
    if (measuresGradNorm()) measureAndClip(ops, params);
    for (auto* p : params)
        if (p->trainable) update(ops, *p, lr, m_steps == 0, skip, scalars);
    ops.hostWork([this] { ++m_steps; }); // at every replay of a captured step, too
}

void Optimizer::setMaxGradNorm(double maxNorm)
{
    if (!(maxNorm >= 0) || !std::isfinite(maxNorm))
        throw InvalidArgument("the largest gradient norm must be a finite number >= 0 (0: no "
                              "clipping), got " +
                              std::to_string(maxNorm));
    m_maxGradNorm = maxNorm;
}

void Optimizer::measureAndClip(Ops& ops, const std::vector<Parameter*>& params)
{
    if (m_zero.empty()) {
        m_zero = Tensor::pinned({1}, DType::Float64);
        std::memset(m_zero.raw(), 0, m_zero.bytes());
    }
    ops.upload(m_zero, m_gradSumSquares);
    for (auto* p : params)
        if (p->trainable) ops.sumSquares(p->grad, 1.0, m_gradSumSquares);
    if (m_maxGradNorm <= 0) return; // measured only
    for (auto* p : params)
        if (p->trainable) ops.clipToNorm(m_gradSumSquares, m_maxGradNorm, p->grad);
}

void Optimizer::fillScalars(StepScalars& scalars, double lr) const
{
    requireLearningRate(lr); // a replayed step reads it here, not through step()
    scalars.values[StepScalars::LearningRate] = lr;
    scalars.values[StepScalars::MomentumFirst] = m_steps == 0 ? 1 : 0;
}

void Optimizer::skipped()
{
    if (m_steps < 1) throw InvalidArgument("Optimizer::skipped: no step was taken");
    --m_steps;
}

Tensor& Optimizer::slot(const Parameter& p, std::size_t i)
{
    auto& slots = m_slots[p.name];
    if (slots.size() <= i) slots.resize(slotNames().size());
    Tensor& t = slots.at(i);
    if (t.empty() || t.shape() != p.value.shape() || t.dtype() != p.value.dtype() ||
        t.device() != p.value.device()) {
        t = Tensor(p.value.shape(), p.value.dtype(), p.value.device()); // beside its parameter
        t.setZero();
    }
    return t;
}

NamedTensors Optimizer::state(const std::vector<Parameter*>& params)
{
    NamedTensors out;
    Tensor steps = Tensor::zeros(Shape{}, DType::Int64);
    steps.data<std::int64_t>()[0] = m_steps;
    out.emplace_back(kStepName, steps);
    const auto names = slotNames();
    for (auto* p : params) {
        if (!p->trainable) continue;
        for (std::size_t i = 0; i < names.size(); ++i)
            out.emplace_back("optim." + p->name + "." + names[i], slot(*p, i));
    }
    return out;
}

void Optimizer::checkState(const std::vector<SafeTensorEntry>& tensors,
                           const std::vector<Parameter*>& params) const
{
    std::map<std::string, const SafeTensorEntry*> given;
    for (const SafeTensorEntry& t : tensors)
        if (t.name.rfind("optim.", 0) == 0) given[t.name] = &t;
    const auto it = given.find(kStepName);
    if (it == given.end()) throw InvalidArgument("optimizer state: tensor 'optim.step' is missing");
    if (it->second->dtype != DType::Int64 || it->second->shape.numel() != 1)
        throw InvalidArgument("optimizer state: 'optim.step' must be one int64, got " +
                              it->second->describe());
    std::set<std::string> used{kStepName};
    const auto names = slotNames();
    for (auto* p : params) {
        if (!p->trainable) continue;
        for (const auto& s : names) {
            const std::string key = "optim." + p->name + "." + s;
            const auto f = given.find(key);
            if (f == given.end())
                throw InvalidArgument("optimizer state: tensor '" + key + "' is missing (the " +
                                      name() + " optimizer keeps '" + s + "' for every parameter)");
            if (f->second->shape != p->value.shape() || f->second->dtype != p->value.dtype())
                throw InvalidArgument("optimizer state: tensor '" + key + "' is " +
                                      f->second->describe() + ", the parameter is " +
                                      p->value.describe());
            used.insert(key);
        }
    }
    for (const auto& [key, t] : given)
        if (!used.count(key))
            throw InvalidArgument("optimizer state: unexpected tensor '" + key +
                                  "' (not kept by the " + name() +
                                  " optimizer for this model; was it written by another "
                                  "optimizer or model?)");
}

void Optimizer::setStepCount(std::int64_t steps)
{
    if (steps < 0) throw InvalidArgument("optimizer state: 'optim.step' is negative");
    m_steps = steps;
}

void Optimizer::loadState(const NamedTensors& tensors, const std::vector<Parameter*>& params)
{
    // Check everything before changing anything.
    checkState(describeTensors(tensors), params);
    std::map<std::string, const Tensor*> given;
    for (const auto& [name, t] : tensors)
        if (name.rfind("optim.", 0) == 0) given[name] = &t;
    const std::int64_t steps = given.at(kStepName)->data<std::int64_t>()[0];
    if (steps < 0) throw InvalidArgument("optimizer state: 'optim.step' is negative");
    const auto names = slotNames();
    for (auto* p : params) {
        if (!p->trainable) continue;
        for (std::size_t i = 0; i < names.size(); ++i)
            slot(*p, i).copyFrom(*given.at("optim." + p->name + "." + names[i]));
    }
    m_steps = steps;
}

const std::vector<std::string>& optimizerKinds()
{
    static const std::vector<std::string> kinds = {"sgd", "momentum", "nesterov", "adam", "adamw"};
    return kinds;
}

std::vector<std::string> optimizerFields(const std::string& kind)
{
    if (kind == "momentum") return {"momentum", "dampening"};
    if (kind == "nesterov") return {"momentum"}; // its dampening is 0
    if (kind == "adam" || kind == "adamw") return {"beta1", "beta2", "epsilon"};
    return {};
}

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& o)
{
    if (o.kind == "sgd") return std::make_unique<Sgd>();
    if (o.kind == "momentum" || o.kind == "nesterov") {
        SgdOptions s;
        s.momentum = o.momentum;
        s.dampening = o.dampening;
        s.nesterov = o.kind == "nesterov";
        if (!(o.momentum > 0 && o.momentum < 1))
            throw InvalidArgument("optimizer " + o.kind + ": momentum must be in (0, 1), got " +
                                  std::to_string(o.momentum));
        return std::make_unique<Sgd>(s);
    }
    if (o.kind == "adam" || o.kind == "adamw") {
        AdamOptions a;
        a.decoupled = o.kind == "adamw";
        a.beta1 = o.beta1;
        a.beta2 = o.beta2;
        a.epsilon = o.epsilon;
        return std::make_unique<Adam>(a);
    }
    std::string known;
    for (const auto& k : optimizerKinds()) known += (known.empty() ? "" : ", ") + k;
    throw UnknownName("unknown optimizer '" + o.kind + "' (known: " + known + ")");
}

} // namespace towers::engine
