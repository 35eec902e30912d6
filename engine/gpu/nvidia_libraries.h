#pragma once
// Finding NVIDIA's libraries (CUDA runtime, cuBLAS, cuDNN, NCCL) for the CUDA backend plugin.
// They are not Debian packages: they come from NVIDIA's CUDA apt repository (/usr/local/cuda-*,
// /usr/lib/<multiarch>), from a CUDA toolkit installed by hand, or from NVIDIA's Python wheels
// (site-packages/nvidia/*/lib). Before the plugin is dlopen'ed, the loader finds each library the
// plugin needs and loads it by its full path, so that the plugin's DT_NEEDED entries resolve
// without LD_LIBRARY_PATH; when one is nowhere, the reason names it and how to get it.
//
// The search is split into small pure functions (folders in, paths out) that the tests drive with
// a fake folder tree; preloadNvidiaLibraries() is the part that touches the process.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace towers::engine {

// The DT_NEEDED entries (sonames) of an ELF64 shared object, in order; empty when the file cannot
// be read or is not one.
std::vector<std::string> elfNeededLibraries(const std::string& path);

// NVIDIA's libraries among `needed` (a DT_NEEDED list), each preceded by the NVIDIA libraries it
// needs from its own folder (libcublasLt for libcublas), in the order to load them: the CUDA
// runtime, cuBLASLt, cuBLAS, cuDNN, NCCL. Other sonames (libc, libstdc++) are left out.
std::vector<std::string> nvidiaLibrariesToLoad(const std::vector<std::string>& needed);

// What an NVIDIA library is and where to get it: "cuDNN 9", NVIDIA's apt package "cudnn9-cuda-13"
// and the wheel "nvidia-cudnn-cu13". `cudaMajor` is the CUDA version the plugin was built for (it
// names the cuDNN and NCCL packages); 0 when unknown.
struct NvidiaLibraryInfo
{
    std::string name;       // "cuDNN 9"; all empty for a soname that is not NVIDIA's
    std::string aptPackage; // in NVIDIA's CUDA apt repository: "cudnn9-cuda-13"
    std::string pipPackage; // an argument of pip install: "nvidia-cudnn-cu13"
};
NvidiaLibraryInfo describeNvidiaLibrary(const std::string& soname, int cudaMajor);

// The CUDA major version a list of sonames was built for (13 for libcudart.so.13), 0 when none
// says.
int cudaMajorOf(const std::vector<std::string>& sonames);

// Where to look, and in which order.
struct NvidiaSearchPlaces
{
    std::string extraPath;   // $TOWERS_NVIDIA_LIBRARY_PATH: folders separated by ':'
    std::string virtualEnv;  // $VIRTUAL_ENV
    std::string condaPrefix; // $CONDA_PREFIX
    std::string path;        // $PATH: its Pythons' environments (folders separated by ':')
    std::string home;        // $HOME
    std::string root;        // prefixed to the system's folders (/usr/..., /usr/local/...): tests
};
struct NvidiaSearchFolders
{
    std::vector<std::string> first; // $TOWERS_NVIDIA_LIBRARY_PATH, before the dynamic loader
    std::vector<std::string> then;  // after the dynamic loader's own search
};
// `first`: the folders of extraPath as given. `then`, the existing folders among, in this order:
//  1. the activated virtual environment's and Conda's site-packages/nvidia/*/lib (and Conda's lib):
//     named by the user's shell, so the most deliberate choice;
//  2. the environments of the Pythons on PATH, in PATH order: for each absolute PATH entry that
//     holds an executable python3 or python3.X (empty and relative entries are skipped), the
//     site-packages/nvidia/*/lib of <entry>/../lib/python3*. The entry's folder is what counts,
//     never where its python3 leads: a virtual environment's bin/python3 is a link to the base
//     interpreter, and the wheels are in the environment's own site-packages. This is the Python
//     that `python3` and `pip` run, so the wheels installed for it (PyTorch's, say, in a virtual
//     environment put on PATH without being activated, /opt/torch/.venv) are found. They come
//     before the toolkit for the reason the activated environment does: an environment on PATH
//     is one somebody chose and filled with a matching set of wheels. Except the system's own
//     Pythons, those of an entry in /usr, /usr/local or / (/usr/bin, /usr/local/bin, /bin), which
//     are on every PATH: they keep their place in 4, so that a PATH of the system's folders
//     alone searches as before;
//  3. the CUDA toolkit's (/usr/local/cuda/lib64, /usr/local/cuda-*/lib64 newest first, and their
//     targets/<arch>-linux/lib, where NVIDIA's apt packages put the runtime and cuBLAS), then
//     /usr/lib/<multiarch> (cuDNN's and NCCL's apt packages);
//  4. the Python wheels of the user (~/.local/lib/python3*/site-packages), of
//     /usr/local/lib/python3*/{dist,site}-packages and of /usr/lib/python3/dist-packages, then
//     those of the system's Pythons on PATH (/usr/lib/python3.X/site-packages: Fedora's, Arch's).
// Wheels are looked for under nvidia/*/lib (nvidia/cu13/lib, nvidia/cudnn/lib, nvidia/nccl/lib,
// ...). A folder reached twice (a symbolic link, a virtual environment both activated and on
// PATH, a PATH entry given twice) is listed once, where it first comes.
NvidiaSearchFolders nvidiaSearchFolders(const NvidiaSearchPlaces& places);
// The places of this process: its environment, no root.
NvidiaSearchPlaces nvidiaSearchPlacesFromEnvironment();

// What to dlopen for `soname`: the full path in the first of `folders.first` that holds it; else
// the soname itself when `loaderFinds` it (the dynamic loader's own search: LD_LIBRARY_PATH,
// ld.so.cache); else the full path in the first of `folders.then` that holds it; nullopt when
// none has it.
std::optional<std::string>
locateNvidiaLibrary(const std::string& soname, const NvidiaSearchFolders& folders,
                    const std::function<bool(const std::string& path)>& exists,
                    const std::function<bool(const std::string& soname)>& loaderFinds);

// Why the plugin cannot load when the sonames `missing` were found nowhere: each named with what
// it is, how to get them, then where they were looked for. "libcudnn.so.9 (cuDNN 9) was not
// found: install it from NVIDIA's CUDA apt repository (`apt install cudnn9-cuda-13`) or as a
// Python wheel (`pip install nvidia-cudnn-cu13`); looked in: ...".
std::string missingNvidiaLibrariesReason(const std::vector<std::string>& missing,
                                         const NvidiaSearchFolders& folders, int cudaMajor);

// Loads, with RTLD_NOW | RTLD_GLOBAL, the NVIDIA libraries that the plugin at `pluginPath` needs
// and that its own loading would not find, from the places above. Empty when every one is loaded
// (or the plugin cannot be read: its dlopen then says why); else the reason, for the user.
std::string preloadNvidiaLibraries(const std::string& pluginPath);

} // namespace towers::engine
