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

// One benchmark: the backend's ops, the model on them with a synthetic batch, and the result the
// timings fill in.
class StepBench
{
public:
    StepBench(const TrainStepBenchOptions& o, const std::function<void(int, int)>& progress)
        : m_o(o), m_progress(progress), m_total(o.warmup + o.steps), m_ops(makeOps(o)),
          m_onGpu(!m_ops->device().isHost()), m_reported(m_total + (m_onGpu ? o.steps : 0)),
          m_ctx(o.inference ? ExecContext::forEvaluation(*m_ops) : ExecContext{*m_ops, true, 0}),
          m_profiler(*m_ops, o.backend == "onednn")
    {
        m_r.options = o;
        m_r.backend = describeBackend(o.backend, backendOptions(o));
        m_r.threads = isHostBackend(o.backend) ? cpu::cpuThreads() : 0;
        if (o.perLayer) m_ctx.profiler = &m_profiler;
        m_model = buildModel(resolveModel(o.model, o.modelDefinition));
        m_model->initialize(o.seed);
        const Shape& in = m_model->inputShape();
        Rng rng(o.seed + 1);
        m_images = Tensor({o.batchSize, in[0], in[1], in[2]}, DType::Float32);
        for (std::int64_t i = 0; i < m_images.numel(); ++i)
            m_images.data<float>()[i] = float(rng.normal());
        m_labels = Tensor(Shape{o.batchSize}, DType::Int32);
        for (int i = 0; i < o.batchSize; ++i)
            m_labels.data<std::int32_t>()[i] =
                std::int32_t(rng.below(std::uint64_t(m_model->numClasses())));
        if (m_onGpu) { // the replica and the batch on the GPU, as a GPU tower has them
            m_model->moveTo(m_ops->device());
            m_images = m_images.copyTo(m_ops->device());
            m_labels = m_labels.copyTo(m_ops->device());
        }
    }

    // The forward pass alone, as eval and classify run it; on a GPU issued back to back too.
    TrainStepBenchResult inference()
    {
        const Sequential::Chunking chunks =
            m_model->net().chunking(m_images.shape(), m_ctx.chunkCacheBytes);
        if (chunks.layers > 0) {
            const auto& layers = m_model->net().layers();
            m_r.chunking = layers.front()->name() + " to " + layers[chunks.layers - 1]->name() +
                           ", " + std::to_string(chunks.images) + " images at a time in a " +
                           mebibytes(m_ctx.chunkCacheBytes) + " cache";
        }
        double fwd = 0;
        for (int step = 0; step < m_total; ++step) {
            m_ctx.step = std::uint64_t(step);
            m_profiler.setPhase(step == 0, step >= m_o.warmup);
            const auto t0 = Clock::now();
            m_model->forward(m_ctx, m_images);
            finish();
            if (step >= m_o.warmup) fwd += msSince(t0);
            report(step + 1);
        }
        m_r.forwardMs = m_r.phasesMs = m_r.stepMs = fwd / m_o.steps;
        if (m_onGpu) {
            const auto t0 = Clock::now();
            for (int step = 0; step < m_o.steps; ++step) {
                m_model->forward(m_ctx, m_images);
                report(m_total + step + 1);
            }
            finish();
            m_r.stepMs = msSince(t0) / m_o.steps;
            m_r.backToBack = true;
            m_r.graphsUnavailable = "inference is not captured";
        }
        m_r.lastLoss = m_model->loss(m_ctx, m_labels).total(); // of the last pass, untimed
        if (!std::isfinite(m_r.lastLoss)) diverged(m_r.lastLoss, "after the timed passes");
        return complete(m_model->inferenceFlopsPerExample());
    }

    // The training step, each phase timed up to the device's finishing it; on a GPU also issued
    // back to back and replayed from a capture.
    TrainStepBenchResult training()
    {
        timePhases();
        if (m_onGpu) {
            timeBackToBack();
            if (m_r.graphsUnavailable.empty()) timeReplayed();
        }
        return complete(m_model->trainingFlopsPerExample());
    }

private:
    static BackendOptions backendOptions(const TrainStepBenchOptions& o)
    {
        return {o.gpu, o.allowTf32, o.precision, o.cudnnBenchmark};
    }
    // The backend's ops, on the threads asked for where they run on the CPU.
    static std::unique_ptr<Ops> makeOps(const TrainStepBenchOptions& o)
    {
        if (isHostBackend(o.backend)) cpu::setCpuThreads(o.threads);
        return o.makeOps ? o.makeOps() : makeBackendOps(o.backend, backendOptions(o));
    }
    void finish() { m_ops->synchronize(); } // GPU work is asynchronous
    void report(int step)
    {
        if (m_progress) m_progress(step, m_reported);
    }
    [[noreturn]] static void diverged(double loss, const std::string& when)
    {
        throw Error("benchmark diverged: loss is " + std::to_string(loss) + " " + when);
    }
    // A step as training issues it on a GPU: the loss stays there.
    void issueStep()
    {
        m_model->forward(m_ctx, m_images);
        m_model->computeLoss(m_ctx, m_labels);
        m_model->backward(m_ctx);
        m_sgd.step(*m_ops, m_model->parameters(), m_o.learningRate);
    }

    void timePhases()
    {
        double fwd = 0, bwd = 0, upd = 0;
        for (int step = 0; step < m_total; ++step) {
            m_ctx.step = std::uint64_t(step);
            m_profiler.setPhase(step == 0, step >= m_o.warmup);
            const auto t0 = Clock::now();
            m_model->forward(m_ctx, m_images);
            m_r.lastLoss = m_model->loss(m_ctx, m_labels).total();
            const double f = msSince(t0);
            const auto t1 = Clock::now();
            m_model->backward(m_ctx);
            finish();
            const double b = msSince(t1);
            const auto t2 = Clock::now();
            m_sgd.step(*m_ops, m_model->parameters(), m_o.learningRate);
            finish();
            const double u = msSince(t2);
            if (!std::isfinite(m_r.lastLoss))
                diverged(m_r.lastLoss, "at step " + std::to_string(step));
            if (step >= m_o.warmup) {
                fwd += f;
                bwd += b;
                upd += u;
            }
            report(step + 1);
        }
        m_r.forwardMs = fwd / m_o.steps;
        m_r.backwardMs = bwd / m_o.steps;
        m_r.updateMs = upd / m_o.steps;
        m_r.phasesMs = m_r.forwardMs + m_r.backwardMs + m_r.updateMs;
        m_r.stepMs = m_r.phasesMs;
    }

    // As training issues GPU steps: back to back, the loss read once at the end.
    void timeBackToBack()
    {
        const auto t0 = Clock::now();
        for (int step = 0; step < m_o.steps; ++step) {
            m_ctx.step = std::uint64_t(m_total + step);
            issueStep();
            report(m_total + step + 1);
        }
        m_r.lastLoss = m_model->readLoss().total(); // waits for the last step
        finish();
        m_r.stepMs = msSince(t0) / m_o.steps;
        m_r.backToBack = true;
        if (!std::isfinite(m_r.lastLoss))
            diverged(m_r.lastLoss, "after the steps issued back to back");
        m_r.graphsUnavailable = m_o.graphs ? m_ops->captureUnavailable() : "graphs off";
    }

    // One step captured (everything it uses was made by the steps before), replayed `steps`
    // times back to back: the step as a GPU tower's training replays it.
    void timeReplayed()
    {
        std::unique_ptr<CapturedWork> step;
        m_ctx.profiler = nullptr; // it waits for each layer
        try {
            m_ops->beginCapture();
            try {
                issueStep();
            } catch (...) {
                m_ops->abandonCapture();
                throw;
            }
            step = m_ops->endCapture();
        } catch (const Error& e) {
            m_r.graphsUnavailable = std::string("capturing the step failed: ") + e.what();
            return;
        }
        step->replay(); // the first launch, untimed (instantiation, uploads)
        finish();
        const auto t0 = Clock::now();
        for (int i = 0; i < m_o.steps; ++i) step->replay();
        const double loss = m_model->readLoss().total(); // waits for the last step
        finish();
        m_r.graphStepMs = msSince(t0) / m_o.steps;
        m_r.graphImagesPerSec = m_o.batchSize * 1000.0 / m_r.graphStepMs;
        if (!std::isfinite(loss)) diverged(loss, "after the replayed steps");
    }

    // The rates from stepMs, the layers' rows and the instruction sets: the result.
    TrainStepBenchResult complete(double flopsPerImage)
    {
        m_r.imagesPerSec = m_o.batchSize * 1000.0 / m_r.stepMs;
        m_r.gflopsPerImage = flopsPerImage * 1e-9;
        m_r.achievedGflops = m_r.gflopsPerImage * m_r.imagesPerSec;
        if (m_o.perLayer) m_r.layers = m_profiler.rows(m_o.steps);
        if (m_o.backend == "onednn") {
            const cpu::CpuInfo info = cpu::cpuInfo();
            m_r.isa = info.isa;
            m_r.simdTarget = info.simdTarget;
        }
        return m_r;
    }

    const TrainStepBenchOptions& m_o;
    const std::function<void(int, int)>& m_progress;
    const int m_total; // warm-up and timed steps
    std::unique_ptr<Ops> m_ops;
    const bool m_onGpu;
    const int m_reported; // the steps progress counts
    ExecContext m_ctx;
    Profiler m_profiler; // goes before m_ops: it may stop a recording there
    std::unique_ptr<Model> m_model;
    Tensor m_images, m_labels;
    Sgd m_sgd;
    TrainStepBenchResult m_r;
};

} // namespace

TrainStepBenchResult benchmarkTrainStep(const TrainStepBenchOptions& o,
                                        const std::function<void(int, int)>& progress)
{
    if (o.batchSize < 1) throw InvalidArgument("batch size must be at least 1");
    if (o.steps < 1) throw InvalidArgument("steps must be at least 1");
    if (o.warmup < 0) throw InvalidArgument("warm-up steps must be >= 0");
    if (o.threads < 0) throw InvalidArgument("threads must be >= 0 (0 = every core)");
    if (!(o.learningRate > 0) || !std::isfinite(o.learningRate))
        throw InvalidArgument("learning rate must be a positive number");
    StepBench bench(o, progress);
    return o.inference ? bench.inference() : bench.training();
}

} // namespace towers::engine
