// MainWindow's runs: a new run's configuration from the pages (an edited network, a checkpoint to
// start from, a model file, a run to copy, the Devices page's tower options carried into it), the
// learning-rate range test, a start that fails, a resume where no checkpoint loads. The window
// itself is in tst_main_window.cpp (main_window_support.h: what the two share).
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include "app/settings/app_settings.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/recipe.h"
#include "engine/train/run_directory.h"
#include "engine/train/run_lock.h"
#include "main_window_support.h"
#include "model_files.h"
#include "training_fixture.h"
#include "ui/main_window.h"
#include "ui/models/device_model.h"
#include "ui/pages/data_page.h"
#include "ui/pages/devices_page.h"
#include "ui/pages/lr_finder_dialog.h"
#include "ui/pages/model_file_editor.h"
#include "ui/pages/model_page.h"
#include "ui/pages/runs_page.h"
#include "ui/pages/train_page.h"
#include "ui/plots/plot_widget.h"
#include "ui/widgets/error_banner.h"
#include "ui/widgets/hyperparameter_form.h"
#include "ui/widgets/validated_field.h"
#include "ui_test_support.h"

using towers::test::devicesOf;
using towers::test::useTinyMnist;
using towers::test::waitForDataset;
using towers::ui::MainWindow;

class TestMainWindowRuns : public towers::test::MainWindowTest
{
    Q_OBJECT

private slots:
    // Using an edited network keeps the hyperparameters (they were reset to the model's defaults,
    // a learning rate set by hand lost); choosing another model still brings its own.
    void editedNetworkKeepsTheHyperparameters()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        w.show();
        w.modelPage()->setModelName(QStringLiteral("fashion-fast"));
        w.modelPage()->form()->setLearningRate(0.0123);
        w.modelPage()->form()->field(QStringLiteral("seed"))->setText(QString()); // being typed
        towers::ui::ModelFileEditor editor(w.modelPage()->model(), w.modelPage()->modelFilePath());
        QTRY_VERIFY_WITH_TIMEOUT(!editor.isChecking(), 20000);
        QVERIFY(editor.text().contains(QStringLiteral("\"filters\": 32")));
        editor.setText(editor.text().replace(QStringLiteral("\"filters\": 32"),
                                             QStringLiteral("\"filters\": 16")));
        QTRY_VERIFY_WITH_TIMEOUT(!editor.isChecking(), 20000);
        QVERIFY(editor.network());
        w.modelPage()->useEdited(editor);
        QCOMPARE(w.modelPage()->modelName(), QStringLiteral("my-fashion-fast"));
        QCOMPARE(w.modelPage()->form()->config().schedule.lr, 0.0123);
        // Fields as typed, an empty one too (a round trip through config() wrote 0 into it).
        QCOMPARE(w.modelPage()->form()->field(QStringLiteral("seed"))->text(), QString());
        QCOMPARE(w.modelPage()->form()->config().model, std::string("my-fashion-fast"));
        QVERIFY2(w.log()->toPlainText().contains(QStringLiteral(
                     "Network my-fashion-fast, with the hyperparameters as they were")),
                 qPrintable(w.log()->toPlainText()));
        // A recipe edited in the file brings its own values (kept, they were silently dropped).
        w.modelPage()->form()->setLearningRate(0.0123);
        towers::ui::ModelFileEditor recipe(w.modelPage()->model(), w.modelPage()->modelFilePath());
        QTRY_VERIFY_WITH_TIMEOUT(!recipe.isChecking(), 20000);
        QVERIFY2(recipe.text().contains(QStringLiteral("\"lr\": 0.1,")), qPrintable(recipe.text()));
        recipe.setText(
            recipe.text().replace(QStringLiteral("\"lr\": 0.1,"), QStringLiteral("\"lr\": 0.07,")));
        QTRY_VERIFY_WITH_TIMEOUT(!recipe.isChecking(), 20000);
        QVERIFY(recipe.network());
        w.modelPage()->useEdited(recipe);
        QCOMPARE(w.modelPage()->form()->config().schedule.lr, 0.07);
        w.modelPage()->setModelName(QStringLiteral("mnist-convnet"));
        QCOMPARE(w.modelPage()->form()->config().schedule.lr,
                 towers::engine::defaultConfigFor("mnist-convnet").schedule.lr);
    }

    // A start that fails at once (the run folder locked by another trainer) is said as a failure,
    // not as "Training in <folder>" before it (nor the Train page's own "New run in <folder>").
    void failedStartDoesNotSayItTrained()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        QVERIFY(waitForDataset(w));
        QString error;
        auto options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        options->newFolder = false; // this folder, not the next free name beside it
        const auto lock = towers::engine::RunLock::acquire(options->runDirectory, "another");
        QSignalSpy finished(w.trainPage(), &towers::ui::TrainPage::runFinished);
        QVERIFY(w.trainPage()->startSession(*options));
        QVERIFY(finished.wait(30000));
        const QString log = w.log()->toPlainText();
        QVERIFY2(!log.contains(QStringLiteral("Training in")), qPrintable(log));
        const QString pageLog = w.trainPage()->logView()->toPlainText();
        QVERIFY2(!pageLog.contains(QStringLiteral("New run in")), qPrintable(pageLog));
        QVERIFY2(w.banner()->message().contains(QStringLiteral("in use by process")),
                 qPrintable(w.banner()->message()));
    }

    // Resuming a run none of whose checkpoints loads asks first; "no" changes nothing, "yes" sets
    // the run's files aside (never deleting them) and trains it from step 0.
    void resumeWithNoLoadableCheckpointAsks()
    {
        QTemporaryDir dir;
        towers::test::writeTinyMnist(dir.filePath(QStringLiteral("data")).toStdString());
        const auto folder =
            std::filesystem::path(dir.filePath(QStringLiteral("runs/r")).toStdString());
        auto options =
            towers::test::tinyRun(dir.filePath(QStringLiteral("data")).toStdString(), folder, 4, 1);
        options.config.dataDir = dir.filePath(QStringLiteral("data")).toStdString();
        {
            towers::engine::TrainingSession session(options);
            session.run();
        }
        towers::engine::RunDirectory run(folder);
        const auto files = run.checkpoints();
        QVERIFY(!files.empty());
        for (const auto& f : files) std::filesystem::resize_file(f.path, 100);

        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        MainWindow w(settings);
        w.setRestartQuestionAnswer(false);
        w.resumeRun(QString::fromStdString(folder.string()));
        QCOMPARE(w.restartQuestionsAsked(), 1);
        QVERIFY(!w.trainPage()->isActive());
        QCOMPARE(run.checkpoints().size(), files.size());
        QVERIFY(!std::filesystem::exists(folder / "set-aside"));

        w.setRestartQuestionAnswer(true);
        QSignalSpy finished(w.trainPage(), &towers::ui::TrainPage::runFinished);
        w.resumeRun(QString::fromStdString(folder.string()));
        QCOMPARE(w.restartQuestionsAsked(), 2);
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.at(0).at(0).value<towers::app::TrainingWorker::Outcome>(),
                 towers::app::TrainingWorker::Outcome::Finished);
        QVERIFY(std::filesystem::exists(folder / "set-aside"));
        std::size_t aside = 0;
        for (const auto& e : std::filesystem::recursive_directory_iterator(folder / "set-aside"))
            aside += e.path().extension() == ".safetensors" &&
                     std::filesystem::file_size(e.path()) == 100;
        QCOMPARE(aside, files.size());
    }

    // A checkpoint chosen as the start of a new run (the Model page's Start from, or the Runs
    // page's context menu) brings its model, whose defaults then take the checkpoint again; the new
    // run's configuration carries it.
    void fineTuneTakesTheCheckpointsModel()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        QVERIFY(waitForDataset(w));
        QVERIFY(w.modelPage()->modelName() != QStringLiteral("fashion-wide"));
        // Checkpoints of the two models (one that cannot be read is refused by the form).
        const auto checkpointOf = [&dir](const char* model) {
            const QString file = dir.filePath(QStringLiteral("%1.safetensors").arg(model));
            towers::engine::CheckpointInfo info;
            info.dataset = "mnist";
            for (int c = 0; c < 10; ++c) info.classNames.push_back(std::to_string(c));
            info.step = 5;
            const auto net = towers::engine::createModel(model, 1, 10);
            towers::engine::writeCheckpoint(file.toStdString(),
                                            towers::engine::makeCheckpoint(*net, info));
            return file;
        };
        const QString file = checkpointOf("fashion-wide");
        const QString fast = checkpointOf("fashion-fast");
        emit w.modelPage()->form()->initFromChosen(file, QStringLiteral("fashion-wide"));
        QCOMPARE(w.modelPage()->modelName(), QStringLiteral("fashion-wide"));
        QString error;
        const auto options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->config.model, std::string("fashion-wide"));
        QCOMPARE(options->config.initFrom, file.toStdString());
        emit w.runsPage()->fineTuneRequested(fast, QStringLiteral("fashion-fast"));
        QCOMPARE(w.modelPage()->modelName(), QStringLiteral("fashion-fast"));
        const auto fine = w.newRunOptions(&error);
        QVERIFY2(fine, qPrintable(error));
        QCOMPARE(fine->config.initFrom, fast.toStdString());
        // A file that cannot be read: refused before the run, naming it; the other fields' edits
        // are still kept as the last configuration meanwhile.
        w.modelPage()->form()->setInitFrom(dir.filePath(QStringLiteral("gone.safetensors")));
        QVERIFY(!w.newRunOptions(&error));
        QVERIFY2(error.contains(QStringLiteral("gone.safetensors")), qPrintable(error));
        w.modelPage()->form()->setLearningRate(0.0321);
        QCOMPARE(towers::engine::TrainConfig::fromJson(settings.lastConfigJson().toStdString())
                     .schedule.lr,
                 0.0321);
    }

    // A network from a model file: its recipe on the form, its definition in the new run's
    // configuration and in the remembered one, so the next window opens with it (the file gone).
    void modelFileRun()
    {
        QTemporaryDir dir;
        const QString file = towers::test::settingsFile(dir.path());
        const QString net = dir.filePath(QStringLiteral("net.json"));
        {
            towers::app::AppSettings settings(file);
            useTinyMnist(settings, dir);
            MainWindow w(settings);
            QVERIFY(waitForDataset(w));
            QFile out(net);
            QVERIFY(out.open(QIODevice::WriteOnly));
            out.write(towers::test::fashionFastDefinition("mine").c_str());
            out.close();
            QString error;
            QVERIFY2(w.modelPage()->openModelFile(net, &error), qPrintable(error));
            const auto options = w.newRunOptions(&error);
            QVERIFY2(options, qPrintable(error));
            QCOMPARE(options->config.model, std::string("mine"));
            QCOMPARE(options->config.modelDefinition, w.modelPage()->model().definition);
            QCOMPARE(options->config.batchPerTower, 128); // a model file's default recipe
            w.close();
        }
        QVERIFY(QFile::remove(net));
        towers::app::AppSettings settings(file);
        MainWindow again(settings);
        if (!again.dataPage()->loadedDataset()) {
            QSignalSpy loaded(again.dataPage(), &towers::ui::DataPage::datasetLoaded);
            QVERIFY(loaded.wait(20000));
        }
        QCOMPARE(again.modelPage()->modelName(), QStringLiteral("mine"));
        QString error;
        const auto options = again.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->config.model, std::string("mine"));
        QVERIFY(!options->config.modelDefinition.empty());

        // A checkpoint of another model file's network, chosen to start from, brings its network
        // (from the run's configuration it holds).
        const auto& other = towers::engine::resolveModel(
            "other", towers::engine::canonicalModelDefinition(
                         towers::test::fashionFastDefinition("other"), "test"));
        auto model = towers::engine::buildModel(other, 10);
        model->initialize(1);
        towers::engine::CheckpointInfo info;
        info.config = towers::engine::defaultConfigFor(other).toJson();
        const QString checkpoint = dir.filePath(QStringLiteral("other.safetensors"));
        towers::engine::writeCheckpoint(checkpoint.toStdString(),
                                        towers::engine::makeCheckpoint(*model, info));
        emit again.runsPage()->fineTuneRequested(checkpoint, QStringLiteral("other"));
        QCOMPARE(again.modelPage()->modelName(), QStringLiteral("other"));
        const auto tuned = again.newRunOptions(&error);
        QVERIFY2(tuned, qPrintable(error));
        QCOMPARE(tuned->config.modelDefinition, other.definition);
        QCOMPARE(tuned->config.initFrom, checkpoint.toStdString());
    }

    // "New run like this…" (the Runs page's run menu; DIGITS' Clone job): the run's dataset,
    // model, hyperparameters and towers on the pages, ready to change and start as a new run; a
    // folder that is no run is refused in the banner.
    void newRunLikeARun()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        towers::engine::TrainConfig c = towers::engine::defaultConfigFor("fashion-fast");
        c.dataset = "mnist";
        c.dataDir = dir.filePath(QStringLiteral("data")).toStdString();
        c.towers = 2;
        c.seed = 9;
        c.schedule.lr = 0.0123;
        c.steps = 50;
        c.epochs = 0;
        c.evalEvery = 10;
        c.validation = 0.2;
        c.patience = 2;
        c.minDelta = 0.001;
        c.runId = "an-earlier-run";
        const QString run = dir.filePath(QStringLiteral("runs/mnist-fashion-fast-1"));
        QVERIFY(QDir().mkpath(run));
        towers::engine::RunDirectory(run.toStdString()).writeConfig(c.toJson());

        MainWindow w(settings);
        QVERIFY(waitForDataset(w));
        w.modelPage()->setModelName(QStringLiteral("mnist-convnet"));
        emit w.runsPage()->newRunLikeRequested(run);
        QCOMPARE(w.currentPage(), int(MainWindow::Model));
        QCOMPARE(w.modelPage()->modelName(), QStringLiteral("fashion-fast"));
        QString error;
        const auto options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        const auto& n = options->config;
        QCOMPARE(n.model, std::string("fashion-fast"));
        QCOMPARE(n.dataset, std::string("mnist"));
        QCOMPARE(n.towers, 2);
        QCOMPARE(n.seed, std::uint64_t(9));
        QCOMPARE(n.schedule.lr, 0.0123);
        QCOMPARE(n.steps, std::int64_t(50));
        QCOMPARE(n.validation, 0.2);
        QCOMPARE(n.patience, 2);
        QCOMPARE(n.minDelta, 0.001);
        QVERIFY(n.runId.empty()); // a new run, with an id of its own when it starts
        QVERIFY(options->runDirectory.string() != run.toStdString()); // in a new folder

        QVERIFY(!w.newRunLike(dir.filePath(QStringLiteral("no-run-here"))));
        QVERIFY2(w.banner()->message().contains(QStringLiteral("no-run-here")),
                 qPrintable(w.banner()->message()));

        // A run whose data folder is not here (copied from another machine) keeps the user's own:
        // it became the Data page's folder, and the dataset was then not found.
        c.dataDir = dir.filePath(QStringLiteral("elsewhere/data")).toStdString();
        const QString copied = dir.filePath(QStringLiteral("runs/copied"));
        QVERIFY(QDir().mkpath(copied));
        towers::engine::RunDirectory(copied.toStdString()).writeConfig(c.toJson());
        QVERIFY(w.newRunLike(copied));
        QCOMPARE(w.dataPage()->dataDir(), dir.filePath(QStringLiteral("data")));
        QCOMPARE(settings.dataDir(), dir.filePath(QStringLiteral("data")));
        QVERIFY2(w.log()->toPlainText().contains(
                     QStringLiteral("Its data folder %1 is not here")
                         .arg(dir.filePath(QStringLiteral("elsewhere/data")))),
                 qPrintable(w.log()->toPlainText()));
    }

    // "Find…" beside the learning rate: the range test on the loaded dataset with the pages'
    // settings, drawn as it runs; its suggestion goes into the form. Without a dataset, the
    // banner says what to do.
    void findsALearningRate()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("mnist"));
        settings.setDataDir(dir.filePath(QStringLiteral("nothing-here")));
        {
            MainWindow w(settings);
            QVERIFY(!w.findLearningRate());
            QVERIFY2(w.banner()->message().contains(QStringLiteral("Load a dataset")),
                     qPrintable(w.banner()->message()));
        }
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        QVERIFY(waitForDataset(w));
        QString error;
        const auto runOptions = w.newRunOptions(&error);
        QVERIFY2(runOptions, qPrintable(error));
        QSignalSpy clicked(w.modelPage()->form(),
                           &towers::ui::HyperparameterForm::findLearningRateRequested);
        w.modelPage()->form()->findLearningRateButton()->click();
        QCOMPARE(clicked.count(), 1);
        auto* dialog = w.findChild<towers::ui::LrFinderDialog*>();
        QVERIFY(dialog && dialog->isVisible());
        // One test at a time, and no run while it trains (they would share the cores): two
        // windows trained at once, and Start stayed enabled.
        QCOMPARE(w.findLearningRate(), dialog);
        QCOMPARE(w.findChildren<towers::ui::LrFinderDialog*>().size(), 1);
        if (dialog->isRunning()) {
            QVERIFY(!w.newRunOptions(&error));
            QVERIFY2(error.contains(QStringLiteral("range test is training")), qPrintable(error));
            // Nor any other start (Start next, a resume): every start asks.
            QVERIFY(!w.trainPage()->startSession(*runOptions));
            QVERIFY2(w.banner()->message().contains(QStringLiteral("range test is training")),
                     qPrintable(w.banner()->message()));
        }
        QTRY_VERIFY_WITH_TIMEOUT(!dialog->isRunning(), 60000);
        QVERIFY2(w.newRunOptions(&error), qPrintable(error));
        QVERIFY2(dialog->result(), qPrintable(dialog->statusText()));
        const auto& result = *dialog->result();
        QCOMPARE(dialog->plot()->pointCount(1), int(result.points.size()));
        QVERIFY2(result.suggestedLr > 0, qPrintable(dialog->statusText()));
        QVERIFY(dialog->statusText().contains(QStringLiteral("Suggested learning rate")));
        QVERIFY(dialog->useButton()->isEnabled());
        dialog->useButton()->click();
        const double lr = w.modelPage()->form()->config().schedule.lr;
        QVERIFY2(std::abs(lr / result.suggestedLr - 1) < 1e-5,
                 qPrintable(QStringLiteral("%1 %2").arg(lr).arg(result.suggestedLr)));
        QVERIFY(w.log()->toPlainText().contains(QStringLiteral("from the range test")));
        // A rate measured for another setup is not put in the form: the model changed meanwhile.
        {
            QPointer<towers::ui::LrFinderDialog> other = w.findLearningRate();
            QVERIFY(other);
            QTRY_VERIFY_WITH_TIMEOUT(!other->isRunning(), 60000);
            const QString model = w.modelPage()->modelName();
            w.modelPage()->setModelName(QStringLiteral("mnist-convnet"));
            const double kept = w.modelPage()->form()->config().schedule.lr;
            QVERIFY2(other->useButton()->isEnabled(), qPrintable(other->statusText()));
            other->useButton()->click();
            QCOMPARE(w.modelPage()->form()->config().schedule.lr, kept);
            QVERIFY2(w.banner()->message().startsWith(
                         QStringLiteral("The range test's rate was not used: the model")),
                     qPrintable(w.banner()->message()));
            w.modelPage()->setModelName(model);
            if (other) other->close();
        }
        // Nor one measured without the batches the form now accumulates: the batch changed.
        {
            QPointer<towers::ui::LrFinderDialog> other = w.findLearningRate();
            QVERIFY(other);
            QTRY_VERIFY_WITH_TIMEOUT(!other->isRunning(), 60000);
            auto* accumulate =
                w.modelPage()->form()->findChild<QSpinBox*>(QStringLiteral("accumulate"));
            QVERIFY(accumulate);
            accumulate->setValue(2);
            const double kept = w.modelPage()->form()->config().schedule.lr;
            QVERIFY2(other->useButton()->isEnabled(), qPrintable(other->statusText()));
            other->useButton()->click();
            QCOMPARE(w.modelPage()->form()->config().schedule.lr, kept);
            QVERIFY2(w.banner()->message().startsWith(
                         QStringLiteral("The range test's rate was not used: the batch")),
                     qPrintable(w.banner()->message()));
            accumulate->setValue(1);
            if (other) other->close();
        }
        // A finished test's open window gives way to a new test (it was raised, its figures old).
        QPointer<towers::ui::LrFinderDialog> second = w.findLearningRate();
        QVERIFY(second && second->isRunning());
        second->stop();
        QTRY_VERIFY_WITH_TIMEOUT(!second->isRunning(), 60000);
        QVERIFY(second->isVisible());
        auto* third = w.findLearningRate();
        QVERIFY(third && third->isRunning());
        QTRY_VERIFY(!second);
        third->stop();
        QTRY_VERIFY_WITH_TIMEOUT(!third->isRunning(), 60000);
    }

    // A first start shows TrainConfig's defaults; a new run's configuration carries what the
    // Devices page says, for GPU towers and CPU towers.
    void newRunCarriesTheTowerOptions()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        auto* devices = devicesOf(w);
        const towers::engine::TrainConfig defaults;
        QCOMPARE(devices->gpuData(), defaults.gpuData);
        QCOMPARE(devices->allreduce(), defaults.allreduce);
        QCOMPARE(devices->cudaGraphs(), defaults.cudaGraphs);
        QCOMPARE(devices->bucketMb(), defaults.bucketMb);
        QVERIFY(waitForDataset(w));
        QString error;
        auto options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->config.gpuData, defaults.gpuData);
        QCOMPARE(options->config.allreduce, defaults.allreduce);
        QCOMPARE(options->config.cudaGraphs, defaults.cudaGraphs);
        QCOMPARE(options->config.bucketMb, defaults.bucketMb);

        // Two stand-in GPUs checked: GPU towers with the page's data, averaging and buckets.
        std::vector<towers::app::DeviceDescription> list(1);
        list[0].id = QStringLiteral("cpu");
        list[0].logicalCores = 4;
        for (int g : {0, 1}) {
            towers::app::DeviceDescription gpu;
            gpu.kind = towers::app::DeviceDescription::Kind::Gpu;
            gpu.id = QStringLiteral("gpu%1").arg(g);
            gpu.cudaNumber = g;
            list.push_back(gpu);
        }
        devices->deviceModel()->setDevices(list);
        QVERIFY(devices->gpuDataChoice()->isEnabled());
        devices->setGpuData("off");
        devices->setAllreduce("host");
        QVERIFY(devices->cudaGraphsCheck()->isEnabled());
        devices->setCudaGraphs(false);
        QVERIFY(devices->tf32Check()->isEnabled() && devices->cudnnBenchmarkCheck()->isEnabled());
        devices->setTf32(true);
        devices->setCudnnBenchmark(true);
        devices->setBucketMb(0);
        options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->config.backend, std::string("cuda"));
        QVERIFY(options->config.allowTf32 && options->config.cudnnBenchmark);
        QCOMPARE(options->config.gpuData, std::string("off"));
        QCOMPARE(options->config.allreduce, std::string("host"));
        QVERIFY(!options->config.cudaGraphs);
        QCOMPARE(options->config.bucketMb, 0.0);
        // The last configuration follows every change.
        auto saved = towers::engine::TrainConfig::fromJson(settings.lastConfigJson().toStdString());
        QCOMPARE(saved.gpuData, std::string("off"));
        QCOMPARE(saved.allreduce, std::string("host"));
        QVERIFY(!saved.cudaGraphs);
        QCOMPARE(saved.bucketMb, 0.0);

        // CPU towers: the bucket size still applies.
        list.resize(1);
        devices->deviceModel()->setDevices(list);
        devices->setTowers(2);
        devices->setBucketMb(8);
        options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->config.backend, std::string("onednn"));
        QCOMPARE(options->config.towers, 2);
        // The GPU options stay checked on the page, but a CPU run records neither.
        QVERIFY(devices->tf32() && devices->cudnnBenchmark());
        QVERIFY(!options->config.allowTf32 && !options->config.cudnnBenchmark);
        QCOMPARE(options->config.bucketMb, 8.0);
        saved = towers::engine::TrainConfig::fromJson(settings.lastConfigJson().toStdString());
        QCOMPARE(saved.bucketMb, 8.0);
    }
};

QTEST_MAIN(TestMainWindowRuns)
#include "tst_main_window_runs.moc"
