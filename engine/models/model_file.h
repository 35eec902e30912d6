#pragma once
// Networks of the user's own, described in a model file: JSON naming the input and listing the
// layers, each one's sizes given and the rest (input channels, features) worked out from the shape
// before it, as Keras' Sequential does. For example:
//
//   {"name": "my-net", "input": [28, 28, 1],
//    "layers": [{"type": "conv2d", "filters": 32, "kernel": 3, "bias": false},
//               {"type": "batchnorm", "relu": true},
//               {"type": "maxpool", "size": 2},
//               {"type": "flatten"},
//               {"type": "linear", "units": "classes"}]}
//
// docs/models.md describes every field. A run of such a model keeps the definition in its
// configuration (TrainConfig::modelDefinition), so its config.json and every checkpoint carry
// it: the run resumes, and its checkpoints evaluate, classify and export, without the file.
#include <filesystem>
#include <string>

#include "engine/models/registry.h"

namespace towers::engine {

// The network that `text` (a model file's JSON) describes. `where` names the source in messages
// (the file's path, "the run's configuration"). Throws InvalidArgument naming the source, the
// layer and the field: "net.json: layers[2] (conv2): kernel: expected an integer from 1 to 64,
// got 0". The result's `definition` is the canonical text (canonicalModelDefinition).
ModelInfo modelFromDefinition(const std::string& text, const std::string& where);

// The definition's canonical text: compact JSON with its keys sorted, so that one network has
// one text whatever the file's spacing and order. InvalidArgument as modelFromDefinition.
std::string canonicalModelDefinition(const std::string& text, const std::string& where);

// The network of a model file (keepModel: kept for the process, where resolveModel finds it).
// IoError naming the file when it cannot be read or describes no valid network.
const ModelInfo& readModelFile(const std::filesystem::path& path);

// The recipe of a model file that has no "recipe" (or leaves fields out of it): the built-in
// batch-norm models' (nesterovOneCycle), batch 128 per tower, 10 epochs, an evaluation every 500
// steps and a log line every 50.
ModelRecipe modelFileRecipe();

// The model file of `info`'s network (a built-in model's, or a model file's written out again),
// called `name`: its layers (the last one the classifier, "units": "classes"), input, dataset,
// augmentation and description, and `recipe` (the "recipe" object as JSON text, its fields in the
// order given; "" for none). modelFromDefinition reads it back as the same network: the same
// layers and options, the same parameters in the same order, so the same weights from a seed.
// Names a model file cannot have (the built-in models' "layer1.res1.conv") are written with '_'
// for '.'; a name the layer would get anyway is left out. A layer a line, as people write them.
// InvalidArgument for a `name` a model may not have or a layer no model file type describes.
std::string modelFileText(const ModelInfo& info, const std::string& name,
                          const std::string& recipe);

// The name of a network saved as `file` from the model `from`: the file's stem ("wide.json":
// "wide") when that is a model's name and not a built-in one's, else "my-<from>".
std::string modelNameForFile(const std::filesystem::path& file, const std::string& from);

// The line (from 1) of `text` that a mistake modelFromDefinition(text, where) refused it with
// points at: where the JSON breaks (nlohmann's "parse error at line L"), the field it names, else
// the layer ("net.json: layers[3] (conv2): kernel: ..." is conv2's "kernel", "net.json: layers[0]
// (res1): layers[1] (bn2): ..." the residual block's second layer, a missing field its layer's
// first line), or a top-level field ("input: ..."); 0 when the message points at nothing in the
// text (the recipe's mistakes, a missing top-level field).
int mistakeLine(const std::string& text, const std::string& where, const std::string& message);

// Whether a model given by the user (--model) names a file rather than a built-in model: a path
// with a '/' in it or a name ending in ".json".
bool namesModelFile(const std::string& model);

} // namespace towers::engine
