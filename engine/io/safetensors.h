#pragma once
// Hugging Face safetensors files: the checkpoint format. A file is a little-endian u64 header
// length N, N bytes of JSON describing every tensor (dtype, shape, byte range) plus optional
// string metadata, then the raw little-endian tensor bytes. Tensor names and layouts follow the
// state_dict of the equivalent PyTorch module (see docs/pytorch-mapping.md), so a checkpoint loads
// in Python with python/towers_torch.py or the `safetensors` package.
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tensor/tensor.h"

namespace towers::engine {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafeTensors
{
    // In file order (ascending data offsets), which is the order they were written in.
    NamedTensors tensors;
    std::map<std::string, std::string> metadata;

    // The tensor called `name`, or nullptr.
    const Tensor* find(std::string_view name) const;
};

// Writes `tensors` (host tensors of any dtype; names unique, non-empty and not "__metadata__")
// and `metadata` to `path` atomically: the bytes go to a temporary file in the same directory,
// which is flushed, fsync'ed and renamed over `path`, then the directory is fsync'ed. Either the
// old file or the complete new one is there afterwards, never a partial one. Throws
// InvalidArgument for bad names or tensors, and IoError naming the path and the operating
// system's reason (no such directory, permission denied, disk full...) for anything that fails on
// disk; the temporary file is removed then.
void writeSafeTensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads and validates a whole file. Every tensor is copied into its own host buffer. Throws
// FileOutOfMemory (an IoError) where a tensor cannot be given memory, IoError naming the file and
// what is wrong with it (with the byte offset where that helps):
// a short or truncated file, an absurd header length, invalid JSON, missing or malformed keys, an
// unsupported dtype, a shape that does not match its byte range, byte ranges out of bounds,
// overlapping or leaving gaps, duplicate names. Never reads out of bounds on any input.
SafeTensors readSafeTensors(const std::filesystem::path& path);
// The metadata of a file whose header passes the same checks, without reading any tensor: what a
// listing or a chooser shows (a few kilobytes read, whatever the file's size).
std::map<std::string, std::string> readSafeTensorsMetadata(const std::filesystem::path& path);

// A tensor as a file's header describes it.
struct SafeTensorEntry
{
    std::string name;
    DType dtype;
    Shape shape;

    // "float32 [128, 3136]", as Tensor::describe() says a host tensor.
    std::string describe() const { return std::string(dtypeName(dtype)) + " " + shape.str(); }
};
// Each tensor's name, dtype and shape, as a file's header would describe them.
std::vector<SafeTensorEntry> describeTensors(const NamedTensors& tensors);
using SafeTensorsHeaderFn = std::function<void(const std::map<std::string, std::string>& metadata,
                                               const std::vector<SafeTensorEntry>& tensors)>;
using SafeTensorFn = std::function<void(const std::string& name, Tensor& tensor)>;
// readSafeTensors' checks, with the file handed over in pieces: `header` (if given) sees the
// metadata and every tensor's entry, in file order, before any tensor is read; then `visit` (if
// given) each tensor in turn, read into its own buffer and dropped after the call, so that no
// more than the largest tensor is in memory at once, whatever the file's size. Returns the
// metadata. IoError as readSafeTensors; what the functions throw goes to the caller.
std::map<std::string, std::string> visitSafeTensors(const std::filesystem::path& path,
                                                    const SafeTensorsHeaderFn& header,
                                                    const SafeTensorFn& visit);

} // namespace towers::engine
