#pragma once
// Sensible defaults per model and dataset, so that `towers-cli train --dataset X` with no other
// option does something good: which model a dataset trains with, the model's optimizer, schedule,
// batch size and length, and how its images are preprocessed. All of it is read from the model's
// registry entry (engine/models/registry.cpp: ModelInfo::recipe, ::augmentation,
// ::defaultDataset) and the dataset's table entry (engine/data/dataset_spec.cpp); nothing here
// names a model or a dataset.
#include <filesystem>
#include <string>

#include "engine/data/dataset_spec.h"
#include "engine/data/preprocessing.h"
#include "engine/models/registry.h"
#include "engine/train/train_config.h"

namespace towers::engine {

// The model a dataset trains with when none is named: the one its DatasetSpec::defaultModel names
// (fashion-fast for MNIST), else the first registered model meant for it (ModelInfo::
// defaultDataset: fashion-fast for Fashion-MNIST, cifar10-tutorial, the seeds' network, for
// CIFAR-10), else the model of lowest ModelInfo::anyDatasetRank that its images fit (modelFits:
// cifar10-resnet for CIFAR-100). UnknownName for an unknown dataset, or images no model takes.
std::string defaultModelFor(const std::string& dataset);
// The same for a dataset's spec (one of the table's, or an imported one: dataset_manifest.h).
std::string defaultModelFor(const DatasetSpec& spec);

// The training configuration a model starts from: its registry entry's ModelRecipe (optimizer,
// schedule, batch per tower, length, weight decay, EMA, checkpoint/evaluation/log intervals) on
// TrainConfig's defaults; the caller fills dataset, towers and anything the user overrides.
// UnknownName listing the models for an unknown one.
TrainConfig defaultConfigFor(const std::string& model);
// The same for any model, one of a model file too: its ModelRecipe, then the file's "recipe"
// (config.json's fields: optimizer, lr, schedule, batchPerTower, steps or epochs, weightDecay,
// emaDecay, checkpointEvery, evalEvery, logEvery) over it. InvalidArgument naming the model and
// the field for a recipe that is not valid.
TrainConfig defaultConfigFor(const ModelInfo& info);
// A model file's network (readModelFile), its recipe checked too (defaultConfigFor), before a run
// is set up with it. IoError naming the file for either's mistakes.
const ModelInfo& loadModelFile(const std::filesystem::path& path);

// The "recipe" of a model file that trains as `info` does (defaultConfigFor): the optimizer's and
// the schedule's kind and the fields that kind uses (optimizerFields, LrSchedule::fieldsOf), the
// rate, weight decay, moving-average decay, batch per tower, length and intervals; JSON text, its
// fields in that order.
std::string modelFileRecipeFields(const ModelInfo& info);
// Writes `info`'s network and recipe as the model file `path` (modelFileText: a built-in model to
// start a network of your own from, or a model file written out again), calling it `name`;
// whole or not at all (writeOutputFile), an existing file replaced only when `overwrite`. IoError
// naming the file for a failure on disk or an existing file, InvalidArgument for a bad `name`.
void saveModelFile(const ModelInfo& info, const std::string& name,
                   const std::filesystem::path& path, bool overwrite);

// The preprocessing of `model` (resolveModel: a built-in one, or a model file's) on `dataset` (its
// training set gives the normalisation statistics), from the model's ModelAugmentation: the seeds'
// distorted_inputs (random crops to the model's input, flips, brightness, contrast, per-image
// standardisation), or translation by up to N pixels and per-channel normalisation; flips only on
// datasets whose classes survive a mirror (DatasetSpec::mirrorSafe: Fashion-MNIST and CIFAR, not
// digits, nor a dataset not in the table). Throws InvalidArgument when the model cannot take the
// dataset's images ("cifar10-tutorial takes 24x24x3 images; fashion-mnist has 28x28x1"), or for
// fewer than 2 classes (any count from 2 to kMaxClasses is the dataset's: the model is built with
// it).
Preprocessing preprocessingFor(const ModelInfo& model, const Dataset& dataset);

} // namespace towers::engine
