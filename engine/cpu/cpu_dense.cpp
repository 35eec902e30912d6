// Fully connected layer on oneDNN. The weights stay in their plain [Out,In] layout: a blocked
// layout would cost a reorder of the whole weight (67 MB for mnist-convnet's fc1) every step.
// Measured at batch 128 on 2 threads: dnnl_sgemm computes x * w^T at only ~100 GFLOP/s, the
// matmul primitive (brgemm, reading w as [In,Out] with strides (1, In)) at ~200 with the bias and
// ReLU fused; dy * w is ~200 either way and dy^T * x ~220 with dnnl_sgemm, ~195 with matmul.
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
    // dx[N,In] = dy[N,Out] * w[Out,In]
    sgemm('N', 'N', d.n, d.in, d.out, dy.data<float>(), d.out, w.data<float>(), d.in,
          dx.data<float>(), d.in, "running a linear backward-data");
    noteImplementation("linear bwd data " + std::to_string(d.n) + "x" + std::to_string(d.in) + "x" +
                           std::to_string(d.out),
                       "gemm NN", "dnnl_sgemm");
}

void OneDnnOps::linearBackwardWeightsImpl(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db)
{
    const auto d = checks::linearBackwardWeights(x, dy);
    Tensor::ensure(dw, {d.out, d.in}, DType::Float32);
    // dw[Out,In] = dy^T[Out,N] * x[N,In]
    sgemm('T', 'N', d.out, d.in, d.n, dy.data<float>(), d.out, x.data<float>(), d.in,
          dw.data<float>(), d.in, "running a linear backward-weights");
    noteImplementation("linear bwd weights " + std::to_string(d.n) + "x" + std::to_string(d.in) +
                           "x" + std::to_string(d.out),
                       "gemm TN", "dnnl_sgemm");
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
