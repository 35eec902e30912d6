// What a run on CPU towers needs of the host's memory (engine/train/memory_need.h), against what
// towers-cli really takes at its peak; and a run that cannot fit in what the process may take
// (here held by an address-space limit, ulimit -v) is refused before it takes it, naming the
// parts, with no run folder left, where it once trained until the system ended it.
#include <QDeadlineTimer>
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <sys/resource.h>

#include <fstream>
#include <thread>
#include <vector>

#include "dataset_files.h"
#include "engine/cpu/host_memory.h"
#include "engine/errors.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/train/memory_need.h"
#include "engine/train/train_config.h"
#include "thread_process_group.h"

using namespace towers;
using namespace towers::engine;

namespace {

constexpr std::int64_t kMiB = std::int64_t(1) << 20;

// 784 -> 32768 -> classes, fully connected: 100 MiB of weights, next to nothing else.
const char* kWide = R"({"name": "wide", "input": [28, 28, 1], "layers": [{"type": "flatten"},
    {"type": "linear", "units": 32768}, {"type": "linear", "units": "classes"}]})";

// A run of the wide network on 10 classes, 16 examples per tower.
TrainConfig wideConfig()
{
    TrainConfig c;
    c.model = "wide";
    c.modelDefinition = kWide;
    c.classes = 10;
    c.batchPerTower = 16;
    return c;
}

struct Run
{
    int exitCode = -1;
    QString out, err;
    std::int64_t peak = 0; // the largest peak resident size of the children so far
};

} // namespace

class TestMemoryNeed : public QObject
{
    Q_OBJECT

    QTemporaryDir m_tmp;

    QString path(const QString& name) const { return m_tmp.filePath(name); }

    // towers-cli train with `args` on the test's data, held to `addressSpace` bytes (0: as this
    // process is).
    Run train(const QStringList& args, rlim_t addressSpace = 0)
    {
        return cli(QStringList{QStringLiteral("train"), QStringLiteral("--steps"),
                               QStringLiteral("2"), QStringLiteral("--eval-every"),
                               QStringLiteral("0")} +
                       args,
                   addressSpace);
    }

    // towers-cli `command` (its name and options) on fashion-mnist, batch 16, a thread per tower
    // (the address space the threads set aside does not follow the machine's cores then); ended
    // once its output says `until` when that is given (its exit code then -1).
    Run cli(const QStringList& command, rlim_t addressSpace = 0, const QString& until = {})
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("HOME"), path(QStringLiteral("home")));
        env.insert(QStringLiteral("XDG_DATA_HOME"), path(QStringLiteral("xdg")));
        env.insert(QStringLiteral("TOWERS_DATA"), path(QStringLiteral("data")));
        env.insert(QStringLiteral("OMP_NUM_THREADS"), QStringLiteral("1"));
        env.insert(QStringLiteral("TOWERS_CUDA_PLUGIN"),
                   QStringLiteral("/nonexistent/libtowers-cuda.so"));
        p.setProcessEnvironment(env);
        p.setChildProcessModifier([addressSpace] {
            if (addressSpace) {
                const rlimit limit{addressSpace, addressSpace};
                ::setrlimit(RLIMIT_AS, &limit);
            }
        });
        p.start(QStringLiteral(TOWERS_CLI),
                command + QStringList{QStringLiteral("--dataset"), QStringLiteral("fashion-mnist"),
                                      QStringLiteral("--batch-size"), QStringLiteral("16"),
                                      QStringLiteral("--threads-per-tower"), QStringLiteral("1")});
        Run r;
        if (!p.waitForStarted(10000)) return r;
        if (!until.isEmpty()) {
            QDeadlineTimer deadline(180000);
            while (p.state() == QProcess::Running && !deadline.hasExpired() &&
                   !r.out.contains(until)) {
                p.waitForReadyRead(100);
                r.out += QString::fromUtf8(p.readAllStandardOutput());
            }
            if (r.out.contains(until)) p.kill();
        }
        if (!p.waitForFinished(180000)) {
            p.kill();
            p.waitForFinished();
            return r;
        }
        r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        r.out += QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
        rusage u{};
        getrusage(RUSAGE_CHILDREN, &u);
        r.peak = std::int64_t(u.ru_maxrss) * 1024;
        return r;
    }

    QString wideFile() const { return path(QStringLiteral("wide.json")); }

private slots:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        test::writeIdxDataset(path(QStringLiteral("data/fashion-mnist")).toStdString(), 256, 64, 28,
                              28, true, 7);
        std::ofstream(wideFile().toStdString()) << kWide;
    }

    // The parts, counted: the weights (and biases) with their gradients on every tower, the
    // optimizer's state on every tower, the average once, every tower's layer outputs, and what a
    // checkpoint's read-back holds (its largest tensor: the first layer's weights).
    void partsOfANetwork()
    {
        const auto model = buildModel(modelFromDefinition(kWide, "wide.json"), 10);
        const std::int64_t weights = 4 * (784 * 32768 + 32768 + 32768 * 10 + 10);
        const std::int64_t outputs = 4 * (784 + 32768 + 10); // per example
        const std::int64_t largest = 4 * 784 * 32768;
        const MemoryNeed sgd = hostMemoryNeed(*model, 1, 16, "sgd", false);
        QCOMPARE(sgd.replicas, 2 * weights);
        QCOMPARE(sgd.optimizer, 0);
        QCOMPARE(sgd.average, 0);
        QCOMPARE(sgd.outputs, 16 * outputs);
        QCOMPARE(sgd.checkpoint, largest);
        QCOMPARE(sgd.floor(), 2 * weights + 16 * outputs);
        QCOMPARE(sgd.total(), 2 * weights + 16 * outputs + largest);
        const MemoryNeed adam = hostMemoryNeed(*model, 2, 16, "adam", true);
        QCOMPARE(adam.replicas, 4 * weights);
        QCOMPARE(adam.optimizer, 4 * weights);
        QCOMPARE(adam.average, weights);
        QCOMPARE(adam.outputs, 32 * outputs);
        QCOMPARE(adam.checkpoint, largest);
        // Resuming: the checkpoint is read into the towers a tensor at a time (and sent to the
        // other processes so); starting from one (--init-from), its weights are held until the
        // towers have them.
        for (const int processes : {1, 2}) {
            QCOMPARE(hostMemoryNeed(*model, 2, 16, "adam", true, processes, StartRead::Resume)
                         .checkpoint,
                     largest);
            QCOMPARE(hostMemoryNeed(*model, 2, 16, "adam", true, processes, StartRead::InitFrom)
                         .checkpoint,
                     weights + largest);
        }
        QCOMPARE(adam.exchange, 0);
        // One of several processes: the towers' gradients in flight to the others, too.
        const MemoryNeed across = hostMemoryNeed(*model, 2, 16, "adam", true, 2);
        QCOMPARE(across.exchange, 2 * weights);
        QCOMPARE(across.floor(), adam.floor() + 2 * weights);
        QCOMPARE(hostMemoryNeed(*model, 3, 16, "nesterov", false).optimizer, 3 * weights);
        QCOMPARE(hostMemoryNeed(*model, 1, 16, "momentum", false).optimizer, weights);
        QCOMPARE(QString::fromStdString(adam.parts()),
                 QStringLiteral("weights and gradients of 2 towers 398 MiB, optimizer state "
                                "398 MiB, moving average 99 MiB, layer outputs of 16 examples "
                                "per tower 4 MiB"));
        // Towers that accumulate their gradients over batches keep a sum of them each; the
        // layer outputs stay a batch's.
        MemoryNeed summed = adam;
        addAccumulation(summed, networkBytes(*model), 4);
        QCOMPARE(summed.accumulated, 2 * weights); // every weight of it trains
        QCOMPARE(summed.outputs, adam.outputs);
        QCOMPARE(summed.floor(), adam.floor() + 2 * weights);
        QVERIFY2(QString::fromStdString(summed.parts())
                     .contains(QStringLiteral(", gradients accumulated 199 MiB, layer outputs")),
                 summed.parts().c_str());
        addAccumulation(summed, networkBytes(*model), 1);
        QCOMPARE(summed.accumulated, 0);
    }

    // A run of that network with every part (two towers, Adam, a moving average): towers-cli's
    // peak, less a small run's, is what the estimate says (from 15 % under to 30 % over: 8 % over
    // on an EPYC with AVX-512, Zen 4; another CPU's kernels may keep a layout of their own of the
    // weights).
    void theEstimateIsThePeak()
    {
        const Run small = train({QStringLiteral("--model"), QStringLiteral("fashion-fast"),
                                 QStringLiteral("--run-dir"), path(QStringLiteral("runs/small"))});
        QVERIFY2(small.exitCode == 0, qPrintable(small.err));
        const auto model = buildModel(modelFromDefinition(kWide, "wide.json"), 10);
        const MemoryNeed need = hostMemoryNeed(*model, 2, 16, "adam", true);
        if (const auto room = cpu::availableHostMemory(); room && room->bytes < 2 * need.total())
            QSKIP(qPrintable(QStringLiteral("%1 MiB free: too little to measure a run of %2 MiB")
                                 .arg(room->bytes / kMiB)
                                 .arg(need.total() / kMiB)));
        const Run wide =
            train({QStringLiteral("--model"), wideFile(), QStringLiteral("--towers"),
                   QStringLiteral("2"), QStringLiteral("--optimizer"), QStringLiteral("adam"),
                   QStringLiteral("--ema-decay"), QStringLiteral("0.999"),
                   QStringLiteral("--run-dir"), path(QStringLiteral("runs/wide"))});
        QVERIFY2(wide.exitCode == 0, qPrintable(wide.err));
        const double taken = double(wide.peak - small.peak);
        const QString figures = QStringLiteral("took %1 MiB over a small run's %2 MiB; estimated "
                                               "%3 MiB (at least %4 MiB)")
                                    .arg(taken / kMiB, 0, 'f', 0)
                                    .arg(small.peak / kMiB)
                                    .arg(need.total() / kMiB)
                                    .arg(need.floor() / kMiB);
        qInfo("%s", qPrintable(figures));
        QVERIFY2(taken > double(need.floor()), qPrintable(figures));
        QVERIFY2(taken > 0.85 * double(need.total()) && taken < 1.3 * double(need.total()),
                 qPrintable(figures));
    }

    // What `towers` towers of a thread each of the wide network need at least under an
    // address-space limit: their parts, and the address space of their threads and the others'.
    std::int64_t floorUnderAddressLimit(int towers, const std::string& optimizer)
    {
        const auto model = buildModel(modelFromDefinition(kWide, "wide.json"), 10);
        MemoryNeed need = hostMemoryNeed(*model, towers, 16, optimizer, false);
        need.threads = cpu::threadsAddressSpace(towers + kThreadsBesidesTowers);
        return need.floor();
    }

    // Four towers of it with Adam need at least 1.6 GiB, and their threads set 128 MiB of address
    // space aside (8 threads' stacks of 8 MiB, an arena of malloc's); held to 1 GiB of address
    // space, towers-cli refuses at once, naming the parts and the limit, and leaves no folder.
    void aRunThatCannotFitIsRefused()
    {
        const QString dir = path(QStringLiteral("runs/too-big"));
        const Run r = train({QStringLiteral("--model"), wideFile(), QStringLiteral("--towers"),
                             QStringLiteral("4"), QStringLiteral("--optimizer"),
                             QStringLiteral("adam"), QStringLiteral("--run-dir"), dir},
                            rlim_t(1024) * kMiB);
        QVERIFY2(r.exitCode == 1, qPrintable(r.err));
        const QString floor =
            QString::fromStdString(cpu::byteText(floorUnderAddressLimit(4, "adam")));
        QVERIFY2(r.err.contains(
                     QStringLiteral("not enough memory for this run: it needs at least ") + floor +
                     QStringLiteral(" (weights and gradients of 4 towers 795 "
                                    "MiB, optimizer state 795 MiB, layer outputs of 16 "
                                    "examples per tower 8 MiB, address space its "
                                    "threads set aside (stacks, malloc's arenas) ")) &&
                     r.err.contains(QStringLiteral("), and this process may take ")),
                 qPrintable(r.err));
        QVERIFY2(r.err.contains(QStringLiteral(" more (its address-space limit, ulimit -v). Fewer "
                                               "towers, a smaller batch or a smaller network "
                                               "would fit")),
                 qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(dir));
    }

    // lr-find builds the towers a run would (8 of it with Nesterov, the model file's recipe):
    // refused the same way.
    void anLrFindThatCannotFitIsRefused()
    {
        const Run r = cli({QStringLiteral("lr-find"), QStringLiteral("--model"), wideFile(),
                           QStringLiteral("--towers"), QStringLiteral("8")},
                          rlim_t(1024) * kMiB);
        QVERIFY2(r.exitCode == 1, qPrintable(r.err));
        const QString floor =
            QString::fromStdString(cpu::byteText(floorUnderAddressLimit(8, "nesterov")));
        QVERIFY2(
            r.err.contains(QStringLiteral("not enough memory for this run: it needs at least ") +
                           floor + QStringLiteral(" (weights and gradients of 8 towers")),
            qPrintable(r.err));
    }

    // Under an address-space limit, malloc is held to two arenas (fitMallocToAddressLimit): one
    // tower of the wide network with Adam and a moving average trains in 950 MiB of address space
    // (from 850 MiB, where the check refuses below), where with an arena for each thread
    // (MALLOC_ARENA_MAX=8) it ran out at step 0 up to 950 MiB, and reading its checkpoint back up
    // to 1,050.
    void aRunUnderAnAddressLimitTrains()
    {
        const Run r =
            train({QStringLiteral("--model"), wideFile(), QStringLiteral("--optimizer"),
                   QStringLiteral("adam"), QStringLiteral("--ema-decay"), QStringLiteral("0.999"),
                   QStringLiteral("--run-dir"), path(QStringLiteral("runs/limited"))},
                  rlim_t(950) * kMiB);
        QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
        QVERIFY2(r.out.contains(QStringLiteral("wrote checkpoint ")), qPrintable(r.out));
    }

    // A resume reads its checkpoint into the towers a tensor at a time (it once read it whole,
    // 398 MiB for the wide network with Adam and a moving average): a run that trains in 950 MiB
    // of address space resumes in 950 MiB too, where it once ran out of memory up to 1,050.
    void aRunResumesWhereItTrained()
    {
        const QString dir = path(QStringLiteral("runs/resumed"));
        const rlim_t limit = rlim_t(950) * kMiB;
        const Run first =
            train({QStringLiteral("--model"), wideFile(), QStringLiteral("--optimizer"),
                   QStringLiteral("adam"), QStringLiteral("--ema-decay"), QStringLiteral("0.999"),
                   QStringLiteral("--run-dir"), dir},
                  limit);
        QVERIFY2(first.exitCode == 0, qPrintable(first.out + first.err));
        const Run resumed =
            cli({QStringLiteral("train"), QStringLiteral("--resume"), QStringLiteral("--run-dir"),
                 dir, QStringLiteral("--steps"), QStringLiteral("4"),
                 QStringLiteral("--eval-every"), QStringLiteral("0")},
                limit);
        QVERIFY2(resumed.exitCode == 0, qPrintable(resumed.out + resumed.err));
        QVERIFY2(resumed.out.contains(QStringLiteral("restored ")) &&
                     resumed.out.contains(QStringLiteral("ckpt-00000002.safetensors at step 2")),
                 qPrintable(resumed.out));
        QVERIFY(QFileInfo::exists(dir + QStringLiteral("/checkpoints/ckpt-00000004.safetensors")));
    }

    // One tower of a network whose second layer is 1 GiB of its 1.2 GiB of weights needs 2.4 GiB
    // with SGD (weights and gradients) and 1 GiB more while it reads a checkpoint back: held
    // between the two (2.4 GiB and 700 MiB of address space, of which towers-cli has mapped 140
    // to 300 MiB when it checks), it is said at the start. The run is ended there.
    void aRunThatMayNotFitIsSaid()
    {
        const char* dominant = R"({"name": "dominant", "input": [28, 28, 1], "layers": [
            {"type": "flatten"}, {"type": "linear", "units": 65536},
            {"type": "linear", "units": 4096}, {"type": "linear", "units": "classes"}]})";
        const QString file = path(QStringLiteral("dominant.json"));
        std::ofstream(file.toStdString()) << dominant;
        const auto model = buildModel(modelFromDefinition(dominant, "dominant.json"), 10);
        const MemoryNeed need = hostMemoryNeed(*model, 1, 16, "sgd", false);
        QCOMPARE(need.checkpoint, std::int64_t(65536) * 4096 * 4);
        if (const auto room = cpu::sharedHostMemory(); room && room->bytes < need.total())
            QSKIP(qPrintable(QStringLiteral("%1 MiB free: the note needs more free than the "
                                            "%2 MiB of the run and its checkpoint")
                                 .arg(room->bytes / kMiB)
                                 .arg(need.total() / kMiB)));
        const QString note = QStringLiteral("note: this run needs at least ");
        const Run r = cli({QStringLiteral("train"), QStringLiteral("--model"), file,
                           QStringLiteral("--optimizer"), QStringLiteral("sgd"),
                           QStringLiteral("--run-dir"), path(QStringLiteral("runs/tight"))},
                          rlim_t(need.floor() + 700 * kMiB), note);
        QVERIFY2(r.out.contains(note) &&
                     r.out.contains(QStringLiteral(" while it writes a checkpoint, and this "
                                                   "process may take ")),
                 qPrintable(r.out + r.err));
    }

    // GPU towers: each GPU this process's towers use is asked once what is free and holds its
    // towers' parts, the moving average on tower 0's, the training set on each when the towers
    // make their images there; a GPU short of it refuses the run, named, with the parts.
    void gpuTowersAreCheckedOnEachGpu()
    {
        TrainConfig c = wideConfig();
        c.optimizer.kind = "nesterov";
        c.emaDecay = 0.999;
        const auto model = buildModel(modelFromDefinition(kWide, "wide.json"), 10);
        const NetworkBytes network = networkBytes(*model);
        const std::int64_t weights = network.weights, outputs = 16 * network.outputsPerExample;
        const std::int64_t tower = 3 * weights + outputs; // weights, gradients, momentum

        const MemoryNeed one = gpuMemoryNeed(network, 2, 16, "nesterov", 1, 47 * kMiB);
        QCOMPARE(one.floor(), 2 * tower + weights + 47 * kMiB);
        QCOMPARE(one.checkpoint, 0);
        QVERIFY(
            QString::fromStdString(one.parts())
                .contains(QStringLiteral(", moving average 99 MiB, the training set 47 MiB, ")));

        // What each GPU is asked, and what it says is free.
        std::vector<int> asked;
        std::vector<std::uint64_t> free;
        const auto freeBytes = [&](int g) {
            asked.push_back(g);
            return free[std::size_t(g)];
        };
        const auto refusal = [&](int gpus, std::int64_t held) -> QString {
            asked.clear();
            try {
                checkGpuMemory(c, nullptr, gpus, freeBytes, held);
            } catch (const Error& e) {
                return QString::fromUtf8(e.what());
            }
            return {};
        };

        // Two towers on GPUs 0 and 1 of 4: only those asked; GPU 0 holds the average as well.
        c.towers = 2;
        free = {std::uint64_t(tower + weights), std::uint64_t(tower), 0, 0};
        QCOMPARE(refusal(4, 0), QString());
        QCOMPARE(asked, (std::vector<int>{0, 1}));
        free[1] = std::uint64_t(tower - 1);
        const QString gpu1 = refusal(4, 0);
        QVERIFY2(gpu1.startsWith(QStringLiteral("not enough memory on GPU 1 for this run: it needs "
                                                "at least 300 MiB there (weights and gradients "
                                                "of 1 tower 199 MiB, optimizer state 99 MiB, "
                                                "layer outputs of 16 examples per tower 2 MiB), "
                                                "and 300 MiB of it is free. Fewer towers on it, "
                                                "a smaller batch or a smaller network would fit")),
                 qPrintable(gpu1));
        free[1] = std::uint64_t(tower);
        free[0] = std::uint64_t(tower + weights - 1); // the average does not fit beside it
        QVERIFY(refusal(4, 0).startsWith(QStringLiteral("not enough memory on GPU 0 ")));
        // The training set on each GPU.
        free = {std::uint64_t(tower + weights + 47 * kMiB), std::uint64_t(tower + 47 * kMiB)};
        QCOMPARE(refusal(2, 47 * kMiB), QString());
        QVERIFY(refusal(2, 48 * kMiB).startsWith(QStringLiteral("not enough memory on GPU 0 ")));

        // Tower 0 on GPU 1 (--gpus 1,0): the average is there.
        c.gpus = {1, 0};
        free = {std::uint64_t(tower), std::uint64_t(tower + weights)};
        QCOMPARE(refusal(2, 0), QString());
        free = {std::uint64_t(tower + weights), std::uint64_t(tower)};
        QVERIFY(refusal(2, 0).startsWith(QStringLiteral("not enough memory on GPU 1 ")));

        // Both towers on GPU 0 (--gpus 0,0): asked once, their parts together.
        c.gpus = {0, 0};
        free = {std::uint64_t(2 * tower + weights), 0};
        QCOMPARE(refusal(2, 0), QString());
        QCOMPARE(asked, (std::vector<int>{0}));
        free[0] -= 1;
        QVERIFY(refusal(2, 0).contains(QStringLiteral("weights and gradients of 2 towers ")));
        // CUDA cannot say (0): not checked; no GPU, or a list the towers refuse: nothing asked.
        free[0] = 0;
        QCOMPARE(refusal(2, 0), QString());
        QCOMPARE(refusal(0, 0), QString());
        QVERIFY(asked.empty());
        c.gpus = {0};
        QCOMPARE(refusal(2, 0), QString());
        QVERIFY(asked.empty());
        c.gpus.clear(); // no GPU, no list: nothing asked (not a tower's GPU number modulo 0)
        QCOMPARE(refusal(0, 0), QString());
        QVERIFY(asked.empty());
    }

    // The run's processes that share a GPU (the same machine and PCI bus id) count together: two
    // processes of a tower each on one GPU need both towers there (each tells the other before
    // either takes its memory), and each its own copy of the training set and its moving
    // average; on two GPUs, each has its own, also where each sees its own as GPU 0 (a batch
    // scheduler's CUDA_VISIBLE_DEVICES for each task), or CUDA cannot say the bus ids.
    void processesSharingAGpuAreCountedTogether()
    {
        TrainConfig c = wideConfig();
        c.towers = 1;
        c.optimizer.kind = "nesterov";
        c.emaDecay = 0.999;
        const auto model = buildModel(modelFromDefinition(kWide, "wide.json"), 10);
        const NetworkBytes network = networkBytes(*model);
        const std::int64_t tower = 3 * network.weights + 16 * network.outputsPerExample;
        // `gpus` GPUs for each process; `ownBus`: each process's GPU 0 is its own.
        const auto run = [&](int gpus, std::uint64_t free, std::int64_t held, bool ownBus = false,
                             bool busKnown = true) {
            const auto world = test::makeThreadWorld(2, 20);
            std::vector<std::string> said(2);
            std::vector<std::thread> ranks;
            for (int r = 0; r < 2; ++r)
                ranks.emplace_back([&, r] {
                    const auto group = test::joinThreadWorld(world, r);
                    const auto bus = [r, ownBus, busKnown](int g) {
                        return !busKnown ? std::string()
                                         : "0000:" + std::to_string(ownBus ? r : g) + "1:00.0";
                    };
                    try {
                        checkGpuMemory(
                            c, group.get(), gpus, [free](int) { return free; }, held, bus);
                    } catch (const Error& e) {
                        said[std::size_t(r)] = e.what();
                    }
                });
            for (auto& t : ranks) t.join();
            return said;
        };
        const std::int64_t both = 2 * (tower + network.weights + 47 * kMiB);
        QCOMPARE(run(1, std::uint64_t(both), 47 * kMiB), (std::vector<std::string>{"", ""}));
        const auto short1 = run(1, std::uint64_t(both - 1), 47 * kMiB);
        for (const std::string& s : short1)
            QVERIFY2(s.find("not enough memory on GPU 0 for this run: its 2 processes there "
                            "need at least ") != std::string::npos &&
                         s.find("weights and gradients of 2 towers") != std::string::npos,
                     s.c_str());
        // A GPU each: half of it is enough.
        QCOMPARE(run(2, std::uint64_t(both / 2), 47 * kMiB), (std::vector<std::string>{"", ""}));
        QCOMPARE(run(1, std::uint64_t(both / 2), 47 * kMiB, true),
                 (std::vector<std::string>{"", ""}));
        QCOMPARE(run(1, std::uint64_t(both / 2), 47 * kMiB, false, false),
                 (std::vector<std::string>{"", ""}));
    }

    // Across processes, one GPU short refuses the run on every process: the others name its rank.
    void aGpuShortOnOneProcessRefusesEveryProcess()
    {
        TrainConfig c = wideConfig();
        c.towers = 1;
        const auto world = test::makeThreadWorld(2, 20);
        std::string said[2];
        std::vector<std::thread> ranks;
        for (int r = 0; r < 2; ++r)
            ranks.emplace_back([&, r] {
                const auto group = test::joinThreadWorld(world, r);
                // Rank 1's GPU has 1 MiB free, rank 0's plenty.
                const std::uint64_t free = r == 1 ? std::uint64_t(kMiB) : std::uint64_t(1) << 40;
                try {
                    checkGpuMemory(
                        c, group.get(), 1, [free](int) { return free; }, 0);
                    said[r] = "trained";
                } catch (const Error& e) {
                    said[r] = e.what();
                }
            });
        for (auto& t : ranks) t.join();
        QVERIFY2(QString::fromStdString(said[0]).startsWith(
                     QStringLiteral("rank 1 refused the run: not enough memory on GPU 0 ")),
                 said[0].c_str());
        QVERIFY2(QString::fromStdString(said[1]).startsWith(
                     QStringLiteral("not enough memory on GPU 0 for this run")),
                 said[1].c_str());
    }
};

QTEST_GUILESS_MAIN(TestMemoryNeed)
#include "tst_memory_need.moc"
