#include "engine/gpu/nvidia_libraries.h"

#include <dlfcn.h>
#include <elf.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string_view>

namespace towers::engine {

namespace {

#ifndef TOWERS_CUDA_VERSION_MAJOR
#define TOWERS_CUDA_VERSION_MAJOR 0 // a build without the CUDA toolkit
#endif
#ifndef TOWERS_CUDA_VERSION_MINOR
#define TOWERS_CUDA_VERSION_MINOR 0
#endif

#if defined(__aarch64__)
constexpr const char* kMultiarch = "aarch64-linux-gnu";
constexpr const char* kCudaTarget = "sbsa-linux";
#else
constexpr const char* kMultiarch = "x86_64-linux-gnu";
constexpr const char* kCudaTarget = "x86_64-linux";
#endif

// NVIDIA's libraries the plugin may link, in the order they load (each only needs those before
// it). `companion`: a library of the same version that it needs from its own folder.
enum class Kind
{
    CudaRuntime,
    Cublas,
    Cudnn,
    Nccl
};
struct Family
{
    std::string_view prefix; // the soname up to its version: "libcudnn.so."
    Kind kind;               // what it is, for messages (cuBLASLt comes with cuBLAS)
    std::string_view companion;
};
constexpr std::array<Family, 5> kFamilies{{
    {"libcudart.so.", Kind::CudaRuntime, ""},
    {"libcublasLt.so.", Kind::Cublas, ""},
    {"libcublas.so.", Kind::Cublas, "libcublasLt.so."},
    {"libcudnn.so.", Kind::Cudnn, ""},
    {"libnccl.so.", Kind::Nccl, ""},
}};

// The family of a soname, or -1; `version` gets what follows the prefix ("13").
int familyOf(const std::string& soname, std::string* version = nullptr)
{
    for (std::size_t i = 0; i < kFamilies.size(); ++i) {
        const auto prefix = kFamilies[i].prefix;
        if (soname.size() > prefix.size() && soname.compare(0, prefix.size(), prefix) == 0) {
            if (version) *version = soname.substr(prefix.size());
            return static_cast<int>(i);
        }
    }
    return -1;
}

int majorOf(const std::string& version)
{
    int major = 0;
    for (char c : version) {
        if (c < '0' || c > '9') break;
        major = major * 10 + (c - '0');
    }
    return major;
}

bool readAt(std::ifstream& file, std::uint64_t offset, void* out, std::size_t size)
{
    file.clear();
    file.seekg(static_cast<std::streamoff>(offset));
    file.read(static_cast<char*>(out), static_cast<std::streamsize>(size));
    return file.good();
}

// `text` with the characters glob(3) treats specially escaped, so that a folder named with them is
// matched as itself.
std::string globEscaped(const std::string& text)
{
    std::string out;
    for (char c : text) {
        if (c == '*' || c == '?' || c == '[' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

// The paths that match `pattern` (glob(3)'s `flags`: GLOB_ONLYDIR for folders), sorted.
std::vector<std::string> globPaths(const std::string& pattern, int flags)
{
    std::vector<std::string> out;
    glob_t g{};
    if (glob(pattern.c_str(), flags | GLOB_NOSORT, nullptr, &g) == 0) {
        for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
    std::sort(out.begin(), out.end());
    return out;
}

// The folders that match `pattern`, in glob's (alphabetical) order.
std::vector<std::string> globFolders(const std::string& pattern)
{
    return globPaths(pattern, GLOB_ONLYDIR);
}

// The canonical path of `path` (symbolic links, "..", "//" resolved); empty when it is not there.
std::string canonical(const std::string& path)
{
    char* real = realpath(path.c_str(), nullptr);
    if (!real) return {};
    std::string out(real);
    std::free(real);
    return out;
}

bool isExecutableFile(const std::string& path)
{
    struct stat st = {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Whether `folder` holds a Python 3 interpreter: an executable python3, or python3.X (a Python
// installed without the python3 name; not python3.X-config).
bool holdsPython3(const std::string& folder)
{
    if (isExecutableFile(folder + "/python3")) return true;
    for (const auto& path : globPaths(globEscaped(folder) + "/python3.[0-9]*", 0)) {
        const auto version = path.substr(path.rfind('/') + std::strlen("/python3."));
        if (std::all_of(version.begin(), version.end(),
                        [](char c) { return c >= '0' && c <= '9'; }) &&
            isExecutableFile(path))
            return true;
    }
    return false;
}

// The environments of the Pythons on `path` (a PATH), in its order, each once: the canonical
// folder above each absolute entry that holds a Python 3. The entry itself is resolved (a
// physical "<entry>/..", as the kernel reads it), never its python3, which in a virtual
// environment is a link to the base interpreter.
std::vector<std::string> pythonPrefixesOnPath(const std::string& path)
{
    std::vector<std::string> out;
    std::string::size_type start = 0;
    while (start <= path.size()) {
        auto end = path.find(':', start);
        if (end == std::string::npos) end = path.size();
        const std::string entry = path.substr(start, end - start);
        start = end + 1;
        // An empty entry means the current folder, as do relative ones: not a place to load
        // libraries from.
        if (entry.empty() || entry[0] != '/' || !holdsPython3(entry)) continue;
        const std::string prefix = canonical(entry + "/..");
        if (!prefix.empty() && std::find(out.begin(), out.end(), prefix) == out.end())
            out.push_back(prefix);
    }
    return out;
}

std::string cudaApt(int major)
{
    // NVIDIA names its packages after the CUDA version the plugin was built with ("13-0").
    const int minor = major == TOWERS_CUDA_VERSION_MAJOR ? TOWERS_CUDA_VERSION_MINOR : 0;
    return std::to_string(major) + "-" + std::to_string(minor);
}

std::string cudaMajorText(int cudaMajor)
{
    return cudaMajor > 0 ? std::to_string(cudaMajor) : std::string("<CUDA major version>");
}

// CUDA 13's wheels of the toolkit's libraries dropped the -cuNN suffix (nvidia-cublas 13.x);
// cuDNN's and NCCL's kept it (nvidia-cudnn-cu13).
std::string toolkitWheel(const std::string& name, int major)
{
    if (major >= 13) return "'nvidia-" + name + "==" + std::to_string(major) + ".*'";
    return "nvidia-" + name + "-cu" + std::to_string(major);
}

std::string joined(const std::vector<std::string>& items, const std::string& separator)
{
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
    return out;
}

} // namespace

std::vector<std::string> elfNeededLibraries(const std::string& path)
{
    std::ifstream file(path, std::ios::binary);
    if (!file) return {};
    Elf64_Ehdr header{};
    if (!readAt(file, 0, &header, sizeof header)) return {};
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
        header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
        header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum == 0 || header.e_phnum > 4096)
        return {};
    std::vector<Elf64_Phdr> segments(header.e_phnum);
    if (!readAt(file, header.e_phoff, segments.data(), segments.size() * sizeof(Elf64_Phdr)))
        return {};
    const auto dynamic = std::find_if(segments.begin(), segments.end(),
                                      [](const Elf64_Phdr& s) { return s.p_type == PT_DYNAMIC; });
    if (dynamic == segments.end()) return {};
    const std::size_t count = std::min<std::uint64_t>(dynamic->p_filesz / sizeof(Elf64_Dyn), 65536);
    std::vector<Elf64_Dyn> entries(count);
    if (!readAt(file, dynamic->p_offset, entries.data(), count * sizeof(Elf64_Dyn))) return {};
    std::vector<std::uint64_t> needed;
    std::uint64_t strtab = 0, strsz = 0;
    for (const auto& e : entries) {
        if (e.d_tag == DT_NULL) break;
        if (e.d_tag == DT_NEEDED) needed.push_back(e.d_un.d_val);
        if (e.d_tag == DT_STRTAB) strtab = e.d_un.d_ptr;
        if (e.d_tag == DT_STRSZ) strsz = e.d_un.d_val;
    }
    if (needed.empty() || strsz == 0 || strsz > (16u << 20)) return {};
    // DT_STRTAB is an address: the loadable segment that holds it says where it is in the file.
    std::optional<std::uint64_t> offset;
    for (const auto& s : segments) {
        if (s.p_type == PT_LOAD && strtab >= s.p_vaddr && strtab - s.p_vaddr < s.p_filesz) {
            offset = strtab - s.p_vaddr + s.p_offset;
            break;
        }
    }
    if (!offset) return {};
    std::string strings(strsz, '\0');
    if (!readAt(file, *offset, strings.data(), strings.size())) return {};
    std::vector<std::string> out;
    for (const auto at : needed) {
        if (at >= strings.size()) return {};
        out.emplace_back(strings.c_str() + at);
    }
    return out;
}

std::vector<std::string> nvidiaLibrariesToLoad(const std::vector<std::string>& needed)
{
    std::vector<std::pair<int, std::string>> found; // (family, soname)
    for (const auto& soname : needed) {
        std::string version;
        const int family = familyOf(soname, &version);
        if (family < 0) continue;
        found.emplace_back(family, soname);
        if (const auto companion = kFamilies[static_cast<std::size_t>(family)].companion;
            !companion.empty()) {
            const std::string name = std::string(companion) + version;
            found.emplace_back(familyOf(name), name);
        }
    }
    std::stable_sort(found.begin(), found.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> out;
    for (const auto& [family, soname] : found)
        if (std::find(out.begin(), out.end(), soname) == out.end()) out.push_back(soname);
    return out;
}

int cudaMajorOf(const std::vector<std::string>& sonames)
{
    for (const auto& soname : sonames) {
        std::string version;
        const int family = familyOf(soname, &version);
        if (family >= 0 && kFamilies[static_cast<std::size_t>(family)].kind == Kind::CudaRuntime)
            return majorOf(version);
    }
    return 0;
}

NvidiaLibraryInfo describeNvidiaLibrary(const std::string& soname, int cudaMajor)
{
    std::string version;
    const int family = familyOf(soname, &version);
    if (family < 0) return {};
    const int major = majorOf(version);
    const std::string v = std::to_string(major);
    const std::string cuda = cudaMajorText(cudaMajor);
    switch (kFamilies[static_cast<std::size_t>(family)].kind) {
    case Kind::CudaRuntime:
        return {"CUDA runtime " + v, "cuda-cudart-" + cudaApt(major),
                toolkitWheel("cuda-runtime", major)};
    case Kind::Cublas:
        return {"cuBLAS " + v, "libcublas-" + cudaApt(major), toolkitWheel("cublas", major)};
    case Kind::Cudnn:
        return {"cuDNN " + v, "cudnn" + v + "-cuda-" + cuda, "nvidia-cudnn-cu" + cuda};
    case Kind::Nccl:
        return {"NCCL " + v, "libnccl" + v, "nvidia-nccl-cu" + cuda};
    }
    return {};
}

NvidiaSearchPlaces nvidiaSearchPlacesFromEnvironment()
{
    const auto env = [](const char* name) {
        const char* value = std::getenv(name);
        return value ? std::string(value) : std::string();
    };
    NvidiaSearchPlaces places;
    places.extraPath = env("TOWERS_NVIDIA_LIBRARY_PATH");
    places.virtualEnv = env("VIRTUAL_ENV");
    places.condaPrefix = env("CONDA_PREFIX");
    places.path = env("PATH");
    places.home = env("HOME");
    return places;
}

NvidiaSearchFolders nvidiaSearchFolders(const NvidiaSearchPlaces& places)
{
    NvidiaSearchFolders folders;
    std::string::size_type start = 0;
    while (start <= places.extraPath.size()) {
        auto end = places.extraPath.find(':', start);
        if (end == std::string::npos) end = places.extraPath.size();
        if (end > start) folders.first.push_back(places.extraPath.substr(start, end - start));
        start = end + 1;
    }

    std::set<std::string> seen; // canonical paths: /usr/local/cuda/lib64 is cuda-13.0's
    const auto add = [&](const std::string& folder) {
        char* real = realpath(folder.c_str(), nullptr);
        if (!real) return; // not there
        const bool isNew = seen.insert(real).second;
        std::free(real);
        if (isNew) folders.then.push_back(folder);
    };
    const auto addMatches = [&](const std::string& pattern) {
        for (const auto& folder : globFolders(pattern)) add(folder);
    };
    // NVIDIA's wheels: nvidia/cu13/lib (CUDA 13's runtime and cuBLAS), nvidia/cudnn/lib,
    // nvidia/nccl/lib, nvidia/cuda_runtime/lib and nvidia/cublas/lib (CUDA 12's), ...
    const auto addWheels = [&](const std::string& sitePackagesPattern) {
        addMatches(sitePackagesPattern + "/nvidia/*/lib");
    };
    const std::string root = globEscaped(places.root);
    if (!places.virtualEnv.empty())
        addWheels(globEscaped(places.virtualEnv) + "/lib/python3*/site-packages");
    if (!places.condaPrefix.empty()) {
        addWheels(globEscaped(places.condaPrefix) + "/lib/python3*/site-packages");
        add(places.condaPrefix + "/lib");
    }
    // The Pythons on PATH (see the header): the environments put there here, before the toolkit;
    // the system's own (/usr/bin, /usr/local/bin, /bin: on every PATH) after the system's other
    // Python places, so that they search as they did before PATH was read.
    std::vector<std::string> systemPrefixes;
    for (const auto& prefix : {places.root + "/usr", places.root + "/usr/local",
                               places.root.empty() ? std::string("/") : places.root})
        if (auto real = canonical(prefix); !real.empty()) systemPrefixes.push_back(real);
    std::vector<std::string> systemPythons;
    const auto addPythonWheels = [&](const std::string& prefix) {
        addWheels(globEscaped(prefix == "/" ? std::string() : prefix) +
                  "/lib/python3*/site-packages");
    };
    for (const auto& prefix : pythonPrefixesOnPath(places.path)) {
        if (std::find(systemPrefixes.begin(), systemPrefixes.end(), prefix) != systemPrefixes.end())
            systemPythons.push_back(prefix);
        else
            addPythonWheels(prefix);
    }
    // The CUDA toolkit: the current one, then every version, newest first.
    std::vector<std::string> toolkits{places.root + "/usr/local/cuda"};
    auto versions = globFolders(root + "/usr/local/cuda-*");
    std::sort(versions.begin(), versions.end(), [](const std::string& a, const std::string& b) {
        return strverscmp(a.c_str(), b.c_str()) > 0;
    });
    toolkits.insert(toolkits.end(), versions.begin(), versions.end());
    for (const auto& toolkit : toolkits) {
        add(toolkit + "/lib64");
        add(toolkit + "/targets/" + kCudaTarget + "/lib");
    }
    add(places.root + "/usr/lib/" + kMultiarch);
    if (!places.home.empty())
        addWheels(globEscaped(places.home) + "/.local/lib/python3*/site-packages");
    addWheels(root + "/usr/local/lib/python3*/dist-packages");
    addWheels(root + "/usr/local/lib/python3*/site-packages");
    addWheels(root + "/usr/lib/python3/dist-packages");
    for (const auto& prefix : systemPythons) addPythonWheels(prefix);
    return folders;
}

std::optional<std::string>
locateNvidiaLibrary(const std::string& soname, const NvidiaSearchFolders& folders,
                    const std::function<bool(const std::string& path)>& exists,
                    const std::function<bool(const std::string& soname)>& loaderFinds)
{
    for (const auto& folder : folders.first)
        if (exists(folder + "/" + soname)) return folder + "/" + soname;
    if (loaderFinds(soname)) return soname;
    for (const auto& folder : folders.then)
        if (exists(folder + "/" + soname)) return folder + "/" + soname;
    return std::nullopt;
}

std::string missingNvidiaLibrariesReason(const std::vector<std::string>& missing,
                                         const NvidiaSearchFolders& folders, int cudaMajor)
{
    // "libcudart.so.13 (CUDA runtime 13), libcublasLt.so.13 and libcublas.so.13 (cuBLAS 13)": the
    // libraries of one kind share their name.
    std::vector<std::string> named, apt, pip;
    for (std::size_t i = 0; i < missing.size();) {
        const auto info = describeNvidiaLibrary(missing[i], cudaMajor);
        std::vector<std::string> sonames{missing[i]};
        std::size_t j = i + 1;
        for (; j < missing.size() && describeNvidiaLibrary(missing[j], cudaMajor).name == info.name;
             ++j)
            sonames.push_back(missing[j]);
        named.push_back(joined(sonames, " and ") +
                        (info.name.empty() ? std::string() : " (" + info.name + ")"));
        if (!info.aptPackage.empty()) apt.push_back(info.aptPackage);
        if (!info.pipPackage.empty()) pip.push_back(info.pipPackage);
        i = j;
    }
    const bool one = missing.size() == 1;
    std::string reason =
        named.size() > 1 ? joined({named.begin(), named.end() - 1}, ", ") + " and " + named.back()
                         : joined(named, "");
    reason += one ? " was not found" : " were not found";
    if (!apt.empty())
        reason += std::string(": install ") + (one ? "it" : "them") +
                  " from NVIDIA's CUDA apt repository (`apt install " + joined(apt, " ") +
                  "`) or as " + (one ? "a Python wheel" : "Python wheels") + " (`pip install " +
                  joined(pip, " ") + "`)";
    std::vector<std::string> places;
    if (!folders.first.empty())
        places.push_back("$TOWERS_NVIDIA_LIBRARY_PATH (" + joined(folders.first, ", ") + ")");
    places.emplace_back("the dynamic loader's paths");
    places.insert(places.end(), folders.then.begin(), folders.then.end());
    reason += "; looked in: " + joined(places, ", ");
    if (folders.first.empty())
        reason += " (TOWERS_NVIDIA_LIBRARY_PATH=DIR[:DIR...] adds folders to look in first)";
    return reason;
}

std::string preloadNvidiaLibraries(const std::string& pluginPath)
{
    const auto libraries = nvidiaLibrariesToLoad(elfNeededLibraries(pluginPath));
    if (libraries.empty()) return {};
    int cudaMajor = cudaMajorOf(libraries);
    if (cudaMajor == 0) cudaMajor = TOWERS_CUDA_VERSION_MAJOR;
    const auto folders = nvidiaSearchFolders(nvidiaSearchPlacesFromEnvironment());
    const auto exists = [](const std::string& path) { return access(path.c_str(), R_OK) == 0; };
    const auto loaderFinds = [](const std::string& soname) {
        // Loaded now, as the plugin would load it: LD_LIBRARY_PATH, then ld.so.cache.
        const bool found = dlopen(soname.c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr;
        if (!found) dlerror(); // a library that is not there is not an error yet
        return found;
    };
    std::vector<std::string> missing;
    for (const auto& soname : libraries) {
        const auto where = locateNvidiaLibrary(soname, folders, exists, loaderFinds);
        if (!where) {
            missing.push_back(soname);
            continue;
        }
        if (*where == soname) continue; // loaded by the dynamic loader's search
        // By its full path: the plugin's DT_NEEDED entry then matches it by its soname.
        if (!dlopen(where->c_str(), RTLD_NOW | RTLD_GLOBAL)) {
            const char* e = dlerror();
            return "NVIDIA's library " + *where +
                   " could not be loaded: " + (e ? e : "unknown error");
        }
    }
    return missing.empty() ? std::string()
                           : missingNvidiaLibrariesReason(missing, folders, cudaMajor);
}

} // namespace towers::engine
