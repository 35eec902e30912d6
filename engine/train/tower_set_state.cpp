// TowerSet's evaluation and state (tower_set.h): evaluate() on every tower at once, the replicas
// compared byte for byte, and a state (a checkpoint's, or tensors in memory) loaded into every
// tower. The rest of TowerSet is in tower_set.cpp and tower_set_step.cpp.
#include "engine/train/tower_set.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "engine/dist/byte_message.h"
#include "engine/dist/stop_vote.h"
#include "engine/errors.h"
#include "engine/train/tower_set_parts.h"

namespace towers::engine {

namespace {

bool isFloat(DType t)
{
    return t == DType::Float32 || t == DType::Float64;
}

// "" when a and b hold the same bytes, else where they first differ.
std::string firstDifference(const Tensor& deviceA, const Tensor& deviceB)
{
    // GPU towers are compared through host copies (a check, not a hot path).
    const Tensor a = deviceA.onHost(), b = deviceB.onHost();
    if (a.shape() != b.shape() || a.dtype() != b.dtype())
        return "is " + a.describe() + " instead of " + b.describe();
    if (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0) return {};
    const std::size_t size = dtypeSize(a.dtype());
    const auto* pa = static_cast<const unsigned char*>(a.raw());
    const auto* pb = static_cast<const unsigned char*>(b.raw());
    std::int64_t i = 0;
    while (std::memcmp(pa + std::size_t(i) * size, pb + std::size_t(i) * size, size) == 0) ++i;
    std::string what = "differs at element " + std::to_string(i);
    if (isFloat(a.dtype()) || a.dtype() == DType::BFloat16)
        what += " (" + std::to_string(a.at(i)) + " instead of " + std::to_string(b.at(i)) + ")";
    return what;
}

std::string packEval(const EvalResult& r)
{
    std::string out;
    putBytes(out, std::int64_t(r.numClasses));
    putBytes(out, r.examples);
    putBytes(out, r.correct);
    putBytes(out, r.correctTop5);
    putBytes(out, r.crossEntropySum);
    putBytes(out, r.seconds);
    putBytes(out, std::int64_t(r.complete));
    for (auto c : r.classCounts) putBytes(out, c);
    for (auto c : r.classTop5) putBytes(out, c);
    for (auto c : r.confusion) putBytes(out, c);
    return out;
}

EvalResult unpackEval(ByteReader& in)
{
    EvalResult r(int(in.take<std::int64_t>()));
    r.examples = in.take<std::int64_t>();
    r.correct = in.take<std::int64_t>();
    r.correctTop5 = in.take<std::int64_t>();
    r.crossEntropySum = in.take<double>();
    r.seconds = in.take<double>();
    r.complete = in.take<std::int64_t>() != 0;
    for (auto& c : r.classCounts) c = in.take<std::int64_t>();
    for (auto& c : r.classTop5) c = in.take<std::int64_t>();
    for (auto& c : r.confusion) c = in.take<std::int64_t>();
    return r;
}

} // namespace

EvalResult TowerSet::evaluate(std::int64_t count, int batchSize, const EvalBatchFn& batches,
                              bool useEma, const CancelFn& cancelled)
{
    requireIdle("evaluate");
    dropGraphs(); // what follows may remake tensors the captures use
    if (useEma && !m_ema)
        throw InvalidArgument(
            "evaluation with the moving averages, but the run keeps none (emaDecay = 0)");
    if (count < 1) throw InvalidArgument("evaluation needs at least one example");
    const auto evaluateOn = [&](int t, const CancelFn& cancel) {
        Tower& tw = *m_towers[std::size_t(t)];
        std::unique_ptr<EmaSwap> swap;
        if (useEma) swap = std::make_unique<EmaSwap>(*m_ema, tw.model->parameters());
        tw.eval = engine::evaluate(*tw.model, *tw.ops, count, batchSize, batches, m_firstTower + t,
                                   m_globalTowers, cancel);
    };
    if (cancelled && m_opt.processes && m_opt.processes->size() > 1) {
        // The towers ask only this process; this thread votes with the others meanwhile.
        StopVote vote(*m_opt.processes, cancelled, size());
        const CancelFn cancel = [&] { return vote.stopped() || cancelled(); };
        runOnAll(
            [&](int t) {
                try {
                    evaluateOn(t, cancel);
                } catch (...) {
                    vote.workerDone(true);
                    throw;
                }
                vote.workerDone(false);
            },
            [&] { vote.run(); });
    } else {
        runOnAll([&](int t) { evaluateOn(t, cancelled); });
    }
    EvalResult r(model().numClasses());
    double seconds = 0;
    const auto mergeIn = [&](const EvalResult& part) {
        r.merge(part);
        seconds = std::max(seconds, part.seconds);
    };
    if (m_opt.processes && m_opt.processes->size() > 1) {
        // Every process merges every tower's part in global order: the same sums everywhere.
        std::string mine;
        for (const auto& tw : m_towers) mine += packEval(tw->eval);
        for (const std::string& share : m_opt.processes->allGatherStrings(mine)) {
            ByteReader reader(share, "a process's evaluation counts");
            for (int t = 0; t < size(); ++t) mergeIn(unpackEval(reader));
        }
    } else {
        for (const auto& tw : m_towers) mergeIn(tw->eval);
    }
    r.finish();
    r.seconds = seconds;
    r.ema = useEma;
    return r;
}

std::string TowerSet::compareReplicas()
{
    requireIdle("compareReplicas");
    auto& ref = *m_towers.front();
    const auto refState = ref.optimizer->state(ref.model->parameters());
    for (int t = 1; t < size(); ++t) {
        auto& tw = *m_towers[std::size_t(t)];
        const auto& a = tw.model->parameters();
        const auto& b = ref.model->parameters();
        for (std::size_t i = 0; i < a.size(); ++i) {
            const std::string d = firstDifference(a[i]->value, b[i]->value);
            if (!d.empty())
                return "tower " + std::to_string(t) + "'s '" + a[i]->name + "' " + d +
                       " (tower 0's value)";
        }
        const auto state = tw.optimizer->state(tw.model->parameters());
        if (state.size() != refState.size())
            return "tower " + std::to_string(t) + "'s optimizer state has another size";
        for (std::size_t i = 0; i < state.size(); ++i) {
            const std::string d = firstDifference(state[i].second, refState[i].second);
            if (!d.empty())
                return "tower " + std::to_string(t) + "'s '" + state[i].first + "' " + d +
                       " (tower 0's value)";
        }
    }
    return {};
}

void TowerSet::verifyReplicas()
{
    const std::string d = compareReplicas();
    if (!d.empty()) throw Error("the tower replicas are no longer identical: " + d);
}

void TowerSet::loadState(const NamedTensors& weights, const NamedTensors& optimizerState,
                         const NamedTensors& emaState)
{
    requireIdle("loadState");
    std::vector<std::pair<std::string, const Tensor*>> all;
    for (const auto& [name, t] : weights) {
        if (name.rfind("optim.", 0) == 0 || name.rfind("ema.", 0) == 0)
            model().parameter(name); // UnknownName: not a weight
        all.emplace_back(name, &t);
    }
    for (const auto& [name, t] : optimizerState)
        if (name.rfind("optim.", 0) == 0) all.emplace_back(name, &t);
    for (const auto& [name, t] : emaState)
        if (name.rfind("ema.", 0) == 0) all.emplace_back(name, &t);
    StateSource state;
    for (const auto& [name, t] : all) {
        state.tensors.push_back({name, t->dtype(), t->shape()});
        // (Its value is at hand here: refused before anything changes.)
        if (name == Optimizer::kStepName && t->dtype() == DType::Int64 && t->numel() == 1 &&
            t->onHost().data<std::int64_t>()[0] < 0)
            throw InvalidArgument("optimizer state: 'optim.step' is negative");
    }
    state.read = [&all](const SafeTensorFn& take) {
        for (const auto& [name, t] : all) {
            Tensor view = *t; // the caller's tensor, unchanged: take() copies it
            take(name, view);
        }
    };
    loadState(state);
}

void TowerSet::loadState(const StateSource& state)
{
    requireIdle("loadState");
    dropGraphs(); // what follows may remake tensors the captures use
    const auto& params = model().parameters();

    // Check the names, dtypes and shapes before changing anything.
    std::map<std::string, const SafeTensorEntry*> weights;
    bool averages = false;
    for (const SafeTensorEntry& t : state.tensors) {
        if (t.name.rfind("optim.", 0) == 0) continue;
        if (t.name.rfind("ema.", 0) == 0)
            averages = true;
        else
            weights[t.name] = &t;
    }
    for (auto* p : params) {
        const auto it = weights.find(p->name);
        if (it == weights.end())
            throw InvalidArgument("state: tensor '" + p->name + "' is missing");
        if (it->second->shape != p->value.shape() || it->second->dtype != p->value.dtype())
            throw InvalidArgument("state: tensor '" + p->name + "' is " + it->second->describe() +
                                  ", the model's is " + p->value.describe());
    }
    if (weights.size() != params.size())
        for (const auto& [name, t] : weights)
            model().parameter(name); // UnknownName for the extra one
    m_towers.front()->optimizer->checkState(state.tensors, params);
    if (m_ema && averages) Ema::checkState(state.tensors, params);

    // Where each tensor goes: every tower's weight, every tower's optimizer slot, the average's
    // (views of the live state: nothing is made beside it).
    std::map<std::string, std::vector<Tensor>> into;
    for (auto& tw : m_towers) {
        for (auto* p : tw->model->parameters()) into[p->name].push_back(p->value);
        for (auto& [name, t] : tw->optimizer->state(tw->model->parameters()))
            if (name != Optimizer::kStepName) into[name].push_back(t);
    }
    if (m_ema && averages)
        for (auto& [name, t] : m_ema->state()) into[name].push_back(t);
    std::int64_t steps = -1;
    std::set<std::string> given;
    state.read([&](const std::string& name, Tensor& t) {
        if (name == Optimizer::kStepName) {
            if (t.dtype() != DType::Int64 || t.numel() != 1)
                throw InvalidArgument("optimizer state: 'optim.step' must be one int64, got " +
                                      t.describe());
            steps = t.onHost().data<std::int64_t>()[0]; // refused below when negative
            given.insert(name);
            return;
        }
        const auto it = into.find(name);
        if (it == into.end()) return; // an average this run does not keep
        for (Tensor& to : it->second) to.copyFrom(t);
        given.insert(name);
    });
    for (const auto& [name, to] : into)
        if (!given.count(name)) throw InvalidArgument("state: tensor '" + name + "' was not given");
    if (!given.count(Optimizer::kStepName))
        throw InvalidArgument("state: tensor 'optim.step' was not given");
    for (auto& tw : m_towers) tw->optimizer->setStepCount(steps);
    if (m_ema && !averages) m_ema->reset(params); // none saved: they start from these weights
}

} // namespace towers::engine
