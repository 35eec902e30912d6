#include "engine/ops/staged_ops.h"

#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace towers::engine {

namespace {

// The copies of a staged call between the outer device and the computing one.
class Stager
{
public:
    Stager(const Device& inner, const Device& outer) : m_dev(inner), m_outer(outer) {}

    // An input on the computing device (empty stays empty: "no bias").
    Tensor in(const Tensor& t) const { return t.empty() ? Tensor() : t.copyTo(m_dev); }
    // An output or in-place argument: its current value when it has one here (an in-place
    // argument's), else nothing.
    Tensor inOut(const Tensor& t) const
    {
        return t.empty() || t.device() != m_outer ? Tensor() : t.copyTo(m_dev);
    }
    // A result back on the outer device, into `dst` as Tensor::ensure would (empty stays empty);
    // a tensor of the right shape keeps its storage, so in-place arguments stay the caller's.
    void out(const Tensor& r, Tensor& dst) const
    {
        if (r.empty()) {
            dst = Tensor();
            return;
        }
        Tensor::ensure(dst, r.shape(), r.dtype(), m_outer);
        dst.copyFrom(r);
    }

protected:
    Device m_dev;
    Device m_outer;
};

// One argument of a staged call, as the computing backend sees it: a tensor copied to its device
// (an output or an in-place argument is copied back by finish()), anything else as it is.
template <class T> class Staged
{
public:
    Staged(const Stager&, T& value) : m_value(value) {}
    T& inner() { return m_value; }
    void finish() {}

private:
    T& m_value;
};

template <> class Staged<const Tensor>
{
public:
    Staged(const Stager& ops, const Tensor& t) : m_inner(ops.in(t)) {}
    const Tensor& inner() { return m_inner; }
    void finish() {}

private:
    Tensor m_inner;
};

template <> class Staged<Tensor>
{
public:
    Staged(const Stager& ops, Tensor& t) : m_ops(ops), m_outer(t), m_inner(ops.inOut(t)) {}
    Tensor& inner() { return m_inner; }
    void finish() { m_ops.out(m_inner, m_outer); }

private:
    const Stager& m_ops;
    Tensor& m_outer;
    Tensor m_inner;
};

// An optional output (a bias gradient, dx): null stays null.
template <> class Staged<Tensor*>
{
public:
    Staged(const Stager& ops, Tensor*& t) : m_ops(ops), m_outer(t)
    {
        if (t) m_inner = ops.inOut(*t);
    }
    Tensor* inner() { return m_outer ? &m_inner : nullptr; }
    void finish()
    {
        if (m_outer) m_ops.out(m_inner, *m_outer);
    }

private:
    const Stager& m_ops;
    Tensor* m_outer;
    Tensor m_inner;
};

// The storage a tensor's bytes live in (null for an empty tensor): what a CUDA graph's node
// holds of it, its address.
const void* storageOf(const Tensor& t)
{
    return t.storage().lock().get();
}

// How many handles the live captures of one StagedOps hold on each storage, together: a tensor
// that only they hold is one a GPU would have freed (several captures share the model's).
class CaptureHolds
{
public:
    void add(const void* storage, int handles)
    {
        std::lock_guard lock(m_mutex);
        m_handles[storage] += handles;
    }
    void remove(const void* storage, int handles)
    {
        std::lock_guard lock(m_mutex);
        if ((m_handles[storage] -= handles) <= 0) m_handles.erase(storage);
    }
    int handles(const void* storage) const
    {
        std::lock_guard lock(m_mutex);
        const auto it = m_handles.find(storage);
        return it == m_handles.end() ? 0 : it->second;
    }

private:
    mutable std::mutex m_mutex;
    std::map<const void*, int> m_handles;
};

// The tensors one capture holds, by storage, with how many of its handles hold each.
class HeldStorage
{
public:
    void add(const Tensor& t)
    {
        if (t.empty()) return;
        Entry& e = m_entries[storageOf(t)];
        if (!e.handles++) {
            e.storage = t.storage();
            e.describe = t.describe();
        }
    }
    // "" when every tensor still has an owner besides the captures (this one, and the live ones
    // `holds` counts, of which this one is when `counted`), else which has not.
    std::string released(const CaptureHolds& holds, bool counted) const
    {
        for (const auto& [p, e] : m_entries)
            if (e.storage.use_count() <= long(holds.handles(p) + (counted ? 0 : e.handles)))
                return e.describe;
        return {};
    }
    void enter(CaptureHolds& holds) const
    {
        for (const auto& [p, e] : m_entries) holds.add(p, e.handles);
    }
    void leave(CaptureHolds& holds) const
    {
        for (const auto& [p, e] : m_entries) holds.remove(p, e.handles);
    }

private:
    struct Entry
    {
        std::weak_ptr<const Buffer> storage;
        int handles = 0;
        std::string describe;
    };
    std::map<const void*, Entry> m_entries;
};

// One argument of a recorded call, kept as a CUDA graph keeps it: a tensor as a handle on its
// storage, anything else by value. arg() gives it to the call as the op's parameter type.
template <class T> class Held
{
public:
    Held(T& value, HeldStorage&) : m_value(value) {}
    T& arg() { return m_value; }
    void checkKept(const char*) const {}

private:
    std::remove_const_t<T> m_value;
};

template <> class Held<const Tensor>
{
public:
    Held(const Tensor& t, HeldStorage& held) : m_value(t) { held.add(t); }
    const Tensor& arg() { return m_value; }
    void checkKept(const char*) const {}

private:
    Tensor m_value;
};

// A tensor the op writes: a replay must write it where the capture found it.
template <> class Held<Tensor>
{
public:
    Held(const Tensor& t, HeldStorage& held) : m_value(t), m_storage(storageOf(t)) { held.add(t); }
    Tensor& arg() { return m_value; }
    void checkKept(const char* op) const
    {
        if (storageOf(m_value) != m_storage)
            throw Error(std::string("a replayed capture's ") + op + " made its " +
                        m_value.describe() +
                        " output anew: a graph writes where the capture found it (the tensor was "
                        "not made before the capture)");
    }

private:
    Tensor m_value;
    const void* m_storage;
};

// An optional output: null stays null, a given one is held as one the op writes.
template <> class Held<Tensor*>
{
public:
    Held(Tensor*& t, HeldStorage& held) : m_given(t != nullptr), m_value(t ? *t : Tensor(), held) {}
    Tensor*& arg()
    {
        m_pointer = m_given ? &m_value.arg() : nullptr;
        return m_pointer;
    }
    void checkKept(const char* op) const { m_value.checkKept(op); }

private:
    bool m_given;
    Held<Tensor> m_value;
    Tensor* m_pointer = nullptr;
};

// A capture of a StagedOps: its calls, run again in order.
class RecordedWork final : public CapturedWork
{
public:
    RecordedWork(std::vector<std::function<void()>> calls, HeldStorage held,
                 std::shared_ptr<CaptureHolds> holds, std::shared_ptr<int> refusals)
        : m_calls(std::move(calls)), m_held(std::move(held)), m_holds(std::move(holds)),
          m_refusals(std::move(refusals))
    {
        m_held.enter(*m_holds);
    }
    ~RecordedWork() override
    {
        m_calls.clear(); // the handles go before the count of them does
        m_held.leave(*m_holds);
    }
    std::size_t size() const override { return m_calls.size(); }

protected:
    void launch() override
    {
        if (*m_refusals > 0) {
            --*m_refusals;
            throw BackendError("the stand-in device refused to launch the graph (as a GPU can "
                               "refuse one it made and uploaded)");
        }
        if (const std::string gone = m_held.released(*m_holds, true); !gone.empty())
            throw Error("a replayed capture uses " + gone +
                        ", which nothing but the capture holds any more: on a GPU the graph would "
                        "write freed memory (a stale capture, kept past a change of its tensors)");
        for (const auto& call : m_calls) call();
    }

private:
    std::vector<std::function<void()>> m_calls;
    HeldStorage m_held;
    std::shared_ptr<CaptureHolds> m_holds;
    std::shared_ptr<int> m_refusals; // launches still to refuse, shared with its StagedOps
};

class StagedOps final : public Ops, private Stager
{
public:
    StagedOps(std::unique_ptr<Ops> inner, const Device& outer, bool capture, int refusedLaunches)
        : Ops(allOps()), Stager(inner->device(), outer), m_ops(std::move(inner)),
          m_canCapture(capture), m_refusals(std::make_shared<int>(refusedLaunches))
    {
    }

    std::string name() const override { return m_ops->name() + " (staged)"; }
    Device device() const override { return m_outer; }
    Precision precision() const override { return m_ops->precision(); }
    bool runsFloat(DType dtype) const override { return m_ops->runsFloat(dtype); }
    void synchronize() override
    {
        refuseDuringCapture("synchronize", "captured work does not run until replayed");
        m_ops->synchronize();
    }
    std::string captureUnavailable() const override
    {
        return m_canCapture ? std::string() : Ops::captureUnavailable();
    }

protected:
    // Every op: its tensors to the computing device, the op there, its outputs back; while
    // capturing, recorded to do that at each replay.
#define TOWERS_STAGED(n) TOWERS_OP_##n(TOWERS_STAGED_DEF)
#define TOWERS_STAGED_DEF(n, R, P, A)                                                              \
    R n##Impl P override                                                                           \
    {                                                                                              \
        auto run = [this](auto&&... staged) -> R { return m_ops->n(staged...); };                  \
        if (m_recording) return record<R>(#n, run, TOWERS_OP_UNPAREN A);                           \
        return call<R>(run, TOWERS_OP_UNPAREN A);                                                  \
    }
    TOWERS_OPS(TOWERS_STAGED)
#undef TOWERS_STAGED_DEF
#undef TOWERS_STAGED

    // The copies, recorded while capturing (the base's checks have refused those that would
    // make their destination).
    void uploadImpl(const Tensor& src, Tensor& dst) override
    {
        if (!m_recording) return Ops::uploadImpl(src, dst);
        recordCopy(
            "upload", [this](const Tensor& s, Tensor& d) { Ops::uploadImpl(s, d); }, src, dst);
    }
    void copyImpl(const Tensor& src, Tensor& dst) override
    {
        if (!m_recording) return Ops::copyImpl(src, dst);
        recordCopy(
            "copy", [this](const Tensor& s, Tensor& d) { Ops::copyImpl(s, d); }, src, dst);
    }
    void downloadImpl(const Tensor& src, Tensor& dst) override
    {
        if (!m_recording) return Ops::downloadImpl(src, dst);
        recordCopy(
            "download", [this](const Tensor& s, Tensor& d) { Ops::downloadImpl(s, d); }, src, dst);
    }

    // Outside a capture, nothing is recorded: m_calls and m_held are empty.
    void beginCaptureImpl() override
    {
        m_recording = true;
    }
    std::unique_ptr<CapturedWork> endCaptureImpl() override
    {
        m_recording = false;
        auto calls = std::exchange(m_calls, {});
        HeldStorage held = std::exchange(m_held, {});
        // A tensor made during the capture and gone by its end is one a GPU would have freed
        // before the graph ever ran.
        if (const std::string gone = held.released(*m_holds, false); !gone.empty())
            throw Unsupported("the capture uses " + gone +
                              ", made during it and gone by its end (" + name() + ")");
        return std::make_unique<RecordedWork>(std::move(calls), std::move(held), m_holds,
                                              m_refusals);
    }
    void abandonCaptureImpl() noexcept override
    {
        m_recording = false;
        m_calls.clear();
        m_held = HeldStorage();
    }

private:
    // Records a call to run `f` on `args` as call() does, with the arguments kept as a graph
    // keeps them (Held).
    template <class R, class F, class... T> R record(const char* op, F f, T&... args)
    {
        static_assert(std::is_void_v<R>, "an op that returns a value cannot be captured");
        std::tuple<Held<T>...> held{Held<T>(args, m_held)...};
        m_calls.push_back([this, op, f, held]() mutable {
            std::apply(
                [&](auto&... h) {
                    call<void>(f, h.arg()...);
                    (h.checkKept(op), ...);
                },
                held);
        });
    }
    // Records a copy: `f` takes the held tensors themselves.
    template <class F> void recordCopy(const char* op, F f, const Tensor& src, Tensor& dst)
    {
        std::tuple<Held<const Tensor>, Held<Tensor>> held{Held<const Tensor>(src, m_held),
                                                          Held<Tensor>(dst, m_held)};
        m_calls.push_back([op, f, held]() mutable {
            auto& [s, d] = held;
            f(s.arg(), d.arg());
            d.checkKept(op);
        });
    }

    template <class R, class F, class... T> R call(F&& f, T&... args)
    {
        const Stager& stager = *this;
        std::tuple<Staged<T>...> staged{Staged<T>(stager, args)...};
        auto finish = [&] { std::apply([](auto&... s) { (s.finish(), ...); }, staged); };
        if constexpr (std::is_void_v<R>) {
            std::apply([&](auto&... s) { f(s.inner()...); }, staged);
            finish();
        } else {
            R result = std::apply([&](auto&... s) { return f(s.inner()...); }, staged);
            finish();
            return result;
        }
    }

    std::unique_ptr<Ops> m_ops;
    bool m_canCapture;
    std::shared_ptr<int> m_refusals; // the launches of its captures still to refuse
    bool m_recording = false;
    std::vector<std::function<void()>> m_calls; // recorded since beginCapture
    HeldStorage m_held;
    std::shared_ptr<CaptureHolds> m_holds = std::make_shared<CaptureHolds>();
};

} // namespace

std::unique_ptr<Ops> makeStagedOps(std::unique_ptr<Ops> inner, const Device& outer, bool capture,
                                   int refusedLaunches)
{
    return std::make_unique<StagedOps>(std::move(inner), outer, capture, refusedLaunches);
}

} // namespace towers::engine
