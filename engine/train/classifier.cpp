#include "engine/train/classifier.h"

#include <algorithm>
#include <cmath>

#include "engine/backends.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/data/batch_loader.h"
#include "engine/models/registry.h"
#include "engine/train/train_config.h"

namespace towers::engine {

Classifier::Classifier(const std::filesystem::path& checkpoint, bool useEma, int threads,
                       std::optional<Precision> precision, const InferenceDevice& device,
                       const VerifiedCheckpoint* checked)
{
    requireBackendName(device.backend);
    // Checked (here, or by the caller), then its weights read into the model: a tensor at a
    // time both times.
    VerifiedCheckpoint verified;
    if (checked)
        verified = *checked;
    else
        (void)verifyCheckpoint(checkpoint, nullptr, &verified);
    m_info = verified.info;
    try {
        m_model = buildModel(resolveModel(m_info.model, m_info.modelDefinition),
                             checkpointClasses(m_info));
    } catch (const std::exception& e) {
        throw IoError(checkpoint.string() + ": " + e.what());
    }
    // What the checkpoint holds not fitting its own model is the file's fault, not the caller's:
    // IoError, as for a file that does not read (towers-cli's exit code 1, not 2).
    try {
        m_usesEma = loadCheckpointWeights(checkpoint, verified, *m_model, useEma);
    } catch (const InvalidArgument& e) {
        throw IoError(e.what());
    }
    if (m_info.preprocessing.empty())
        throw IoError(checkpoint.string() +
                      ": the checkpoint has no preprocessing recipe, so its inputs are unknown");
    m_source = sourceImageShape(m_info);
    try {
        m_recipe = Preprocessing::fromJson(m_info.preprocessing);
        m_recipe.validateFor(m_source);
    } catch (const InvalidArgument& e) {
        throw IoError(checkpoint.string() + ": its preprocessing recipe is invalid: " + e.what());
    }
    if (!m_info.classNames.empty() &&
        static_cast<int>(m_info.classNames.size()) != m_model->numClasses())
        throw IoError(checkpoint.string() + ": it names " +
                      std::to_string(m_info.classNames.size()) + " classes, its model has " +
                      std::to_string(m_model->numClasses()));
    if (m_info.classNames.empty())
        for (int i = 0; i < m_model->numClasses(); ++i)
            m_info.classNames.push_back("class " + std::to_string(i));
    cpu::setCpuThreads(threads);
    const auto makeOps = [&](Precision p) {
        if (device.makeOps) return device.makeOps(p, device.gpu);
        if (device.backend == "onednn") return cpu::makeOneDnnOps(p);
        return makeBackendOps(device.backend, BackendOptions{device.gpu, false, p});
    };
    if (precision) {
        m_precision = *precision;
    } else if (trainedPrecision(m_info) == precisionName(Precision::BFloat16)) {
        // The checkpoint's own precision where the device runs it, else float32, saying why.
        std::string why;
        if (device.backend == "onednn" && !device.makeOps) {
            if (const std::string needs = cpu::bf16Needs(); !needs.empty())
                why = "bf16 needs " + needs;
        } else { // the device's ops refuse a precision they cannot run, saying why
            try {
                m_ops = makeOps(Precision::BFloat16);
            } catch (const Unsupported& e) {
                why = e.what();
            }
        }
        m_precision = why.empty() ? Precision::BFloat16 : Precision::Float32;
        if (!why.empty()) m_precisionNote = "trained in bf16, evaluated in float32 here: " + why;
    }
    if (!m_ops) m_ops = makeOps(m_precision);
    if (!m_ops->device().isHost()) m_model->moveTo(m_ops->device());
}

Device Classifier::device() const
{
    return m_ops->device();
}

const Tensor& Classifier::forward(ExecContext& ctx, const Tensor& x)
{
    if (m_ops->device().isHost()) return m_model->forward(ctx, x);
    m_ops->upload(x, m_deviceInput);
    return m_model->forward(ctx, m_deviceInput);
}

Classifier::~Classifier() = default;

void Classifier::requireSourceShape(const ImageSet& images) const
{
    if (images.count > 0 && images.imageShape() != m_source)
        throw ShapeError("classifier: images must be " + m_source.str() + ", got " +
                         images.imageShape().str());
}

int Classifier::numClasses() const
{
    return m_model->numClasses();
}

std::string Classifier::mirrorUnseen() const
{
    if (!m_recipe.flip)
        return "its recipe does not mirror its training images (" +
               (m_info.dataset.empty() ? std::string("its classes")
                                       : "the classes of " + m_info.dataset) +
               " may not survive a mirror, as digits do not)";
    if (!m_info.config.empty()) {
        try {
            if (TrainConfig::fromJson(m_info.config).augmentation == "none")
                return "its run trained without distortions (--augment none), so never on a "
                       "mirror image";
        } catch (const InvalidArgument&) { // a configuration that does not read: the recipe's word
        }
    }
    return "";
}

void Classifier::setTestTimeAugmentation(TestTimeAugmentation tta)
{
    if (tta == TestTimeAugmentation::Mirror)
        if (const std::string why = mirrorUnseen(); !why.empty())
            throw InvalidArgument("mirror test-time augmentation: " + m_info.model + " of " +
                                  (m_info.dataset.empty() ? "this checkpoint" : m_info.dataset) +
                                  " never learnt from mirror images: " + why);
    m_tta = tta;
}

std::vector<std::vector<double>> Classifier::logits(const ImageSet& images)
{
    requireSourceShape(images);
    std::vector<std::vector<double>> out;
    ExecContext ctx = ExecContext::forEvaluation(*m_ops);
    Tensor x, labels;
    constexpr std::int64_t batch = 256;
    for (std::int64_t begin = 0; begin < images.count; begin += batch) {
        const std::int64_t end = std::min(images.count, begin + batch);
        evaluationBatch(images, m_recipe, begin, end, x, labels);
        Tensor logits = forward(ctx, x).onHost();
        if (m_tta == TestTimeAugmentation::Mirror) {
            const Tensor first = logits.clone(); // its own bytes: forward overwrites the model's
            mirrorImages(x, m_mirrored);
            Tensor mean;
            meanOfLogits(first, forward(ctx, m_mirrored).onHost(), mean);
            logits = mean;
        }
        const std::int64_t k = logits.dim(1);
        for (std::int64_t i = 0; i < end - begin; ++i) {
            std::vector<double> row(static_cast<std::size_t>(k));
            for (std::int64_t j = 0; j < k; ++j) row[std::size_t(j)] = logits.at(i * k + j);
            out.push_back(std::move(row));
        }
    }
    return out;
}

std::vector<double> Classifier::softmax(const std::vector<double>& logits)
{
    std::vector<double> p(logits.size());
    double top = -INFINITY, sum = 0;
    for (double v : logits) top = std::max(top, v);
    for (std::size_t j = 0; j < logits.size(); ++j) sum += p[j] = std::exp(logits[j] - top);
    for (auto& v : p) v /= sum;
    return p;
}

std::vector<std::vector<double>> Classifier::probabilities(const ImageSet& images)
{
    std::vector<std::vector<double>> out = logits(images);
    for (auto& row : out) row = softmax(row);
    return out;
}

std::vector<ClassScore> Classifier::topK(const std::vector<double>& probabilities, int k)
{
    std::vector<ClassScore> s;
    for (std::size_t i = 0; i < probabilities.size(); ++i)
        s.push_back({static_cast<int>(i), probabilities[i]});
    std::stable_sort(s.begin(), s.end(), [](const ClassScore& a, const ClassScore& b) {
        return a.probability > b.probability;
    });
    s.resize(std::min<std::size_t>(s.size(), static_cast<std::size_t>(std::max(k, 0))));
    return s;
}

void computeStatistics(LayerView& view)
{
    const auto n = static_cast<double>(view.values.size());
    if (view.values.empty()) return;
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    std::size_t zeros = 0;
    for (float v : view.values) {
        sum += v;
        lo = std::min(lo, double(v));
        hi = std::max(hi, double(v));
        zeros += v == 0.0f;
    }
    view.mean = sum / n;
    double squares = 0;
    for (float v : view.values) squares += (v - view.mean) * (v - view.mean);
    view.stddev = std::sqrt(squares / n);
    view.min = lo;
    view.max = hi;
    view.zeroFraction = double(zeros) / n;
}

namespace {

// The first example of `t` (a batch of one).
LayerView viewOf(std::string name, std::string description, const Tensor& t)
{
    LayerView v;
    v.name = std::move(name);
    v.description = std::move(description);
    const Tensor host = t.onHost();
    std::vector<std::int64_t> dims;
    for (int d = 1; d < host.rank(); ++d) dims.push_back(host.dim(d));
    v.shape = Shape(dims);
    const std::int64_t per = v.shape.numel();
    const Tensor one = host.slice(0, 1).to(DType::Float32);
    const float* p = one.data<float>();
    v.values.assign(p, p + per);
    computeStatistics(v);
    return v;
}

} // namespace

std::vector<LayerView> Classifier::layerOutputs(const ImageSet& images, std::int64_t index)
{
    requireSourceShape(images);
    if (index < 0 || index >= images.count)
        throw InvalidArgument("classifier: no image " + std::to_string(index) + " among " +
                              std::to_string(images.count));
    ExecContext ctx{*m_ops, false, 0};
    Tensor x, labels;
    evaluationBatch(images, m_recipe, index, index + 1, x, labels);
    forward(ctx, x);
    std::vector<LayerView> views;
    const char* normalization = m_recipe.normalization == Preprocessing::Normalization::PerImage
                                    ? "standardised per image"
                                : m_recipe.normalization == Preprocessing::Normalization::MeanStd
                                    ? "normalised by the training set's mean and deviation"
                                    : "scaled to 0..1";
    views.push_back(viewOf("input",
                           "the image as the model gets it: its central " +
                               std::to_string(m_recipe.height) + "x" +
                               std::to_string(m_recipe.width) + ", " + normalization,
                           x));
    const auto rows = m_model->layerTable();
    for (std::size_t i = 0; i < rows.size(); ++i)
        views.push_back(viewOf(rows[i].name, rows[i].description, m_model->layerOutput(i)));
    return views;
}

std::vector<std::int64_t> LayerActivity::deadChannels() const
{
    std::vector<std::int64_t> dead;
    for (std::size_t c = 0; c < activeIn.size(); ++c)
        if (activeIn[c] == 0) dead.push_back(std::int64_t(c));
    return dead;
}

std::vector<LayerActivity> Classifier::layerActivity(const ImageSet& images, std::int64_t count,
                                                     int batchSize,
                                                     const std::function<bool()>& stop)
{
    requireSourceShape(images);
    if (batchSize < 1) throw InvalidArgument("classifier: the batch size must be at least 1");
    const std::int64_t n = count <= 0 ? images.count : std::min(count, images.count);
    const auto rows = m_model->layerTable();
    std::vector<LayerActivity> out(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) out[i].name = rows[i].name;
    ExecContext ctx{*m_ops, false, 0};
    Tensor x, labels;
    for (std::int64_t b = 0; b < n; b += batchSize) {
        if (stop && stop()) break;
        const std::int64_t e = std::min(n, b + batchSize);
        evaluationBatch(images, m_recipe, b, e, x, labels);
        forward(ctx, x);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            Tensor host = m_model->layerOutput(i).onHost();
            if (host.dtype() != DType::Float32) host = host.to(DType::Float32);
            const std::int64_t channels = host.dim(host.rank() - 1);
            const std::int64_t per = host.numel() / host.dim(0); // one image's values
            LayerActivity& a = out[i];
            if (a.activeIn.empty()) a.activeIn.assign(std::size_t(channels), 0);
            std::vector<char> active(static_cast<std::size_t>(channels));
            for (std::int64_t k = 0; k < e - b; ++k) {
                std::fill(active.begin(), active.end(), 0);
                const float* v = host.data<float>() + k * per;
                // Each position's channels, until every channel is seen active on this image.
                std::int64_t left = channels;
                for (std::int64_t at = 0; at < per && left > 0; at += channels)
                    for (std::int64_t c = 0; c < channels; ++c)
                        if (!active[std::size_t(c)] && v[at + c] != 0.0f) {
                            active[std::size_t(c)] = 1;
                            --left;
                        }
                for (std::int64_t c = 0; c < channels; ++c)
                    a.activeIn[std::size_t(c)] += active[std::size_t(c)];
            }
            a.images = e;
        }
    }
    return out;
}

std::vector<LayerView> Classifier::convolutionFilters() const
{
    std::vector<LayerView> views;
    for (const Parameter* p : m_model->parameters()) {
        if (p->value.rank() != 4) continue;
        LayerView v;
        v.name = p->name;
        const Shape& s = p->value.shape();
        v.description = std::to_string(s[0]) + " filters of " + std::to_string(s[2]) + "x" +
                        std::to_string(s[3]) + " over " + std::to_string(s[1]) +
                        (s[1] == 1 ? " channel" : " channels");
        v.shape = s;
        const Tensor host = p->value.onHost().to(DType::Float32);
        v.values.assign(host.data<float>(), host.data<float>() + host.numel());
        computeStatistics(v);
        views.push_back(std::move(v));
    }
    return views;
}

EvalResult Classifier::evaluate(const ImageSet& set, int batchSize)
{
    if (set.imageShape() != m_source)
        throw ShapeError("classifier: the set's images are " + set.imageShape().str() +
                         ", the checkpoint expects " + m_source.str());
    EvalResult r = engine::evaluate(
        *m_model, *m_ops, set.count, batchSize,
        [&](std::int64_t b, std::int64_t e, Tensor& images, Tensor& labels) {
            evaluationBatch(set, m_recipe, b, e, images, labels);
        },
        0, 1, {}, m_tta);
    r.step = m_info.step;
    r.ema = m_usesEma;
    return r;
}

} // namespace towers::engine
