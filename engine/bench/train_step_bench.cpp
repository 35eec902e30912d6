#include "engine/bench/train_step_bench.h"

#include <chrono>
#include <cmath>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/cpu/onednn_ops.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/models/registry.h"
#include "engine/optim/sgd.h"

namespace towers::engine {

namespace {
using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
} // namespace

TrainStepBenchResult benchmarkTrainStep(const TrainStepBenchOptions& o,
                                        const std::function<void(int, int)>& progress)
{
    if (o.batchSize < 1) throw InvalidArgument("batch size must be at least 1");
    if (o.steps < 1) throw InvalidArgument("steps must be at least 1");
    if (o.warmup < 0) throw InvalidArgument("warm-up steps must be >= 0");
    if (o.threads < 0) throw InvalidArgument("threads must be >= 0 (0 = every core)");

    std::unique_ptr<Ops> ops;
    GpuBackend* gpu = nullptr;
    std::string backendName;
    if (o.backend == "onednn") {
        cpu::setCpuThreads(o.threads);
        ops = cpu::makeOneDnnOps();
        const auto* v = dnnl::version();
        backendName = "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                      std::to_string(v->patch);
    } else if (o.backend == "reference") {
        ops = makeReferenceOps();
        backendName = "reference";
    } else if (o.backend == "cuda") {
        std::string why;
        gpu = cudaBackend(&why);
        if (!gpu) throw Unsupported("bench on cuda: " + why);
        if (gpu->deviceCount() == 0) throw Unsupported("bench on cuda: " + gpu->unavailableReason());
        ops = gpu->makeOps(0, GpuOpsOptions{o.allowTf32});
        backendName = "cuda (" + gpu->deviceInfo(0).name + "; " + gpu->versions() + (o.allowTf32 ? "; TF32" : "") + ")";
    } else {
        throw UnknownName("unknown backend '" + o.backend + "' (known: onednn, reference, cuda)");
    }
    // GPU work is asynchronous: each phase is timed up to the GPU's finishing it.
    auto finish = [&] { ops->synchronize(); };

    auto model = createModel(o.model, o.seed);
    const Shape& in = model->inputShape();
    Rng rng(o.seed + 1);
    Tensor images({o.batchSize, in[0], in[1], in[2]}, DType::Float32);
    for (std::int64_t i = 0; i < images.numel(); ++i) images.data<float>()[i] = float(rng.normal());
    Tensor labels(Shape{o.batchSize}, DType::Int32);
    for (int i = 0; i < o.batchSize; ++i)
        labels.data<std::int32_t>()[i] = std::int32_t(rng.below(std::uint64_t(model->numClasses())));
    if (!ops->device().isHost()) { // the replica and the batch on the GPU, as a GPU tower has them
        model->moveTo(ops->device());
        images = images.copyTo(ops->device());
        labels = labels.copyTo(ops->device());
    }

    if (!(o.learningRate > 0) || !std::isfinite(o.learningRate))
        throw InvalidArgument("learning rate must be a positive number");
    Sgd sgd;
    ExecContext ctx{*ops, true, 0};
    TrainStepBenchResult r;
    r.options = o;
    r.backend = backendName;
    r.threads = gpu ? 0 : cpu::cpuThreads();
    double fwd = 0, bwd = 0, upd = 0;
    const int total = o.warmup + o.steps;
    for (int step = 0; step < total; ++step) {
        ctx.step = std::uint64_t(step);
        auto t0 = Clock::now();
        model->forward(ctx, images);
        r.lastLoss = model->loss(ctx, labels).total();
        const double f = msSince(t0);
        auto t1 = Clock::now();
        model->backward(ctx);
        finish();
        const double b = msSince(t1);
        auto t2 = Clock::now();
        sgd.step(*ops, model->parameters(), o.learningRate);
        finish();
        const double u = msSince(t2);
        if (!std::isfinite(r.lastLoss))
            throw Error("benchmark diverged: loss is " + std::to_string(r.lastLoss) + " at step " +
                        std::to_string(step));
        if (step >= o.warmup) {
            fwd += f;
            bwd += b;
            upd += u;
        }
        if (progress) progress(step + 1, total);
    }
    r.forwardMs = fwd / o.steps;
    r.backwardMs = bwd / o.steps;
    r.updateMs = upd / o.steps;
    r.stepMs = r.forwardMs + r.backwardMs + r.updateMs;
    r.imagesPerSec = o.batchSize * 1000.0 / r.stepMs;
    r.gflopsPerImage = model->trainingFlopsPerExample() * 1e-9;
    r.achievedGflops = r.gflopsPerImage * r.imagesPerSec;
    return r;
}

} // namespace towers::engine
