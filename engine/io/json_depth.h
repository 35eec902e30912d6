#pragma once
// A bound on how deeply the JSON Towers reads may nest. nlohmann's parser is iterative, but its
// dump() and its diagnostics recurse once per level: a damaged or hostile file of a few hundred
// kilobytes of brackets (config.json, a model file, a checkpoint's header, a dataset manifest)
// would overflow the stack where a message quotes the value back. Every JSON text read from a
// file is checked first; the deepest that Towers writes (a model file's blocks) is far below.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

namespace towers::engine {

inline constexpr int kMaxJsonDepth = 128;

// The byte offset (1-based, as nlohmann's parse errors count) of the first '[' or '{' that opens
// level kMaxJsonDepth + 1 outside a string; 0 when the text nests no deeper.
std::size_t jsonTooDeepAt(std::string_view text);

// Throws nlohmann::json::parse_error (id 101, at that byte: "nested more than 128 levels deep")
// where jsonTooDeepAt finds one, so that callers report it as any other syntax error.
void requireJsonDepth(std::string_view text);

} // namespace towers::engine
