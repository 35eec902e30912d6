#pragma once
// ONNX export of a checkpoint: the model in inference form, for onnxruntime and the other tools
// that read ONNX. Built with Debian's ONNX library (libonnx: its protocol buffers and its
// checker); used by `towers-cli export` and the GUI's Runs page.
//
// What the file holds (see README.md "ONNX"):
//  * one input, "input", float32 [batch, H, W, C] (NHWC, the layout `towers-cli classify` feeds
//    the model) or [batch, C, H, W] (NCHW) as chosen, the batch dimension dynamic ("batch"),
//    holding images already preprocessed (see the metadata below);
//  * two outputs, "logits" [batch, classes] and "probabilities" (their softmax);
//  * the weights of the checkpoint, its moving averages (EMA) when it has them unless asked not
//    to; batch normalisation with its running statistics, folded into the convolution before it
//    (a batch norm that follows no convolution stays a BatchNormalization node); dropout removed;
//  * TensorFlow's semantics where the engine has them: LRN (ONNX's alpha is divided by the
//    window size, so alpha_onnx = alpha_tf * (2r + 1), size = 2r + 1, bias = k), SAME padding as
//    explicit pads with the extra pixel at the bottom/right, and flatten in C, H, W order;
//  * metadata_props with what a user needs to reproduce `classify` (kOnnxMetadataKeys).
//
// The graph is made by running each layer's inference forward through a recording op backend,
// so every layer kind maps through the ops it calls (conv, max-pool, LRN, linear, ReLU, add,
// batch norm, layout changes); a layer that computes without ops is refused unless it is dropout
// (an identity in inference).
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/models/model.h"
#include "engine/train/checkpoint.h"

namespace towers::engine {

enum class OnnxLayout
{
    Nhwc,
    Nchw
};

// "nhwc" / "nchw"; parseOnnxLayout throws InvalidArgument for anything else.
const char* onnxLayoutName(OnnxLayout layout);
OnnxLayout parseOnnxLayout(const std::string& name);

// The opsets a file can be written for: from 11 to the newest the ONNX library knows (17 for
// Debian 12's ONNX 1.12). The default is the newest.
constexpr int kOnnxMinOpset = 11;
int onnxMaxOpset();
int onnxDefaultOpset();

struct OnnxExportOptions
{
    int opset = 0;      // 0: onnxDefaultOpset()
    bool useEma = true; // the moving averages when the checkpoint has them
    OnnxLayout layout = OnnxLayout::Nhwc;
    bool overwrite = false; // replace an existing output file
};

struct OnnxExportSummary
{
    std::filesystem::path output;
    std::string model;
    bool hasEma = false;  // the checkpoint has moving averages
    bool usedEma = false; // the file holds them
    int opset = 0;
    OnnxLayout layout = OnnxLayout::Nhwc;
    int nodes = 0;
    int foldedBatchNorms = 0;
    std::int64_t bytes = 0;
    std::vector<std::string> warnings; // e.g. the checkpoint has no preprocessing recipe
};

// The metadata_props keys every exported file has (plus "towers.mean" and "towers.std" with the
// mean_std normalisation, "towers.preprocessing" when the checkpoint has a recipe, and
// "towers.gray" for grayscale images): among them how classify reads an image file
// (towers.image_*, towers.channel_order).
extern const std::vector<std::string> kOnnxMetadataKeys;

// What an ONNX file says of itself: its metadata_props and its doc_string. IoError naming the
// file when it does not read as an ONNX model.
struct OnnxFileInfo
{
    std::map<std::string, std::string> metadata;
    std::string docString;
};
OnnxFileInfo readOnnxInfo(const std::filesystem::path& path);

// Where `towers-cli export` writes without --output: the checkpoint's path with ".onnx" in
// place of its extension.
std::filesystem::path defaultOnnxPath(const std::filesystem::path& checkpoint);

// The serialized ModelProto of `model` (whose weights are those to export; they are only read,
// but its layers' state from an earlier forward is dropped: run forward before any backward)
// with `info`'s metadata, `usedEma` recorded in it. Runs ONNX's checker and shape inference
// (a failure is an Error: a bug of the exporter, never the user's). Throws Unsupported for a
// layer that cannot be expressed in ONNX, InvalidArgument for a bad opset.
std::string onnxModelBytes(Model& model, const CheckpointInfo& info, bool usedEma,
                           const OnnxExportOptions& options, OnnxExportSummary* summary = nullptr);

// What exportOnnx refuses of `output` before it reads anything: a checkpoint's name (.safetensors),
// and what checkOutputFile refuses (a folder, an existing file unless `overwrite`, a checkpoint
// or a run's own records even then). IoError naming it.
void checkOnnxOutput(const std::filesystem::path& output, bool overwrite);

// Reads `checkpoint`, loads it into its model and writes the ONNX file `output` atomically
// (temporary file in the same folder, fsync, rename). An existing `output` is refused unless
// options.overwrite. Throws IoError naming the file for a checkpoint that does not read or does
// not fit a known model and for any failure on disk (the temporary file is removed then),
// InvalidArgument for bad options. `verified`: what verifyCheckpoint found of `checkpoint`
// already, so that it is read once more, not twice; none: checked here.
OnnxExportSummary exportOnnx(const std::filesystem::path& checkpoint,
                             const std::filesystem::path& output,
                             const OnnxExportOptions& options = {},
                             const VerifiedCheckpoint* verified = nullptr);

} // namespace towers::engine
