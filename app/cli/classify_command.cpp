// towers-cli classify: the top classes of image files under a checkpoint.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "app/cli/command.h"
#include "app/inference/image_files.h"
#include "engine/errors.h"
#include "engine/train/classifier.h"

namespace towers::app {

int runClassify(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    p.setApplicationDescription(
        QStringLiteral(
            "Classifies image files (PNG, JPEG, BMP, PPM/PGM, GIF...) with a checkpoint, which\n"
            "knows its model, classes and preprocessing: each image is converted to the\n"
            "dataset's colour format, scaled (shorter side) and centre-cropped to its size,\n"
            "preprocessed as in evaluation, and the most probable classes are printed with their\n"
            "probabilities. Only regular files are read, and an image of more than %1 megapixels,\n"
            "or whose sides are more than %2 times apart, is refused before it is decoded.")
            .arg(kMaxImagePixels / 1'000'000)
            .arg(kMaxImageAspect));
    p.addPositionalArgument(QStringLiteral("images"), QStringLiteral("Image files."),
                            QStringLiteral("IMAGE..."));
    p.addOptions({
        {QStringLiteral("checkpoint"),
         QStringLiteral("The checkpoint (.safetensors). A run folder, or a run's name in the runs "
                        "folder, gives its newest checkpoint."),
         QStringLiteral("file")},
        {QStringLiteral("top-k"), QStringLiteral("How many classes to show (default 5)."),
         QStringLiteral("k"), QStringLiteral("5")},
        {QStringLiteral("no-ema"),
         QStringLiteral("Use the raw weights, not their moving averages.")},
        {QStringLiteral("json"),
         QStringLiteral("Print JSON: each image's top classes and all its logits.")},
    });
    int code = 0;
    if (!parseOrExplain(p, args, io, code)) return code;
    QString checkpointFile;
    if (const int c =
            checkpointOption(p, QStringLiteral("towers-cli classify"), io, checkpointFile);
        c != ExitOk)
        return c;
    const QStringList files = p.positionalArguments();
    if (files.isEmpty()) {
        io.err << "towers-cli classify: give at least one image file\n";
        return ExitUsage;
    }
    int topK = 5;
    if (!intOption(p, QStringLiteral("top-k"), 1, 100000, topK, io)) return ExitUsage;

    engine::Classifier classifier(checkpointFile.toStdString(), !p.isSet(QStringLiteral("no-ema")));
    // Each file is checked before it is decoded (a regular file, a size within the limits of
    // app/inference/image_files.h) and decoded no larger than the model needs.
    const engine::Shape shape = classifier.sourceShape();
    engine::ImageSet images;
    for (const QString& f : files) {
        const QImage image = readImageFile(f, shape);
        try {
            appendImage(image, shape, images);
        } catch (const engine::IoError& e) {
            throw engine::IoError(f.toStdString() + ": " + e.what());
        }
    }
    const auto logits = classifier.logits(images);
    std::vector<std::vector<double>> probs;
    for (const auto& l : logits) probs.push_back(engine::Classifier::softmax(l));
    const auto& names = classifier.classNames();
    const bool json = p.isSet(QStringLiteral("json"));
    QJsonArray results;
    for (int i = 0; i < files.size(); ++i) {
        const auto top = engine::Classifier::topK(probs[std::size_t(i)], topK);
        if (json) {
            QJsonArray classes;
            for (const auto& s : top)
                classes.append(QJsonObject{
                    {QStringLiteral("label"), s.label},
                    {QStringLiteral("class"), QString::fromStdString(names[std::size_t(s.label)])},
                    {QStringLiteral("probability"), s.probability}});
            // Every class's logit, in label order (what an ONNX export's "logits" output gives).
            QJsonArray all;
            for (double v : logits[std::size_t(i)]) all.append(v);
            results.append(QJsonObject{{QStringLiteral("image"), files[i]},
                                       {QStringLiteral("top"), classes},
                                       {QStringLiteral("logits"), all}});
            continue;
        }
        io.out << files[i] << "\n";
        for (const auto& s : top)
            io.out << "  " << QString::number(100 * s.probability, 'f', 2).rightJustified(6)
                   << "%  " << QString::fromStdString(names[std::size_t(s.label)]) << "\n";
    }
    if (json)
        io.out << QJsonDocument(QJsonObject{{QStringLiteral("checkpoint"), checkpointFile},
                                            {QStringLiteral("model"),
                                             QString::fromStdString(classifier.info().model)},
                                            {QStringLiteral("ema"), classifier.usesEma()},
                                            {QStringLiteral("results"), results}})
                      .toJson(QJsonDocument::Indented);
    return ExitOk;
}

} // namespace towers::app
