#include "engine/train/gradient_buckets.h"

#include <cmath>
#include <cstdio>

#include "engine/errors.h"
#include "engine/train/tower_times.h"

namespace towers::engine {

namespace {

bool averaged(const Parameter& p)
{
    const DType t = p.value.dtype();
    return p.trainable || t == DType::Float32 || t == DType::Float64;
}

class Timer
{
public:
    explicit Timer(double& total) : m_total(total), m_start(StepClock::now()) {}
    ~Timer() { m_total += msBetween(m_start, StepClock::now()); }

private:
    double& m_total;
    StepClock::time_point m_start;
};

} // namespace

Tensor averagedTensor(Parameter& p)
{
    if (p.trainable) return p.grad;
    return averaged(p) ? p.value : Tensor();
}

BucketPlan BucketPlan::make(const std::vector<Parameter*>& params, double bucketMb, double firstMb)
{
    if (!(bucketMb > 0) || !std::isfinite(bucketMb))
        throw InvalidArgument("bucket size: must be a positive number of MiB, got " +
                              std::to_string(bucketMb));
    if (!(firstMb > 0) || !std::isfinite(firstMb))
        throw InvalidArgument("first bucket size: must be a positive number of MiB, got " +
                              std::to_string(firstMb));
    BucketPlan plan;
    plan.bucketOf.assign(params.size(), -1);
    std::vector<std::size_t> current;
    std::int64_t bytes = 0;
    auto close = [&] {
        plan.buckets.push_back(std::move(current));
        plan.bytes.push_back(bytes);
        current.clear();
        bytes = 0;
    };
    for (std::size_t i = params.size(); i-- > 0;) {
        const Parameter& p = *params[i];
        if (!averaged(p)) continue;
        plan.bucketOf[i] = int(plan.buckets.size());
        current.push_back(i);
        // A gradient has its value's size (it may not exist before the first backward).
        bytes += std::int64_t(p.value.bytes());
        const double capMb = plan.buckets.empty() ? firstMb : bucketMb;
        if (double(bytes) >= capMb * 1024.0 * 1024.0) close();
    }
    if (!current.empty()) close();
    return plan;
}

std::string BucketPlan::describe() const
{
    std::string sizes;
    for (std::int64_t b : bytes) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.*f", b < 1024 * 1024 ? 2 : 1,
                      double(b) / (1024.0 * 1024.0));
        sizes += (sizes.empty() ? "" : ", ") + std::string(buf);
    }
    return std::to_string(buckets.size()) + (buckets.size() == 1 ? " bucket (" : " buckets (") +
           sizes + " MiB)";
}

TowerBuckets::TowerBuckets(const BucketPlan& plan, Communicator& comm, int rank,
                           const std::vector<Parameter*>& params, bool staged, Ops& ops)
    : m_plan(plan), m_comm(comm), m_rank(rank), m_params(params), m_staged(staged), m_ops(ops)
{
    if (plan.bucketOf.size() != params.size())
        throw InvalidArgument("gradient buckets: the plan is for " +
                              std::to_string(plan.bucketOf.size()) +
                              " parameters, the replica has " + std::to_string(params.size()));
    for (std::size_t i = 0; i < params.size(); ++i) m_index[params[i]] = i;
    m_pending.resize(plan.buckets.size());
    m_tickets.resize(plan.buckets.size());
    m_where.resize(plan.buckets.size());
    m_host.resize(plan.buckets.size());
}

void TowerBuckets::begin()
{
    for (std::size_t b = 0; b < m_plan.buckets.size(); ++b)
        m_pending[b] = int(m_plan.buckets[b].size());
    m_next = 0;
    m_collectiveMs = 0;
}

void TowerBuckets::ready(const Parameter& p)
{
    const auto it = m_index.find(&p);
    if (it == m_index.end()) return;
    const int b = m_plan.bucketOf[it->second];
    if (b < 0 || m_pending[std::size_t(b)] == 0) return;
    --m_pending[std::size_t(b)];
    // In order, always: every tower must start the same collectives in the same sequence.
    while (m_next < m_plan.buckets.size() && m_pending[m_next] == 0) launch(m_next++);
}

void TowerBuckets::launch(std::size_t bucket)
{
    auto& where = m_where[bucket];
    where.clear();
    for (std::size_t i : m_plan.buckets[bucket]) where.push_back(averagedTensor(*m_params[i]));
    m_ops.outsideCapture([this, bucket] { start(bucket); });
}

void TowerBuckets::start(std::size_t bucket)
{
    Timer timer(m_collectiveMs);
    auto& where = m_where[bucket];
    if (!m_staged) {
        m_tickets[bucket] = m_comm.startAllReduceMean(m_rank, where);
        return;
    }
    auto& host = m_host[bucket];
    host.resize(where.size());
    for (std::size_t i = 0; i < where.size(); ++i) {
        Tensor::ensure(host[i], where[i].shape(), where[i].dtype());
        host[i].copyFrom(where[i]); // waits for the tower's stream to have produced it
    }
    m_tickets[bucket] = m_comm.startAllReduceMean(m_rank, host);
}

const std::vector<Tensor>& TowerBuckets::finish()
{
    for (std::size_t b = 0; b < m_plan.buckets.size(); ++b) m_pending[b] = 0;
    while (m_next < m_plan.buckets.size()) launch(m_next++);
    m_all.clear();
    for (const auto& where : m_where) m_all.insert(m_all.end(), where.begin(), where.end());
    m_ops.outsideCapture([this] { completeAll(); });
    return m_all;
}

void TowerBuckets::completeAll()
{
    Timer timer(m_collectiveMs);
    for (std::size_t b = 0; b < m_plan.buckets.size(); ++b) {
        m_comm.complete(m_rank, m_tickets[b]);
        if (m_staged)
            for (std::size_t i = 0; i < m_where[b].size(); ++i)
                m_where[b][i].copyFrom(m_host[b][i]);
    }
}

} // namespace towers::engine
