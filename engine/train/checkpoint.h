#pragma once
// Training checkpoints: safetensors files (engine/io/safetensors.h) holding the model's weights
// and buffers under their state_dict names (so they load in PyTorch as they are), the moving
// averages under "ema.<name>", the optimizer state under "optim.", and string metadata that makes
// a checkpoint self-describing for evaluation and inference: the model, the dataset and its class
// names, the input shape, the preprocessing recipe, the step and the whole run configuration.
// A CRC-32 of everything else guards against damaged or partly copied files.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/data/dataset_spec.h"
#include "engine/io/safetensors.h"
#include "engine/models/model.h"

namespace towers::engine {

constexpr int kCheckpointFormatVersion = 1;

struct CheckpointInfo
{
    int formatVersion = kCheckpointFormatVersion;
    std::string model;                   // registry name, e.g. "cifar10-tutorial"
    std::string dataset;                 // e.g. "cifar10" (may be empty)
    std::vector<std::string> classNames; // index = label (may be empty)
    Shape inputShape;                    // [H, W, C]
    // [H, W, C] of the dataset's images the model was trained on (larger than the input where
    // the recipe crops); empty in a checkpoint from before it was recorded (then the dataset
    // table's, else the input: sourceImageShape).
    Shape imageShape;
    // How an image file is brought to imageShape to be classified: as the dataset's files were
    // (DatasetSpec::imageFit); Crop in a checkpoint from before it was recorded.
    ImageFit imageFit = ImageFit::Crop;
    std::string preprocessing; // the recipe as JSON (Preprocessing::toJson), may be empty
    std::int64_t step = 0;     // global steps done
    double epoch = 0;          // step / steps per epoch
    std::string optimizer;     // "sgd", "momentum", "nesterov", "adam"
    std::string config;        // the run configuration as JSON (TrainConfig::toJson)
    // A model file's network (TrainConfig::modelDefinition, read from `config`); "" for a built-in
    // model. resolveModel(model, modelDefinition) is the checkpoint's model.
    std::string modelDefinition;
};

struct Checkpoint
{
    CheckpointInfo info;
    NamedTensors weights;   // parameters and buffers, the model's names and order
    NamedTensors ema;       // "ema.<parameter>" (empty without EMA)
    NamedTensors optimizer; // "optim.step", "optim.<parameter>.<slot>"

    // The weight called `name` or nullptr; ema.<name> instead when useEma and there is one.
    const Tensor* weight(const std::string& name, bool useEma = false) const;
};

// The tensors and metadata of a checkpoint of `model`'s current state.
Checkpoint makeCheckpoint(const Model& model, CheckpointInfo info, NamedTensors ema = {},
                          NamedTensors optimizer = {});

// Writes atomically (temporary file, fsync, rename): a reader sees the old file or the new one,
// never a partial one, even if the process is killed. IoError naming the file on failure.
void writeCheckpoint(const std::filesystem::path& path, const Checkpoint& checkpoint);

// Reads a checkpoint and checks its integrity: a valid safetensors file, Towers metadata of a
// known format version, and a checksum that matches. Throws IoError naming the file and what is
// wrong (truncated, corrupt header, checksum mismatch, missing metadata...).
Checkpoint readCheckpoint(const std::filesystem::path& path);
// A checkpoint's metadata (model, dataset, classes, step) from its header alone, without reading
// or checking its tensors: for choosers and listings. IoError as readCheckpoint for what it reads.
CheckpointInfo readCheckpointInfo(const std::filesystem::path& path);
// The classes a checkpoint's model was built with: as many as its class names, else 0 (the
// model's default, ModelInfo::numClasses: a checkpoint that names none).
int checkpointClasses(const CheckpointInfo& info);
// The size images are brought to before the recipe's central crop, for a model of `info`: the
// recorded imageShape, else the dataset table's for `info.dataset`, else the model's input.
Shape sourceImageShape(const CheckpointInfo& info);
// A string field of the run configuration a checkpoint records (TrainConfig's JSON: "runId",
// "precision"...), or `otherwise` where it has none or it cannot be read.
std::string checkpointConfigField(const CheckpointInfo& info, const char* key,
                                  const std::string& otherwise);
// The precision ("fp32", "bf16") a checkpoint's weights were trained in: "fp32" where its
// configuration names none (a checkpoint from before --precision, or of no run).
std::string trainedPrecision(const CheckpointInfo& info);

// Checks that `checkpoint` (read from `path`, named in messages) fits `model`: the same model,
// every parameter and buffer present with the model's shape and dtype and no other weight, the
// averages (if any) covering exactly the trainable parameters, and every "optim.<parameter>.<slot>"
// tensor shaped as its parameter, the weights and averages finite, the batch norms' running
// variances and the optimizer's step count not negative. Throws InvalidArgument naming the file and
// the tensor.
void validateCheckpoint(const Checkpoint& checkpoint, const Model& model,
                        const std::filesystem::path& path);

// readCheckpoint's checks, and validateCheckpoint's against `model` where one is given, reading
// one tensor at a time: no more memory than the checkpoint's largest tensor, where
// readCheckpoint holds all of them (the read-back of a checkpoint just written, the rotation's
// look at the older ones). Returns the checkpoint's metadata. IoError and InvalidArgument as they
// throw them, a damaged file said to be damaged before anything else.
// What verifyCheckpoint found a checkpoint to be: its metadata, every tensor's name, dtype and
// shape, and the checksum they matched (what rereadCheckpoint holds the file to).
struct VerifiedCheckpoint
{
    CheckpointInfo info;
    std::vector<SafeTensorEntry> tensors;
    std::string checksum;
};
// `verified`, where given, gets what it found (for rereadCheckpoint).
CheckpointInfo verifyCheckpoint(const std::filesystem::path& path, const Model* model = nullptr,
                                VerifiedCheckpoint* verified = nullptr);

// The tensors of a checkpoint that verifyCheckpoint passed (`verified`), read again one at a time
// into `take` (a resume loads its towers so: no more than the largest tensor in memory beside
// them). IoError where the file is no longer the one checked: another file in its place (other
// tensors or another checksum), said before `take` sees anything, or other bytes than the
// checksum's, found at the end, after `take` saw every tensor. What `take` throws goes to the
// caller.
void rereadCheckpoint(const std::filesystem::path& path, const VerifiedCheckpoint& verified,
                      const SafeTensorFn& take);

// A checkpoint that verifyCheckpoint passed without a model (`verified`: its own model is built
// from its metadata), read again a tensor at a time into `model`: validateCheckpoint's checks
// (InvalidArgument naming the file and the tensor, `model` then partly loaded), the weights and
// buffers copied in, the moving averages in place of the trainable weights where `useEma` and
// the file has them. What evaluation, classification and export read: no more than its largest
// tensor beside the model (the optimizer's state is read and left). IoError as rereadCheckpoint's.
// Returns whether the averages were taken.
bool loadCheckpointWeights(const std::filesystem::path& path, const VerifiedCheckpoint& verified,
                           Model& model, bool useEma);

// readCheckpoint + validateCheckpoint, then copies the weights and buffers into `model` (the
// moving averages in place of the trainable weights when useEma and the checkpoint has them).
// Returns the checkpoint (for its metadata and optimizer state).
Checkpoint loadCheckpoint(const std::filesystem::path& path, Model& model, bool useEma = false);

} // namespace towers::engine
