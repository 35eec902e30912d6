// The op list; Ops' context (captures, transfers, marks, the host fallback); and the default
// implementations of the composite ops, each the sequence of single ops that defines its meaning
// (and the reference the fused backends are tested against). The public entries of Ops, with each
// op's argument checks, are in op_checks.cpp.
#include "engine/ops/ops.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "engine/ops/poll_backoff.h"
#include "engine/ops/staged_ops.h"

namespace towers::engine {

// ---- the op list ----

const char* opName(Op op)
{
    static const char* const names[] = {
#define TOWERS_OP_NAME(n) #n,
        TOWERS_OPS(TOWERS_OP_NAME)
#undef TOWERS_OP_NAME
    };
    return names[static_cast<int>(op)];
}

bool isComposite(Op op)
{
    switch (op) {
#define TOWERS_OP_CASE(n) case Op::n:
        TOWERS_COMPOSITE_OPS(TOWERS_OP_CASE)
#undef TOWERS_OP_CASE
        return true;
    default:
        return false;
    }
}

OpSet opSet(std::initializer_list<Op> ops)
{
    OpSet set;
    for (Op op : ops) set.set(static_cast<std::size_t>(op));
    return set;
}

OpSet allOps()
{
    return OpSet().set();
}

// ---- the backend's context ----

Ops::Ops(OpSet implemented) : m_implemented(implemented) {}

Ops::~Ops() = default;

namespace {

// Whether `dst` is already a tensor like `src` on `device` (a copy into it makes nothing).
bool fits(const Tensor& dst, const Tensor& src, const Device& device)
{
    return !dst.empty() && dst.shape() == src.shape() && dst.dtype() == src.dtype() &&
           dst.device() == device;
}

} // namespace

CapturedWork::~CapturedWork() = default;

void CapturedWork::replay()
{
    launch();
    for (const auto& work : m_hostWork) work();
}

namespace {

// A capture cut by Ops::outsideCapture: its parts, with the work between them.
class CapturedParts final : public CapturedWork
{
public:
    CapturedParts(std::vector<std::unique_ptr<CapturedWork>> parts,
                  std::vector<std::function<void()>> between)
        : m_parts(std::move(parts)), m_between(std::move(between))
    {
    }
    std::size_t size() const override
    {
        std::size_t n = 0;
        for (const auto& p : m_parts) n += p->size();
        return n;
    }
    bool launchesAtOnce() const override { return false; }

protected:
    void launch() override
    {
        for (std::size_t i = 0; i < m_parts.size(); ++i) {
            m_parts[i]->replay();
            if (i < m_between.size()) m_between[i]();
        }
    }

private:
    std::vector<std::unique_ptr<CapturedWork>> m_parts; // one more than m_between
    std::vector<std::function<void()>> m_between;
};

} // namespace

std::string Ops::captureUnavailable() const
{
    return "the " + name() + " backend runs each op as it is called";
}

void Ops::beginCapture()
{
    if (m_capturing) throw InvalidArgument("beginCapture: a capture is under way already");
    if (const std::string why = captureUnavailable(); !why.empty())
        throw Unsupported("cannot capture: " + why);
    beginCaptureImpl();
    m_capturedHostWork.clear();
    m_capturing = true;
}

std::unique_ptr<CapturedWork> Ops::endCapturedPart()
{
    m_capturing = false;
    auto hostWork = std::move(m_capturedHostWork);
    m_capturedHostWork.clear();
    std::unique_ptr<CapturedWork> work;
    try {
        work = endCaptureImpl(); // throws with nothing kept
    } catch (...) {
        dropCapturedParts();
        throw;
    }
    work->m_hostWork = std::move(hostWork);
    return work;
}

std::unique_ptr<CapturedWork> Ops::endCapture()
{
    if (!m_capturing) throw InvalidArgument("endCapture: no capture is under way");
    std::unique_ptr<CapturedWork> last = endCapturedPart();
    if (m_capturedParts.empty()) return last;
    auto parts = std::exchange(m_capturedParts, {});
    parts.push_back(std::move(last));
    return std::make_unique<CapturedParts>(std::move(parts), std::exchange(m_outsideWork, {}));
}

void Ops::abandonCapture() noexcept
{
    if (!m_capturing) return;
    m_capturing = false;
    m_capturedHostWork.clear();
    dropCapturedParts();
    abandonCaptureImpl();
}

void Ops::dropCapturedParts() noexcept
{
    m_capturedParts.clear();
    m_outsideWork.clear();
}

void Ops::outsideCapture(std::function<void()> work)
{
    if (!m_capturing) {
        work();
        return;
    }
    std::unique_ptr<CapturedWork> part = endCapturedPart(); // not capturing from here
    m_capturedParts.push_back(std::move(part));
    m_outsideWork.push_back(std::move(work));
    try {
        beginCaptureImpl();
    } catch (...) {
        dropCapturedParts();
        throw;
    }
    m_capturing = true;
}

void Ops::hostWork(std::function<void()> work)
{
    if (m_capturing)
        m_capturedHostWork.push_back(std::move(work));
    else
        work();
}

void Ops::beginCaptureImpl()
{
    throw Unsupported("cannot capture: " + captureUnavailable());
}

std::unique_ptr<CapturedWork> Ops::endCaptureImpl()
{
    throw Unsupported("cannot capture: " + captureUnavailable());
}

void Ops::refuseDuringCapture(const char* what, const char* why) const
{
    if (m_capturing)
        throw Unsupported(std::string(what) + " during a capture: " + why + " (" + name() + ")");
}

void Ops::upload(const Tensor& src, Tensor& dst)
{
    if (!src.device().isHost())
        throw InvalidArgument("upload: " + src.describe() + " is not in host memory");
    if (m_capturing && !fits(dst, src, device()))
        refuseDuringCapture("upload", "it would make its destination");
    uploadImpl(src, dst);
}

void Ops::prefetch(const Tensor& src, Tensor& dst)
{
    if (!src.device().isHost())
        throw InvalidArgument("prefetch: " + src.describe() + " is not in host memory");
    refuseDuringCapture("prefetch", "it runs beside the stream, not on it");
    if (!fits(dst, src, device()) || !src.bytes())
        uploadImpl(src, dst); // made where it is first written, among the ops
    else
        prefetchImpl(src, dst);
}

void Ops::copy(const Tensor& src, Tensor& dst)
{
    if (src.device() != device())
        throw InvalidArgument("copy: " + src.describe() + " is not on " + device().str());
    if (m_capturing && !fits(dst, src, device()))
        refuseDuringCapture("copy", "it would make its destination");
    copyImpl(src, dst);
}

void Ops::download(const Tensor& src, Tensor& dst)
{
    if (src.device() != device())
        throw InvalidArgument("download: " + src.describe() + " is not on " + device().str());
    if (!dst.device().isHost() || dst.shape() != src.shape() || dst.dtype() != src.dtype())
        throw InvalidArgument("download: " + dst.describe() + " is not a host tensor like " +
                              src.describe());
    downloadImpl(src, dst);
}

void Ops::uploadImpl(const Tensor& src, Tensor& dst)
{
    Tensor::ensure(dst, src.shape(), src.dtype(), device());
    dst.copyFrom(src);
}

void Ops::copyImpl(const Tensor& src, Tensor& dst)
{
    Tensor::ensure(dst, src.shape(), src.dtype(), device());
    dst.copyFrom(src);
}

void Ops::downloadImpl(const Tensor& src, Tensor& dst)
{
    dst.copyFrom(src);
}

void Ops::requireMark(int mark, int made)
{
    if (mark < 0 || mark >= made || made - mark > kMarkWindow)
        throw InvalidArgument("mark " + std::to_string(mark) + " is not one of the latest " +
                              std::to_string(std::min(made, kMarkWindow)) + " of " +
                              std::to_string(made) + " made since clearMarks()");
}

void Ops::setHostFallback(std::function<std::unique_ptr<Ops>()> makeHostOps)
{
    m_makeHostOps = std::move(makeHostOps);
    m_hostOps.reset();
}

void Ops::setLog(std::function<void(const std::string&)> log)
{
    m_log = std::move(log);
}

Ops& Ops::fallback(Op op)
{
    if (!m_makeHostOps)
        throw Unsupported("the " + name() + " backend does not implement " + opName(op) +
                          ", and no host backend was given to run it on");
    if (!m_hostOps) m_hostOps = makeStagedOps(m_makeHostOps(), device());
    const auto bit = static_cast<std::size_t>(op);
    if (!m_logged.test(bit)) {
        m_logged.set(bit);
        const std::string line = "the " + name() + " backend does not implement " + opName(op) +
                                 "; it runs on the host through " + m_hostOps->name() +
                                 ", its tensors copied there and back";
        if (m_log)
            m_log(line);
        else
            std::clog << "towers: " << line << '\n';
    }
    return *m_hostOps;
}

// ---- the composite ops' defaults ----

namespace {

// What every layer with a fused activation does in backward: dy through the activation, then the
// parameter gradients from the masked gradient, then the input gradient from it.
template <class Weights, class Data>
void throughActivation(Ops& ops, Activation act, const Tensor& y, const Tensor& dy,
                       const Weights& weights, const Data& data)
{
    Tensor masked;
    const Tensor* g = &dy;
    if (act == Activation::Relu) {
        ops.reluBackward(y, dy, masked);
        g = &masked;
    }
    weights(*g);
    data(*g);
}

} // namespace

void Ops::conv2dForwardTrainingImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                    const Tensor& b, Tensor& y, Activation act, Tensor& saved)
{
    conv2dForward(d, x, w, b, y, act);
    saved = Tensor();
}

void Ops::conv2dBackwardImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& y,
                             const Tensor& dy, Activation act, const Tensor& saved, Tensor* dx,
                             Tensor& dw, Tensor* db)
{
    (void)saved;
    throughActivation(
        *this, act, y, dy, [&](const Tensor& g) { conv2dBackwardWeights(d, x, g, dw, db); },
        [&](const Tensor& g) {
            if (dx) conv2dBackwardData(d, g, w, *dx);
        });
}

void Ops::linearBackwardImpl(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy,
                             Activation act, Tensor* dx, Tensor& dw, Tensor* db)
{
    throughActivation(
        *this, act, y, dy, [&](const Tensor& g) { linearBackwardWeights(x, g, dw, db); },
        [&](const Tensor& g) {
            if (dx) linearBackwardData(g, w, *dx);
        });
}

void Ops::batchNormActForwardTrainingImpl(const BatchNormDesc& d, const Tensor& x,
                                          const Tensor& gamma, const Tensor& beta, Activation act,
                                          Tensor& y, Tensor& runningMean, Tensor& runningVar,
                                          Tensor& saveMean, Tensor& saveVar, Tensor& saved)
{
    batchNormForwardTraining(d, x, gamma, beta, y, runningMean, runningVar, saveMean, saveVar);
    if (act == Activation::Relu) reluForward(y, y);
    saved = Tensor();
}

void Ops::batchNormActForwardInferenceImpl(const BatchNormDesc& d, const Tensor& x,
                                           const Tensor& gamma, const Tensor& beta,
                                           const Tensor& runningMean, const Tensor& runningVar,
                                           Activation act, Tensor& y)
{
    batchNormForwardInference(d, x, gamma, beta, runningMean, runningVar, y);
    if (act == Activation::Relu) reluForward(y, y);
}

void Ops::batchNormActBackwardImpl(const BatchNormDesc& d, const Tensor& x, const Tensor& y,
                                   const Tensor& dy, Activation act, const Tensor& gamma,
                                   const Tensor& saveMean, const Tensor& saveVar,
                                   const Tensor& saved, Tensor& dx, Tensor& dgamma, Tensor& dbeta)
{
    (void)saved;
    throughActivation(
        *this, act, y, dy,
        [&](const Tensor& g) {
            batchNormBackward(d, x, g, gamma, saveMean, saveVar, dx, dgamma, dbeta);
        },
        [](const Tensor&) {});
}

void waitWatching(Ops& ops, int mark, const std::function<void()>& watch)
{
    PollBackoff backoff;
    while (!ops.reached(mark)) {
        watch();
        backoff.pause();
    }
    ops.waitFor(mark);
}

} // namespace towers::engine
