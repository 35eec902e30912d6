#include "engine/io/json_depth.h"

#include <string>

namespace towers::engine {

std::size_t jsonTooDeepAt(std::string_view text)
{
    int depth = 0;
    bool inString = false, escaped = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                inString = false;
            continue;
        }
        if (c == '"') {
            inString = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth) return i + 1;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return 0;
}

void requireJsonDepth(std::string_view text)
{
    if (const std::size_t at = jsonTooDeepAt(text))
        throw nlohmann::json::parse_error::create(
            101, at, "nested more than " + std::to_string(kMaxJsonDepth) + " levels deep", nullptr);
}

} // namespace towers::engine
