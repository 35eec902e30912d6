// Fully connected layer on oneDNN. The weights stay in their plain [Out,In] layout: a blocked
// layout would cost a reorder of the whole weight (67 MB for mnist-convnet's fc1) every step.
// Measured at batch 128 on 2 threads: dnnl_sgemm computes x * w^T at only ~100 GFLOP/s, the
// matmul primitive (brgemm, reading w as [In,Out] with strides (1, In)) at ~200 with the bias and
// ReLU fused; dy * w is ~200 either way and dy^T * x ~220 with dnnl_sgemm, ~195 with matmul.
// In bfloat16 (Precision::BFloat16) all three products are matmul primitives reading bfloat16
// copies of their operands, made by reorders (rounded to nearest even), into the layouts the
// primitive asks for, and accumulating and writing float32; the bias gradient stays float32 sums.
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

// dst[M,N] = act(a[M,K] * b[K,N] + bias) in bfloat16 with float32 accumulation and output: a
// and b are float32 views (any strides: a transposed operand is a view with swapped strides),
// converted into the primitive's bfloat16 layouts by reorders, into buffers owned here.
struct Bf16Product
{
    BoundPrimitive toA, toB, product;
    AlignedBuffer a, b;

    Bf16Product(const dnnl::engine& eng, const dnnl::memory::desc& aView,
                const dnnl::memory::desc& bView, bool bias, bool relu)
    {
        const auto dims = [](const dnnl::memory::desc& m) { return m.dims(); };
        const dnnl::memory::dim m = dims(aView)[0], k = dims(aView)[1], n = dims(bView)[1];
        const dnnl::memory::desc a16({m, k}, dt::bf16, tag::any), b16({k, n}, dt::bf16, tag::any);
        const dnnl::memory::desc biasDesc({1, n}, dt::f32, tag::ab), dst({m, n}, dt::f32, tag::ab);
        dnnl::primitive_attr attr = BoundPrimitive::scratchpadAttr();
        if (relu) {
            dnnl::post_ops po;
            po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
            attr.set_post_ops(po);
        }
        const auto desc =
            bias ? dnnl::matmul::desc(a16, b16, biasDesc, dst) : dnnl::matmul::desc(a16, b16, dst);
        const dnnl::matmul::primitive_desc pd(desc, attr, eng);
        product.prim = dnnl::matmul(pd);
        product.addArg(DNNL_ARG_SRC, pd.src_desc(), eng);
        product.addArg(DNNL_ARG_WEIGHTS, pd.weights_desc(), eng);
        if (bias) product.addArg(DNNL_ARG_BIAS, biasDesc, eng);
        product.addArg(DNNL_ARG_DST, dst, eng);
        product.addScratchpad(pd.scratchpad_desc(), eng);
        toA = makeReorder(aView, pd.src_desc(), eng);
        toB = makeReorder(bView, pd.weights_desc(), eng);
    }

    void run(dnnl::stream& s, const float* av, const float* bv, const float* bias, float* dst)
    {
        void* a16 = a.get(product.arg(DNNL_ARG_SRC).get_desc().get_size());
        void* b16 = b.get(product.arg(DNNL_ARG_WEIGHTS).get_desc().get_size());
        toA.bind(DNNL_ARG_FROM, av);
        toA.bind(DNNL_ARG_TO, a16);
        toA.execute(s);
        toB.bind(DNNL_ARG_FROM, bv);
        toB.bind(DNNL_ARG_TO, b16);
        toB.execute(s);
        product.bind(DNNL_ARG_SRC, a16);
        product.bind(DNNL_ARG_WEIGHTS, b16);
        if (bias) product.bind(DNNL_ARG_BIAS, bias);
        product.bind(DNNL_ARG_DST, dst);
        product.execute(s);
    }
};

// A row-major [rows, cols] float32 matrix, or, transposed, the [cols, rows] view of it (swapped
// strides, no copy).
dnnl::memory::desc matrix(std::int64_t rows, std::int64_t cols, bool transposed = false)
{
    return transposed ? dnnl::memory::desc({cols, rows}, dt::f32, tag::ba)
                      : dnnl::memory::desc({rows, cols}, dt::f32, tag::ab);
}

std::string productKey(const char* what, std::int64_t n, std::int64_t in, std::int64_t out)
{
    return std::string("linear ") + what + " " + std::to_string(n) + "x" + std::to_string(in) +
           "x" + std::to_string(out);
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
        guarded("running a linear forward in bfloat16", [&] {
            // y[N,Out] = x[N,In] * w^T[In,Out]
            auto& p = cached<Bf16Product>(key + " bf16", [&] {
                return std::make_shared<Bf16Product>(m_engine, matrix(d.n, d.in),
                                                     matrix(d.out, d.in, true), !b.empty(), relu);
            });
            p.run(m_stream, x.data<float>(), w.data<float>(), b.empty() ? nullptr : b.data<float>(),
                  y.data<float>());
        });
        return;
    }
    guarded("running a linear forward", [&] {
        using dt = dnnl::memory::data_type;
        using tag = dnnl::memory::format_tag;
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
        guarded("running a linear backward-data in bfloat16", [&] {
            // dx[N,In] = dy[N,Out] * w[Out,In]
            auto& p = cached<Bf16Product>(productKey("bwd data bf16", d.n, d.in, d.out), [&] {
                return std::make_shared<Bf16Product>(m_engine, matrix(d.n, d.out),
                                                     matrix(d.out, d.in), false, false);
            });
            p.run(m_stream, dy.data<float>(), w.data<float>(), nullptr, dx.data<float>());
        });
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
        guarded("running a linear backward-weights in bfloat16", [&] {
            // dw[Out,In] = dy^T[Out,N] * x[N,In]
            auto& p = cached<Bf16Product>(productKey("bwd weights bf16", d.n, d.in, d.out), [&] {
                return std::make_shared<Bf16Product>(m_engine, matrix(d.n, d.out, true),
                                                     matrix(d.n, d.in), false, false);
            });
            p.run(m_stream, dy.data<float>(), x.data<float>(), nullptr, dw.data<float>());
        });
    } else {
        sgemm('T', 'N', d.out, d.in, d.n, dy.data<float>(), d.out, x.data<float>(), d.in,
              dw.data<float>(), d.in, "running a linear backward-weights");
        noteImplementation(productKey("bwd weights", d.n, d.in, d.out), "gemm TN", "dnnl_sgemm");
    }
    if (!db) return;
    Tensor::ensure(*db, {d.out}, DType::Float32);
    const float* pdy = dy.data<float>();
    float* pdb = db->data<float>();
    // Column sums, a block of columns per thread so that the inner loop runs along rows of dy.
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
    linearBackwardWeights(x, *g, dw, db);
    if (dx) linearBackwardData(*g, w, *dx);
}

} // namespace towers::engine::cpu
