// The CUDA backend plugin. Everywhere: it loads (in a build with CUDA) or says why not, and
// refuses a program of another build. On a machine with an NVIDIA GPU: every op against the
// float64 reference (the self-test's checks, also with TF32), training on GPU towers (the loss
// falls, the replicas stay identical, 2 towers equal 1 tower of the same global batch), and
// device errors as typed exceptions. Without a GPU those skip, saying why.
#include <QtTest>

#include <dlfcn.h>

#include <cstdlib>

#include "engine/gpu/gpu_backend.h"
#include "engine/selftest/selftest.h"
#include "engine/tensor/rng.h"
#include "engine/train/tower_set.h"
#include "synthetic_batches.h"

using namespace towers::engine;

namespace {

// The GPU backend when it can run, else nullptr with the reason to skip.
GpuBackend* gpuOrWhy(QString& why)
{
    std::string reason;
    GpuBackend* gpu = cudaBackend(&reason);
    if (!gpu) {
        why = QString::fromStdString(reason);
        return nullptr;
    }
    if (gpu->deviceCount() == 0) {
        why = QStringLiteral("no GPU: ") + QString::fromStdString(gpu->unavailableReason());
        return nullptr;
    }
    return gpu;
}

#define REQUIRE_GPU(gpu)                                                                           \
    QString why_;                                                                                  \
    GpuBackend* gpu = gpuOrWhy(why_);                                                              \
    if (!gpu) QSKIP(qPrintable(QStringLiteral("needs an NVIDIA GPU and the CUDA backend: ") + why_))

void runSelfTest(bool tf32)
{
    SelfTestOptions o;
    o.backend = "cuda";
    o.allowTf32 = tf32;
    o.training = !tf32;
    int failed = 0;
    const auto results = towers::engine::runSelfTest(o, [&](const SelfTestResult& r) {
        qInfo().noquote() << (r.passed ? "PASS" : "FAIL") << QString::fromStdString(r.name)
                          << r.error << "<=" << r.tolerance << QString::fromStdString(r.detail);
        failed += r.passed ? 0 : 1;
    });
    QVERIFY(results.size() > 20);
    QCOMPARE(failed, 0);
}

} // namespace

class TestGpuBackend : public QObject
{
    Q_OBJECT
private slots:
    void loadsOrSaysWhy()
    {
        std::string why;
        GpuBackend* gpu = cudaBackend(&why);
        if (!TOWERS_HAS_CUDA) {
            QVERIFY(!gpu);
            QVERIFY2(why.find("no CUDA backend") != std::string::npos, why.c_str());
            return;
        }
        // A CUDA build finds its plugin in the build tree; whether a GPU is there is another
        // matter.
        QVERIFY2(gpu, why.c_str());
        const std::string versions = gpu->versions();
        qInfo() << "CUDA backend:" << versions.c_str();
        QVERIFY2(versions.find("cuDNN 9") != std::string::npos, versions.c_str());
        QVERIFY2(versions.find("NCCL") != std::string::npos, versions.c_str());
        if (gpu->deviceCount() == 0) {
            qInfo() << "no GPU:" << gpu->unavailableReason().c_str();
            QVERIFY(!gpu->unavailableReason().empty());
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, gpu->deviceInfo(0));
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, gpu->makeOps(0, {}));
        }
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, gpu->deviceInfo(gpu->deviceCount()));
    }

    void refusesAnotherBuild()
    {
#ifndef TOWERS_CUDA_PLUGIN_FILE
        QSKIP("this build has no CUDA backend plugin");
#else
        const char* env = std::getenv("TOWERS_CUDA_PLUGIN"); // a carried build: the plugin is there
        void* handle = dlopen(env && *env ? env : TOWERS_CUDA_PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
        QVERIFY2(handle, dlerror());
        using Entry = GpuBackend* (*)(int, const char*, char*, std::size_t);
        auto entry = reinterpret_cast<Entry>(dlsym(handle, "towers_cuda_backend"));
        QVERIFY(entry);
        char error[512] = {};
        QVERIFY(!entry(kGpuBackendAbi + 1, gpuBackendBuildId(), error, sizeof error));
        QVERIFY2(QByteArray(error).contains("ABI"), error);
        QVERIFY(!entry(kGpuBackendAbi, "towers 0.0.0 another compiler", error, sizeof error));
        QVERIFY2(QByteArray(error).contains("install matching versions"), error);
#endif
    }

    void everyOpMatchesTheReference()
    {
        REQUIRE_GPU(gpu);
        for (int i = 0; i < gpu->deviceCount(); ++i) {
            const auto info = gpu->deviceInfo(i);
            qInfo() << "GPU" << i << info.name.c_str() << info.computeMajor << info.computeMinor
                    << info.pciBusId.c_str();
            QVERIFY(info.totalMemory > 0);
        }
        runSelfTest(false);
    }

    void everyOpMatchesTheReferenceWithTf32()
    {
        REQUIRE_GPU(gpu);
        runSelfTest(true);
    }

    void towersOnEveryGpu()
    {
        REQUIRE_GPU(gpu);
        // One tower per GPU, or two on the one GPU: replicas identical after real steps, bitwise.
        TowerSetOptions o;
        o.model = "cifar10-resnet";
        o.backend = "cuda";
        o.towers = std::max(2, gpu->deviceCount());
        o.optimizer.kind = "nesterov";
        TowerSet set(o);
        towers::test::SyntheticBatches data(set.model().inputShape(), set.model().numClasses(),
                                            o.towers, 16, 256, 3);
        double first = 0, last = 0;
        for (int s = 0; s < 8; ++s) {
            const auto r = set.step(data.next(), s, 0.05);
            QVERIFY(r.finite);
            (s == 0 ? first : last) = r.loss;
        }
        qInfo() << "loss" << first << "->" << last;
        QVERIFY(last < first);
        QCOMPARE(QString::fromStdString(set.compareReplicas()), QString());
        const auto eval = set.evaluate(64, 32, data.evaluationBatches(), false);
        QCOMPARE(eval.examples, 64);
    }

    void deviceErrorsAreTypedAndSayWhat()
    {
        REQUIRE_GPU(gpu);
        const Device dev{DeviceKind::Cuda, 0};
        try {
            Tensor huge({std::int64_t(1) << 40}, DType::Float32, dev); // 4 TiB
            QFAIL("a 4 TiB tensor was allocated");
        } catch (const DeviceOutOfMemory& e) {
            QVERIFY2(QByteArray(e.what()).contains("asked for"), e.what());
            QVERIFY2(QByteArray(e.what()).contains("cuda:0"), e.what());
        }
        // The device still works after an out-of-memory error.
        Tensor t = Tensor::zeros({3}, DType::Float32).copyTo(dev);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, t.at(0));
        auto ops = gpu->makeOps(0, {});
        Tensor y;
        // A host tensor given to GPU ops is refused, naming it.
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 ops->reluForward(Tensor::zeros({3}, DType::Float32), y));
        // float64 is the reference's; the GPU says so.
        QVERIFY_THROWS_EXCEPTION(
            Unsupported, ops->reluForward(Tensor::zeros({3}, DType::Float64).copyTo(dev), y));
        // A label outside the classes names its row.
        Tensor logits = Tensor::zeros({4, 10}, DType::Float32).copyTo(dev);
        Tensor labels({4}, DType::Int32);
        for (int i = 0; i < 4; ++i) labels.data<std::int32_t>()[i] = i == 2 ? 10 : 1;
        Tensor probs;
        try {
            ops->softmaxCrossEntropyForward(logits, labels.copyTo(dev), probs);
            QFAIL("a label of 10 in 10 classes was accepted");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QByteArray(e.what()).contains("row 2"), e.what());
        }
        gpu->synchronize(0);
    }
};

QTEST_APPLESS_MAIN(TestGpuBackend)
#include "tst_gpu_backend.moc"
