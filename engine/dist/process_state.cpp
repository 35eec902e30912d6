#include "engine/dist/process_state.h"

#include "engine/dist/byte_message.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <vector>

namespace towers::engine {

namespace {

// What differs between two line-per-setting descriptions: the first line of `there` that rank 0
// lacks, beside rank 0's line of the same key ("--lr 0.5 there, --lr 0.1 on rank 0").
std::string firstDifferentLine(const std::string& there, const std::string& rank0)
{
    const auto lines = [](const std::string& text) {
        std::vector<std::string> out;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            line.erase(0, line.find_first_not_of(" \t"));
            while (!line.empty() && (line.back() == ',' || line.back() == ' ')) line.pop_back();
            out.push_back(line);
        }
        return out;
    };
    const auto keyOf = [](const std::string& line) {
        return line.substr(0, line.find_first_of(": "));
    };
    const std::vector<std::string> a = lines(there), b = lines(rank0);
    const auto in = [](const std::vector<std::string>& v, const std::string& x) {
        return std::find(v.begin(), v.end(), x) != v.end();
    };
    for (const auto& la : a) {
        if (in(b, la)) continue;
        for (const auto& lb : b)
            if (!in(a, lb) && keyOf(lb) == keyOf(la)) return la + " there, " + lb + " on rank 0";
        return la + " there, nothing like it on rank 0";
    }
    for (const auto& lb : b)
        if (!in(a, lb)) return lb + " on rank 0, nothing like it there";
    return "they differ";
}

std::string packSettings(const std::vector<Setting>& settings)
{
    std::string out;
    const auto put = [&](const std::string& text) {
        putBytes(out, std::uint64_t(text.size()));
        out += text;
    };
    putBytes(out, std::uint64_t(settings.size()));
    for (const Setting& s : settings) {
        put(s.name);
        put(s.canonical);
        put(s.given);
    }
    return out;
}

std::vector<Setting> unpackSettings(const std::string& bytes, std::size_t rank)
{
    ByteReader r(bytes, "the settings of rank " + std::to_string(rank));
    const auto take = [&] {
        const auto n = r.take<std::uint64_t>();
        return std::string(r.bytes(n), n);
    };
    const auto count = r.take<std::uint64_t>();
    std::vector<Setting> out;
    for (std::uint64_t i = 0; i < count; ++i) {
        Setting s;
        s.name = take();
        s.canonical = take();
        s.given = take();
        out.push_back(std::move(s));
    }
    if (!r.atEnd()) throw Error("the settings of rank " + std::to_string(rank) + " are damaged");
    return out;
}

} // namespace

std::string packTensorEntries(const NamedTensors& tensors)
{
    std::string out;
    putBytes(out, std::uint64_t(tensors.size()));
    for (const auto& [name, t] : tensors) {
        putBytes(out, std::uint64_t(name.size()));
        out += name;
        putBytes(out, std::int32_t(t.dtype()));
        putBytes(out, std::uint64_t(t.rank()));
        for (int d = 0; d < t.rank(); ++d) putBytes(out, std::int64_t(t.dim(d)));
    }
    return out;
}

std::vector<SafeTensorEntry> unpackTensorEntries(const std::string& bytes)
{
    ByteReader r(bytes, "the training state sent by rank 0");
    const auto count = r.take<std::uint64_t>();
    std::vector<SafeTensorEntry> out;
    for (std::uint64_t i = 0; i < count; ++i) {
        const auto nameLength = r.take<std::uint64_t>();
        std::string name(r.bytes(nameLength), nameLength);
        const auto dtype = r.take<std::int32_t>();
        const auto rank = r.take<std::uint64_t>();
        if (rank > 16 || dtype < 0 || dtype > std::int32_t(DType::UInt8))
            throw Error("the training state sent by rank 0 is damaged");
        std::vector<std::int64_t> dims;
        for (std::uint64_t d = 0; d < rank; ++d) {
            dims.push_back(r.take<std::int64_t>());
            if (dims.back() < 0) throw Error("the training state sent by rank 0 is damaged");
        }
        out.push_back({std::move(name), DType(dtype), Shape(dims)});
    }
    if (!r.atEnd()) throw Error("the training state sent by rank 0 has extra bytes");
    return out;
}

void requireSameEverywhere(ProcessGroup& group, const std::string& mine, const std::string& what,
                           bool usage)
{
    const std::vector<std::string> all = group.allGatherStrings(mine);
    for (std::size_t r = 1; r < all.size(); ++r)
        if (all[r] != all.front()) {
            const std::string message =
                "rank " + std::to_string(r) + " runs another " + what +
                " than rank 0: " + firstDifferentLine(all[r], all.front()) +
                ". Every process of a run must run the same Towers with the same options and data.";
            if (usage) throw InvalidArgument(message);
            throw Error(message);
        }
}

std::string rankList(const std::vector<int>& ranks)
{
    std::string out = ranks.size() == 1 ? "rank " : "ranks ";
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (i) out += i + 1 == ranks.size() ? " and " : ", ";
        out += std::to_string(ranks[i]);
    }
    return out;
}

void requireSameSettings(ProcessGroup& group, const std::vector<Setting>& mine)
{
    const std::vector<std::string> packed = group.allGatherStrings(packSettings(mine));
    std::vector<std::vector<Setting>> all;
    for (std::size_t r = 0; r < packed.size(); ++r) all.push_back(unpackSettings(packed[r], r));
    const auto find = [](const std::vector<Setting>& settings, const std::string& name) {
        const auto it = std::find_if(settings.begin(), settings.end(),
                                     [&](const Setting& s) { return s.name == name; });
        return it == settings.end() ? nullptr : &*it;
    };
    // The names in rank 0's order, then those only the others have.
    std::vector<std::string> names;
    for (const auto& settings : all)
        for (const Setting& s : settings)
            if (std::find(names.begin(), names.end(), s.name) == names.end())
                names.push_back(s.name);
    for (const std::string& name : names) {
        // Each meaning with the ranks that have it (nullptr: not given), in order of first rank.
        std::vector<std::pair<const Setting*, std::vector<int>>> meanings;
        for (std::size_t r = 0; r < all.size(); ++r) {
            const Setting* s = find(all[r], name);
            auto it = std::find_if(meanings.begin(), meanings.end(), [&](const auto& m) {
                return (m.first == nullptr) == (s == nullptr) &&
                       (!s || m.first->canonical == s->canonical);
            });
            if (it == meanings.end())
                meanings.push_back({s, {int(r)}});
            else
                it->second.push_back(int(r));
        }
        if (meanings.size() < 2) continue;
        std::string message = "the processes of the run were started differently: " + name + " is ";
        for (std::size_t m = 0; m < meanings.size(); ++m) {
            const auto& [s, ranks] = meanings[m];
            if (m) message += ", ";
            message += s ? s->given : std::string("not given");
            message += " on " + rankList(ranks);
        }
        throw InvalidArgument(message + ". Every process of a run must run the same Towers with "
                                        "the same options.");
    }
}

} // namespace towers::engine
