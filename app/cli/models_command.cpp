// towers-cli models: the registered models and their layers.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <functional>

#include "app/cli/command.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/train/recipe.h"

namespace towers::app {

namespace {

// models NAME --save FILE: the model as a model file to start from.
int saveModel(const QCommandLineParser& p, const engine::ModelInfo& info, CommandIo& io)
{
    const std::filesystem::path file = p.value(QStringLiteral("save")).toStdString();
    const std::string name = p.isSet(QStringLiteral("name"))
                                 ? p.value(QStringLiteral("name")).toStdString()
                                 : engine::modelNameForFile(file, info.name);
    engine::saveModelFile(info, name, file, p.isSet(QStringLiteral("force")));
    const QString path = QString::fromStdString(file.string());
    const QString shown = path.contains(QLatin1Char('/')) ? path : QStringLiteral("./") + path;
    if (p.isSet(QStringLiteral("json"))) {
        io.out << QJsonDocument(
                      QJsonObject{{QStringLiteral("from"), QString::fromStdString(info.name)},
                                  {QStringLiteral("name"), QString::fromStdString(name)},
                                  {QStringLiteral("file"), path}})
                      .toJson(QJsonDocument::Indented);
        return ExitOk;
    }
    io.out << "Wrote " << QString::fromStdString(info.name) << " as the model file " << path
           << " (network '" << QString::fromStdString(name) << "').\n"
           << "Edit it (docs/models.md), then 'towers-cli models " << shown
           << "' checks it and 'towers-cli train --model " << shown << "' trains it.\n";
    return ExitOk;
}

} // namespace

int runModels(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    p.setApplicationDescription(QStringLiteral(
        "Without a name, lists the models. With a name, or a model file (your own network: see\n"
        "docs/models.md), shows that model's layers, output shapes and parameter counts (names\n"
        "as in the equivalent PyTorch module's state_dict); a model file is checked as train\n"
        "would check it, its recipe too. With --save, writes that model as a model file to\n"
        "start a network of your own from: its layers, augmentation and recipe, which\n"
        "'towers-cli train --model FILE.json' trains as the model itself."));
    p.addPositionalArgument(QStringLiteral("name"),
                            QStringLiteral("A model to describe: a name, or a model file (.json)."),
                            QStringLiteral("[name | file.json]"));
    p.addOptions({
        {QStringLiteral("save"),
         QStringLiteral("Write the model as a model file (written whole or not at all; an existing "
                        "file is replaced only with --force)."),
         QStringLiteral("file.json")},
        {QStringLiteral("name"),
         QStringLiteral("With --save: the network's name (default: the file's name, or "
                        "my-<model> when that is a built-in model's or no model's name)."),
         QStringLiteral("name")},
        {QStringLiteral("force"),
         QStringLiteral("With --save: replace the file if it exists (never a checkpoint or a "
                        "run's own files).")},
        {QStringLiteral("json"), QStringLiteral("Print JSON.")},
    });
    int code = 0;
    if (!parseOrExplain(p, args, io, code)) return code;
    const bool json = p.isSet(QStringLiteral("json"));
    const QStringList pos = p.positionalArguments();
    if (pos.size() > 1) {
        io.err << "towers-cli models: expected at most one model name\n";
        return ExitUsage;
    }
    const bool save = p.isSet(QStringLiteral("save"));
    for (const char* option : {"name", "force"})
        if (p.isSet(QString::fromLatin1(option)) && !save) {
            io.err << "towers-cli models: --" << option << " goes with --save\n";
            return ExitUsage;
        }
    if (save && (pos.isEmpty() || p.value(QStringLiteral("save")).isEmpty())) {
        io.err << "towers-cli models: --save takes a model and a file to write: 'towers-cli "
                  "models cifar10-resnet --save mine.json'\n";
        return ExitUsage;
    }
    if (save) return saveModel(p, modelOption(pos.first()), io);

    if (pos.isEmpty()) {
        QJsonArray list;
        for (const auto& info : engine::modelRegistry()) {
            const auto model = info.build(info.numClasses);
            if (json) {
                list.append(QJsonObject{
                    {QStringLiteral("name"), QString::fromStdString(info.name)},
                    {QStringLiteral("description"), QString::fromStdString(info.description)},
                    {QStringLiteral("input_shape"), shapeJson(info.inputShape)},
                    {QStringLiteral("classes"), info.numClasses},
                    {QStringLiteral("parameters"), qint64(model->parameterCount())},
                    {QStringLiteral("dataset"), QString::fromStdString(info.defaultDataset)}});
            } else {
                io.out << QString::fromStdString(info.name).leftJustified(18) << " input "
                       << shapeText(info.inputShape).leftJustified(8) << " "
                       << QString::number(model->parameterCount()).rightJustified(10) << " params  "
                       << QString::fromStdString(info.description) << "\n";
            }
        }
        if (json)
            io.out << QJsonDocument(list).toJson(QJsonDocument::Indented);
        else
            io.out << "\nYour own network: a model file (docs/models.md; examples in "
                      "/usr/share/doc/towers/examples);\n'towers-cli models FILE.json' shows one, "
                      "'towers-cli train --model FILE.json' trains it.\n";
        return ExitOk;
    }

    const engine::ModelInfo& info = modelOption(pos.first());
    const auto model = engine::buildModel(info);
    const auto rows = model->layerTable();
    if (json) {
        // A block's layers (a concat's branches) under it, as "layers".
        const std::function<QJsonArray(const std::vector<engine::LayerRow>&)> layersJson =
            [&](const std::vector<engine::LayerRow>& list) {
                QJsonArray out;
                for (const auto& r : list) {
                    QJsonObject o{
                        {QStringLiteral("name"), QString::fromStdString(r.name)},
                        {QStringLiteral("kind"), QString::fromStdString(r.kind)},
                        {QStringLiteral("description"), QString::fromStdString(r.description)},
                        {QStringLiteral("output_shape"), shapeJson(r.outputShape)},
                        {QStringLiteral("parameters"), qint64(r.parameters)},
                        {QStringLiteral("forward_flops"), r.forwardFlops}};
                    if (!r.children.empty())
                        o.insert(QStringLiteral("layers"), layersJson(r.children));
                    out.append(o);
                }
                return out;
            };
        const QJsonArray layers = layersJson(rows);
        QJsonArray params;
        for (auto* prm : model->parameters())
            params.append(QJsonObject{{QStringLiteral("name"), QString::fromStdString(prm->name)},
                                      {QStringLiteral("shape"), shapeJson(prm->value.shape())},
                                      {QStringLiteral("trainable"), prm->trainable}});
        io.out << QJsonDocument(
                      QJsonObject{{QStringLiteral("name"), QString::fromStdString(model->name())},
                                  {QStringLiteral("input_shape"), shapeJson(model->inputShape())},
                                  {QStringLiteral("parameters"), qint64(model->parameterCount())},
                                  {QStringLiteral("layers"), layers},
                                  {QStringLiteral("state_dict"), params}})
                      .toJson(QJsonDocument::Indented);
        return ExitOk;
    }
    io.out << QString::fromStdString(model->name()) << ": input " << shapeText(model->inputShape())
           << " (HxWxC), " << model->numClasses() << " classes, " << model->parameterCount()
           << " trainable parameters, "
           << QString::number(model->trainingFlopsPerExample() * 1e-6, 'f', 1)
           << " MFLOP per training example\n\n";
    // A block's layers (a concat's branches, then their layers) indented under it; the columns
    // as wide as their widest entry.
    const auto shown = engine::shownLayerRows(rows);
    int nameWidth = 16, shapeWidth = 12;
    for (const auto& [r, depth] : shown) {
        nameWidth = std::max(nameWidth, 2 * depth + int(r->name.size()) + 2);
        shapeWidth = std::max(shapeWidth, int(shapeText(r->outputShape).size()) + 2);
    }
    io.out << QStringLiteral("layer").leftJustified(nameWidth)
           << QStringLiteral("output").leftJustified(shapeWidth)
           << QStringLiteral("params").rightJustified(10) << "  description\n";
    for (const auto& [r, depth] : shown)
        io.out << (QString(2 * depth, QLatin1Char(' ')) + QString::fromStdString(r->name))
                      .leftJustified(nameWidth)
               << shapeText(r->outputShape).leftJustified(shapeWidth)
               << QString::number(r->parameters).rightJustified(10) << "  "
               << QString::fromStdString(r->description) << "\n";
    io.out << "\nstate_dict:\n";
    for (auto* prm : model->parameters())
        io.out << "  " << QString::fromStdString(prm->name).leftJustified(32)
               << shapeText(prm->value.shape()) << (prm->trainable ? "" : "  (buffer)") << "\n";
    return ExitOk;
}

} // namespace towers::app
