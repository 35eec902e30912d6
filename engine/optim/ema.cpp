#include "engine/optim/ema.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace towers::engine {

namespace {

template <class T> void blend(T* s, const T* v, std::int64_t n, T keep)
{
    // TensorFlow's assign_moving_average: shadow -= (shadow - value) * (1 - decay).
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
    for (std::int64_t i = 0; i < n; ++i) s[i] -= (s[i] - v[i]) * keep;
}

} // namespace

Ema::Ema(double decay) : m_decay(decay)
{
    if (!(decay > 0 && decay < 1))
        throw InvalidArgument("EMA decay must be in (0, 1), got " + std::to_string(decay));
}

double Ema::effectiveDecay(std::int64_t numUpdates) const
{
    const double n = double(std::max<std::int64_t>(0, numUpdates));
    return std::min(m_decay, (1 + n) / (10 + n));
}

void Ema::reset(const std::vector<Parameter*>& params)
{
    m_order.clear();
    m_shadow.clear();
    for (auto* p : params) {
        if (!p->trainable) continue;
        m_order.push_back(p->name);
        m_shadow[p->name] = p->value.copyTo(p->value.device()); // where the weights live
    }
}

Tensor& Ema::find(const Parameter& p)
{
    const auto it = m_shadow.find(p.name);
    if (it == m_shadow.end())
        throw InvalidArgument("EMA: parameter '" + p.name +
                              "' has no average (reset() with other parameters?)");
    if (it->second.shape() != p.value.shape() || it->second.dtype() != p.value.dtype())
        throw InvalidArgument("EMA: the average of '" + p.name + "' is " + it->second.describe() +
                              ", the parameter is " + p.value.describe());
    return it->second;
}

void Ema::update(const std::vector<Parameter*>& params, std::int64_t numUpdates, int part,
                 int parts)
{
    if (parts < 1 || part < 0 || part >= parts)
        throw InvalidArgument("EMA update: part out of range");
    const double keep = 1.0 - effectiveDecay(numUpdates);
    std::int64_t total = 0;
    for (auto* p : params)
        if (p->trainable) total += find(*p).numel();
    // This part's range of the concatenated elements.
    const std::int64_t begin = total * part / parts, end = total * (part + 1) / parts;
    std::int64_t offset = 0;
    for (auto* p : params) {
        if (!p->trainable) continue;
        Tensor& s = find(*p);
        const std::int64_t n = s.numel();
        const std::int64_t b = std::clamp(begin - offset, std::int64_t(0), n);
        const std::int64_t e = std::clamp(end - offset, std::int64_t(0), n);
        if (b < e) {
            if (!s.device().isHost())
                throw InvalidArgument("EMA of '" + p->name + "': the averages live on " +
                                      s.device().str() + ": update them with that device's ops");
            const Tensor v = p->value.onHost();
            if (s.dtype() == DType::Float32)
                blend(s.data<float>() + b, v.data<float>() + b, e - b, float(keep));
            else if (s.dtype() == DType::Float64)
                blend(s.data<double>() + b, v.data<double>() + b, e - b, keep);
            else
                throw Unsupported("EMA of '" + p->name +
                                  "': only float32 and float64 weights are averaged");
        }
        offset += n;
    }
}

void Ema::update(Ops& ops, const std::vector<Parameter*>& params, std::int64_t numUpdates,
                 const Tensor& skip, const Tensor& scalars)
{
    const double keep = 1.0 - effectiveDecay(numUpdates);
    for (auto* p : params)
        if (p->trainable) ops.emaUpdate(keep, p->value, find(*p), skip, scalars);
}

void Ema::fillScalars(StepScalars& scalars, std::int64_t numUpdates) const
{
    scalars.values[StepScalars::EmaKeep] = 1.0 - effectiveDecay(numUpdates);
}

bool Ema::onHost() const
{
    for (const auto& [name, t] : m_shadow)
        if (!t.device().isHost()) return false;
    return true;
}

NamedTensors Ema::state() const
{
    NamedTensors out;
    for (const auto& name : m_order) out.emplace_back("ema." + name, m_shadow.at(name));
    return out;
}

void Ema::checkState(const std::vector<SafeTensorEntry>& tensors,
                     const std::vector<Parameter*>& params)
{
    std::map<std::string, const SafeTensorEntry*> given;
    for (const SafeTensorEntry& t : tensors)
        if (t.name.rfind("ema.", 0) == 0) given[t.name] = &t;
    std::size_t used = 0;
    for (auto* p : params) {
        if (!p->trainable) continue;
        const std::string key = "ema." + p->name;
        const auto it = given.find(key);
        if (it == given.end()) throw InvalidArgument("EMA state: tensor '" + key + "' is missing");
        if (it->second->shape != p->value.shape() || it->second->dtype != p->value.dtype())
            throw InvalidArgument("EMA state: tensor '" + key + "' is " + it->second->describe() +
                                  ", the parameter is " + p->value.describe());
        ++used;
    }
    if (used != given.size()) {
        for (const auto& [key, t] : given) {
            bool known = false;
            for (auto* p : params) known = known || (p->trainable && key == "ema." + p->name);
            if (!known)
                throw InvalidArgument("EMA state: unexpected tensor '" + key +
                                      "' (no such trainable parameter)");
        }
    }
}

void Ema::loadState(const NamedTensors& tensors, const std::vector<Parameter*>& params)
{
    checkState(describeTensors(tensors), params);
    std::map<std::string, const Tensor*> given;
    for (const auto& [name, t] : tensors)
        if (name.rfind("ema.", 0) == 0) given[name] = &t;
    m_order.clear();
    m_shadow.clear();
    for (auto* p : params) {
        if (!p->trainable) continue;
        m_order.push_back(p->name);
        Tensor shadow(p->value.shape(), p->value.dtype(), p->value.device());
        shadow.copyFrom(*given.at("ema." + p->name));
        m_shadow[p->name] = shadow;
    }
}

const Tensor& Ema::average(const std::string& parameterName) const
{
    const auto it = m_shadow.find(parameterName);
    if (it == m_shadow.end()) throw UnknownName("EMA: no average of '" + parameterName + "'");
    return it->second;
}

EmaSwap::EmaSwap(const Ema& ema, const std::vector<Parameter*>& params)
{
    for (auto* p : params) {
        if (!p->trainable) continue;
        const Tensor& avg = ema.average(p->name);
        m_saved.emplace_back(p, p->value.clone());
        p->value.copyFrom(avg);
    }
}

EmaSwap::~EmaSwap()
{
    for (auto& [p, saved] : m_saved) p->value.copyFrom(saved);
}

} // namespace towers::engine
