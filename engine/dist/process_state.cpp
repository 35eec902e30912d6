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

} // namespace

std::string packTensors(const NamedTensors& tensors)
{
    std::string out;
    putBytes(out, std::uint64_t(tensors.size()));
    for (const auto& [name, t] : tensors) {
        const Tensor h = t.onHost();
        putBytes(out, std::uint64_t(name.size()));
        out += name;
        putBytes(out, std::int32_t(h.dtype()));
        putBytes(out, std::uint64_t(h.rank()));
        for (int d = 0; d < h.rank(); ++d) putBytes(out, std::int64_t(h.dim(d)));
        putBytes(out, std::uint64_t(h.bytes()));
        if (h.bytes()) out.append(static_cast<const char*>(h.raw()), h.bytes());
    }
    return out;
}

NamedTensors unpackTensors(const std::string& bytes)
{
    ByteReader r(bytes, "the training state sent by rank 0");
    const auto count = r.take<std::uint64_t>();
    NamedTensors out;
    for (std::uint64_t i = 0; i < count; ++i) {
        const auto nameLength = r.take<std::uint64_t>();
        std::string name(r.bytes(nameLength), nameLength);
        const auto dtype = DType(r.take<std::int32_t>());
        const auto rank = r.take<std::uint64_t>();
        if (rank > 16) throw Error("the training state sent by rank 0 is damaged");
        std::vector<std::int64_t> dims;
        for (std::uint64_t d = 0; d < rank; ++d) dims.push_back(r.take<std::int64_t>());
        Tensor t(Shape(dims), dtype);
        const auto n = r.take<std::uint64_t>();
        if (n != t.bytes())
            throw Error("the training state sent by rank 0 is damaged (tensor '" + name + "')");
        if (n) std::memcpy(t.raw(), r.bytes(n), n);
        out.emplace_back(std::move(name), std::move(t));
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

} // namespace towers::engine
