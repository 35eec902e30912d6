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

} // namespace towers::engine::cpu
