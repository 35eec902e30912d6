// towers-cli train's options: declared with their help (addTrainOptions), and as the processes of a
// run compare them (settingsGiven); train_options.h. The command itself is in train_command.cpp.
#include "app/cli/train_options.h"

#include <QDir>
#include <QStringList>

#include "app/cli/command.h"
#include "app/runs/run_builder.h"
#include "app/version/build_info.h"
#include "engine/data/dataset_spec.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/ops/precision.h"
#include "engine/train/recipe.h"
#include "engine/train/train_config.h"

namespace towers::app {

namespace {

QString joined(const std::vector<std::string>& names)
{
    QStringList list;
    for (const std::string& n : names) list << QString::fromStdString(n);
    return list.join(QStringLiteral(", "));
}

// The datasets some registered model trains (those with a default model), in table order.
std::vector<std::string> trainableDatasets()
{
    std::vector<std::string> names;
    for (const std::string& name : engine::knownDatasets()) {
        try {
            engine::defaultModelFor(name);
            names.push_back(name);
        } catch (const engine::UnknownName&) {
        }
    }
    return names;
}

} // namespace

void addTrainOptions(QCommandLineParser& p)
{
    p.setApplicationDescription(
        QStringLiteral(
            "Trains a model by synchronous data parallelism with replicated towers: every tower "
            "holds "
            "a\n"
            "full replica, runs forward and backward on its own slice of the global batch (towers "
            "x\n"
            "--batch-size), the gradients are averaged and every replica applies the same update.\n"
            "Defaults come from the model's recipe ('towers-cli models NAME'); with no options at "
            "all "
            "it\n"
            "trains the default model of the first dataset found (%1).\n"
            "Writes a run folder: config.json, metrics.jsonl, eval.jsonl, checkpoints/; one "
            "training at a\n"
            "time per folder (a second one is refused). Ctrl-C, SIGTERM, SIGHUP or a closed "
            "output (| head)\n"
            "stop after the current step and write a checkpoint; --resume continues from the "
            "newest one\n"
            "that loads. Towers never deletes a checkpoint it cannot read or that another run "
            "wrote:\n"
            "--overwrite and --restart move an earlier run's files to the folder's set-aside/.")
            .arg(joined(engine::autoTrainDatasets())));
    const QString n = QStringLiteral("n"), x = QStringLiteral("x"), name = QStringLiteral("name");
    p.addOptions({
        {QStringLiteral("dataset"),
         QStringLiteral("%1 (see 'towers-cli datasets').").arg(joined(trainableDatasets())), name},
        {QStringLiteral("data-dir"), QStringLiteral("Look for the dataset in this folder first."),
         QStringLiteral("dir")},
        {QStringLiteral("model"),
         QStringLiteral("Model (see 'towers-cli models'), or a model file of your own network "
                        "(.json, docs/models.md); default: the dataset's."),
         name},
    });
    p.addOptions(
        deviceOptions(QStringLiteral("cpu or cuda (default cpu; a resumed run keeps its own).")));
    p.addOptions({
        {QStringLiteral("tf32"),
         QStringLiteral("cuda: let cuDNN and cuBLAS use TF32 tensor cores for float32.")},
        {QStringLiteral("precision"),
         QStringLiteral(
             "fp32 (default) or bf16: convolutions and matrix products in bfloat16 with "
             "float32 accumulation; weights, optimizer state and loss stay float32 (CPU "
             "towers, on a CPU with AVX512_BF16 or AMX; GPU towers, on compute capability 8.0 "
             "or later). A resumed run keeps its own unless "
             "given: checkpoints are float32 and continue in either."),
         name},
        {QStringLiteral("allreduce"),
         QStringLiteral("cuda: auto (NCCL across GPUs, a kernel on a shared GPU) or host "
                        "(average through host copies, the seeds' design) (default auto)."),
         name},
        {QStringLiteral("gpu-data"),
         QStringLiteral("cuda: auto (keep the training set on the GPUs when it fits and "
                        "distort it there) or off (make the batches on the host) (default auto)."),
         name},
        {QStringLiteral("cuda-graphs"),
         QStringLiteral("cuda: on (capture the GPU towers' steps as CUDA graphs once warm and "
                        "replay them) or off (issue every op each step) (default on; a resumed "
                        "run keeps its own unless given; the results are the same)."),
         QStringLiteral("on|off")},
        {QStringLiteral("cudnn-benchmark"),
         QStringLiteral("cuda: on (each convolution's algorithm the fastest that cuDNN measures, "
                        "as torch.backends.cudnn.benchmark: timing noise may make another process "
                        "choose another, so a run may not repeat bitwise) or off (the first of "
                        "cuDNN's heuristics, the same in every process) (default off; a resumed "
                        "run keeps its own unless given)."),
         QStringLiteral("on|off")},
        {QStringLiteral("bucket-mb"),
         QStringLiteral("MiB of gradients averaged together while backward runs; 0 averages "
                        "everything after backward (default 25; the results are the same)."),
         x},
        {QStringLiteral("towers"), QStringLiteral("Number of towers (replicas) (default 1)."), n},
        {QStringLiteral("threads-per-tower"),
         QStringLiteral("CPU threads per tower; 0 shares the cores out (default 0)."), n},
        {QStringLiteral("batch-size"),
         QStringLiteral("Examples per tower and batch; the global batch is towers x this "
                        "(x --accumulate)."),
         n},
        {QStringLiteral("accumulate"),
         QStringLiteral("Batches each tower runs per step, their gradients summed before one "
                        "update: a global batch of towers x --batch-size x this, with the memory "
                        "of one batch (default 1: none)."),
         n},
        {QStringLiteral("steps"), QStringLiteral("Global steps to train (instead of --epochs)."),
         n},
        {QStringLiteral("epochs"), QStringLiteral("Epochs to train (instead of --steps)."), x},
        {QStringLiteral("optimizer"),
         QStringLiteral("sgd, momentum, nesterov, adam or adamw (Adam with decoupled weight "
                        "decay, PyTorch's AdamW)."),
         name},
        {QStringLiteral("lr"), QStringLiteral("Learning rate (the peak for one-cycle)."), x},
        {QStringLiteral("lr-schedule"),
         QStringLiteral(
             "constant, exponential (the tutorial's staircase decay), step, cosine, onecycle."),
         name},
        {QStringLiteral("momentum"), QStringLiteral("Momentum of momentum/nesterov (default 0.9)."),
         x},
        {QStringLiteral("weight-decay"),
         QStringLiteral("L2 coefficient on conv/linear weights, replacing the model's "
                        "(adamw: its decoupled decay, as AdamW's weight_decay, e.g. 0.05)."),
         x},
        {QStringLiteral("ema-decay"),
         QStringLiteral(
             "Moving average of the weights for evaluation (0 = off; the tutorial: 0.9999)."),
         x},
        {QStringLiteral("label-smoothing"),
         QStringLiteral("Train towards (1 - x) on the label and x spread over every class "
                        "(PyTorch's label_smoothing; 0 = none, the default; e.g. 0.1)."),
         x},
        {QStringLiteral("clip-grad-norm"),
         QStringLiteral("Scale the averaged gradients down to this global norm when it is larger "
                        "(PyTorch's clip_grad_norm_; 0 = no clipping, the default; e.g. 1)."),
         x},
        {QStringLiteral("augment"),
         QStringLiteral("default (the model's recipe; for cifar10-tutorial the tutorial's "
                        "distortions; 'tutorial' is another name for it) or none."),
         name},
        {QStringLiteral("sampling"),
         QStringLiteral("The order of the training images: uniform (a fresh permutation every "
                        "epoch, the default) or balanced (every class equally often, for classes "
                        "far apart in size: a small class's images repeated)."),
         name},
        {QStringLiteral("seed"),
         QStringLiteral("Seed of the weights, dropout and data order (default 1)."), n},
        {QStringLiteral("init-from"),
         QStringLiteral("Start from the weights of this checkpoint of the same model (a file, or "
                        "a run folder or name for its newest checkpoint), its moving averages "
                        "where it has them: fine-tuning. The classifier starts afresh when the "
                        "dataset's classes are not the checkpoint's; the optimizer and the step "
                        "start anew."),
         QStringLiteral("checkpoint")},
        initBestOption(),
        {QStringLiteral("like"),
         QStringLiteral("A new run like this one (a run folder, or its name as runs lists "
                        "it): its model, dataset, hyperparameters, towers and devices, with the "
                        "options given changed (another seed: --like RUN --seed 2)."),
         QStringLiteral("run")},
        {QStringLiteral("run-dir"),
         QStringLiteral("The run folder (default: a new folder under the runs folder)."),
         QStringLiteral("dir")},
        {QStringLiteral("checkpoint-every"),
         QStringLiteral("Steps between checkpoints (0 = only at the end and on stop)."), n},
        {QStringLiteral("keep-checkpoints"),
         QStringLiteral("How many checkpoints to keep (default 5), and the best evaluated "
                        "one besides."),
         n},
        {QStringLiteral("resume"),
         QStringLiteral("Continue the run in --run-dir (default: the newest run) from its newest "
                        "checkpoint that loads. Run-defining options may be repeated with the "
                        "run's own values (a requeued job script); a different value is refused.")},
        {QStringLiteral("resume-or-start"),
         QStringLiteral("Continue the run in --run-dir when it holds one, else start it there "
                        "(a job script that a cluster scheduler requeues runs unchanged).")},
        {QStringLiteral("restart"),
         QStringLiteral(
             "With --resume, when no checkpoint of the run loads: start it over from step 0, "
             "moving its files to <run>/set-aside/ (nothing is deleted).")},
        {QStringLiteral("overwrite"),
         QStringLiteral(
             "Start a new run in a --run-dir that holds one, moving the earlier run's files "
             "to <run>/set-aside/ (nothing is deleted).")},
        {QStringLiteral("eval-every"),
         QStringLiteral("Steps between evaluations on the test set, or on the validation set "
                        "with --validation (0 = only at the end)."),
         n},
        {QStringLiteral("validation"),
         QStringLiteral("Hold out this share of each class's training images (0.1 or 10%, at "
                        "most half) as a validation set: the run evaluates on it and keeps the "
                        "checkpoint best on it, and the test set stays unseen until eval measures "
                        "that checkpoint on it. The same images for every run with the "
                        "same share (default 0: evaluate on the test set)."),
         QStringLiteral("share")},
        {QStringLiteral("patience"),
         QStringLiteral("Stop early once this many evaluations in a row were no better than the "
                        "best before them (0 = never; needs --eval-every; a resumed run may "
                        "change it)."),
         n},
        {QStringLiteral("min-delta"),
         QStringLiteral("What an evaluation must gain on the best before it to count as better "
                        "for the patience: 0.2% (points of precision @ 1) or 0.002, at most 50% "
                        "(default 0; a resumed run may change it)."),
         QStringLiteral("share")},
        {QStringLiteral("log-every"), QStringLiteral("Steps between log lines."), n},
        {QStringLiteral("histogram-every"),
         QStringLiteral("Steps between TensorBoard histograms of the weights and gradients "
                        "(0 = none; default 100)."),
         n},
        {QStringLiteral("loader-workers"), QStringLiteral("Input-pipeline threads (default 1)."),
         n},
        {QStringLiteral("json"),
         QStringLiteral("Print one JSON object per event (step, eval, log, checkpoint; "
                        "at the end finished, stopped or failed).")},
    });
}

std::vector<engine::Setting> settingsGiven(const QCommandLineParser& p)
{
    static const QStringList integers{QStringLiteral("towers"),
                                      QStringLiteral("threads-per-tower"),
                                      QStringLiteral("batch-size"),
                                      QStringLiteral("accumulate"),
                                      QStringLiteral("steps"),
                                      QStringLiteral("seed"),
                                      QStringLiteral("checkpoint-every"),
                                      QStringLiteral("keep-checkpoints"),
                                      QStringLiteral("eval-every"),
                                      QStringLiteral("patience"),
                                      QStringLiteral("log-every"),
                                      QStringLiteral("histogram-every"),
                                      QStringLiteral("loader-workers")};
    static const QStringList numbers{
        QStringLiteral("epochs"),          QStringLiteral("lr"),
        QStringLiteral("momentum"),        QStringLiteral("weight-decay"),
        QStringLiteral("ema-decay"),       QStringLiteral("bucket-mb"),
        QStringLiteral("label-smoothing"), QStringLiteral("clip-grad-norm")};
    static const QStringList paths{QStringLiteral("run-dir"), QStringLiteral("init-from"),
                                   QStringLiteral("like"), QStringLiteral("model")};
    const auto number = [](double v) { return QString::number(v, 'g', 17); };
    const auto meaning = [&](const QString& name, const QString& given) -> QString {
        bool ok = false;
        const QString t = given.trimmed();
        if (integers.contains(name)) {
            const qint64 v = t.toLongLong(&ok);
            if (ok) return QString::number(v);
        } else if (numbers.contains(name)) {
            const double v = t.toDouble(&ok);
            if (ok) return number(v);
        } else if (name == QLatin1String("validation")) {
            if (const auto v = validationShare(given)) return number(*v);
        } else if (name == QLatin1String("min-delta")) {
            if (const auto v = shareOf(given, engine::kMaxMinDelta)) return number(*v);
        } else if (name == QLatin1String("lr-schedule")) {
            return scheduleName(given);
        } else if (name == QLatin1String("augment")) {
            if (!given.isEmpty()) return augmentName(given);
        } else if (name == QLatin1String("precision")) {
            try {
                return QString::fromStdString(std::string(
                    engine::precisionName(engine::parsePrecision(given.toStdString()))));
            } catch (const engine::Error&) {
            }
        } else if (name == QLatin1String("gpus")) {
            if (t == QLatin1String("all")) return t;
            QStringList gpus;
            for (const QString& item : given.split(QLatin1Char(','))) {
                const int g = item.trimmed().toInt(&ok);
                if (!ok) return given;
                gpus << QString::number(g);
            }
            return gpus.join(QLatin1Char(','));
        } else if (paths.contains(name)) {
            // Rank 0's to read or make, wherever the others started (another machine need not
            // see the file): the same path, however spelt ("runs/a/" and "runs/./a").
            if (!given.isEmpty()) return QDir::cleanPath(given);
        }
        return given;
    };
    const std::string build =
        (versionLine(QStringLiteral("towers-cli")) + QStringLiteral(", GPU backend ") +
         QString::fromLatin1(engine::gpuBackendBuildId()))
            .toStdString();
    std::vector<engine::Setting> out{{"the Towers build", build, build}};
    QStringList names = p.optionNames();
    names.removeDuplicates();
    names.sort();
    for (const QString& name : names) {
        if (name == QLatin1String("data-dir")) continue;
        const QStringList values = p.values(name);
        engine::Setting s;
        s.name = QStringLiteral("--%1").arg(name).toStdString();
        if (values.isEmpty()) { // a switch
            s.canonical = "on";
            s.given = "given";
        } else {
            const QString canonical = meaning(name, values.back());
            s.canonical = canonical.toStdString();
            s.given = shellWord(values.back()).toStdString();
        }
        out.push_back(std::move(s));
    }
    return out;
}

} // namespace towers::app
