#include "engine/ops/staged_ops.h"

#include <tuple>
#include <type_traits>
#include <utility>

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

class StagedOps final : public Ops, private Stager
{
public:
    StagedOps(std::unique_ptr<Ops> inner, const Device& outer)
        : Ops(allOps()), Stager(inner->device(), outer), m_ops(std::move(inner))
    {
    }

    std::string name() const override { return m_ops->name() + " (staged)"; }
    Device device() const override { return m_outer; }
    bool runsFloat(DType dtype) const override { return m_ops->runsFloat(dtype); }
    void synchronize() override { m_ops->synchronize(); }

protected:
    // Every op: its tensors to the computing device, the op there, its outputs back.
#define TOWERS_STAGED(n) TOWERS_OP_##n(TOWERS_STAGED_DEF)
#define TOWERS_STAGED_DEF(n, R, P, A)                                                              \
    R n##Impl P override                                                                           \
    {                                                                                              \
        return call<R>([this](auto&&... staged) -> R { return m_ops->n(staged...); },              \
                       TOWERS_OP_UNPAREN A);                                                       \
    }
    TOWERS_OPS(TOWERS_STAGED)
#undef TOWERS_STAGED_DEF
#undef TOWERS_STAGED

private:
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
};

} // namespace

std::unique_ptr<Ops> makeStagedOps(std::unique_ptr<Ops> inner, const Device& outer)
{
    return std::make_unique<StagedOps>(std::move(inner), outer);
}

} // namespace towers::engine
