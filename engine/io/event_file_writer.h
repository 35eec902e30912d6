#pragma once
// TensorBoard event files: events.out.tfevents.<unix time>.<host>, TFRecord-framed Event protocol
// buffers (TensorBoard's messages and field numbers, engine/io/tensorboard/*.proto). What
// `tensorboard --logdir` and TensorBoard's EventAccumulator read: scalars, histograms, images,
// text, and the restart marker of a resumed run.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "engine/io/tfrecord.h"

namespace towers::engine {

// A histogram as TensorFlow's tf.summary.histogram (v1) makes it: TensorFlow's default bucket
// limits (0, and +-1e-12 growing by 10% up to +-1e20, then +-DBL_MAX), runs of empty buckets
// merged into one.
struct Histogram
{
    double min = 0, max = 0, num = 0, sum = 0, sumSquares = 0;
    std::vector<double>
        bucketLimit; // bucket i: [bucketLimit[i - 1], bucketLimit[i]); the first from -DBL_MAX
    std::vector<double> bucket; // counts

    // Non-finite values are left out (they have no bucket).
    static Histogram of(std::span<const float> values);
    static Histogram of(std::span<const double> values);
    // TensorFlow's default limits, ascending (1,551 of them, from -DBL_MAX to DBL_MAX).
    static const std::vector<double>& defaultLimits();
};

class EventFileWriter
{
public:
    // Creates a new file in `folder` (which must exist): events.out.tfevents.<unix seconds>.<host>,
    // the seconds made later than those of every event file already there, so that the files sort
    // in the order they were written (TensorBoard reads a folder's files in that order). Writes the
    // file-version record. IoError naming the file when it cannot be created.
    explicit EventFileWriter(const std::filesystem::path& folder);

    const std::filesystem::path& path() const { return m_file.path(); }

    // Each call below writes one event record at once (IoError naming the file on failure).
    //
    // SessionLog START at `step`: TensorBoard discards what earlier files of the folder hold at
    // `step` or later (the future of an earlier attempt a resumed run replaces).
    void sessionStart(std::int64_t step);
    // Scalars (simple_value, float32 on disk), one event.
    void scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values);
    // Histograms, one event.
    void histograms(std::int64_t step,
                    const std::vector<std::pair<std::string, Histogram>>& values);
    // An image (tf.summary.image): `png` is a PNG file of height x width x channels (1 or 3).
    void image(std::int64_t step, const std::string& tag, const std::string& png, int height,
               int width, int channels);
    // Markdown for TensorBoard's text plugin (a string tensor, as tf.summary.text).
    void text(std::int64_t step, const std::string& tag, const std::string& markdown);
    // A hyperparameter's value for the HParams plugin: a number, a string or a boolean.
    using HParamValue = std::variant<double, std::string, bool>;
    // The HParams plugin's session start (as its hparams summary writes it: the tag
    // "_hparams_/session_start_info", an empty float tensor, the plugin data): the run's
    // hyperparameters, which TensorBoard's HParams dashboard shows as a row per run beside its
    // scalars; `modelUri`, where its checkpoints are.
    void hparams(const std::vector<std::pair<std::string, HParamValue>>& values,
                 const std::string& modelUri);
    // The HParams plugin's session end ("_hparams_/session_end_info"): the run succeeded (it
    // reached its end, or stopped early) or failed; the dashboard's Status column. A run stopped
    // to be resumed writes none (its status stays unknown).
    void hparamsEnd(bool success);

    // Rewrites the event files of `folder` without their records of steps after `step` (the file
    // version stays), without their HParams session starts and ends (the resumed run writes its
    // own) and without a partial last record a killed writer left: the abandoned future a run
    // resumed at `step` replaces, as truncateLogs drops it from metrics.jsonl. (TensorBoard's
    // Python loader drops it anyway at sessionStart(); its fast loader does not.) Each file is
    // replaced atomically (temporary file, fsync, rename); one that does not read (a CRC fails) is
    // left as it is. Returns how many files were rewritten; IoError naming the file when one
    // cannot be.
    static int dropEventsAfter(const std::filesystem::path& folder, std::int64_t step);

    // The file name for `unixSeconds` and `host`, and the seconds of an event file's name (-1
    // when it is not one).
    static std::string fileName(std::int64_t unixSeconds, const std::string& host);
    static std::int64_t secondsOf(const std::string& fileName);

private:
    void writeEvent(const std::string& serialized);
    // An HParams plugin summary: `tag`, the serialized HParamsPluginData, the empty tensor.
    void writeHParams(const std::string& tag, const std::string& pluginData);
    TfRecordFile m_file;
};

} // namespace towers::engine
