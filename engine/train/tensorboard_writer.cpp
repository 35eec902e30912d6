#include "engine/train/tensorboard_writer.h"

#include <algorithm>
#include <cmath>

#include "engine/io/png_writer.h"

namespace towers::engine {

namespace {

Histogram histogramOf(const Tensor& t)
{
    const Tensor host = t.onHost();
    if (host.dtype() == DType::Float32) return Histogram::of(host.span<float>());
    if (host.dtype() == DType::Float64) return Histogram::of(host.span<double>());
    return {};
}

// Markdown that shows `text` as it is (an indented code block).
std::string codeBlock(const std::string& text)
{
    std::string out = "    ";
    for (char c : text) {
        out.push_back(c);
        if (c == '\n') out += "    ";
    }
    return out;
}

} // namespace

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& runFolder) : m_file(runFolder) {}

std::string TensorBoardWriter::tagOf(const std::string& parameterName)
{
    std::string tag = parameterName;
    std::replace(tag.begin(), tag.end(), '.', '/');
    return tag;
}

void TensorBoardWriter::start(std::int64_t step, const TrainConfig& config,
                              const std::filesystem::path& checkpoints)
{
    m_file.sessionStart(step);
    m_file.text(step, "config", codeBlock(config.toJson()));
    m_file.hparams(hparamsOf(config), checkpoints.string());
}

std::vector<std::pair<std::string, EventFileWriter::HParamValue>> hparamsOf(const TrainConfig& c)
{
    // Numbers as doubles, text as strings: each name keeps one type in every run, as the
    // dashboard's columns need.
    std::vector<std::pair<std::string, EventFileWriter::HParamValue>> h = {
        {"model", c.model},
        {"dataset", c.dataset},
        {"optimizer", c.optimizer.kind},
        {"lr", c.schedule.lr},
        {"lr_schedule", LrSchedule::kindName(c.schedule.kind)},
        {"batch_per_tower", double(c.batchPerTower)},
        {"towers", double(c.towers)},
        {"processes", double(c.processes)},
        {"accumulate", double(c.accumulate)},
        {"global_batch", double(c.examplesPerTowerStep()) * c.towers * c.processes},
        {"ema_decay", c.emaDecay},
        {"label_smoothing", c.labelSmoothing},
        {"clip_grad_norm", c.clipGradNorm},
        {"seed", double(c.seed)},
        {"precision", std::string(precisionName(c.precision))},
        {"augmentation", c.augmentation},
        {"sampling", c.sampling},
        {"steps", double(c.steps)},
        {"epochs", c.epochs},
        {"validation", c.validation},
        {"patience", double(c.patience)},
        {"dropout", c.dropout},
        {"device", std::string(c.backend == "cuda" ? "cuda" : "cpu")},
    };
    if (c.weightDecay >= 0) h.emplace_back("weight_decay", c.weightDecay);
    if (!c.initFrom.empty()) h.emplace_back("init_from", c.initFrom);
    return h;
}

std::vector<std::uint8_t> imageGrid(const Batch& batch, int maxImages, int& height, int& width,
                                    int& channels)
{
    const Tensor images = batch.images.onHost();
    if (images.rank() != 4 || images.dtype() != DType::Float32 || images.dim(0) < 1)
        throw InvalidArgument("imageGrid: expected Float32 images [N, H, W, C]");
    const int n = int(std::min<std::int64_t>(images.dim(0), std::max(1, maxImages)));
    const int h = int(images.dim(1)), w = int(images.dim(2)), c = int(images.dim(3));
    const int cols = int(std::ceil(std::sqrt(double(n)))), rows = (n + cols - 1) / cols;
    constexpr int kPad = 2;
    height = rows * h + (rows + 1) * kPad;
    width = cols * w + (cols + 1) * kPad;
    channels = c;
    std::vector<std::uint8_t> grid(std::size_t(height) * std::size_t(width) * std::size_t(c), 0);
    const auto values = images.span<float>();
    const std::size_t perImage = std::size_t(h) * std::size_t(w) * std::size_t(c);
    for (int i = 0; i < n; ++i) {
        const float* v = values.data() + std::size_t(i) * perImage;
        const auto [lo, hi] = std::minmax_element(v, v + perImage);
        const double scale = *hi > *lo ? 255.0 / (double(*hi) - double(*lo)) : 0.0;
        const int top = kPad + (i / cols) * (h + kPad), left = kPad + (i % cols) * (w + kPad);
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x)
                for (int k = 0; k < c; ++k) {
                    const float value =
                        v[(std::size_t(y) * std::size_t(w) + std::size_t(x)) * std::size_t(c) +
                          std::size_t(k)];
                    const long byte = scale > 0 ? std::lround((double(value) - *lo) * scale) : 128;
                    grid[(std::size_t(top + y) * std::size_t(width) + std::size_t(left + x)) *
                             std::size_t(c) +
                         std::size_t(k)] = std::uint8_t(std::clamp(byte, 0L, 255L));
                }
    }
    return grid;
}

void TensorBoardWriter::trainingImages(std::int64_t step, const Batch& batch, int maxImages)
{
    // Images the grid cannot show are left out, never an error that ends the run: TensorBoard
    // shows grayscale and RGB.
    const Tensor& images = batch.images;
    if (images.rank() != 4 || images.dtype() != DType::Float32 || images.dim(0) < 1 ||
        (images.dim(3) != 1 && images.dim(3) != 3))
        return;
    int height = 0, width = 0, channels = 0;
    const auto grid = imageGrid(batch, maxImages, height, width, channels);
    m_file.image(step, "input/training_images", encodePng(grid, height, width, channels), height,
                 width, channels);
}

void TensorBoardWriter::stepMetrics(const StepMetrics& m, std::int64_t examplesPerTower)
{
    std::vector<std::pair<std::string, double>> v{{"train/loss", m.loss},
                                                  {"train/cross_entropy", m.crossEntropy},
                                                  {"train/learning_rate", m.lr},
                                                  {"train/epoch", m.epoch},
                                                  {"throughput/examples_per_sec", m.examplesPerSec},
                                                  {"time/step_ms", m.stepMs},
                                                  {"time/data_wait_ms", m.dataWaitMs},
                                                  {"time/compute_ms", m.computeMs},
                                                  {"time/allreduce_ms", m.allReduceMs},
                                                  {"time/update_ms", m.updateMs}};
    if (std::isfinite(m.gradNorm)) v.emplace_back("train/grad_norm", m.gradNorm); // a finite step's
    for (std::size_t t = 0; t < m.towerComputeMs.size(); ++t) {
        const std::string tower = "tower_" + std::to_string(t);
        const double ms = m.towerComputeMs[t];
        v.emplace_back("throughput/" + tower + "/examples_per_sec",
                       ms > 0 ? double(examplesPerTower) * 1000.0 / ms : 0.0);
        v.emplace_back("time/" + tower + "/compute_ms", ms);
    }
    for (std::size_t t = 0; t < m.towerTimes.size(); ++t) {
        const std::string tower = "time/tower_" + std::to_string(t);
        v.emplace_back(tower + "/comm_ms", m.towerTimes[t].commMs);
        v.emplace_back(tower + "/data_ms", m.towerTimes[t].dataMs);
        v.emplace_back(tower + "/update_ms", m.towerTimes[t].updateMs);
    }
    m_file.scalars(m.step, v);
}

void TensorBoardWriter::evaluation(const EvalResult& r)
{
    const std::string suffix = r.ema ? "_ema" : "";
    // "test/..." or, for a run that holds a validation set out, "validation/...".
    std::vector<std::pair<std::string, double>> v{
        {r.set + "/precision_at_1" + suffix, r.precisionAt1},
        {r.set + "/cross_entropy" + suffix, r.meanCrossEntropy}};
    if (r.hasTop5()) v.emplace_back(r.set + "/precision_at_5" + suffix, r.precisionAt5);
    m_file.scalars(r.step, v);
}

void TensorBoardWriter::parameters(std::int64_t step, const Model& model, bool gradients)
{
    std::vector<std::pair<std::string, Histogram>> values;
    for (const Parameter* p : model.parameters()) {
        if (!p->trainable || p->value.empty()) continue;
        values.emplace_back(tagOf(p->name), histogramOf(p->value));
        if (gradients && !p->grad.empty())
            values.emplace_back(tagOf(p->name) + "/gradients", histogramOf(p->grad));
    }
    if (!values.empty()) m_file.histograms(step, values);
}

} // namespace towers::engine
