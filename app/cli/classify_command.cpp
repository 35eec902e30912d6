// towers-cli classify: the top classes of image files under a checkpoint.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

#include "app/cli/command.h"
#include "app/inference/classify_files.h"
#include "app/inference/image_files.h"
#include "app/inference/layer_figures.h"
#include "engine/errors.h"
#include "engine/train/classifier.h"

namespace towers::app {

namespace {

QString figure(double v)
{
    return layerFigure(v, 4).rightJustified(10);
}

void printLayers(const std::vector<engine::LayerView>& views, CommandIo& io)
{
    int width = 5;
    for (const auto& v : views) width = std::max(width, int(v.name.size()));
    io.out << "  " << QStringLiteral("layer").leftJustified(width) << "  "
           << QStringLiteral("output").leftJustified(12) << "      mean       std       min"
           << "       max   zeros\n";
    for (const auto& v : views)
        io.out << "  " << QString::fromStdString(v.name).leftJustified(width) << "  "
               << shapeText(v.shape).leftJustified(12) << figure(v.mean) << figure(v.stddev)
               << figure(v.min) << figure(v.max)
               << QString::number(100 * v.zeroFraction, 'f', 1).rightJustified(7) << "%\n";
}

QJsonArray layersJson(const std::vector<engine::LayerView>& views)
{
    QJsonArray out;
    for (const auto& v : views) {
        out.append(QJsonObject{{QStringLiteral("layer"), QString::fromStdString(v.name)},
                               {QStringLiteral("shape"), shapeJson(v.shape)},
                               {QStringLiteral("mean"), v.mean},
                               {QStringLiteral("stddev"), v.stddev},
                               {QStringLiteral("min"), v.min},
                               {QStringLiteral("max"), v.max},
                               {QStringLiteral("zero_fraction"), v.zeroFraction}});
    }
    return out;
}

} // namespace

int runClassify(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    p.setApplicationDescription(
        QStringLiteral(
            "Classifies image files (PNG, JPEG, BMP, PPM/PGM, GIF...) with a checkpoint, which\n"
            "knows its model, classes and preprocessing: each image is converted to the\n"
            "dataset's colour format and brought to its size as its images were (scaled by the\n"
            "shorter side and centre-cropped, or for a dataset imported with --fit squash or\n"
            "fill, the whole image squashed or fitted inside), preprocessed as in evaluation,\n"
            "and the most probable classes are printed with their probabilities. Only regular\n"
            "files are read, and an image of more than %1 megapixels, or whose sides are more\n"
            "than %2 times apart, is refused before it is decoded.")
            .arg(kMaxImagePixels / 1'000'000)
            .arg(kMaxImageAspect));
    p.addPositionalArgument(QStringLiteral("images"), QStringLiteral("Image files."),
                            QStringLiteral("IMAGE..."));
    p.addOptions({
        {QStringLiteral("checkpoint"),
         QStringLiteral("The checkpoint (.safetensors). A run folder, or a run's name in the runs "
                        "folder, gives its newest checkpoint (with --best, its best)."),
         QStringLiteral("file")},
        bestOption(),
        {QStringLiteral("top-k"), QStringLiteral("How many classes to show (default 5)."),
         QStringLiteral("k"), QStringLiteral("5")},
        {QStringLiteral("no-ema"),
         QStringLiteral("Use the raw weights, not their moving averages.")},
        inferencePrecisionOption(),
        ttaOption(),
        {QStringLiteral("layers"),
         QStringLiteral("Also show what each layer makes of each image: its output's shape, mean, "
                        "deviation, range and share of zeros (a ReLU's inactive units).")},
        {QStringLiteral("json"),
         QStringLiteral("Print JSON: each image's top classes and all its logits (and with "
                        "--layers, each layer's figures).")},
    });
    p.addOptions(inferenceDeviceOptions());
    int code = 0;
    if (!parseOrExplain(p, args, io, code)) return code;
    const QStringList files = p.positionalArguments();
    if (files.isEmpty()) {
        io.err << "towers-cli classify: give at least one image file\n";
        return ExitUsage;
    }
    int topK = 5;
    if (!intOption(p, QStringLiteral("top-k"), 1, 100000, topK, io)) return ExitUsage;
    std::optional<engine::Precision> arithmetic;
    if (!precisionOption(p, arithmetic, io)) return ExitUsage;
    engine::InferenceDevice device;
    if (const int c = inferenceDeviceOption(p, QStringLiteral("towers-cli classify"), io, device);
        c != ExitOk)
        return c;
    // The checkpoint last: a run given for it is resolved (and named) only with the rest usable.
    QString checkpointFile;
    std::optional<engine::VerifiedCheckpoint> verified;
    if (const int c = checkpointOption(p, QStringLiteral("towers-cli classify"), io, checkpointFile,
                                       &verified);
        c != ExitOk)
        return c;

    engine::Classifier classifier(checkpointFile.toStdString(), !p.isSet(QStringLiteral("no-ema")),
                                  0, arithmetic, device, verified ? &*verified : nullptr);
    if (!classifier.precisionNote().empty())
        io.err << io.program << ": " << QString::fromStdString(classifier.precisionNote()) << "\n";
    if (const int c = applyTtaOption(p, classifier, io); c != ExitOk) return c;
    // Each file is checked before it is decoded (a regular file, a size within the limits of
    // app/inference/image_files.h) and decoded no larger than the model needs; one that cannot be
    // read is named on standard error and the others are answered (exit 1 at the end).
    const auto answers = classifyFiles(classifier, files, topK);
    const auto& names = classifier.classNames();
    const bool json = p.isSet(QStringLiteral("json"));
    const bool layers = p.isSet(QStringLiteral("layers"));
    const engine::Shape shape = classifier.sourceShape();
    QJsonArray results;
    int failed = 0;
    for (const FileAnswer& a : answers) {
        if (!a.error.isEmpty()) {
            ++failed;
            io.err << "towers-cli classify: error: " << a.error << "\n";
            io.err.flush();
            if (json)
                results.append(QJsonObject{{QStringLiteral("image"), a.file},
                                           {QStringLiteral("error"), a.error}});
            continue;
        }
        std::vector<engine::LayerView> views;
        if (layers) { // the image the model saw, through every layer
            engine::ImageSet one;
            one.height = shape[0];
            one.width = shape[1];
            one.channels = shape[2];
            appendImage(a.input, shape, one);
            views = classifier.layerOutputs(one, 0);
        }
        if (json) {
            QJsonArray classes;
            for (const auto& s : a.top)
                classes.append(QJsonObject{
                    {QStringLiteral("label"), s.label},
                    {QStringLiteral("class"), QString::fromStdString(names[std::size_t(s.label)])},
                    {QStringLiteral("probability"), s.probability}});
            // Every class's logit, in label order (what an ONNX export's "logits" output gives).
            QJsonArray all;
            for (double v : a.logits) all.append(v);
            QJsonObject result{{QStringLiteral("image"), a.file},
                               {QStringLiteral("top"), classes},
                               {QStringLiteral("logits"), all}};
            if (layers) result.insert(QStringLiteral("layers"), layersJson(views));
            results.append(result);
            continue;
        }
        io.out << a.file << "\n";
        for (const auto& s : a.top)
            io.out << "  " << QString::number(100 * s.probability, 'f', 2).rightJustified(6)
                   << "%  " << QString::fromStdString(names[std::size_t(s.label)]) << "\n";
        if (layers) printLayers(views, io);
    }
    if (json)
        io.out << QJsonDocument(
                      QJsonObject{{QStringLiteral("checkpoint"), checkpointFile},
                                  {QStringLiteral("model"),
                                   QString::fromStdString(classifier.info().model)},
                                  {QStringLiteral("ema"), classifier.usesEma()},
                                  {QStringLiteral("device"), deviceName(classifier.device())},
                                  {QStringLiteral("precision"),
                                   QString::fromStdString(
                                       std::string(engine::precisionName(classifier.precision())))},
                                  {QStringLiteral("tta"),
                                   QString::fromLatin1(engine::testTimeAugmentationName(
                                       classifier.testTimeAugmentation()))},
                                  {QStringLiteral("results"), results}})
                      .toJson(QJsonDocument::Indented);
    if (failed) {
        io.err << "towers-cli classify: " << failed << " of " << files.size()
               << " files could not be classified\n";
        return ExitFailure;
    }
    return ExitOk;
}

} // namespace towers::app
