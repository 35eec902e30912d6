#include "engine/cpu/cgroups.h"

#include <fstream>

namespace towers::engine::cpu {

std::string fileText(const std::filesystem::path& path)
{
    std::ifstream in(path);
    if (!in) return {};
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string_view trimmed(std::string_view text)
{
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    return text;
}

} // namespace towers::engine::cpu
