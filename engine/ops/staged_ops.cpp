#include "engine/ops/staged_ops.h"

#include <utility>

namespace towers::engine {

namespace {

class StagedOps final : public Ops
{
public:
    StagedOps(std::unique_ptr<Ops> inner, const Device& outer)
        : m_ops(std::move(inner)), m_dev(m_ops->device()), m_outer(outer)
    {
    }

    std::string name() const override { return m_ops->name() + " (staged)"; }
    Device device() const override { return m_outer; }
    void synchronize() override { m_ops->synchronize(); }
    void upload(const Tensor& src, Tensor& dst) override { Ops::upload(src, dst); }

    void conv2dForward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b,
                       Tensor& y, Activation act) override
    {
        Tensor r;
        m_ops->conv2dForward(d, in(x), in(w), in(b), r, act);
        out(r, y);
    }
    void conv2dBackwardData(const Conv2dDesc& d, const Tensor& dy, const Tensor& w,
                            Tensor& dx) override
    {
        Tensor r;
        m_ops->conv2dBackwardData(d, in(dy), in(w), r);
        out(r, dx);
    }
    void conv2dBackwardWeights(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw,
                               Tensor* db) override
    {
        Tensor rw, rb;
        m_ops->conv2dBackwardWeights(d, in(x), in(dy), rw, db ? &rb : nullptr);
        out(rw, dw);
        if (db) out(rb, *db);
    }
    void conv2dForwardTraining(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                               const Tensor& b, Tensor& y, Activation act, Tensor& saved) override
    {
        Tensor ry, rs;
        m_ops->conv2dForwardTraining(d, in(x), in(w), in(b), ry, act, rs);
        out(ry, y);
        out(rs, saved);
    }
    void conv2dBackward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& y,
                        const Tensor& dy, Activation act, const Tensor& saved, Tensor* dx,
                        Tensor& dw, Tensor* db) override
    {
        Tensor rx, rw, rb;
        m_ops->conv2dBackward(d, in(x), in(w), in(y), in(dy), act, in(saved), dx ? &rx : nullptr,
                              rw, db ? &rb : nullptr);
        if (dx) out(rx, *dx);
        out(rw, dw);
        if (db) out(rb, *db);
    }

    void maxPoolForward(const Pool2dDesc& d, const Tensor& x, Tensor& y, Tensor& workspace) override
    {
        Tensor ry, rw;
        m_ops->maxPoolForward(d, in(x), ry, rw);
        out(ry, y);
        out(rw, workspace);
    }
    void maxPoolBackward(const Pool2dDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                         const Tensor& workspace, Tensor& dx) override
    {
        Tensor r;
        m_ops->maxPoolBackward(d, in(x), in(y), in(dy), in(workspace), r);
        out(r, dx);
    }
    void lrnForward(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace) override
    {
        Tensor ry, rw;
        m_ops->lrnForward(d, in(x), ry, rw);
        out(ry, y);
        out(rw, workspace);
    }
    void lrnBackward(const LrnDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                     const Tensor& workspace, Tensor& dx) override
    {
        Tensor r;
        m_ops->lrnBackward(d, in(x), in(y), in(dy), in(workspace), r);
        out(r, dx);
    }

    void linearForward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                       Activation act) override
    {
        Tensor r;
        m_ops->linearForward(in(x), in(w), in(b), r, act);
        out(r, y);
    }
    void linearBackwardData(const Tensor& dy, const Tensor& w, Tensor& dx) override
    {
        Tensor r;
        m_ops->linearBackwardData(in(dy), in(w), r);
        out(r, dx);
    }
    void linearBackwardWeights(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db) override
    {
        Tensor rw, rb;
        m_ops->linearBackwardWeights(in(x), in(dy), rw, db ? &rb : nullptr);
        out(rw, dw);
        if (db) out(rb, *db);
    }
    void linearBackward(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy,
                        Activation act, Tensor* dx, Tensor& dw, Tensor* db) override
    {
        Tensor rx, rw, rb;
        m_ops->linearBackward(in(x), in(w), in(y), in(dy), act, dx ? &rx : nullptr, rw,
                              db ? &rb : nullptr);
        if (dx) out(rx, *dx);
        out(rw, dw);
        if (db) out(rb, *db);
    }

    void reluForward(const Tensor& x, Tensor& y) override
    {
        Tensor r;
        m_ops->reluForward(in(x), r);
        out(r, y);
    }
    void reluBackward(const Tensor& y, const Tensor& dy, Tensor& dx) override
    {
        Tensor r;
        m_ops->reluBackward(in(y), in(dy), r);
        out(r, dx);
    }
    void add(const Tensor& a, const Tensor& b, Tensor& y) override
    {
        Tensor r;
        m_ops->add(in(a), in(b), r);
        out(r, y);
    }
    void dropoutForward(const Tensor& x, double rate, std::uint64_t seed, Tensor& y,
                        Tensor& mask) override
    {
        Tensor ry, rm;
        m_ops->dropoutForward(in(x), rate, seed, ry, rm);
        out(ry, y);
        out(rm, mask);
    }
    void dropoutBackward(const Tensor& dy, const Tensor& mask, double rate, Tensor& dx) override
    {
        Tensor r;
        m_ops->dropoutBackward(in(dy), in(mask), rate, r);
        out(r, dx);
    }

    void batchNormForwardTraining(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, Tensor& y, Tensor& runningMean,
                                  Tensor& runningVar, Tensor& saveMean, Tensor& saveVar) override
    {
        Tensor ry, rm = in(runningMean), rv = in(runningVar), sm, sv;
        m_ops->batchNormForwardTraining(d, in(x), in(gamma), in(beta), ry, rm, rv, sm, sv);
        out(ry, y);
        back(rm, runningMean);
        back(rv, runningVar);
        out(sm, saveMean);
        out(sv, saveVar);
    }
    void batchNormForwardInference(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& runningMean,
                                   const Tensor& runningVar, Tensor& y) override
    {
        Tensor r;
        m_ops->batchNormForwardInference(d, in(x), in(gamma), in(beta), in(runningMean),
                                         in(runningVar), r);
        out(r, y);
    }
    void batchNormBackward(const BatchNormDesc& d, const Tensor& x, const Tensor& dy,
                           const Tensor& gamma, const Tensor& saveMean, const Tensor& saveVar,
                           Tensor& dx, Tensor& dgamma, Tensor& dbeta) override
    {
        Tensor rx, rg, rb;
        m_ops->batchNormBackward(d, in(x), in(dy), in(gamma), in(saveMean), in(saveVar), rx, rg,
                                 rb);
        out(rx, dx);
        out(rg, dgamma);
        out(rb, dbeta);
    }

    void nhwcToNchw(const Tensor& x, Tensor& y) override
    {
        Tensor r;
        m_ops->nhwcToNchw(in(x), r);
        out(r, y);
    }
    void nchwToNhwc(const Tensor& x, Tensor& y) override
    {
        Tensor r;
        m_ops->nchwToNhwc(in(x), r);
        out(r, y);
    }

    double softmaxCrossEntropyForward(const Tensor& logits, const Tensor& labels,
                                      Tensor& probs) override
    {
        Tensor r;
        const double loss = m_ops->softmaxCrossEntropyForward(in(logits), in(labels), r);
        out(r, probs);
        return loss;
    }
    void softmaxCrossEntropyBackward(const Tensor& probs, const Tensor& labels, double scale,
                                     Tensor& dlogits) override
    {
        Tensor r;
        m_ops->softmaxCrossEntropyBackward(in(probs), in(labels), scale, r);
        out(r, dlogits);
    }

    double sumSquares(const Tensor& x) override { return m_ops->sumSquares(in(x)); }
    void axpy(double alpha, const Tensor& x, Tensor& y) override
    {
        Tensor r = in(y);
        m_ops->axpy(alpha, in(x), r);
        back(r, y);
    }
    void momentumUpdate(const MomentumStep& s, const Tensor& g, Tensor& buf, Tensor& w) override
    {
        Tensor rb = in(buf), rw = in(w);
        m_ops->momentumUpdate(s, in(g), rb, rw);
        back(rb, buf);
        back(rw, w);
    }
    void adamUpdate(const AdamStep& s, const Tensor& g, Tensor& m, Tensor& v, Tensor& w) override
    {
        Tensor rm = in(m), rv = in(v), rw = in(w);
        m_ops->adamUpdate(s, in(g), rm, rv, rw);
        back(rm, m);
        back(rv, v);
        back(rw, w);
    }

private:
    // An input on the computing device (empty stays empty: "no bias").
    Tensor in(const Tensor& t) const
    {
        if (!t.empty() && t.device() != m_outer)
            throw InvalidArgument("staged ops on " + m_outer.str() + " were given " + t.describe());
        return t.empty() ? Tensor() : t.copyTo(m_dev);
    }
    // A result back on the outer device, into `dst` as Tensor::ensure would (empty stays empty).
    void out(const Tensor& r, Tensor& dst) const
    {
        if (r.empty()) {
            dst = Tensor();
            return;
        }
        Tensor::ensure(dst, r.shape(), r.dtype(), m_outer);
        dst.copyFrom(r);
    }
    // An in-place argument back into the caller's tensor (same shape and dtype by construction).
    static void back(const Tensor& r, Tensor& dst)
    {
        if (!r.empty()) dst.copyFrom(r);
    }

    std::unique_ptr<Ops> m_ops;
    Device m_dev;
    Device m_outer;
};

} // namespace

std::unique_ptr<Ops> makeStagedOps(std::unique_ptr<Ops> inner, const Device& outer)
{
    return std::make_unique<StagedOps>(std::move(inner), outer);
}

} // namespace towers::engine
