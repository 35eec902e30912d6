#include "engine/bench/train_step_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/backends.h"
#include "engine/cpu/cpu_info.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/primitive_implementations.h"
#include "engine/models/registry.h"
#include "engine/nn/layer.h"
#include "engine/nn/sequential.h"
#include "engine/optim/sgd.h"

namespace towers::engine {

namespace {
using Clock = std::chrono::steady_clock;
std::string mebibytes(std::int64_t bytes)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(1 << 20));
    return text;
}
double msSince(Clock::time_point t)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
// Times the model's top-level layers (nested containers count as their parent), synchronising the
// device around each, and notes which implementations each one's primitives ran on.
class Profiler final : public LayerProfiler
{
public:
    Profiler(Ops& ops, bool onednn) : m_ops(ops), m_onednn(onednn) {}
    ~Profiler() override
    {
        if (!m_recording) return;
        try { // a layer's pass threw while recording
            cpu::recordImplementations(m_ops, nullptr);
        } catch (...) {
        }
    }
    Profiler(const Profiler&) = delete;
    Profiler& operator=(const Profiler&) = delete;

    void begin(ExecContext&, const Layer& layer, bool) override
    {
        if (m_depth++ > 0) return;
        m_ops.synchronize();
        if (m_noting) {
            m_ran.clear();
            cpu::recordImplementations(m_ops, &m_ran);
            m_recording = true;
        }
        m_t0 = Clock::now();
        (void)layer;
    }
    void end(ExecContext&, const Layer& layer, bool backward) override
    {
        if (--m_depth > 0) return;
        m_ops.synchronize();
        const double ms = msSince(m_t0);
        LayerTiming& row = rowOf(layer);
        if (m_timing) (backward ? row.backwardMs : row.forwardMs) += ms;
        if (m_noting) {
            cpu::recordImplementations(m_ops, nullptr);
            m_recording = false;
            auto& impls = backward ? row.backwardImpl : row.forwardImpl;
            for (const std::string& impl : m_ran)
                if (std::find(impls.begin(), impls.end(), impl) == impls.end())
                    impls.push_back(impl);
        }
    }

    void folded(ExecContext&, const Layer& layer, const Layer& into) override
    {
        if (m_depth > 0) return; // inside a block: the block's row has the time
        LayerTiming& row = rowOf(layer);
        const std::string note = "folded into " + into.name();
        if (row.forwardImpl.empty()) row.forwardImpl.push_back(note);
    }

    // Implementations are noted in the first step; time is summed in the timed ones.
    void setPhase(bool noting, bool timing)
    {
        m_noting = noting && m_onednn;
        m_timing = timing;
    }
    std::vector<LayerTiming> rows(int steps) const
    {
        std::vector<LayerTiming> out = m_rows;
        for (auto& r : out) {
            r.forwardMs /= steps;
            r.backwardMs /= steps;
        }
        return out;
    }

private:
    LayerTiming& rowOf(const Layer& layer)
    {
        const auto it = m_index.find(&layer);
        if (it != m_index.end()) return m_rows[it->second];
        m_index.emplace(&layer, m_rows.size());
        m_rows.push_back({layer.name(), layer.kind(), layer.describe(), 0, 0, {}, {}});
        return m_rows.back();
    }

    Ops& m_ops;
    bool m_onednn;
    int m_depth = 0;
    bool m_noting = false, m_timing = false;
    std::vector<std::string> m_ran; // what the layer being noted ran (cpu::recordImplementations)
    bool m_recording = false;
    Clock::time_point m_t0{};
    std::map<const Layer*, std::size_t> m_index;
    std::vector<LayerTiming> m_rows;
};

} // namespace

TrainStepBenchResult benchmarkTrainStep(const TrainStepBenchOptions& o,
                                        const std::function<void(int, int)>& progress)
{
    if (o.batchSize < 1) throw InvalidArgument("batch size must be at least 1");
    if (o.steps < 1) throw InvalidArgument("steps must be at least 1");
    if (o.warmup < 0) throw InvalidArgument("warm-up steps must be >= 0");
    if (o.threads < 0) throw InvalidArgument("threads must be >= 0 (0 = every core)");

    const BackendOptions backend{o.gpu, o.allowTf32, o.precision, o.cudnnBenchmark};
    const bool host = isHostBackend(o.backend);
    if (host) cpu::setCpuThreads(o.threads);
    std::unique_ptr<Ops> ops = o.makeOps ? o.makeOps() : makeBackendOps(o.backend, backend);
    const std::string backendName = describeBackend(o.backend, backend);
    // GPU work is asynchronous: each phase is timed up to the GPU's finishing it.
    auto finish = [&] { ops->synchronize(); };
    const bool onGpu = !ops->device().isHost();

    auto model = buildModel(resolveModel(o.model, o.modelDefinition));
    model->initialize(o.seed);
    const Shape& in = model->inputShape();
    Rng rng(o.seed + 1);
    Tensor images({o.batchSize, in[0], in[1], in[2]}, DType::Float32);
    for (std::int64_t i = 0; i < images.numel(); ++i) images.data<float>()[i] = float(rng.normal());
    Tensor labels(Shape{o.batchSize}, DType::Int32);
    for (int i = 0; i < o.batchSize; ++i)
        labels.data<std::int32_t>()[i] =
            std::int32_t(rng.below(std::uint64_t(model->numClasses())));
    if (onGpu) { // the replica and the batch on the GPU, as a GPU tower has them
        model->moveTo(ops->device());
        images = images.copyTo(ops->device());
        labels = labels.copyTo(ops->device());
    }

    if (!(o.learningRate > 0) || !std::isfinite(o.learningRate))
        throw InvalidArgument("learning rate must be a positive number");
    Sgd sgd;
    ExecContext ctx = o.inference ? ExecContext::forEvaluation(*ops) : ExecContext{*ops, true, 0};
    Profiler profiler(*ops, o.backend == "onednn");
    if (o.perLayer) ctx.profiler = &profiler;
    TrainStepBenchResult r;
    r.options = o;
    r.backend = backendName;
    r.threads = host ? cpu::cpuThreads() : 0;
    double fwd = 0, bwd = 0, upd = 0;
    const int total = o.warmup + o.steps;
    const auto diverged = [](double loss, const std::string& when) {
        throw Error("benchmark diverged: loss is " + std::to_string(loss) + " " + when);
    };
    // A step as training issues it on a GPU: the loss stays there.
    const auto issueStep = [&] {
        model->forward(ctx, images);
        model->computeLoss(ctx, labels);
        model->backward(ctx);
        sgd.step(*ops, model->parameters(), o.learningRate);
    };
    const int reported = total + (onGpu ? o.steps : 0); // the steps progress counts
    // The rates from stepMs, the layers' rows and the instruction sets: the result.
    const auto complete = [&](double flopsPerImage) {
        r.imagesPerSec = o.batchSize * 1000.0 / r.stepMs;
        r.gflopsPerImage = flopsPerImage * 1e-9;
        r.achievedGflops = r.gflopsPerImage * r.imagesPerSec;
        if (o.perLayer) r.layers = profiler.rows(o.steps);
        if (o.backend == "onednn") {
            const cpu::CpuInfo info = cpu::cpuInfo();
            r.isa = info.isa;
            r.simdTarget = info.simdTarget;
        }
        return r;
    };
    if (o.inference) {
        const Sequential::Chunking chunks =
            model->net().chunking(images.shape(), ctx.chunkCacheBytes);
        if (chunks.layers > 0) {
            const auto& layers = model->net().layers();
            r.chunking = layers.front()->name() + " to " + layers[chunks.layers - 1]->name() +
                         ", " + std::to_string(chunks.images) + " images at a time in a " +
                         mebibytes(ctx.chunkCacheBytes) + " cache";
        }
        // The forward pass alone, as eval and classify run it; on a GPU issued back to back.
        for (int step = 0; step < total; ++step) {
            ctx.step = std::uint64_t(step);
            profiler.setPhase(step == 0, step >= o.warmup);
            const auto t0 = Clock::now();
            model->forward(ctx, images);
            finish();
            if (step >= o.warmup) fwd += msSince(t0);
            if (progress) progress(step + 1, reported);
        }
        r.forwardMs = r.phasesMs = r.stepMs = fwd / o.steps;
        if (onGpu) {
            const auto t0 = Clock::now();
            for (int step = 0; step < o.steps; ++step) {
                model->forward(ctx, images);
                if (progress) progress(total + step + 1, reported);
            }
            finish();
            r.stepMs = msSince(t0) / o.steps;
            r.backToBack = true;
            r.graphsUnavailable = "inference is not captured";
        }
        r.lastLoss = model->loss(ctx, labels).total(); // of the last pass, untimed
        if (!std::isfinite(r.lastLoss)) diverged(r.lastLoss, "after the timed passes");
        return complete(model->inferenceFlopsPerExample());
    }
    for (int step = 0; step < total; ++step) {
        ctx.step = std::uint64_t(step);
        profiler.setPhase(step == 0, step >= o.warmup);
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
        if (!std::isfinite(r.lastLoss)) diverged(r.lastLoss, "at step " + std::to_string(step));
        if (step >= o.warmup) {
            fwd += f;
            bwd += b;
            upd += u;
        }
        if (progress) progress(step + 1, reported);
    }
    r.forwardMs = fwd / o.steps;
    r.backwardMs = bwd / o.steps;
    r.updateMs = upd / o.steps;
    r.phasesMs = r.forwardMs + r.backwardMs + r.updateMs;
    r.stepMs = r.phasesMs;
    if (onGpu) {
        // As training issues GPU steps: back to back, the loss read once at the end.
        const auto t0 = Clock::now();
        for (int step = 0; step < o.steps; ++step) {
            ctx.step = std::uint64_t(total + step);
            issueStep();
            if (progress) progress(total + step + 1, reported);
        }
        r.lastLoss = model->readLoss().total(); // waits for the last step
        finish();
        r.stepMs = msSince(t0) / o.steps;
        r.backToBack = true;
        if (!std::isfinite(r.lastLoss)) diverged(r.lastLoss, "after the steps issued back to back");
        r.graphsUnavailable = o.graphs ? ops->captureUnavailable() : "graphs off";
    }
    if (onGpu && r.graphsUnavailable.empty()) {
        // One step captured (everything it uses was made by the steps before), replayed `steps`
        // times back to back: the step as a GPU tower's training replays it.
        std::unique_ptr<CapturedWork> step;
        ctx.profiler = nullptr; // it waits for each layer
        try {
            ops->beginCapture();
            try {
                issueStep();
            } catch (...) {
                ops->abandonCapture();
                throw;
            }
            step = ops->endCapture();
        } catch (const Error& e) {
            r.graphsUnavailable = std::string("capturing the step failed: ") + e.what();
        }
        if (step) {
            step->replay(); // the first launch, untimed (instantiation, uploads)
            finish();
            const auto t0 = Clock::now();
            for (int i = 0; i < o.steps; ++i) step->replay();
            const double loss = model->readLoss().total(); // waits for the last step
            finish();
            r.graphStepMs = msSince(t0) / o.steps;
            r.graphImagesPerSec = o.batchSize * 1000.0 / r.graphStepMs;
            if (!std::isfinite(loss)) diverged(loss, "after the replayed steps");
        }
    }
    return complete(model->trainingFlopsPerExample());
}

} // namespace towers::engine
