// towers-cli eval: precision @ 1, per-class accuracy and confusion matrix of a checkpoint on its
// dataset's test set, on the validation set its run held out of the training images, on the
// training images or on both splits; or on another dataset whose classes are among its own.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <optional>

#include "app/cli/command.h"
#include "app/data/image_folder_import.h"
#include "app/inference/layer_figures.h"
#include "app/inference/test_set_predictions.h"
#include "app/runs/run_builder.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_content.h"
#include "engine/data/dataset_spec.h"
#include "engine/data/validation_split.h"
#include "engine/errors.h"
#include "engine/train/checkpoint.h"
#include "engine/train/classifier.h"
#include "engine/train/train_config.h"

namespace towers::app {

namespace {

// A class name as folders can spell it: lowercase letters and digits only ("T-shirt/top",
// "t-shirt_top" and "T shirt top" are one class; a folder's name has no '/').
QString looseClassName(const std::string& name)
{
    QString loose;
    for (const QChar c : QString::fromStdString(name).toLower())
        if (c.isLetterOrNumber()) loose += c;
    return loose;
}

// Where `name` is among `known`: the same name, else the one name that is the same loosely
// (looseClassName); -1 when none is, or several are (those go to `several`).
int classIndexOf(const std::string& name, const std::vector<std::string>& known,
                 QStringList* several = nullptr)
{
    const auto at = std::find(known.begin(), known.end(), name);
    if (at != known.end()) return int(at - known.begin());
    QStringList matches;
    int found = -1;
    for (std::size_t i = 0; i < known.size(); ++i) {
        if (looseClassName(known[i]) != looseClassName(name)) continue;
        matches << QStringLiteral("'%1'").arg(QString::fromStdString(known[i]));
        found = int(i);
    }
    if (matches.size() < 2) return found;
    if (several) *several = matches;
    return -1;
}

// The options and help of towers-cli eval.
void addEvalOptions(QCommandLineParser& p)
{
    p.setApplicationDescription(QStringLiteral(
        "Evaluates a checkpoint on the whole test set of the dataset it was trained on (found "
        "along\n"
        "the search path, see 'towers-cli datasets'): precision @ 1 with every example counted\n"
        "once, per class its accuracy (recall), precision and F1, and the confusion matrix. Uses\n"
        "the moving averages of the weights when the checkpoint has them (as the tutorial's\n"
        "evaluator does) unless --no-ema.\n"
        "With --set validation, on the validation set its run held out of the training images\n"
        "instead: the same images the run evaluated on, so that the test set stays unseen while "
        "you\n"
        "choose. With --set train, on the training images (as the network saw them, without\n"
        "distortions): far above the test set's, the network learnt its training images by "
        "heart.\n"
        "With --dataset, on another dataset of the same image size whose classes are among the\n"
        "checkpoint's, matched by name: your own images, imported with 'towers-cli import'."));
    p.addOptions({
        {QStringLiteral("checkpoint"),
         QStringLiteral(
             "The checkpoint (.safetensors) to evaluate. A run folder, or a run's name in the runs "
             "folder, gives its newest checkpoint (with --best, its best)."),
         QStringLiteral("file")},
        bestOption(),
        {QStringLiteral("data-dir"), QStringLiteral("Look for the dataset in this folder first."),
         QStringLiteral("dir")},
        {QStringLiteral("set"),
         QStringLiteral("test (default); validation: the share of the training images the "
                        "checkpoint's run held out for validation; train: the training images; "
                        "all: the training and the test images."),
         QStringLiteral("name")},
        {QStringLiteral("dataset"),
         QStringLiteral("Evaluate on this dataset instead of the checkpoint's own: one of the "
                        "same image size whose classes are among the checkpoint's, by name (case, "
                        "spaces and punctuation aside: a folder 'T-shirt_top' is 'T-shirt/top')."),
         QStringLiteral("name")},
        {QStringLiteral("no-ema"),
         QStringLiteral("Use the raw weights, not their moving averages.")},
        {QStringLiteral("layers"),
         QStringLiteral("Also count, per layer, the channels that are zero on every test image "
                        "(dead: a ReLU that passes nothing on, whatever the input).")},
        {QStringLiteral("mistakes"),
         QStringLiteral("Also list the n wrong answers the network was surest of (test image, "
                        "true and predicted class, probability; for a dataset imported from "
                        "image files, the image's file): mislabelled images and look-alike "
                        "classes show first."),
         QStringLiteral("n")},
        {QStringLiteral("batch-size"), QStringLiteral("Examples per forward pass (default 250)."),
         QStringLiteral("n"), QStringLiteral("250")},
        inferencePrecisionOption(),
        ttaOption(),
        {QStringLiteral("json"), QStringLiteral("Print JSON.")},
    });
    p.addOptions(inferenceDeviceOptions());
}

// The run's configuration as the checkpoint records it (`runConfig`, empty where it records none
// or it does not read) and, for --set validation, the share of the training images it held out
// (`share`). ExitOk, or the exit code after the message.
int runConfigOf(const QString& checkpointFile, const engine::CheckpointInfo& info, bool validation,
                CommandIo& io, std::optional<engine::TrainConfig>& runConfig, double& share)
{
    if (!info.config.empty()) {
        try {
            runConfig = engine::TrainConfig::fromJson(info.config);
        } catch (const engine::InvalidArgument& e) {
            if (validation) {
                io.err << "towers-cli eval: --set validation: the run's configuration in "
                       << checkpointFile << " does not read (" << QString::fromUtf8(e.what())
                       << "), so its validation share is unknown\n";
                return ExitFailure;
            }
            io.err << "towers-cli eval: note: the run's configuration in " << checkpointFile
                   << " does not read (" << QString::fromUtf8(e.what())
                   << "): the dataset is not compared with the one it trained on\n";
        }
    }
    // The run's validation set: its share of the training images, drawn as the run drew it.
    share = 0;
    if (validation) {
        if (runConfig) share = runConfig->validation;
        if (share <= 0) {
            io.err << "towers-cli eval: --set validation: the run of " << checkpointFile
                   << " held out no validation set (train with --validation to hold one out); "
                      "without --set, eval measures the test set\n";
            return ExitFailure;
        }
    }
    return ExitOk;
}

// Another dataset's classes, as the checkpoint's: each of its names must be one of them
// (`asCheckpointClass`, by index). ExitOk, or ExitFailure after naming those that are not.
int classesByName(const engine::Classifier& classifier, const engine::Dataset& data,
                  const std::string& datasetName, const QString& checkpointFile, CommandIo& io,
                  std::vector<int>& asCheckpointClass)
{
    const auto& known = classifier.classNames();
    QStringList missing;
    for (const std::string& name : data.classNames) {
        QStringList several;
        asCheckpointClass.push_back(classIndexOf(name, known, &several));
        if (asCheckpointClass.back() >= 0) continue;
        missing << (several.isEmpty()
                        ? QString::fromStdString(name)
                        : QStringLiteral("%1 (case, spaces and punctuation aside, it is each "
                                         "of %2: which one is ambiguous)")
                              .arg(QString::fromStdString(name),
                                   several.join(QStringLiteral(" and "))));
    }
    if (!missing.isEmpty()) {
        QStringList names;
        for (const std::string& n : known) names << QString::fromStdString(n);
        io.err << "towers-cli eval: " << QString::fromStdString(datasetName) << " has "
               << (missing.size() == 1 ? "a class" : "classes") << " that " << checkpointFile
               << " does not know: " << missing.join(QStringLiteral(", "))
               << " (its classes: " << names.join(QStringLiteral(", ")) << ")\n";
        return ExitFailure;
    }
    return ExitOk;
}

// The images measured: the test set, the run's validation share (`split`), the training set or
// both (in `owned`), their labels the checkpoint's classes where matched by name.
const engine::ImageSet& measuredImages(const engine::Dataset& data, const QString& setName,
                                       double share, bool byName,
                                       const std::vector<int>& asCheckpointClass,
                                       std::optional<engine::ValidationSplit>& split,
                                       engine::ImageSet& owned)
{
    const bool validation = setName == QLatin1String("validation");
    const engine::ImageSet* chosen = &data.test;
    if (validation) {
        split = engine::splitValidation(data.train, int(data.classNames.size()), share);
        chosen = &split->validation;
    } else if (setName == QLatin1String("train")) {
        chosen = &data.train;
    } else if (setName == QLatin1String("all")) {
        owned = data.train;
        owned.count += data.test.count;
        owned.pixels.insert(owned.pixels.end(), data.test.pixels.begin(), data.test.pixels.end());
        owned.labels.insert(owned.labels.end(), data.test.labels.begin(), data.test.labels.end());
        chosen = &owned;
    }
    if (byName) {
        if (chosen != &owned) owned = *chosen;
        for (auto& label : owned.labels) label = asCheckpointClass[std::size_t(label)];
        chosen = &owned;
    }
    return *chosen;
}

// The checkpoint's own dataset, changed since its run trained on it (imported again under its
// name, replaced on disk): said, naming what changed (from the run's record of it); its classes
// are then matched to the checkpoint's by name where they differ (`byName`), as another
// dataset's are. ExitOk, or ExitFailure for --set validation, whose share is not the run's then.
int checkOwnDataset(const engine::Dataset& data, const std::string& datasetName,
                    const QString& checkpointFile,
                    const std::optional<engine::TrainConfig>& runConfig, bool validation,
                    bool byName, CommandIo& io)
{
    std::string change;
    try {
        if (runConfig && !runConfig->datasetContent.empty())
            change = engine::datasetContentChange(runConfig->datasetContent,
                                                  engine::datasetContent(data));
    } catch (const engine::InvalidArgument&) { // a record this version cannot read: none
    }
    if (change.empty() && byName) change = "its classes are not the checkpoint's";
    if (!change.empty()) {
        if (validation) {
            io.err << "towers-cli eval: --set validation: " << QString::fromStdString(datasetName)
                   << " is not the dataset the run of " << checkpointFile << " trained on ("
                   << QString::fromStdString(change)
                   << "), so its validation share is not the run's\n";
            return ExitFailure;
        }
        io.err << "towers-cli eval: note: " << QString::fromStdString(datasetName)
               << " is not the dataset the run of " << checkpointFile
               << " trained on: " << QString::fromStdString(change)
               << (byName ? "; its classes are matched to the checkpoint's by name" : "") << "\n";
    }
    return ExitOk;
}

// What eval measured, for its report: the checkpoint and its classifier, the dataset and the set,
// the results and what was asked besides (the layers, the surest mistakes).
struct EvalReport
{
    const QString& checkpointFile;
    const engine::Classifier& classifier;
    const std::string& datasetName;
    const engine::Dataset& data;
    bool otherDataset = false;
    const QString& setName;
    const QString& setWord; // in sentences: "test examples", "training images"
    engine::EvalResult r;
    std::vector<engine::ClassScores> scores{};
    std::vector<engine::LayerActivity> activity{};
    std::optional<TestSetPredictions> predictions{};
    std::vector<std::int64_t> mistakes{};
    QStringList exampleFiles{}; // each example's image file, for a dataset imported from files

    QString className(int c) const
    {
        return QString::fromStdString(classifier.classNames()[std::size_t(c)]);
    }
    QString fileOf(std::int64_t i) const
    {
        return i < exampleFiles.size() ? exampleFiles[qsizetype(i)] : QString();
    }
};

// The report as --json prints it.
QJsonObject reportJson(const EvalReport& e)
{
    const engine::EvalResult& r = e.r;
    const int k = r.numClasses;
    const auto& scores = e.scores;
    const engine::Classifier& classifier = e.classifier;
    const auto& info = classifier.info();
    const auto& activity = e.activity;
    const auto& predictions = e.predictions;
    const QString& checkpointFile = e.checkpointFile;
    const QString& setName = e.setName;
    const std::string& datasetName = e.datasetName;
    const engine::Dataset& data = e.data;
    const auto className = [&](int c) { return e.className(c); };
    const auto fileOf = [&](std::int64_t i) { return e.fileOf(i); };
    // The precision the checkpoint's run trained (and evaluated) in.
    const QString trained = QString::fromStdString(engine::trainedPrecision(info));
    QJsonArray perClass, perClassTop5, precision, f1, confusion, names, counts;
    for (int i = 0; i < k; ++i) {
        perClass.append(r.perClassAccuracy[std::size_t(i)]);
        perClassTop5.append(r.perClassTop5[std::size_t(i)]);
        counts.append(qint64(r.classCounts[std::size_t(i)]));
        precision.append(scores[std::size_t(i)].precision);
        f1.append(scores[std::size_t(i)].f1);
        names.append(className(i));
        QJsonArray row;
        for (int j = 0; j < k; ++j) row.append(qint64(r.confusionAt(i, j)));
        confusion.append(row);
    }
    QJsonObject o{
        {QStringLiteral("checkpoint"), checkpointFile},
        {QStringLiteral("model"), QString::fromStdString(info.model)},
        {QStringLiteral("dataset"), QString::fromStdString(datasetName)},
        {QStringLiteral("checkpoint_dataset"), QString::fromStdString(info.dataset)},
        {QStringLiteral("data_folder"), QString::fromStdString(data.location.string())},
        {QStringLiteral("set"), setName},
        {QStringLiteral("step"), qint64(info.step)},
        {QStringLiteral("ema"), r.ema},
        {QStringLiteral("precision"),
         QString::fromStdString(std::string(engine::precisionName(classifier.precision())))},
        {QStringLiteral("trained_precision"), trained},
        {QStringLiteral("device"), deviceName(classifier.device())},
        {QStringLiteral("tta"),
         QString::fromLatin1(engine::testTimeAugmentationName(classifier.testTimeAugmentation()))},
        {QStringLiteral("examples"), qint64(r.examples)},
        {QStringLiteral("correct"), qint64(r.correct)},
        {QStringLiteral("precision_at_1"), r.precisionAt1},
        {QStringLiteral("correct_top5"), qint64(r.correctTop5)},
        {QStringLiteral("precision_at_5"), r.precisionAt5},
        {QStringLiteral("mean_cross_entropy"), r.meanCrossEntropy},
        {QStringLiteral("classes"), names},
        {QStringLiteral("per_class_accuracy"), perClass},
        {QStringLiteral("per_class_top5"), perClassTop5},
        {QStringLiteral("per_class_examples"), counts},
        {QStringLiteral("per_class_precision"), precision},
        {QStringLiteral("per_class_f1"), f1},
        {QStringLiteral("macro_f1"), engine::macroF1(scores)},
        {QStringLiteral("confusion"), confusion},
    };
    if (!activity.empty()) {
        QJsonArray layers;
        for (const auto& a : activity) {
            QJsonArray dead;
            for (const std::int64_t c : a.deadChannels()) dead.append(qint64(c));
            layers.append(QJsonObject{{QStringLiteral("name"), QString::fromStdString(a.name)},
                                      {QStringLiteral("channels"), qint64(a.channels())},
                                      {QStringLiteral("images"), qint64(a.images)},
                                      {QStringLiteral("dead_channels"), dead}});
        }
        o.insert(QStringLiteral("layers"), layers);
    }
    if (predictions) {
        QJsonArray list;
        for (const std::int64_t i : e.mistakes) {
            QJsonObject m{
                {QStringLiteral("index"), qint64(i)},
                {QStringLiteral("truth"), className(predictions->truth[std::size_t(i)])},
                {QStringLiteral("predicted"), className(predictions->predicted[std::size_t(i)])},
                {QStringLiteral("probability"), double(predictions->confidence[std::size_t(i)])}};
            if (const QString file = fileOf(i); !file.isEmpty())
                m.insert(QStringLiteral("file"), file);
            list.append(m);
        }
        o.insert(QStringLiteral("mistakes"), list);
    }
    return o;
}

// The report as text: the precision @ 1, each class's scores and the confusion matrix.
void printScores(const EvalReport& e, QTextStream& out)
{
    const engine::EvalResult& r = e.r;
    const int k = r.numClasses;
    const auto& scores = e.scores;
    const engine::Classifier& classifier = e.classifier;
    const auto& info = classifier.info();
    const auto className = [&](int c) { return e.className(c); };
    out << QString::fromStdString(info.model) << " at step " << info.step << " on "
        << QString::fromStdString(e.datasetName) << " ("
        << QString::fromStdString(e.data.location.string()) << ")"
        << (e.otherDataset ? QStringLiteral(", trained on ") + QString::fromStdString(info.dataset)
                           : QString())
        << ", " << (r.ema ? "moving averages of the weights" : "raw weights")
        << (classifier.precision() == engine::Precision::BFloat16
                ? QStringLiteral(", bf16 convolutions and matrix products")
                : QString())
        << (classifier.device().isHost()
                ? QString()
                : QStringLiteral(", on ") + deviceName(classifier.device()))
        << (classifier.testTimeAugmentation() == engine::TestTimeAugmentation::Mirror
                ? QStringLiteral(", each image averaged with its mirror image")
                : QString())
        << "\n"
        << "precision @ 1 = " << QString::number(r.precisionAt1, 'f', 4) << " (" << r.correct
        << " of " << r.examples << " " << e.setWord << " examples), ";
    if (r.hasTop5())
        out << "precision @ 5 = " << QString::number(r.precisionAt5, 'f', 4) << " ("
            << r.correctTop5 << "), ";
    out << "mean cross-entropy " << QString::number(r.meanCrossEntropy, 'f', 4) << "\n\n";
    int width = 5;
    for (const auto& n : classifier.classNames())
        width = std::max(width, textColumns(QString::fromStdString(n)));
    // Accuracy is the class's recall: its images found; top 5, its images with their class among
    // the five highest (precision @ 5's share of the class, shown where precision @ 5 is);
    // precision, its answers right.
    const bool top5 = r.hasTop5();
    out << QStringLiteral("class").leftJustified(width) << "  accuracy"
        << (top5 ? "     top 5" : "") << "  precision      F1  examples\n";
    const auto percent = [](double v, int w) {
        return QString::number(100 * v, 'f', 2).rightJustified(w) + QLatin1Char('%');
    };
    // A class without examples (another dataset's classes may be fewer) has no accuracy.
    for (int i = 0; i < k; ++i) {
        const std::int64_t images = r.classCounts[std::size_t(i)];
        const QString none = QStringLiteral("-").rightJustified(8);
        out << padColumns(className(i), width) << "  "
            << (images > 0 ? percent(r.perClassAccuracy[std::size_t(i)], 7) : none);
        if (top5) out << "  " << (images > 0 ? percent(r.perClassTop5[std::size_t(i)], 7) : none);
        out << "  " << percent(scores[std::size_t(i)].precision, 8) << "  "
            << QString::number(scores[std::size_t(i)].f1, 'f', 3).rightJustified(6) << "  "
            << QString::number(images).rightJustified(8) << "\n";
    }
    out << "macro F1 = " << QString::number(engine::macroF1(scores), 'f', 4)
        << " (the mean of the classes' F1)\n";
    if (k <= 20) {
        // Each row named by its number and whole name ("9 Ankle boot").
        const auto rowName = [&](int i) {
            return QString::number(i) + QLatin1Char(' ') + className(i);
        };
        int rowWidth = width;
        for (int i = 0; i < k; ++i) rowWidth = std::max(rowWidth, textColumns(rowName(i)));
        out << "\nconfusion matrix (rows: true class, columns: predicted)\n"
            << QString(rowWidth, QLatin1Char(' '));
        for (int j = 0; j < k; ++j) out << QString::number(j).rightJustified(6);
        out << "\n";
        for (int i = 0; i < k; ++i) {
            out << padColumns(rowName(i), rowWidth);
            for (int j = 0; j < k; ++j)
                out << QString::number(r.confusionAt(i, j)).rightJustified(6);
            out << "\n";
        }
    }
}

// The surest mistakes, as text.
void printMistakes(const EvalReport& e, QTextStream& out)
{
    const auto& predictions = e.predictions;
    const auto& mistakes = e.mistakes;
    const QString& setWord = e.setWord;
    const auto className = [&](int c) { return e.className(c); };
    const auto fileOf = [&](std::int64_t i) { return e.fileOf(i); };
    out << "\n";
    if (mistakes.empty())
        out << "no " << setWord << " image is classified wrongly\n";
    else
        out << "the "
            << QString::fromStdString(
                   engine::counted(qint64(mistakes.size()), "wrong answer", "wrong answers"))
            << " the network was surest of (" << setWord
            << " image: true class -> predicted, probability"
            << (e.exampleFiles.isEmpty() ? "" : ", file") << ")\n";
    for (const std::int64_t i : mistakes) {
        out << QString::number(i).rightJustified(8) << "  "
            << className(predictions->truth[std::size_t(i)]) << " -> "
            << className(predictions->predicted[std::size_t(i)]) << "  "
            << QString::number(100.0 * predictions->confidence[std::size_t(i)], 'f', 1) << " %";
        if (const QString file = fileOf(i); !file.isEmpty()) out << "  " << quotedPath(file);
        out << "\n";
    }
}

// The dead channels of each layer, as text.
void printLayers(const EvalReport& e, QTextStream& out)
{
    const auto& activity = e.activity;
    const QString& setWord = e.setWord;
    out << "\nlayers over the " << activity.front().images << " " << setWord
        << " images (a dead channel is zero on every one: it passes nothing on)\n";
    int nameWidth = 5;
    for (const auto& a : activity) nameWidth = std::max(nameWidth, int(a.name.size()));
    out << QStringLiteral("layer").leftJustified(nameWidth) << "  channels   dead\n";
    for (const auto& a : activity) {
        const auto dead = a.deadChannels();
        out << QString::fromStdString(a.name).leftJustified(nameWidth) << "  "
            << QString::number(a.channels()).rightJustified(8) << "  "
            << QString::number(dead.size()).rightJustified(5)
            << (dead.empty() ? QString() : QStringLiteral("  (") + channelList(dead, 8) + ')')
            << "\n";
    }
}

} // namespace

int runEval(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    addEvalOptions(p);
    int code = 0;
    if (!parseOrExplain(p, args, io, code, Arguments::None)) return code;
    QString setName;
    if (!choiceOption(p, QStringLiteral("set"), {"test", "validation", "train", "all"}, setName,
                      io))
        return ExitUsage;
    if (setName.isEmpty()) setName = QStringLiteral("test");
    const bool validation = setName == QLatin1String("validation");
    // The images' word in sentences: "test examples", "training images".
    const QString setWord = setName == QLatin1String("train") ? QStringLiteral("training")
                            : setName == QLatin1String("all") ? QStringLiteral("training and test")
                                                              : setName;
    int batch = 250, mistakeCount = 0;
    if (!intOption(p, QStringLiteral("batch-size"), 1, 65536, batch, io) ||
        !intOption(p, QStringLiteral("mistakes"), 1, 1000000, mistakeCount, io))
        return ExitUsage;
    std::optional<engine::Precision> arithmetic;
    if (!precisionOption(p, arithmetic, io)) return ExitUsage;
    engine::InferenceDevice device;
    if (const int c = inferenceDeviceOption(p, QStringLiteral("towers-cli eval"), io, device);
        c != ExitOk)
        return c;
    std::vector<std::filesystem::path> path;
    if (!searchPathOption(p, io, path)) return ExitUsage;
    // The checkpoint last: a run given for it is resolved (and named) only with the rest usable.
    QString checkpointFile;
    std::optional<engine::VerifiedCheckpoint> verified;
    if (const int c =
            checkpointOption(p, QStringLiteral("towers-cli eval"), io, checkpointFile, &verified);
        c != ExitOk)
        return c;
    // Where the checkpoint's run found its dataset comes after --data-dir (which
    // loadDatasetPreferring tries first), before the default folders.
    if (const QString runData = runDataDirOf(checkpointFile); !runData.isEmpty())
        path.insert(path.begin(), runData.toStdString());

    engine::Classifier classifier(checkpointFile.toStdString(), !p.isSet(QStringLiteral("no-ema")),
                                  0, arithmetic, device, verified ? &*verified : nullptr);
    if (!classifier.precisionNote().empty())
        io.err << io.program << ": " << QString::fromStdString(classifier.precisionNote()) << "\n";
    if (const int c = applyTtaOption(p, classifier, io); c != ExitOk) return c;
    const auto& info = classifier.info();
    if (info.dataset.empty() && !p.isSet(QStringLiteral("dataset")))
        throw engine::IoError(checkpointFile.toStdString() +
                              ": the checkpoint does not say which dataset it was trained on "
                              "(name one with --dataset)");
    const std::string datasetName = p.isSet(QStringLiteral("dataset"))
                                        ? p.value(QStringLiteral("dataset")).toStdString()
                                        : info.dataset;
    const bool otherDataset = datasetName != info.dataset;
    if (otherDataset && validation) {
        io.err << "towers-cli eval: --set validation is the share of " << checkpointFile
               << "'s own dataset that its run held out; on --dataset "
               << QString::fromStdString(datasetName) << " use test, train or all\n";
        return ExitUsage;
    }
    std::optional<engine::TrainConfig> runConfig;
    double share = 0;
    if (const int c = runConfigOf(checkpointFile, info, validation, io, runConfig, share);
        c != ExitOk)
        return c;
    // The checkpoint's own dataset name, when it is no name of a dataset (a damaged or forged
    // file's), is the file's fault, not the command line's: exit 1 naming the file.
    if (!p.isSet(QStringLiteral("dataset"))) {
        try {
            (void)engine::datasetFolderNames(datasetName);
        } catch (const engine::InvalidArgument& e) {
            throw engine::IoError(checkpointFile.toStdString() +
                                  ": the checkpoint says it was "
                                  "trained on dataset '" +
                                  datasetName + "', which is no dataset's name (" + e.what() +
                                  "); name the dataset with --dataset");
        }
    }
    const engine::Dataset data = engine::loadDatasetPreferring(
        datasetName, p.value(QStringLiteral("data-dir")).toStdString(), path);
    if (data.test.imageShape() != classifier.sourceShape()) {
        const engine::Shape want = classifier.sourceShape();
        io.err << "towers-cli eval: " << QString::fromStdString(datasetName) << "'s images are "
               << shapeText(data.test.imageShape()) << ", " << checkpointFile << " takes "
               << shapeText(want) << " (import your images with --size " << want[0]
               << " --channels " << want[2] << ")\n";
        return ExitFailure;
    }
    // Its own dataset's classes are matched by name too where they differ from the checkpoint's.
    const bool byName = otherDataset || data.classNames != classifier.classNames();
    if (!otherDataset) {
        if (const int c = checkOwnDataset(data, datasetName, checkpointFile, runConfig, validation,
                                          byName, io);
            c != ExitOk)
            return c;
    }
    std::vector<int> asCheckpointClass;
    if (byName) {
        if (const int c =
                classesByName(classifier, data, datasetName, checkpointFile, io, asCheckpointClass);
            c != ExitOk)
            return c;
    }
    std::optional<engine::ValidationSplit> split;
    engine::ImageSet owned;
    const engine::ImageSet& set =
        measuredImages(data, setName, share, byName, asCheckpointClass, split, owned);
    EvalReport e{checkpointFile, classifier, datasetName, data,
                 otherDataset,   setName,    setWord,     classifier.evaluate(set, batch)};
    const engine::EvalResult& r = e.r;
    e.scores = engine::classScores(r.confusion, r.numClasses);
    if (p.isSet(QStringLiteral("layers"))) e.activity = classifier.layerActivity(set, 0, batch);
    if (p.isSet(QStringLiteral("mistakes"))) {
        e.predictions = classifyTestSet(classifier, set, nullptr, nullptr, batch);
        e.mistakes = e.predictions->confidentMistakes(std::size_t(mistakeCount));
    }
    // Each example's image file, for a dataset imported from one (its record of them, when it is
    // the dataset that record was written with): a mistake names its file, not just its index.
    if (e.predictions) {
        const bool all = setName == QLatin1String("all");
        e.exampleFiles = importedImageFiles(data, all || setName == QLatin1String("train"),
                                            all || setName == QLatin1String("test"),
                                            validation ? &split->validationIndex : nullptr);
    }
    if (p.isSet(QStringLiteral("json"))) {
        io.out << QJsonDocument(reportJson(e)).toJson(QJsonDocument::Indented);
        return ExitOk;
    }
    printScores(e, io.out);
    if (e.predictions) printMistakes(e, io.out);
    if (!e.activity.empty()) printLayers(e, io.out);
    return ExitOk;
}

} // namespace towers::app
