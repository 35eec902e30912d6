#include "engine/io/event_file_writer.h"

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>

#include <unistd.h>

#include "engine/errors.h"
#include "io/tensorboard/event.pb.h"
#include "io/tensorboard/hparams.pb.h"

namespace towers::engine {

namespace fs = std::filesystem;
namespace tb = towers::tensorboard;

namespace {

constexpr const char* kPrefix = "events.out.tfevents.";
constexpr const char* kSessionStartTag = "_hparams_/session_start_info";
constexpr const char* kSessionEndTag = "_hparams_/session_end_info";

// A summary of one value tagged `tag`.
bool isTagged(const tb::Event& e, const char* tag)
{
    return e.summary().value_size() == 1 && e.summary().value(0).tag() == tag;
}

double wallTime()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string hostName()
{
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
    std::string h = buf;
    std::replace(h.begin(), h.end(), '/', '_');
    return h;
}

// A folder's event file name for now: later than every event file's already there.
fs::path newFileIn(const fs::path& folder)
{
    std::int64_t seconds = std::int64_t(std::time(nullptr));
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
        seconds = std::max(seconds, EventFileWriter::secondsOf(it->path().filename().string()) + 1);
    return folder / EventFileWriter::fileName(seconds, hostName());
}

template <class T> Histogram histogramOf(std::span<const T> values)
{
    const auto& limits = Histogram::defaultLimits();
    std::vector<double> counts(limits.size(), 0.0);
    Histogram h;
    h.min = DBL_MAX;
    h.max = -DBL_MAX;
    for (const T value : values) {
        const double v = double(value);
        if (!std::isfinite(v)) continue;
        h.min = std::min(h.min, v);
        h.max = std::max(h.max, v);
        h.num += 1;
        h.sum += v;
        h.sumSquares += v * v;
        // The bucket whose limit is the first above v (TensorFlow's upper_bound).
        const auto b =
            std::size_t(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
        counts[std::min(b, counts.size() - 1)] += 1;
    }
    if (h.num == 0) h.min = h.max = 0;
    // Runs of empty buckets become one (the run's last limit), as TensorFlow encodes them.
    for (std::size_t i = 0; i < limits.size();) {
        double end = limits[i], count = counts[i];
        ++i;
        if (count <= 0)
            while (i < limits.size() && counts[i] <= 0) end = limits[i++];
        h.bucketLimit.push_back(end);
        h.bucket.push_back(count);
    }
    return h;
}

} // namespace

const std::vector<double>& Histogram::defaultLimits()
{
    static const std::vector<double> limits = [] {
        std::vector<double> positive;
        for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
        positive.push_back(DBL_MAX);
        std::vector<double> all;
        for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
        all.push_back(0.0);
        all.insert(all.end(), positive.begin(), positive.end());
        return all;
    }();
    return limits;
}

Histogram Histogram::of(std::span<const float> values)
{
    return histogramOf(values);
}
Histogram Histogram::of(std::span<const double> values)
{
    return histogramOf(values);
}

std::string EventFileWriter::fileName(std::int64_t unixSeconds, const std::string& host)
{
    char digits[32];
    std::snprintf(digits, sizeof digits, "%010lld", static_cast<long long>(unixSeconds));
    return std::string(kPrefix) + digits + "." + host;
}

std::int64_t EventFileWriter::secondsOf(const std::string& name)
{
    const std::string prefix = kPrefix;
    if (name.rfind(prefix, 0) != 0) return -1;
    std::int64_t seconds = 0;
    std::size_t i = prefix.size();
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && i < prefix.size() + 18; ++i)
        seconds = seconds * 10 + (name[i] - '0');
    return i > prefix.size() ? seconds : -1;
}

int EventFileWriter::dropEventsAfter(const fs::path& folder, std::int64_t step)
{
    static const std::string kTemporary = ".towers-events-rewrite-";
    std::vector<fs::path> files, stale;
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (secondsOf(name) >= 0 && it->is_regular_file(ec)) files.push_back(it->path());
        if (name.rfind(kTemporary, 0) == 0) stale.push_back(it->path()); // a killed rewrite's
    }
    for (const auto& s : stale) fs::remove(s, ec);
    int rewritten = 0;
    for (const auto& file : files) {
        std::string bytes;
        {
            std::ifstream in(file, std::ios::binary);
            bytes.assign(std::istreambuf_iterator<char>(in), {});
        }
        std::vector<std::string> records;
        bool complete = false;
        try {
            records = readTfRecords(bytes, &complete, file.string());
        } catch (const IoError&) {
            continue; // damaged: not ours to repair; readers stop at the damage
        }
        std::vector<std::string> kept;
        bool dropped = !complete;
        for (auto& r : records) {
            tb::Event e;
            // Beyond `step`; or the HParams session start and end, which the resumed run writes
            // again (the plugin takes a tag's first one).
            if (e.ParseFromString(r) && !e.has_file_version() &&
                (e.step() > step || isTagged(e, kSessionStartTag) || isTagged(e, kSessionEndTag))) {
                dropped = true;
                continue;
            }
            kept.push_back(std::move(r));
        }
        if (!dropped) continue;
        // A temporary name TensorBoard does not take for an event file (no "tfevents" in it).
        const fs::path temp = folder / (kTemporary + std::to_string(::getpid()));
        try {
            TfRecordFile out(temp);
            out.write(kept);
            out.sync();
        } catch (...) {
            ::unlink(temp.c_str());
            throw;
        }
        if (::rename(temp.c_str(), file.c_str()) != 0) {
            const int err = errno;
            ::unlink(temp.c_str());
            throw IoError("cannot replace '" + file.string() + "': " + std::strerror(err));
        }
        ++rewritten;
    }
    return rewritten;
}

EventFileWriter::EventFileWriter(const fs::path& folder)
    : m_file(newFileIn(folder), TfRecordFile::Open::CreateNew)
{
    tb::Event e;
    e.set_wall_time(wallTime());
    e.set_file_version("brain.Event:2");
    writeEvent(e.SerializeAsString());
}

void EventFileWriter::writeEvent(const std::string& serialized)
{
    m_file.write(serialized);
}

void EventFileWriter::sessionStart(std::int64_t step)
{
    tb::Event e;
    e.set_wall_time(wallTime());
    e.set_step(step);
    e.mutable_session_log()->set_status(tb::SessionLog::START);
    writeEvent(e.SerializeAsString());
}

void EventFileWriter::scalars(std::int64_t step,
                              const std::vector<std::pair<std::string, double>>& values)
{
    tb::Event e;
    e.set_wall_time(wallTime());
    e.set_step(step);
    for (const auto& [tag, value] : values) {
        auto* v = e.mutable_summary()->add_value();
        v->set_tag(tag);
        v->set_simple_value(float(value));
    }
    writeEvent(e.SerializeAsString());
}

void EventFileWriter::histograms(std::int64_t step,
                                 const std::vector<std::pair<std::string, Histogram>>& values)
{
    tb::Event e;
    e.set_wall_time(wallTime());
    e.set_step(step);
    for (const auto& [tag, h] : values) {
        auto* v = e.mutable_summary()->add_value();
        v->set_tag(tag);
        auto* p = v->mutable_histo();
        p->set_min(h.min);
        p->set_max(h.max);
        p->set_num(h.num);
        p->set_sum(h.sum);
        p->set_sum_squares(h.sumSquares);
        for (double l : h.bucketLimit) p->add_bucket_limit(l);
        for (double c : h.bucket) p->add_bucket(c);
    }
    writeEvent(e.SerializeAsString());
}

void EventFileWriter::image(std::int64_t step, const std::string& tag, const std::string& png,
                            int height, int width, int channels)
{
    tb::Event e;
    e.set_wall_time(wallTime());
    e.set_step(step);
    auto* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    auto* image = v->mutable_image();
    image->set_height(height);
    image->set_width(width);
    image->set_colorspace(channels);
    image->set_encoded_image_string(png);
    writeEvent(e.SerializeAsString());
}

void EventFileWriter::text(std::int64_t step, const std::string& tag, const std::string& markdown)
{
    tb::Event e;
    e.set_wall_time(wallTime());
    e.set_step(step);
    auto* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    // As tf.summary.text: the text plugin's metadata (empty content: its version 0) and a scalar
    // string tensor.
    auto* metadata = v->mutable_metadata();
    metadata->mutable_plugin_data()->set_plugin_name("text");
    metadata->set_data_class(tb::DATA_CLASS_TENSOR);
    auto* tensor = v->mutable_tensor();
    tensor->set_dtype(tb::DT_STRING);
    tensor->mutable_tensor_shape();
    tensor->add_string_val(markdown);
    writeEvent(e.SerializeAsString());
}

void EventFileWriter::hparams(const std::vector<std::pair<std::string, HParamValue>>& values,
                              const std::string& modelUri)
{
    tb::HParamsPluginData data;
    data.set_version(0);
    auto* start = data.mutable_session_start_info();
    start->set_model_uri(modelUri);
    start->set_start_time_secs(wallTime());
    for (const auto& [name, value] : values) {
        tb::HParamValue& v = (*start->mutable_hparams())[name];
        if (const auto* number = std::get_if<double>(&value))
            v.set_number_value(*number);
        else if (const auto* text = std::get_if<std::string>(&value))
            v.set_string_value(*text);
        else
            v.set_bool_value(std::get<bool>(value));
    }
    writeHParams(kSessionStartTag, data.SerializeAsString());
}

void EventFileWriter::hparamsEnd(bool success)
{
    tb::HParamsPluginData data;
    data.set_version(0);
    auto* end = data.mutable_session_end_info();
    end->set_status(success ? tb::STATUS_SUCCESS : tb::STATUS_FAILURE);
    end->set_end_time_secs(wallTime());
    writeHParams(kSessionEndTag, data.SerializeAsString());
}

void EventFileWriter::writeHParams(const std::string& tag, const std::string& pluginData)
{
    tb::Event e;
    e.set_wall_time(wallTime());
    e.set_step(0);
    auto* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    auto* metadata = v->mutable_metadata();
    metadata->mutable_plugin_data()->set_plugin_name("hparams");
    metadata->mutable_plugin_data()->set_content(pluginData);
    // The plugin's empty tensor: float32 of shape [0].
    auto* tensor = v->mutable_tensor();
    tensor->set_dtype(tb::DT_FLOAT);
    tensor->mutable_tensor_shape()->add_dim()->set_size(0);
    writeEvent(e.SerializeAsString());
}

} // namespace towers::engine
