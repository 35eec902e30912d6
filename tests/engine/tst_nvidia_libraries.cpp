// How the CUDA backend's loader finds NVIDIA's libraries (engine/gpu/nvidia_libraries.h), with no
// GPU and no NVIDIA library: the DT_NEEDED entries of the plugin (and of a fake ELF file), the
// order they load in, a fake tree of the places NVIDIA's apt packages, toolkits and Python wheels
// put them (a virtual environment's nvidia/cu13/lib and nvidia/cudnn/lib, ~/.local's
// nvidia/nccl/lib, /usr/local/cuda-*/lib64, the system's Python), $TOWERS_NVIDIA_LIBRARY_PATH
// before all of them, and a missing library named with how to get it.
#include <QtTest>

#include <elf.h>

#include <algorithm>
#include <cstring>

#include "engine/gpu/nvidia_libraries.h"

using namespace towers::engine;

namespace {

// An empty file at `path`, with its folders.
void touch(const QString& path)
{
    QVERIFY(QDir().mkpath(QFileInfo(path).path()));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
}

// A minimal ELF64 shared object whose dynamic section needs `needed`: one loadable segment at an
// address other than its file offset (DT_STRTAB is an address), and the dynamic segment.
void writeElf(const QString& path, const std::vector<std::string>& needed)
{
    constexpr std::uint64_t base = 0x400000;
    const std::uint64_t strtabOffset = sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr);
    std::string strtab(1, '\0');
    std::vector<Elf64_Dyn> dynamic;
    for (const auto& name : needed) {
        dynamic.push_back({DT_NEEDED, {strtab.size()}});
        strtab += name + '\0';
    }
    const std::uint64_t dynamicOffset = (strtabOffset + strtab.size() + 7) / 8 * 8;
    dynamic.push_back({DT_STRTAB, {base + strtabOffset}});
    dynamic.push_back({DT_STRSZ, {strtab.size()}});
    dynamic.push_back({DT_NULL, {0}});
    const std::uint64_t size = dynamicOffset + dynamic.size() * sizeof(Elf64_Dyn);
    Elf64_Ehdr header{};
    std::memcpy(header.e_ident, ELFMAG, SELFMAG);
    header.e_ident[EI_CLASS] = ELFCLASS64;
    header.e_ident[EI_DATA] = ELFDATA2LSB;
    header.e_ident[EI_VERSION] = EV_CURRENT;
    header.e_type = ET_DYN;
    header.e_machine = EM_X86_64;
    header.e_version = EV_CURRENT;
    header.e_phoff = sizeof(Elf64_Ehdr);
    header.e_ehsize = sizeof(Elf64_Ehdr);
    header.e_phentsize = sizeof(Elf64_Phdr);
    header.e_phnum = 2;
    Elf64_Phdr load{};
    load.p_type = PT_LOAD;
    load.p_vaddr = load.p_paddr = base;
    load.p_filesz = load.p_memsz = size;
    Elf64_Phdr dyn{};
    dyn.p_type = PT_DYNAMIC;
    dyn.p_offset = dynamicOffset;
    dyn.p_vaddr = dyn.p_paddr = base + dynamicOffset;
    dyn.p_filesz = dyn.p_memsz = dynamic.size() * sizeof(Elf64_Dyn);
    QByteArray bytes(static_cast<qsizetype>(size), '\0');
    std::memcpy(bytes.data(), &header, sizeof header);
    std::memcpy(bytes.data() + sizeof header, &load, sizeof load);
    std::memcpy(bytes.data() + sizeof header + sizeof load, &dyn, sizeof dyn);
    std::memcpy(bytes.data() + strtabOffset, strtab.data(), strtab.size());
    std::memcpy(bytes.data() + dynamicOffset, dynamic.data(), dynamic.size() * sizeof(Elf64_Dyn));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    QCOMPARE(f.write(bytes), bytes.size());
}

// Where NVIDIA's packages and wheels put their libraries, under `dir`: a virtual environment with
// CUDA 13's wheels (nvidia/cu13/lib) and cuDNN's (nvidia/cudnn/lib), NCCL's wheel in the user's
// ~/.local, a CUDA toolkit (/usr/local/cuda -> cuda-13.0, and an empty cuda-12.4), and another
// cuDNN wheel in the system's Python.
NvidiaSearchPlaces fakeNvidiaTree(const QString& dir, bool withNccl = true)
{
    const QString venv = dir + "/venv/lib/python3.12/site-packages/nvidia/";
    for (const char* name : {"libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13"})
        touch(venv + "cu13/lib/" + name);
    touch(venv + "cudnn/lib/libcudnn.so.9");
    if (withNccl)
        touch(dir + "/home/.local/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2");
    touch(dir + "/root/usr/local/cuda-13.0/lib64/libcudart.so.13");
    QDir().mkpath(dir + "/root/usr/local/cuda-12.4/lib64");
    QFile::link(dir + "/root/usr/local/cuda-13.0", dir + "/root/usr/local/cuda");
    touch(dir + "/root/usr/lib/python3/dist-packages/nvidia/cudnn/lib/libcudnn.so.9");
    NvidiaSearchPlaces places;
    places.virtualEnv = (dir + "/venv").toStdString();
    places.home = (dir + "/home").toStdString();
    places.root = (dir + "/root").toStdString();
    return places;
}

bool fileExists(const std::string& path)
{
    return QFileInfo(QString::fromStdString(path)).isFile();
}
bool loaderFindsNothing(const std::string&)
{
    return false;
}
bool loaderFindsAll(const std::string&)
{
    return true;
}

std::vector<std::string> under(const QString& dir, const std::vector<std::string>& paths)
{
    std::vector<std::string> out;
    for (const auto& p : paths) out.push_back(dir.toStdString() + p);
    return out;
}

// An executable file at `path` (a fake interpreter), with its folders.
void touchExecutable(const QString& path)
{
    touch(path);
    QVERIFY(QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
}

// A Python environment at `prefix`, as `python3 -m venv` makes one: bin/python3 a link to the
// base interpreter `base` (made if needed), and in lib/python3.12/site-packages NVIDIA's wheels
// `wheels` ("cudnn" for nvidia/cudnn/lib/libcudnn.so.9, "cu13" for CUDA 13's, "nccl").
void fakeEnvironment(const QString& prefix, const QStringList& wheels, const QString& base)
{
    if (!QFileInfo::exists(base)) touchExecutable(base);
    QVERIFY(QDir().mkpath(prefix + "/bin"));
    QVERIFY(QFile::link(base, prefix + "/bin/python3"));
    const QString nvidia = prefix + "/lib/python3.12/site-packages/nvidia/";
    for (const auto& wheel : wheels) {
        if (wheel == "cudnn") touch(nvidia + "cudnn/lib/libcudnn.so.9");
        if (wheel == "nccl") touch(nvidia + "nccl/lib/libnccl.so.2");
        if (wheel == "cu13")
            for (const char* name : {"libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13"})
                touch(nvidia + "cu13/lib/" + name);
    }
}

// The folder of `wheel` ("cudnn") in the environment at `prefix` made by fakeEnvironment().
std::string wheelFolder(const QString& prefix, const char* wheel)
{
    return (prefix + "/lib/python3.12/site-packages/nvidia/" + wheel + "/lib").toStdString();
}

// The folders of fakeNvidiaTree(d, withNccl) after its virtual environment's: the toolkit's, then
// the user's and the system's wheels.
std::vector<std::string> toolkitAndSystem(const QString& d, bool withNccl = true)
{
    auto out = under(d, {"/root/usr/local/cuda/lib64", "/root/usr/local/cuda-12.4/lib64"});
    if (withNccl)
        out.push_back(d.toStdString() +
                      "/home/.local/lib/python3.11/site-packages/nvidia/nccl/lib");
    out.push_back(d.toStdString() + "/root/usr/lib/python3/dist-packages/nvidia/cudnn/lib");
    return out;
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b)
{
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

} // namespace

class TestNvidiaLibraries : public QObject
{
    Q_OBJECT
private slots:
    void elfNeededLibrariesReadsTheDynamicSection()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString fake = dir.filePath("libfake.so");
        writeElf(fake, {"libcudnn.so.9", "libstdc++.so.6", "libc.so.6"});
        QCOMPARE(elfNeededLibraries(fake.toStdString()),
                 (std::vector<std::string>{"libcudnn.so.9", "libstdc++.so.6", "libc.so.6"}));
        const auto self = elfNeededLibraries("/proc/self/exe");
        QVERIFY(std::find(self.begin(), self.end(), "libc.so.6") != self.end());
        // Not an ELF file, or no file: nothing, never a crash.
        touch(dir.filePath("empty.so"));
        QVERIFY(elfNeededLibraries(dir.filePath("empty.so").toStdString()).empty());
        QVERIFY(elfNeededLibraries(dir.filePath("absent.so").toStdString()).empty());
        QFile text(dir.filePath("text.so"));
        QVERIFY(text.open(QIODevice::WriteOnly));
        text.write(QByteArray(4096, 'x'));
        text.close();
        QVERIFY(elfNeededLibraries(text.fileName().toStdString()).empty());
#ifdef TOWERS_CUDA_PLUGIN_FILE
        // The plugin this build made needs exactly these, loaded in this order.
        QCOMPARE(nvidiaLibrariesToLoad(elfNeededLibraries(TOWERS_CUDA_PLUGIN_FILE)),
                 (std::vector<std::string>{"libcudart.so.13", "libcublasLt.so.13",
                                           "libcublas.so.13", "libcudnn.so.9", "libnccl.so.2"}));
#endif
    }

    void nvidiaLibrariesLoadInDependencyOrder()
    {
        QCOMPARE(nvidiaLibrariesToLoad({"libstdc++.so.6", "libnccl.so.2", "libcudnn.so.9",
                                        "libcublas.so.12", "libcudart.so.12", "libc.so.6"}),
                 (std::vector<std::string>{"libcudart.so.12", "libcublasLt.so.12",
                                           "libcublas.so.12", "libcudnn.so.9", "libnccl.so.2"}));
        QVERIFY(nvidiaLibrariesToLoad({"libc.so.6", "libcudnn_ops.so.9"}).empty());
        QCOMPARE(cudaMajorOf({"libnccl.so.2", "libcudart.so.13"}), 13);
        QCOMPARE(cudaMajorOf({"libnccl.so.2"}), 0);
    }

    void nvidiaLibrariesAreFoundWhereWheelsAndPackagesPutThem()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString d = dir.path();
        const auto folders = nvidiaSearchFolders(fakeNvidiaTree(d));
        QVERIFY(folders.first.empty());
        // The virtual environment first, then the toolkit (reached through /usr/local/cuda once,
        // then the older ones), then the user's wheels, then the system's Python.
        QCOMPARE(folders.then,
                 under(d, {"/venv/lib/python3.12/site-packages/nvidia/cu13/lib",
                           "/venv/lib/python3.12/site-packages/nvidia/cudnn/lib",
                           "/root/usr/local/cuda/lib64", "/root/usr/local/cuda-12.4/lib64",
                           "/home/.local/lib/python3.11/site-packages/nvidia/nccl/lib",
                           "/root/usr/lib/python3/dist-packages/nvidia/cudnn/lib"}));
        const auto where = [&](const char* soname) {
            return locateNvidiaLibrary(soname, folders, fileExists, loaderFindsNothing)
                .value_or("(none)");
        };
        const std::string venv = d.toStdString() + "/venv/lib/python3.12/site-packages/nvidia/";
        QCOMPARE(where("libcudart.so.13"), venv + "cu13/lib/libcudart.so.13");
        QCOMPARE(where("libcublasLt.so.13"), venv + "cu13/lib/libcublasLt.so.13");
        QCOMPARE(where("libcudnn.so.9"), venv + "cudnn/lib/libcudnn.so.9");
        QCOMPARE(where("libnccl.so.2"),
                 d.toStdString() +
                     "/home/.local/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2");
        // Without the virtual environment: the toolkit's runtime, the system's cuDNN wheel.
        auto places = fakeNvidiaTree(d);
        places.virtualEnv.clear();
        const auto system = nvidiaSearchFolders(places);
        QCOMPARE(locateNvidiaLibrary("libcudart.so.13", system, fileExists, loaderFindsNothing),
                 d.toStdString() + "/root/usr/local/cuda/lib64/libcudart.so.13");
        QCOMPARE(locateNvidiaLibrary("libcudnn.so.9", system, fileExists, loaderFindsNothing),
                 d.toStdString() +
                     "/root/usr/lib/python3/dist-packages/nvidia/cudnn/lib/libcudnn.so.9");
        QVERIFY(!locateNvidiaLibrary("libcublas.so.13", system, fileExists, loaderFindsNothing));
        // What the dynamic loader finds by itself wins over the folders.
        QCOMPARE(locateNvidiaLibrary("libcudnn.so.9", folders, fileExists, loaderFindsAll),
                 std::string("libcudnn.so.9"));
    }

    void theEnvironmentsFoldersComeFirst()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        auto places = fakeNvidiaTree(dir.path());
        touch(dir.filePath("extra2/libcudnn.so.9"));
        places.extraPath = (dir.filePath("extra1") + "::" + dir.filePath("extra2")).toStdString();
        const auto folders = nvidiaSearchFolders(places);
        QCOMPARE(folders.first, (std::vector<std::string>{dir.filePath("extra1").toStdString(),
                                                          dir.filePath("extra2").toStdString()}));
        // Before the dynamic loader's own search and the wheels.
        QCOMPARE(locateNvidiaLibrary("libcudnn.so.9", folders, fileExists, loaderFindsAll),
                 dir.filePath("extra2/libcudnn.so.9").toStdString());
        QCOMPARE(locateNvidiaLibrary("libcudart.so.13", folders, fileExists, loaderFindsAll),
                 std::string("libcudart.so.13"));
    }

    void aVirtualEnvironmentOnPathIsFoundWithoutVirtualEnv()
    {
        // PyTorch's environment, /opt/torch/.venv, whose bin/python3 is the python3 on PATH but
        // which is not activated: its own wheels are found, before the toolkit, and not those of
        // the base interpreter its python3 links to.
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString d = dir.path();
        auto places = fakeNvidiaTree(d, /*withNccl=*/false);
        places.virtualEnv.clear();
        const QString torch = d + "/opt/torch/.venv";
        fakeEnvironment(torch, {"cu13", "cudnn"}, d + "/base/bin/python3.12");
        touch(d + "/base/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
        places.path = (d + "/usr/bin:" + torch + "/bin").toStdString();
        const auto folders = nvidiaSearchFolders(places);
        QVERIFY(folders.first.empty());
        QCOMPARE(folders.then, concat({wheelFolder(torch, "cu13"), wheelFolder(torch, "cudnn")},
                                      toolkitAndSystem(d, /*withNccl=*/false)));
        const auto where = [&](const char* soname) {
            return locateNvidiaLibrary(soname, folders, fileExists, loaderFindsNothing)
                .value_or("(none)");
        };
        QCOMPARE(where("libcudart.so.13"), wheelFolder(torch, "cu13") + "/libcudart.so.13");
        QCOMPARE(where("libcublas.so.13"), wheelFolder(torch, "cu13") + "/libcublas.so.13");
        QCOMPARE(where("libcudnn.so.9"), wheelFolder(torch, "cudnn") + "/libcudnn.so.9");
        QCOMPARE(where("libnccl.so.2"), std::string("(none)"));
        // What is missing is named with how to get it, and the environment among the places.
        const auto nccl = missingNvidiaLibrariesReason({"libnccl.so.2"}, folders, 13);
        qInfo() << nccl.c_str();
        QVERIFY2(nccl.rfind("libnccl.so.2 (NCCL 2) was not found: install it from NVIDIA's CUDA "
                            "apt repository (`apt install libnccl2`) or as a Python wheel (`pip "
                            "install nvidia-nccl-cu13`); looked in: the dynamic loader's paths, " +
                                wheelFolder(torch, "cu13") + ", " + wheelFolder(torch, "cudnn") +
                                ", " + d.toStdString() + "/root/usr/local/cuda/lib64, ",
                            0) == 0,
                 nccl.c_str());
        // A Python installed with python3.X only (no python3) is one too.
        const QString plain = d + "/opt/python";
        touchExecutable(plain + "/bin/python3.13");
        touch(plain + "/lib/python3.13/site-packages/nvidia/nccl/lib/libnccl.so.2");
        places.path = (plain + "/bin:" + torch + "/bin").toStdString();
        const auto withPlain = nvidiaSearchFolders(places);
        QCOMPARE(
            locateNvidiaLibrary("libnccl.so.2", withPlain, fileExists, loaderFindsNothing),
            (plain + "/lib/python3.13/site-packages/nvidia/nccl/lib/libnccl.so.2").toStdString());
        QCOMPARE(withPlain.then.front(),
                 (plain + "/lib/python3.13/site-packages/nvidia/nccl/lib").toStdString());
    }

    void thePathsEnvironmentsComeInItsOrder()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString d = dir.path();
        auto places = fakeNvidiaTree(d);
        places.virtualEnv.clear();
        const QString base = d + "/base/bin/python3.12";
        fakeEnvironment(d + "/a", {"cudnn", "nccl"}, base);
        fakeEnvironment(d + "/b", {"cudnn"}, base);
        places.path = (d + "/b/bin:" + d + "/a/bin").toStdString();
        auto folders = nvidiaSearchFolders(places);
        QCOMPARE(folders.then,
                 concat({wheelFolder(d + "/b", "cudnn"), wheelFolder(d + "/a", "cudnn"),
                         wheelFolder(d + "/a", "nccl")},
                        toolkitAndSystem(d)));
        QCOMPARE(locateNvidiaLibrary("libcudnn.so.9", folders, fileExists, loaderFindsNothing),
                 wheelFolder(d + "/b", "cudnn") + "/libcudnn.so.9");
        places.path = (d + "/a/bin:" + d + "/b/bin").toStdString();
        folders = nvidiaSearchFolders(places);
        QCOMPARE(folders.then,
                 concat({wheelFolder(d + "/a", "cudnn"), wheelFolder(d + "/a", "nccl"),
                         wheelFolder(d + "/b", "cudnn")},
                        toolkitAndSystem(d)));
        QCOMPARE(locateNvidiaLibrary("libcudnn.so.9", folders, fileExists, loaderFindsNothing),
                 wheelFolder(d + "/a", "cudnn") + "/libcudnn.so.9");
    }

    void anActivatedEnvironmentComesBeforeThePaths()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString d = dir.path();
        auto places = fakeNvidiaTree(d); // VIRTUAL_ENV: d/venv, with cu13 and cudnn
        const QString base = d + "/base/bin/python3.12";
        fakeEnvironment(d + "/onpath", {"cudnn", "cu13"}, base);
        fakeEnvironment(d + "/conda", {"cudnn"}, base);
        touch(d + "/conda/lib/libnccl.so.2");
        places.condaPrefix = (d + "/conda").toStdString();
        places.path = (d + "/onpath/bin").toStdString();
        const auto folders = nvidiaSearchFolders(places);
        QCOMPARE(
            folders.then,
            concat(under(d, {"/venv/lib/python3.12/site-packages/nvidia/cu13/lib",
                             "/venv/lib/python3.12/site-packages/nvidia/cudnn/lib",
                             "/conda/lib/python3.12/site-packages/nvidia/cudnn/lib", "/conda/lib",
                             "/onpath/lib/python3.12/site-packages/nvidia/cu13/lib",
                             "/onpath/lib/python3.12/site-packages/nvidia/cudnn/lib"}),
                   toolkitAndSystem(d)));
        QCOMPARE(locateNvidiaLibrary("libcudnn.so.9", folders, fileExists, loaderFindsNothing),
                 d.toStdString() +
                     "/venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9");
    }

    void aPathEntryWithoutPythonAddsNothing()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString d = dir.path();
        auto places = fakeNvidiaTree(d);
        places.virtualEnv.clear();
        // Wheels next to folders that hold no Python 3: none, one that cannot run, a folder named
        // python3, only python3.12-config, only python2.
        for (const char* name : {"none", "noexec", "folder", "config", "python2"})
            touch(d + "/" + name + "/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9");
        QVERIFY(QDir().mkpath(d + "/none/bin"));
        touch(d + "/noexec/bin/python3");
        QVERIFY(QDir().mkpath(d + "/folder/bin/python3"));
        touchExecutable(d + "/config/bin/python3.12-config");
        touchExecutable(d + "/python2/bin/python2.7");
        fakeEnvironment(d + "/venv2", {"nccl"}, d + "/base/bin/python3.12");
        QString path;
        for (const char* name : {"none", "noexec", "folder", "config", "python2", "venv2"})
            path += d + "/" + name + "/bin:";
        places.path = path.toStdString();
        const auto folders = nvidiaSearchFolders(places);
        QCOMPARE(folders.then, concat({wheelFolder(d + "/venv2", "nccl")}, toolkitAndSystem(d)));
    }

    void relativeAndEmptyPathEntriesAreIgnored()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString d = dir.path();
        auto places = fakeNvidiaTree(d);
        places.virtualEnv.clear();
        fakeEnvironment(d + "/here", {"cudnn"}, d + "/base/bin/python3.12");
        fakeEnvironment(d + "/there", {"nccl"}, d + "/base/bin/python3.12");
        const QString saved = QDir::currentPath();
        QVERIFY(QDir::setCurrent(d + "/here/bin"));
        // The current folder (empty entries, "."), and folders relative to it: never.
        places.path = (":.:../bin:../../here/bin::" + d + "/there/bin:").toStdString();
        const auto folders = nvidiaSearchFolders(places);
        QVERIFY(QDir::setCurrent(saved));
        QCOMPARE(folders.then, concat({wheelFolder(d + "/there", "nccl")}, toolkitAndSystem(d)));
    }

    void aFolderOnPathTwiceIsListedOnce()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString d = dir.path();
        auto places = fakeNvidiaTree(d); // VIRTUAL_ENV: d/venv
        const QString base = d + "/base/bin/python3.12";
        fakeEnvironment(d + "/other", {"cudnn"}, base);
        QVERIFY(QDir().mkpath(d + "/venv/bin"));
        QVERIFY(QFile::link(base, d + "/venv/bin/python3"));
        QVERIFY(QFile::link(d + "/other/bin", d + "/other-bin")); // a link to a bin folder
        const QString venv = d + "/venv/bin", other = d + "/other/bin";
        places.path = (venv + ":" + other + ":" + venv + "/:" + d + "/venv//bin:" + other + ":" +
                       d + "/other-bin:" + d + "/other/bin/../bin")
                          .toStdString();
        const auto folders = nvidiaSearchFolders(places);
        const auto expected =
            concat(under(d, {"/venv/lib/python3.12/site-packages/nvidia/cu13/lib",
                             "/venv/lib/python3.12/site-packages/nvidia/cudnn/lib"}),
                   concat({wheelFolder(d + "/other", "cudnn")}, toolkitAndSystem(d)));
        QCOMPARE(folders.then, expected);
        // Without $VIRTUAL_ENV: the same folders, found on PATH.
        places.virtualEnv.clear();
        QCOMPARE(nvidiaSearchFolders(places).then, expected);
    }

    void theSystemsPythonsOnPathKeepTheirPlace()
    {
        // /usr/local/bin, /usr/bin and /bin (a link to usr/bin) are on every PATH: their Pythons'
        // wheels stay after the toolkit and the user's, where /usr/local's were without PATH;
        // /usr/lib/python3.X/site-packages (a distribution's Python) comes last.
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString d = dir.path();
        auto places = fakeNvidiaTree(d);
        places.virtualEnv.clear();
        const QString root = d + "/root";
        touchExecutable(root + "/usr/bin/python3.12");
        QVERIFY(QFile::link(root + "/usr/bin/python3.12", root + "/usr/bin/python3"));
        QVERIFY(QFile::link(root + "/usr/bin", root + "/bin"));
        touchExecutable(root + "/usr/local/bin/python3");
        touch(root + "/usr/local/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
        touch(root + "/usr/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13");
        fakeEnvironment(d + "/torch", {"cudnn"}, root + "/usr/bin/python3.12");
        places.path =
            (root + "/usr/local/bin:" + root + "/usr/bin:" + root + "/bin:" + d + "/torch/bin")
                .toStdString();
        const auto folders = nvidiaSearchFolders(places);
        QCOMPARE(folders.then,
                 concat({wheelFolder(d + "/torch", "cudnn")},
                        under(d, {"/root/usr/local/cuda/lib64", "/root/usr/local/cuda-12.4/lib64",
                                  "/home/.local/lib/python3.11/site-packages/nvidia/nccl/lib",
                                  "/root/usr/local/lib/python3.12/site-packages/nvidia/nccl/lib",
                                  "/root/usr/lib/python3/dist-packages/nvidia/cudnn/lib",
                                  "/root/usr/lib/python3.12/site-packages/nvidia/cu13/lib"})));
        // Without PATH, /usr/local's wheels are in the same place; /usr/lib/python3.12's are not.
        places.path.clear();
        QCOMPARE(nvidiaSearchFolders(places).then,
                 under(d, {"/root/usr/local/cuda/lib64", "/root/usr/local/cuda-12.4/lib64",
                           "/home/.local/lib/python3.11/site-packages/nvidia/nccl/lib",
                           "/root/usr/local/lib/python3.12/site-packages/nvidia/nccl/lib",
                           "/root/usr/lib/python3/dist-packages/nvidia/cudnn/lib"}));
    }

    void aMissingLibraryIsNamedWithHowToGetIt()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const auto folders = nvidiaSearchFolders(fakeNvidiaTree(dir.path(), /*withNccl=*/false));
        QVERIFY(!locateNvidiaLibrary("libnccl.so.2", folders, fileExists, loaderFindsNothing));
        const auto nccl = missingNvidiaLibrariesReason({"libnccl.so.2"}, folders, 13);
        qInfo() << nccl.c_str();
        QVERIFY2(nccl.rfind("libnccl.so.2 (NCCL 2) was not found: install it from NVIDIA's CUDA "
                            "apt repository (`apt install libnccl2`) or as a Python wheel (`pip "
                            "install nvidia-nccl-cu13`); looked in: the dynamic loader's paths, " +
                                dir.path().toStdString() + "/venv/",
                            0) == 0,
                 nccl.c_str());
        QVERIFY2(nccl.find("TOWERS_NVIDIA_LIBRARY_PATH") != std::string::npos, nccl.c_str());
        const auto cudnn = missingNvidiaLibrariesReason({"libcudnn.so.9"}, {}, 13);
        QVERIFY2(cudnn.find("libcudnn.so.9 (cuDNN 9) was not found: install it from NVIDIA's "
                            "CUDA apt repository (`apt install cudnn9-cuda-13`) or as a Python "
                            "wheel (`pip install nvidia-cudnn-cu13`)") == 0,
                 cudnn.c_str());
        // All of them: named once each, cuBLASLt with cuBLAS, one command for each way.
        const auto all =
            missingNvidiaLibrariesReason({"libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13",
                                          "libcudnn.so.9", "libnccl.so.2"},
                                         {{"/opt/nvidia"}, {}}, 13);
        qInfo() << all.c_str();
        QVERIFY2(all.find("libcudart.so.13 (CUDA runtime 13), libcublasLt.so.13 and "
                          "libcublas.so.13 (cuBLAS 13), libcudnn.so.9 (cuDNN 9) and libnccl.so.2 "
                          "(NCCL 2) were not found: install them") == 0,
                 all.c_str());
        QVERIFY2(
            QString::fromStdString(all).contains(QRegularExpression(
                "`apt install cuda-cudart-13-\\d+ libcublas-13-\\d+ cudnn9-cuda-13 libnccl2`")),
            all.c_str());
        QVERIFY2(all.find("`pip install 'nvidia-cuda-runtime==13.*' 'nvidia-cublas==13.*' "
                          "nvidia-cudnn-cu13 nvidia-nccl-cu13`") != std::string::npos,
                 all.c_str());
        QVERIFY2(all.find("looked in: $TOWERS_NVIDIA_LIBRARY_PATH (/opt/nvidia), the dynamic "
                          "loader's paths") != std::string::npos,
                 all.c_str());
        // CUDA 12's wheels still carry the -cu12 suffix.
        QCOMPARE(describeNvidiaLibrary("libcudart.so.12", 12).pipPackage,
                 std::string("nvidia-cuda-runtime-cu12"));
        QCOMPARE(describeNvidiaLibrary("libcublas.so.12", 12).pipPackage,
                 std::string("nvidia-cublas-cu12"));
        QVERIFY(describeNvidiaLibrary("libc.so.6", 13).name.empty());
    }

    void preloadingSaysWhatAPluginLacks()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QByteArray saved = qgetenv("TOWERS_NVIDIA_LIBRARY_PATH");
        qputenv("TOWERS_NVIDIA_LIBRARY_PATH", dir.filePath("extra").toUtf8());
        // A plugin that needs no NVIDIA library: nothing to do.
        writeElf(dir.filePath("plain.so"), {"libc.so.6"});
        QCOMPARE(preloadNvidiaLibraries(dir.filePath("plain.so").toStdString()), std::string());
        // One that needs a cuDNN nobody has: named, with where it was looked for.
        writeElf(dir.filePath("needs.so"), {"libcudnn.so.99", "libc.so.6"});
        const auto missing = preloadNvidiaLibraries(dir.filePath("needs.so").toStdString());
        qInfo() << missing.c_str();
        QVERIFY2(missing.find("libcudnn.so.99 (cuDNN 99) was not found") == 0, missing.c_str());
        QVERIFY2(missing.find("$TOWERS_NVIDIA_LIBRARY_PATH (" +
                              dir.filePath("extra").toStdString() + ")") != std::string::npos,
                 missing.c_str());
        // A file of that name that is not a library: what dlopen says of it.
        touch(dir.filePath("extra/libnccl.so.97"));
        writeElf(dir.filePath("broken.so"), {"libnccl.so.97"});
        const auto broken = preloadNvidiaLibraries(dir.filePath("broken.so").toStdString());
        QVERIFY2(broken.find("NVIDIA's library " +
                             dir.filePath("extra/libnccl.so.97").toStdString() +
                             " could not be loaded: ") == 0,
                 broken.c_str());
        if (saved.isNull())
            qunsetenv("TOWERS_NVIDIA_LIBRARY_PATH");
        else
            qputenv("TOWERS_NVIDIA_LIBRARY_PATH", saved);
    }
};

QTEST_APPLESS_MAIN(TestNvidiaLibraries)
#include "tst_nvidia_libraries.moc"
