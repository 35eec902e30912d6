#include "engine/export/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/data/dataset.h"
#include "engine/data/preprocessing.h"
#include "engine/errors.h"
#include "engine/export/onnx_graph.h"
#include "engine/io/output_file.h"
#include "engine/models/registry.h"

namespace towers::engine {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// The IR version each opset came with (onnx/helper.py's VERSION_TABLE), so that a file for an
// older opset also loads in the runtimes of its time.
std::int64_t irVersionFor(int opset)
{
    if (opset <= 11) return 6;
    if (opset <= 14) return 7;
    if (opset <= 17) return 8;
    return ::onnx::IR_VERSION;
}

Json shapeJson(const Shape& s)
{
    Json a = Json::array();
    for (std::int64_t d : s.dims()) a.push_back(d);
    return a;
}

void addMetadata(::onnx::ModelProto& m, const std::string& key, const std::string& value)
{
    auto* p = m.add_metadata_props();
    p->set_key(key);
    p->set_value(value);
}

// towers.image_crop: what of the image file is scaled to towers.source_shape (ImageFit).
const char* imageCropName(ImageFit fit)
{
    switch (fit) {
    case ImageFit::Squash:
        return "none";
    case ImageFit::Fill:
        return "pad";
    case ImageFit::Crop:
        break;
    }
    return "centre";
}

// The doc string's words for it, from the cut to the scaled image.
std::string fitWords(ImageFit fit)
{
    const std::string scaled = " with area averaging (bilinear where it enlarges)";
    switch (fit) {
    case ImageFit::Squash:
        return "transparency put on black, the whole image scaled to towers.source_shape's height "
               "and width" +
               scaled + ", its aspect ratio not kept";
    case ImageFit::Fill:
        return "transparency put on black, the whole image scaled" + scaled +
               " to fit inside towers.source_shape's height and width, its aspect ratio kept, "
               "and centred on black";
    case ImageFit::Crop:
        break;
    }
    return "its largest centre rectangle of towers.source_shape's aspect cut, transparency put "
           "on black, scaled to towers.source_shape's height and width" +
           scaled;
}

// What a user needs to feed the model as `classify` does, as metadata_props and in words.
void describe(::onnx::ModelProto& m, const Model& model, const CheckpointInfo& info, bool usedEma,
              OnnxLayout layout, OnnxExportSummary& summary)
{
    const Shape& in = model.inputShape();
    std::vector<std::string> classes = info.classNames;
    if (classes.size() != std::size_t(model.numClasses())) {
        classes.clear();
        for (int i = 0; i < model.numClasses(); ++i)
            classes.push_back("class " + std::to_string(i));
    }
    // The images' size before the crop: the dataset's, else the model's input (as Classifier).
    Shape source = sourceImageShape(info);
    if (source.rank() != 3) source = in; // metadata without an input shape: the model's
    const int cropH = int(in[0]), cropW = int(in[1]);
    const Json crop = {(source[0] - cropH) / 2, (source[1] - cropW) / 2, cropH, cropW};

    addMetadata(m, "towers.format_version", "1");
    addMetadata(m, "towers.model", model.name());
    addMetadata(m, "towers.dataset", info.dataset);
    addMetadata(m, "towers.step", std::to_string(info.step));
    addMetadata(m, "towers.weights", usedEma ? "ema" : "raw");
    addMetadata(m, "towers.input_layout", layout == OnnxLayout::Nhwc ? "NHWC" : "NCHW");
    addMetadata(m, "towers.input_shape", shapeJson(in).dump());
    addMetadata(m, "towers.class_names", Json(classes).dump());
    addMetadata(m, "towers.source_shape", shapeJson(source).dump());
    addMetadata(m, "towers.crop", crop.dump());
    // How classify makes an image file into those 8-bit pixels (app/inference/image_files.h:
    // readImageFile, appendImage), so that another program feeds the model the same: the EXIF
    // orientation applied; an image whose shorter side is longer than towers.image_decode_side
    // first reduced to it (aspect kept); towers.image_crop "centre": the largest centre rectangle
    // of towers.source_shape's aspect cut, "none": the whole image (CheckpointInfo::imageFit
    // squash), "pad": the whole image, to be fitted inside (fill); transparency on black; that
    // scaled to towers.source_shape's H x W "smooth" (Qt::SmoothTransformation: area averaging
    // where it reduces, bilinear where it enlarges), or for "pad" to fit inside it, aspect kept,
    // centred on black; then RGB, or gray as (11 R + 16 G + 5 B) / 32 (Qt's qGray, the quotient's
    // integer part).
    // The decode side is app/inference's decodedShortSide: tst_onnx_export ties the two.
    addMetadata(m, "towers.image_orientation", "exif");
    addMetadata(m, "towers.image_decode_side",
                std::to_string(std::max<std::int64_t>(256, 4 * std::max(source[0], source[1]))));
    addMetadata(m, "towers.image_crop", imageCropName(info.imageFit));
    addMetadata(m, "towers.image_resize", "smooth");
    addMetadata(m, "towers.image_alpha", "black");
    addMetadata(m, "towers.channel_order", source[2] == 1 ? "gray" : "RGB");
    if (source[2] == 1) addMetadata(m, "towers.gray", "(11 * R + 16 * G + 5 * B) // 32");

    std::string how;
    if (info.preprocessing.empty()) {
        addMetadata(m, "towers.normalization", "unknown");
        summary.warnings.push_back(
            "the checkpoint has no preprocessing recipe: the file cannot say how "
            "images are normalised");
        how = "The checkpoint named no preprocessing.";
    } else {
        const Preprocessing p = Preprocessing::fromJson(info.preprocessing);
        addMetadata(m, "towers.normalization", normalizationName(p.normalization));
        switch (p.normalization) {
        case Preprocessing::Normalization::PerImage:
            how = "x = (x - mean(x)) / max(std(x), 1 / sqrt(H * W * C)) over the whole crop, "
                  "on the 0..255 scale (tf.image.per_image_standardization).";
            break;
        case Preprocessing::Normalization::MeanStd:
            addMetadata(m, "towers.mean", Json(p.mean).dump());
            addMetadata(m, "towers.std", Json(p.stddev).dump());
            how = "x = (x / 255 - mean[c]) / std[c] per channel (towers.mean, towers.std).";
            break;
        case Preprocessing::Normalization::Scale:
            how = "x = x / 255.";
            break;
        }
        addMetadata(m, "towers.preprocessing", info.preprocessing);
    }
    m.set_doc_string(
        "Towers model '" + model.name() + "' (dataset '" + info.dataset + "', step " +
        std::to_string(info.step) + ", " + (usedEma ? "moving-average" : "raw") +
        " weights) in inference form. Input 'input': float32 " +
        (layout == OnnxLayout::Nhwc ? "[batch, H, W, C]" : "[batch, C, H, W]") +
        " of preprocessed images; outputs 'logits' and 'probabilities' [batch, classes], class i "
        "named by towers.class_names[i]. Preprocessing, as towers-cli classify: the image file "
        "turned upright by its EXIF orientation, reduced (aspect kept) when its shorter side is "
        "longer than towers.image_decode_side, " +
        fitWords(info.imageFit) +
        ", as 8-bit pixels of towers.source_shape [H, W, C] (towers.channel_order: RGB, "
        "or gray as towers.gray); the rectangle towers.crop [top, left, height, width] cut from "
        "it, then " +
        how);
}

} // namespace

const std::vector<std::string> kOnnxMetadataKeys = {
    "towers.format_version",    "towers.model",
    "towers.dataset",           "towers.step",
    "towers.weights",           "towers.input_layout",
    "towers.input_shape",       "towers.class_names",
    "towers.source_shape",      "towers.crop",
    "towers.normalization",     "towers.image_orientation",
    "towers.image_decode_side", "towers.image_crop",
    "towers.image_resize",      "towers.image_alpha",
    "towers.channel_order",
};

OnnxFileInfo readOnnxInfo(const fs::path& path)
{
    ::onnx::ModelProto m;
    std::ifstream in(path, std::ios::binary);
    if (!in || !m.ParseFromIstream(&in))
        throw IoError(path.string() + ": cannot read it as an ONNX model");
    OnnxFileInfo info;
    for (const auto& p : m.metadata_props()) info.metadata[p.key()] = p.value();
    info.docString = m.doc_string();
    return info;
}

const char* onnxLayoutName(OnnxLayout layout)
{
    return layout == OnnxLayout::Nhwc ? "nhwc" : "nchw";
}

OnnxLayout parseOnnxLayout(const std::string& name)
{
    if (name == "nhwc" || name == "NHWC") return OnnxLayout::Nhwc;
    if (name == "nchw" || name == "NCHW") return OnnxLayout::Nchw;
    throw InvalidArgument("unknown input layout '" + name + "' (nhwc or nchw)");
}

int onnxMaxOpset()
{
    const auto& map = ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    const auto it = map.find(::onnx::ONNX_DOMAIN);
    return it == map.end() ? 17 : it->second.second;
}

int onnxDefaultOpset()
{
    return onnxMaxOpset();
}

fs::path defaultOnnxPath(const fs::path& checkpoint)
{
    fs::path p = checkpoint;
    p.replace_extension(".onnx");
    return p;
}

std::string onnxModelBytes(Model& model, const CheckpointInfo& info, bool usedEma,
                           const OnnxExportOptions& options, OnnxExportSummary* summary)
{
    const int opset = options.opset == 0 ? onnxDefaultOpset() : options.opset;
    if (opset < kOnnxMinOpset || opset > onnxMaxOpset())
        throw InvalidArgument("opset " + std::to_string(opset) +
                              " is not one this build can write (" + std::to_string(kOnnxMinOpset) +
                              " to " + std::to_string(onnxMaxOpset()) + ")");
    OnnxExportSummary local;
    OnnxExportSummary& s = summary ? *summary : local;
    ::onnx::ModelProto m;
    m.set_ir_version(irVersionFor(opset));
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    m.set_producer_name("Towers");
    m.set_producer_version(TOWERS_BUILD_VERSION);
    m.set_model_version(info.step);
    const onnx_graph::GraphStats stats =
        onnx_graph::buildGraph(model, options.layout, *m.mutable_graph());
    describe(m, model, info, usedEma, options.layout, s);
    try {
        ::onnx::checker::check_model(m);
        // Strict shape inference: every node's output shape follows from its inputs, and the
        // declared outputs agree. It also records the intermediate shapes in the file.
        ::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(),
                                             ::onnx::ShapeInferenceOptions(true, 1, false));
        ::onnx::checker::check_model(m);
    } catch (const std::exception& e) {
        throw Error("the ONNX checker refused the exported '" + model.name() +
                    "' model (a bug of the exporter): " + e.what());
    }
    std::string bytes;
    if (!m.SerializeToString(&bytes))
        throw Error("the '" + model.name() + "' model does not fit in an ONNX file (2 GB at most)");
    s.model = model.name();
    s.usedEma = usedEma;
    s.opset = opset;
    s.layout = options.layout;
    s.nodes = stats.nodes;
    s.foldedBatchNorms = stats.foldedBatchNorms;
    s.bytes = std::int64_t(bytes.size());
    return bytes;
}

void checkOnnxOutput(const fs::path& output, bool overwrite)
{
    if (isCheckpointName(output))
        throw IoError(quotedPath(output) +
                      " is a checkpoint's name (.safetensors), which export never writes: name a "
                      ".onnx file");
    checkOutputFile(output, overwrite);
}

OnnxExportSummary exportOnnx(const fs::path& checkpoint, const fs::path& output,
                             const OnnxExportOptions& options, const VerifiedCheckpoint* checked)
{
    if (output.empty()) throw InvalidArgument("no output file named");
    const int opset = options.opset == 0 ? onnxDefaultOpset() : options.opset;
    if (opset < kOnnxMinOpset || opset > onnxMaxOpset())
        throw InvalidArgument("opset " + std::to_string(opset) +
                              " is not one this build can write (" + std::to_string(kOnnxMinOpset) +
                              " to " + std::to_string(onnxMaxOpset()) + ")");
    // --force replaces an ONNX file, never a checkpoint: neither the one exported nor another
    // (an ONNX file in its place would lose the run's weights and optimizer state), whatever its
    // name (checkOutputFile reads what the file is); nor is an ONNX file given a checkpoint's
    // name, where runs and eval would take it for one.
    std::error_code ec;
    if (fs::exists(output, ec) && fs::equivalent(output, checkpoint, ec))
        throw IoError(quotedPath(output) +
                      " is the checkpoint being exported: name another file for the ONNX model");
    checkOnnxOutput(output, options.overwrite);

    // Checked (here, or by the caller), then its weights read into the model: a tensor at a
    // time both times.
    VerifiedCheckpoint verified;
    if (checked)
        verified = *checked;
    else
        (void)verifyCheckpoint(checkpoint, nullptr, &verified);
    const CheckpointInfo& info = verified.info;
    std::unique_ptr<Model> model;
    OnnxExportSummary summary;
    bool useEma = false;
    try {
        model = buildModel(resolveModel(info.model, info.modelDefinition), checkpointClasses(info));
        for (const SafeTensorEntry& e : verified.tensors)
            summary.hasEma = summary.hasEma || e.name.rfind("ema.", 0) == 0;
        useEma = loadCheckpointWeights(checkpoint, verified, *model, options.useEma);
    } catch (const InvalidArgument& e) {
        // The file is the problem, not the command line.
        const std::string what = e.what();
        const bool named = what.starts_with(checkpoint.string()) ||
                           what.starts_with("checkpoint " + quotedPath(checkpoint));
        throw IoError(named ? what : checkpoint.string() + ": " + what);
    }
    if (!info.preprocessing.empty()) {
        try {
            (void)Preprocessing::fromJson(info.preprocessing);
        } catch (const InvalidArgument& e) {
            throw IoError(checkpoint.string() +
                          ": its preprocessing recipe is invalid: " + e.what());
        }
    }
    const std::string bytes = onnxModelBytes(*model, info, useEma, options, &summary);
    writeOutputFile(output, bytes, options.overwrite);
    summary.output = output;
    return summary;
}

} // namespace towers::engine
