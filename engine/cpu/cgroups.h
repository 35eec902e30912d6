#pragma once
// Reading this process's control groups (cgroup v2, or v1's per-controller hierarchies) for the
// limits they hold on it: a CPU quota (cores.h), a memory limit (host_memory.h). A limit on a
// group holds its children too, so the tightest of the group and its ancestors is the one.
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace towers::engine::cpu {

// A small file's text ("" where it cannot be read).
std::string fileText(const std::filesystem::path& path);

// `text` without the spaces and newlines around it (a value read from such a file).
std::string_view trimmed(std::string_view text);

// The tightest (smallest) of `limitAt`'s answers for this process's control groups and their
// ancestors, read from the process's cgroup list (the text of /proc/self/cgroup) and the cgroup
// file systems mounted at `root`: for the v2 group (the line "0::/path"), limitAt(folder) for
// root/path and each folder above it; for a v1 hierarchy whose controllers include `controller`,
// the same under the first of `v1Mounts` (folders of root) that exists. limitAt gives
// std::nullopt for no limit there; none at all gives std::nullopt.
template <typename T, typename LimitAt>
std::optional<T> tightestInCgroups(const std::string& procSelfCgroup,
                                   const std::filesystem::path& root, const std::string& controller,
                                   const std::vector<std::string>& v1Mounts, LimitAt limitAt)
{
    namespace fs = std::filesystem;
    std::optional<T> tightest;
    const auto take = [&](std::optional<T> v) {
        if (v && (!tightest || *v < *tightest)) tightest = v;
    };
    // The folder `relative` names under `top`, and each folder between them.
    const auto walk = [&](const fs::path& top, std::string_view relative) {
        fs::path dir = top;
        take(limitAt(dir));
        for (const auto& part : fs::path(relative).relative_path()) {
            if (part.empty() || part == ".") continue;
            if (part == "..") break; // not a cgroup path
            dir /= part;
            take(limitAt(dir));
        }
    };
    std::istringstream lines(procSelfCgroup);
    for (std::string line; std::getline(lines, line);) {
        // "hierarchy-ID:controller-list:cgroup-path"; v2's is "0::/path".
        const std::size_t first = line.find(':');
        const std::size_t second =
            first == std::string::npos ? std::string::npos : line.find(':', first + 1);
        if (second == std::string::npos) continue;
        const std::string controllers = line.substr(first + 1, second - first - 1);
        const std::string path = line.substr(second + 1);
        if (controllers.empty()) {
            walk(root, path);
            continue;
        }
        std::istringstream names(controllers);
        bool ours = false;
        for (std::string name; std::getline(names, name, ',');) ours = ours || name == controller;
        if (!ours) continue;
        for (const std::string& mount : v1Mounts) {
            std::error_code ec;
            if (!fs::is_directory(root / mount, ec)) continue;
            walk(root / mount, path);
            break;
        }
    }
    return tightest;
}

} // namespace towers::engine::cpu
