#include "engine/data/dataset_content.h"

#include <cstdint>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "engine/errors.h"

namespace towers::engine {

namespace {

using Json = nlohmann::json;

Json parsedRecord(const std::string& record)
{
    try {
        Json o = Json::parse(record);
        if (o.is_object() && o.contains("classes") && o["classes"].is_array() &&
            o.contains("train") && o.contains("test"))
            return o;
    } catch (const Json::exception&) {
    }
    throw InvalidArgument("not a record of a dataset's content: " + record.substr(0, 200));
}

std::string joined(const Json& names)
{
    std::string text;
    for (const auto& n : names) text += (text.empty() ? "" : ", ") + n.get<std::string>();
    return text;
}

// CRC-32 (zlib's) of a set's pixels, then its labels.
unsigned long imageSetCrc(const ImageSet& set)
{
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32_z(c, reinterpret_cast<const Bytef*>(set.pixels.data()), set.pixels.size());
    c = crc32_z(c, reinterpret_cast<const Bytef*>(set.labels.data()),
                set.labels.size() * sizeof(set.labels[0]));
    return c;
}

} // namespace

std::string datasetContent(const Dataset& dataset)
{
    const auto part = [](const ImageSet& s) {
        return Json{{"examples", s.count}, {"crc32", imageSetCrc(s)}};
    };
    Json o;
    o["classes"] = dataset.classNames;
    o["train"] = part(dataset.train);
    o["test"] = part(dataset.test);
    return o.dump();
}

std::string datasetContentChange(const std::string& before, const std::string& now)
{
    const Json a = parsedRecord(before), b = parsedRecord(now);
    if (a == b) return {};
    std::string change;
    const auto add = [&change](const std::string& what) {
        change += (change.empty() ? "" : "; ") + what;
    };
    if (a["classes"] != b["classes"])
        add("its classes were " + joined(a["classes"]) + ", they are " + joined(b["classes"]));
    for (const char* set : {"train", "test"}) {
        const Json &x = a[set], &y = b[set];
        const std::string name = std::string(set) == "train" ? "training" : "test";
        if (x.value("examples", -1) != y.value("examples", -1))
            add("its " + name + " set had " + std::to_string(x.value("examples", -1)) +
                " examples, it has " + std::to_string(y.value("examples", -1)));
        else if (x.value("crc32", 0UL) != y.value("crc32", 0UL))
            add("its " + name + " set has the same number of examples (" +
                std::to_string(y.value("examples", -1)) + ") but other images or labels (CRC-32 " +
                std::to_string(x.value("crc32", 0UL)) + ", now " +
                std::to_string(y.value("crc32", 0UL)) + ")");
    }
    return change.empty() ? "its record differs" : change;
}

std::string datasetContentLines(const std::string& record)
{
    const Json o = parsedRecord(record);
    const auto line = [&o](const char* set, const char* name) {
        return std::string(name) + " examples " +
               std::to_string(o[set].value("examples", std::int64_t(-1))) + ", CRC-32 " +
               std::to_string(o[set].value("crc32", 0UL));
    };
    return line("train", "training") + "\n" + line("test", "test");
}

std::optional<std::vector<std::string>> datasetContentClasses(const std::string& record)
{
    try {
        return parsedRecord(record)["classes"].get<std::vector<std::string>>();
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

} // namespace towers::engine
