// Fully connected layer on oneDNN. The weights stay in their plain [Out,In] layout: a blocked
// layout would cost a reorder of the whole weight (67 MB for mnist-convnet's fc1) every step.
// Measured at batch 128 on 2 threads: dnnl_sgemm computes x * w^T at only ~100 GFLOP/s, the
// matmul primitive (brgemm, reading w as [In,Out] with strides (1, In)) at ~200 with the bias and
// ReLU fused; dy * w is ~200 either way and dy^T * x ~220 with dnnl_sgemm, ~195 with matmul.
// In bfloat16 (Precision::BFloat16) all three products are matmul primitives reading bfloat16
// copies of their operands in their own plain layouts (made by reorders, rounded to nearest even;
// a transposed operand is a view of one), accumulating and writing float32; the forward's copies
// of x and w serve the fused backward; the bias gradient stays float32 sums.
#include <algorithm>

#include "engine/cpu/cpu_common.h"
#include "engine/ops/op_checks.h"

namespace towers::engine::cpu {

namespace {

void sgemm(char transa, char transb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
           std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
           const char* what)
{
    const dnnl_status_t st =
        dnnl_sgemm(transa, transb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    if (st != dnnl_success)
        throw BackendError(std::string("oneDNN failed while ") + what + ": dnnl_sgemm status " +
                           std::to_string(static_cast<int>(st)));
}

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// A bfloat16 copy of a float32 tensor in the same layout (rounded to nearest even, by a oneDNN
// reorder), and whose bytes it was made from.
struct Bf16Copy
{
    BoundPrimitive convert;
    AlignedBuffer data;
    std::int64_t count = 0;
    const void* source = nullptr;      // the bytes it was made from
    std::weak_ptr<const Buffer> owner; // and their storage, alive

    const void* of(dnnl::stream& s, const dnnl::engine& eng, const Tensor& t)
    {
        if (t.numel() != count) {
            count = t.numel();
            convert = makeReorder(dnnl::memory::desc({count}, dt::f32, tag::a),
                                  dnnl::memory::desc({count}, dt::bf16, tag::a), eng);
        }
        void* out = data.get(static_cast<std::size_t>(count) * 2);
        convert.bind(DNNL_ARG_FROM, t);
        convert.bind(DNNL_ARG_TO, out);
        convert.execute(s);
        source = t.raw();
        owner = t.storage();
        return out;
    }
    // The copy made last when it was made of t's bytes, in storage still alive, else a new one;
    // the caller knows t has not changed since (linearBackward's contract: x and w are those of
    // the forward, unchanged).
    const void* ofUnchanged(dnnl::stream& s, const dnnl::engine& eng, const Tensor& t)
    {
        const auto mine = owner.lock();
        const bool same = mine && mine == t.storage().lock() && source == t.raw();
        return same && count == t.numel() ? data.peek() : of(s, eng, t);
    }
};

// dst[M,N] = act(a[M,K] * b[K,N] + bias) on bfloat16 operands in the given plain layouts (a
// transposed operand is a view with swapped strides), accumulating and writing float32.
struct Bf16Product
{
    BoundPrimitive product;

    Bf16Product(const dnnl::engine& eng, const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                bool bias, bool relu)
    {
        const dnnl::memory::dim m = a.dims()[0], n = b.dims()[1];
        const dnnl::memory::desc biasDesc({1, n}, dt::f32, tag::ab), dst({m, n}, dt::f32, tag::ab);
        dnnl::primitive_attr attr = BoundPrimitive::scratchpadAttr();
        if (relu) {
            dnnl::post_ops po;
            po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
            attr.set_post_ops(po);
        }
        const auto desc =
            bias ? dnnl::matmul::desc(a, b, biasDesc, dst) : dnnl::matmul::desc(a, b, dst);
        const dnnl::matmul::primitive_desc pd(desc, attr, eng);
        product.prim = dnnl::matmul(pd);
        product.addArg(DNNL_ARG_SRC, a, eng);
        product.addArg(DNNL_ARG_WEIGHTS, b, eng);
        if (bias) product.addArg(DNNL_ARG_BIAS, biasDesc, eng);
        product.addArg(DNNL_ARG_DST, dst, eng);
        product.addScratchpad(pd.scratchpad_desc(), eng);
    }

    void run(dnnl::stream& s, const void* a, const void* b, const float* bias, float* dst)
    {
        product.bind(DNNL_ARG_SRC, a);
        product.bind(DNNL_ARG_WEIGHTS, b);
        if (bias) product.bind(DNNL_ARG_BIAS, bias);
        product.bind(DNNL_ARG_DST, dst);
        product.execute(s);
    }
};

// A row-major [rows, cols] bfloat16 matrix, or, transposed, the [cols, rows] view of it (swapped
// strides, no copy).
dnnl::memory::desc bf16Matrix(std::int64_t rows, std::int64_t cols, bool transposed = false)
{
    return transposed ? dnnl::memory::desc({cols, rows}, dt::bf16, tag::ba)
                      : dnnl::memory::desc({rows, cols}, dt::bf16, tag::ab);
}

std::string productKey(const char* what, std::int64_t n, std::int64_t in, std::int64_t out)
{
    return std::string("linear ") + what + " " + std::to_string(n) + "x" + std::to_string(in) +
           "x" + std::to_string(out);
}

Bf16Copy& bf16Copy(OneDnnOps& ops, const char* what, const Tensor& t)
{
    return ops.cached<Bf16Copy>(std::string("linear bf16 ") + what + " " + dimsKey(t.shape()),
                                [] { return std::make_shared<Bf16Copy>(); });
}

// dx[N,In] = dy[N,Out] * w[Out,In] on bfloat16 copies.
void bf16BackwardData(OneDnnOps& ops, const checks::LinearDims& d, const void* dy16,
                      const void* w16, Tensor& dx)
{
    guarded("running a linear backward-data in bfloat16", [&] {
        auto& p = ops.cached<Bf16Product>(productKey("bwd data bf16", d.n, d.in, d.out), [&] {
            return std::make_shared<Bf16Product>(ops.dnnlEngine(), bf16Matrix(d.n, d.out),
                                                 bf16Matrix(d.out, d.in), false, false);
        });
        p.run(ops.dnnlStream(), dy16, w16, nullptr, dx.data<float>());
    });
}

// dw[Out,In] = dy^T[Out,N] * x[N,In] on bfloat16 copies.
void bf16BackwardWeights(OneDnnOps& ops, const checks::LinearDims& d, const void* x16,
                         const void* dy16, Tensor& dw)
{
    guarded("running a linear backward-weights in bfloat16", [&] {
        auto& p = ops.cached<Bf16Product>(productKey("bwd weights bf16", d.n, d.in, d.out), [&] {
            return std::make_shared<Bf16Product>(ops.dnnlEngine(), bf16Matrix(d.n, d.out, true),
                                                 bf16Matrix(d.n, d.in), false, false);
        });
        p.run(ops.dnnlStream(), dy16, x16, nullptr, dw.data<float>());
    });
}

// db = the column sums of dy, in float32.
void columnSums(const checks::LinearDims& d, const Tensor& dy, Tensor& db)
{
    Tensor::ensure(db, {d.out}, DType::Float32);
    const float* pdy = dy.data<float>();
    float* pdb = db.data<float>();
    // A block of columns per thread so that the inner loop runs along rows of dy.
    constexpr std::int64_t block = 256;
#pragma omp parallel for schedule(static) if (d.n * d.out > kParallelGrain)
    for (std::int64_t o0 = 0; o0 < d.out; o0 += block) {
        const std::int64_t o1 = std::min(o0 + block, d.out);
        for (std::int64_t o = o0; o < o1; ++o) pdb[o] = 0;
        for (std::int64_t n = 0; n < d.n; ++n) {
            const float* row = pdy + n * d.out;
            for (std::int64_t o = o0; o < o1; ++o) pdb[o] += row[o];
        }
    }
}

} // namespace

void OneDnnOps::linearForwardImpl(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                                  Activation act)
{
    const auto d = checks::linearForward(x, w);
    Tensor::ensure(y, {d.n, d.out}, DType::Float32);
    const bool relu = act == Activation::Relu;
    const std::string key = "linear fwd " + std::to_string(d.n) + " " + std::to_string(d.in) + " " +
                            std::to_string(d.out) + (b.empty() ? "" : " bias") +
                            (relu ? " relu" : "");
    if (m_precision == Precision::BFloat16) {
        // y[N,Out] = x[N,In] * w^T[In,Out]; the copies stay for linearBackward.
        guarded("running a linear forward in bfloat16", [&] {
            // Evaluation's bfloat16 activations are read as they are.
            const void* x16 = x.dtype() == DType::BFloat16
                                  ? x.raw()
                                  : bf16Copy(*this, "x", x).of(m_stream, m_engine, x);
            const void* w16 = bf16Copy(*this, "w", w).of(m_stream, m_engine, w);
            auto& p = cached<Bf16Product>(key + " bf16", [&] {
                return std::make_shared<Bf16Product>(m_engine, bf16Matrix(d.n, d.in),
                                                     bf16Matrix(d.out, d.in, true), !b.empty(),
                                                     relu);
            });
            p.run(m_stream, x16, w16, b.empty() ? nullptr : b.data<float>(), y.data<float>());
        });
        return;
    }
    guarded("running a linear forward", [&] {
        auto& p = cached<BoundPrimitive>(key, [&] {
            const dnnl::memory::desc src({d.n, d.in}, dt::f32, tag::ab);
            const dnnl::memory::desc weights({d.in, d.out}, dt::f32, tag::ba); // w^T, no copy
            const dnnl::memory::desc bias({1, d.out}, dt::f32, tag::ab);
            const dnnl::memory::desc dst({d.n, d.out}, dt::f32, tag::ab);
            dnnl::primitive_attr attr;
            if (relu) {
                dnnl::post_ops po;
                po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
                attr.set_post_ops(po);
            }
            const auto desc = b.empty() ? dnnl::matmul::desc(src, weights, dst)
                                        : dnnl::matmul::desc(src, weights, bias, dst);
            const dnnl::matmul::primitive_desc pd(desc, attr, m_engine);
            auto bp = std::make_shared<BoundPrimitive>();
            bp->prim = dnnl::matmul(pd);
            bp->addArg(DNNL_ARG_SRC, src, m_engine);
            bp->addArg(DNNL_ARG_WEIGHTS, weights, m_engine);
            if (!b.empty()) bp->addArg(DNNL_ARG_BIAS, bias, m_engine);
            bp->addArg(DNNL_ARG_DST, dst, m_engine);
            return bp;
        });
        p.bind(DNNL_ARG_SRC, x);
        p.bind(DNNL_ARG_WEIGHTS, w);
        if (!b.empty()) p.bind(DNNL_ARG_BIAS, b);
        p.bind(DNNL_ARG_DST, y);
        p.execute(m_stream);
    });
}

void OneDnnOps::linearBackwardDataImpl(const Tensor& dy, const Tensor& w, Tensor& dx)
{
    const auto d = checks::linearBackwardData(dy, w);
    Tensor::ensure(dx, {d.n, d.in}, DType::Float32);
    if (m_precision == Precision::BFloat16) {
        bf16BackwardData(*this, d, bf16Copy(*this, "dy", dy).of(m_stream, m_engine, dy),
                         bf16Copy(*this, "w", w).of(m_stream, m_engine, w), dx);
        return;
    }
    // dx[N,In] = dy[N,Out] * w[Out,In]
    sgemm('N', 'N', d.n, d.in, d.out, dy.data<float>(), d.out, w.data<float>(), d.in,
          dx.data<float>(), d.in, "running a linear backward-data");
    noteImplementation(productKey("bwd data", d.n, d.in, d.out), "gemm NN", "dnnl_sgemm");
}

void OneDnnOps::linearBackwardWeightsImpl(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db)
{
    const auto d = checks::linearBackwardWeights(x, dy);
    Tensor::ensure(dw, {d.out, d.in}, DType::Float32);
    if (m_precision == Precision::BFloat16) {
        bf16BackwardWeights(*this, d, bf16Copy(*this, "x", x).of(m_stream, m_engine, x),
                            bf16Copy(*this, "dy", dy).of(m_stream, m_engine, dy), dw);
    } else {
        sgemm('T', 'N', d.out, d.in, d.n, dy.data<float>(), d.out, x.data<float>(), d.in,
              dw.data<float>(), d.in, "running a linear backward-weights");
        noteImplementation(productKey("bwd weights", d.n, d.in, d.out), "gemm TN", "dnnl_sgemm");
    }
    if (db) columnSums(d, dy, *db);
}

void OneDnnOps::linearBackwardImpl(const Tensor& x, const Tensor& w, const Tensor& y,
                                   const Tensor& dy, Activation act, Tensor* dx, Tensor& dw,
                                   Tensor* db)
{
    const Tensor* g = &dy;
    if (act == Activation::Relu) {
        // The masked gradient in a scratch tensor of this backend, reused every step.
        Tensor& masked = cached<Tensor>("linear masked dy " + dimsKey(dy.shape()),
                                        [] { return std::make_shared<Tensor>(); });
        reluBackward(y, dy, masked);
        g = &masked;
    }
    if (m_precision != Precision::BFloat16) {
        linearBackwardWeights(x, *g, dw, db);
        if (dx) linearBackwardData(*g, w, *dx);
        return;
    }
    // In bfloat16: g converted once for both products, x and w as the forward converted them
    // (they are the forward's, unchanged: the contract) unless another layer's forward of the
    // same shape has replaced those copies since.
    const auto d = checks::linearBackwardWeights(x, *g);
    Tensor::ensure(dw, {d.out, d.in}, DType::Float32);
    if (dx) Tensor::ensure(*dx, {d.n, d.in}, DType::Float32);
    guarded("converting a linear layer's operands to bfloat16", [&] {
        const void* g16 = bf16Copy(*this, "dy", *g).of(m_stream, m_engine, *g);
        bf16BackwardWeights(*this, d, bf16Copy(*this, "x", x).ofUnchanged(m_stream, m_engine, x),
                            g16, dw);
        if (dx)
            bf16BackwardData(*this, d, g16,
                             bf16Copy(*this, "w", w).ofUnchanged(m_stream, m_engine, w), *dx);
    });
    if (db) columnSums(d, *g, *db);
}

} // namespace towers::engine::cpu
