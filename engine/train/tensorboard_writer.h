#pragma once
// What a training run shows in TensorBoard: the trainer's events file in the run folder
// (events.out.tfevents.<unix time>.<host>, one per run() of a Trainer; a resumed run adds one).
// Tags, with the steps they are written at:
// * at the logged steps: train/loss, train/cross_entropy, train/learning_rate, train/epoch,
//   throughput/examples_per_sec, throughput/tower_<t>/examples_per_sec (a tower's slice over its
//   compute time), time/step_ms, time/data_wait_ms, time/compute_ms, time/allreduce_ms (the
//   averaging the slowest tower waits for), time/update_ms, time/tower_<t>/compute_ms, and
//   train/grad_norm, the averaged gradients' global norm (before clipping, in a run that clips);
// * at evaluations: test/precision_at_1, test/cross_entropy (validation/... for a run that holds a
//   validation set out; ..._ema with the moving averages);
// * every histogramEvery steps: <layer>/<parameter> and <layer>/<parameter>/gradients histograms;
// * at the start: input/training_images, a grid of the first batch after the recipe's
//   distortions, config, the run's configuration (TensorBoard's text plugin), and
//   _hparams_/session_start_info, its hyperparameters (hparamsOf) for the HParams dashboard.
// The values are those of metrics.jsonl and eval.jsonl (as float32). Writes are unbuffered, so a
// killed run's file reads up to its last whole record.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/data/batch_source.h"
#include "engine/io/event_file_writer.h"
#include "engine/models/model.h"
#include "engine/train/evaluation.h"
#include "engine/train/train_config.h"
#include "engine/train/trainer_observer.h"

namespace towers::engine {

class TensorBoardWriter
{
public:
    // Creates the events file in `runFolder` (IoError naming it when it cannot).
    explicit TensorBoardWriter(const std::filesystem::path& runFolder);

    const std::filesystem::path& path() const { return m_file.path(); }

    // The start of a run at `step` (0 for a new run): the restart marker (what earlier files hold
    // at `step` or later is an abandoned future TensorBoard then drops), the configuration, and
    // its hyperparameters for the HParams plugin, with `checkpoints`, where the run keeps them.
    void start(std::int64_t step, const TrainConfig& config,
               const std::filesystem::path& checkpoints);
    // The end of a run that reached its end or stopped early (success) or failed, for the
    // HParams dashboard's status (EventFileWriter::hparamsEnd).
    void end(bool success) { m_file.hparamsEnd(success); }
    // A grid of at most `maxImages` images of `batch` (per image rescaled from its own minimum and
    // maximum to 0..255, as the GUI shows them), as one PNG; nothing for images that are not
    // Float32 NHWC grayscale or RGB.
    void trainingImages(std::int64_t step, const Batch& batch, int maxImages = 64);
    void stepMetrics(const StepMetrics& m, std::int64_t examplesPerTower);
    void evaluation(const EvalResult& r);
    // Histograms of every trainable parameter of `model`, and of its gradient when `gradients`.
    void parameters(std::int64_t step, const Model& model, bool gradients);

    // "conv1.weight" -> "conv1/weight": TensorBoard groups tags by what comes before the first '/'.
    static std::string tagOf(const std::string& parameterName);

private:
    EventFileWriter m_file;
};

// The hyperparameters a run shows in TensorBoard's HParams dashboard, one column each, named as
// the command line's options: model, dataset, optimizer, lr, lr_schedule, batch_per_tower,
// towers, processes, global_batch, weight_decay (when it replaces the model's), ema_decay,
// label_smoothing, seed,
// precision, augmentation, steps, epochs, validation, patience, dropout, device and init_from
// (when the run started from a checkpoint).
std::vector<std::pair<std::string, EventFileWriter::HParamValue>> hparamsOf(const TrainConfig& c);

// The images of a batch tiled into one grid, 8-bit, 2 pixels of black between tiles; `height`,
// `width` and `channels` receive its size.
std::vector<std::uint8_t> imageGrid(const Batch& batch, int maxImages, int& height, int& width,
                                    int& channels);

} // namespace towers::engine
