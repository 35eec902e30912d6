// towers-cli export: a checkpoint as an ONNX file (engine/export/onnx_export.h), for onnxruntime
// and the other tools that read ONNX.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>

#include "app/cli/command.h"
#include "engine/export/onnx_export.h"

namespace towers::app {

int runExport(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    p.setApplicationDescription(
        QStringLiteral(
            "Writes a checkpoint's model as an ONNX file in inference form: batch norm with its\n"
            "running statistics (folded into the convolutions), no dropout, the moving averages "
            "of\n"
            "the weights when the checkpoint has them (unless --no-ema), a dynamic batch "
            "dimension.\n"
            "Input 'input': float32 preprocessed images, [batch, H, W, C] (NHWC, as classify "
            "feeds\n"
            "the model) or [batch, C, H, W] with --layout nchw; outputs 'logits' and\n"
            "'probabilities'. The preprocessing (crop, normalisation) and the class names are in\n"
            "the file's metadata_props (towers.*). The file is checked with ONNX's checker and\n"
            "written atomically; an existing file is replaced only with --force. Opsets %1 to %2.")
            .arg(engine::kOnnxMinOpset)
            .arg(engine::onnxMaxOpset()));
    p.addOptions({
        {QStringLiteral("checkpoint"),
         QStringLiteral(
             "The checkpoint (.safetensors) to export. A run folder, or a run's name in the runs "
             "folder, gives its newest checkpoint (with --best, its best)."),
         QStringLiteral("file")},
        bestOption(),
        {QStringLiteral("output"),
         QStringLiteral("The ONNX file to write (default: the checkpoint's path with .onnx)."),
         QStringLiteral("file")},
        {QStringLiteral("opset"),
         QStringLiteral("The ONNX opset (default %1).").arg(engine::onnxDefaultOpset()),
         QStringLiteral("n")},
        {QStringLiteral("layout"), QStringLiteral("The input's layout: nhwc (default) or nchw."),
         QStringLiteral("layout"), QStringLiteral("nhwc")},
        {QStringLiteral("no-ema"),
         QStringLiteral("Export the raw weights, not their moving averages.")},
        {QStringLiteral("force"),
         QStringLiteral("Replace the output file if it exists (never a checkpoint or a run's own "
                        "files).")},
        {QStringLiteral("json"), QStringLiteral("Print JSON.")},
    });
    int code = 0;
    if (!parseOrExplain(p, args, io, code, Arguments::None)) return code;
    engine::OnnxExportOptions options;
    options.opset = engine::onnxDefaultOpset();
    if (!intOption(p, QStringLiteral("opset"), engine::kOnnxMinOpset, engine::onnxMaxOpset(),
                   options.opset, io))
        return ExitUsage;
    QString layout = QStringLiteral("nhwc");
    if (!choiceOption(p, QStringLiteral("layout"), {"nhwc", "nchw"}, layout, io)) return ExitUsage;
    options.layout = engine::parseOnnxLayout(layout.toStdString());
    options.useEma = !p.isSet(QStringLiteral("no-ema"));
    options.overwrite = p.isSet(QStringLiteral("force"));
    if (p.isSet(QStringLiteral("output")) && p.value(QStringLiteral("output")).isEmpty()) {
        io.err << "towers-cli export: --output must name a file\n";
        return ExitUsage;
    }
    // An output named is checked first: a run given for the checkpoint is not read for nothing.
    if (p.isSet(QStringLiteral("output")))
        engine::checkOnnxOutput(p.value(QStringLiteral("output")).toStdString(), options.overwrite);
    // The checkpoint last: a run given for it is resolved (and named) only with the rest usable.
    QString checkpointFile;
    std::optional<engine::VerifiedCheckpoint> verified;
    if (const int c =
            checkpointOption(p, QStringLiteral("towers-cli export"), io, checkpointFile, &verified);
        c != ExitOk)
        return c;
    const std::filesystem::path checkpoint = checkpointFile.toStdString();
    const std::filesystem::path output =
        p.isSet(QStringLiteral("output"))
            ? std::filesystem::path(p.value(QStringLiteral("output")).toStdString())
            : engine::defaultOnnxPath(checkpoint);

    const engine::OnnxExportSummary s =
        engine::exportOnnx(checkpoint, output, options, verified ? &*verified : nullptr);
    const QString path = QString::fromStdString(s.output.string());
    for (const auto& w : s.warnings)
        io.err << "towers-cli export: warning: " << QString::fromStdString(w) << "\n";
    if (p.isSet(QStringLiteral("json"))) {
        io.out << QJsonDocument(QJsonObject{
                                    {QStringLiteral("checkpoint"), checkpointFile},
                                    {QStringLiteral("output"), path},
                                    {QStringLiteral("model"), QString::fromStdString(s.model)},
                                    {QStringLiteral("ema"), s.usedEma},
                                    {QStringLiteral("opset"), s.opset},
                                    {QStringLiteral("layout"),
                                     QString::fromLatin1(engine::onnxLayoutName(s.layout))},
                                    {QStringLiteral("nodes"), s.nodes},
                                    {QStringLiteral("foldedBatchNorms"), s.foldedBatchNorms},
                                    {QStringLiteral("bytes"), qint64(s.bytes)},
                                })
                      .toJson(QJsonDocument::Indented);
        return ExitOk;
    }
    QString weights = s.usedEma ? QStringLiteral("moving-average weights")
                                : (s.hasEma ? QStringLiteral("raw weights (--no-ema)")
                                            : QStringLiteral("raw weights"));
    io.out << "Exported " << QString::fromStdString(s.model) << " (" << weights << ") to " << path
           << "\n"
           << "  opset " << s.opset << ", input 'input' "
           << (s.layout == engine::OnnxLayout::Nhwc ? "[batch, H, W, C]" : "[batch, C, H, W]")
           << ", outputs 'logits' and 'probabilities', " << s.nodes << " nodes";
    if (s.foldedBatchNorms > 0) io.out << ", " << s.foldedBatchNorms << " batch norms folded";
    io.out << ", " << QLocale::c().formattedDataSize(s.bytes) << "\n";
    return ExitOk;
}

} // namespace towers::app
