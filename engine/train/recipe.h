#pragma once
// Sensible defaults per model and dataset, so that `towers-cli train --dataset X` with no other
// option does something good: which model a dataset trains with, the model's optimizer, schedule,
// batch size and length, and how its images are preprocessed.
#include <string>

#include "engine/data/preprocessing.h"
#include "engine/train/train_config.h"

namespace towers::engine {

// The model a dataset trains with when none is named: fashion-fast for the 28x28 sets,
// cifar10-tutorial (the seeds' network) for CIFAR-10. UnknownName for other names.
std::string defaultModelFor(const std::string& dataset);

// The training configuration a model starts from (model, optimizer, schedule, batch per tower,
// length, weight decay, EMA); the caller fills dataset, towers and anything the user overrides.
//   cifar10-tutorial  the tutorial: plain SGD, lr 0.1 decayed x0.1 every 350 epochs (staircase),
//                     batch 128, EMA 0.9999, 10,000 steps (the tutorial runs 1,000,000)
//   cifar10-resnet    Nesterov 0.9, one-cycle to 0.2, weight decay 5e-4, batch 128, 12 epochs
//   fashion-fast      Nesterov 0.9, one-cycle to 0.1, weight decay 5e-4, batch 64, 10 epochs
//   mnist-convnet     the MNIST seed: Adam, lr 1e-3, batch 128, 2 epochs
TrainConfig defaultConfigFor(const std::string& model);

// The preprocessing of `model` on `dataset` (its training set gives the normalisation
// statistics): the tutorial's distorted_inputs for cifar10-tutorial (24x24 crops), pad-and-crop
// translation by 4 with flips and per-channel normalisation for 32x32 colour models, translation
// by 1 (with flips for Fashion-MNIST, not for digits) and normalisation for the 28x28 sets.
// Throws InvalidArgument when the model cannot take the dataset's images ("cifar10-tutorial
// takes 24x24x3 images; fashion-mnist has 28x28x1").
Preprocessing preprocessingFor(const std::string& model, const Dataset& dataset);

} // namespace towers::engine
