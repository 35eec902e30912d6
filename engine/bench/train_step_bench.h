#pragma once
// Times a full training step (forward + loss, backward, SGD update) of a registered model on
// synthetic data, or its forward pass in evaluation mode: the engine side of `towers-cli bench`.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/ops/precision.h"

namespace towers::engine {
class Ops;
}

namespace towers::engine {

struct TrainStepBenchOptions
{
    std::string model = "cifar10-tutorial";
    std::string modelDefinition; // a model file's network (resolveModel), "" for a built-in one
    int batchSize = 128;
    int threads = 0;                // 0 = every core
    int steps = 20;                 // timed steps
    int warmup = 3;                 // untimed steps first (primitive creation, caches)
    std::string backend = "onednn"; // "onednn", "reference" or "cuda"
    int gpu = 0;                    // for "cuda"
    bool allowTf32 = false;         // "cuda": TF32 tensor cores for float32
    bool cudnnBenchmark = false;    // "cuda": convolution algorithms measured (--cudnn-benchmark)
    Precision precision = Precision::Float32; // bf16: convolutions and matrix products
    double learningRate = 0.01;
    std::uint64_t seed = 1;
    // Also time each layer's forward and backward (synchronising around each; the step is
    // slightly slower for it) and name the implementations its primitives ran on.
    bool perLayer = false;
    // Time the forward pass alone in evaluation mode instead of the training step: what eval,
    // classify and the evaluations during training run (batch norms with their running
    // statistics, dropout off, no loss, backward or update).
    bool inference = false;
    // On a GPU whose ops can capture: also time as many steps again replayed from one capture
    // (CUDA graphs, as a GPU tower's training replays them).
    bool graphs = true;
    // Tests: the backend's ops (a stand-in device's); by default makeBackendOps(backend).
    std::function<std::unique_ptr<Ops>()> makeOps;
};

// One layer of the model's top level (a residual block counts as one), per timed step.
struct LayerTiming
{
    std::string name, kind, description;
    double forwardMs = 0, backwardMs = 0;
    // What the oneDNN backend ran, for each direction: "jit:avx512_core", "towers:AVX2",
    // "lrn_ref:any" (a reference loop), each distinct one once; empty for other backends.
    std::vector<std::string> forwardImpl, backwardImpl;
};

struct TrainStepBenchResult
{
    TrainStepBenchOptions options;
    std::string backend; // e.g. "onednn 2.6.3"
    int threads = 0;     // the OpenMP threads actually used
    // batch / mean step time. On a GPU, the step time is that of steps issued back to back, as
    // training issues them (the loss stays on the GPU, one wait at the end): the GPU then runs
    // while the host issues the next step. On the CPU, whose ops finish before they return, the
    // sum of the phases.
    double imagesPerSec = 0;
    double stepMs = 0;
    // The phases' means per step, each timed up to the device's finishing it (so on a GPU their
    // sum, phasesMs, exceeds stepMs by the waits between them).
    double forwardMs = 0, backwardMs = 0, updateMs = 0, phasesMs = 0;
    bool backToBack = false; // stepMs is of steps issued back to back (a GPU)
    // With options.graphs on a GPU: the mean time of a step replayed from a capture (issued
    // back to back as well) and its images/s; 0 when not timed, and `graphsUnavailable` says
    // why ("" when timed or on the CPU).
    double graphStepMs = 0, graphImagesPerSec = 0;
    std::string graphsUnavailable;
    double gflopsPerImage = 0; // training (inference: forward) FLOPs per image, in GFLOP
    double achievedGflops = 0; // gflopsPerImage * imagesPerSec
    double lastLoss = 0;       // of the last step (inference: of the last pass, in evaluation mode)
    // Inference: the layers the pass runs a chunk of the batch at a time, and how
    // (Sequential::chunking): "conv1 to flatten, 16 images at a time in a 2 MiB cache"; empty
    // where it runs the whole batch through every layer.
    std::string chunking;
    std::string isa;        // the CPU's instruction set oneDNN ran on ("avx2", "avx512_core")
    std::string simdTarget; // the one Towers' own kernels ran on ("AVX2", "AVX3")
    std::vector<LayerTiming> layers; // with options.perLayer, in forward order
};

// Throws InvalidArgument / UnknownName for bad options (batch < 1, steps < 1, unknown model...).
TrainStepBenchResult
benchmarkTrainStep(const TrainStepBenchOptions& options,
                   const std::function<void(int step, int total)>& progress = {});

} // namespace towers::engine
