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
