// towers: the desktop application.
#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QIcon>
#include <QTemporaryDir>
#include <QTimer>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include "app/cli/cli.h"
#include "app/cli/command.h"
#include "app/process/interrupt_notifier.h"
#include "app/settings/app_settings.h"
#include "app/version/build_info.h"
#include "engine/cpu/host_memory.h"
#include "engine/gpu/gpu_backend.h"
#include "ui/main_window.h"
#include "ui/pages/data_page.h"
#include "ui/pages/devices_page.h"
#include "ui/pages/model_file_editor.h"
#include "ui/pages/train_page.h"
#include "ui/plots/plot_theme.h"
#include "ui/plural_forms.h"
#include "ui/screenshot_tour.h"

namespace {

struct Options
{
    QCommandLineOption help{{QStringLiteral("h"), QStringLiteral("help")},
                            QStringLiteral("Show this help and quit.")};
    QCommandLineOption version{
        {QStringLiteral("v"), QStringLiteral("version")},
        QStringLiteral("Show the version, the git revision and the backends, and quit.")};
    QCommandLineOption settings{QStringLiteral("settings"),
                                QStringLiteral("Keep the settings in this INI file."),
                                QStringLiteral("file")};
    QCommandLineOption tour{
        QStringLiteral("screenshot-tour"),
        QStringLiteral(
            "Walk through every page (a short training run included), save a screenshot of "
            "each into this folder, and quit. Without --settings its settings and run are kept "
            "in a temporary folder, not the user's."),
        QStringLiteral("dir")};
    QCommandLineOption dark{
        QStringLiteral("dark"),
        QStringLiteral("Use a dark palette (Fusion style) whatever the desktop theme.")};
    QCommandLineOption startup{
        QStringLiteral("measure-startup"),
        QStringLiteral("Print the milliseconds from start to the first idle event loop "
                       "with the window shown, and quit.")};
    QCommandLineOption dataset{
        QStringLiteral("dataset"),
        QStringLiteral("Show this dataset (cifar10, mnist, fashion-mnist, ..., or one imported "
                       "into the data folder)."),
        QStringLiteral("name")};
    QCommandLineOption towers{QStringLiteral("towers"),
                              QStringLiteral("Train with this many CPU towers."),
                              QStringLiteral("n")};
    QCommandLineOption train{
        QStringLiteral("train"),
        QStringLiteral("Start training as soon as the dataset is loaded, with the Model page's "
                       "configuration: the recipe of the dataset's model on a first start, else "
                       "the last session's. A dataset that cannot be loaded is said, and no run "
                       "starts.")};

    void addTo(QCommandLineParser& parser) const
    {
        parser.setApplicationDescription(
            QStringLiteral("Towers trains convolutional networks by synchronous data parallelism "
                           "with replicated towers.\n"
                           "towers-cli is its command-line twin; see towers-cli(1)."));
        for (const auto* o :
             {&help, &version, &settings, &tour, &dark, &startup, &dataset, &towers, &train})
            parser.addOption(*o);
    }
};

// --help and --version answer before QApplication exists, so they work without a display (a
// package's smoke test, a terminal over ssh). Anything else, Qt's own options included, is left to
// the full parse after QApplication has taken its arguments. Returns an exit code, or -1 to go on.
int answerWithoutDisplay(int argc, char** argv)
{
    QStringList args;
    for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
    Options o;
    QCommandLineParser parser;
    o.addTo(parser);
    parser.parse(args);
    if (parser.isSet(o.version)) {
        std::fputs(qPrintable(towers::app::versionText(QStringLiteral("towers"))), stdout);
        return 0;
    }
    if (parser.isSet(o.help)) {
        std::fputs(qPrintable(towers::app::helpTextFor(parser, QStringLiteral("towers"))), stdout);
        std::fputs("\nQt's own options (-platform, -style, ...) are accepted as well.\n", stdout);
        return 0;
    }
    return -1;
}

int run(int argc, char** argv, const QElapsedTimer& sinceMain);

} // namespace

int main(int argc, char** argv)
{
    QElapsedTimer sinceMain;
    sinceMain.start();
    towers::engine::setCudaDeviceOrder();           // before any thread
    towers::engine::cpu::fitMallocToAddressLimit(); // so too
    // A settings file or folder named in bytes that are not UTF-8 would be read as another.
    if (towers::app::refuseUndecodableArgument("towers", argc, argv)) return 2;
    if (const int code = answerWithoutDisplay(argc, argv); code >= 0) return code;
    const int code = run(argc, argv, sinceMain);
    // The window is closed, the settings written. A model file editor's check may still be
    // building a large network on its own thread (seconds, and it cannot be stopped): the process
    // ends without waiting for it, and without the static destructors, which it could outlive.
    if (towers::ui::ModelFileEditor::buildsRunning() > 0) {
        std::fflush(nullptr);
        std::_Exit(code);
    }
    return code;
}

namespace {

int run(int argc, char** argv, const QElapsedTimer& sinceMain)
{
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Towers"));
    QApplication::setApplicationName(QStringLiteral("towers"));
    QApplication::setApplicationDisplayName(QStringLiteral("Towers"));
    QApplication::setApplicationVersion(QStringLiteral(TOWERS_VERSION));
    QGuiApplication::setDesktopFileName(QStringLiteral(TOWERS_APP_ID));
    QApplication::setWindowIcon(towers::ui::MainWindow::applicationIcon());
    if (!towers::ui::installPluralForms(app))
        std::fprintf(stderr,
                     "towers: the plural forms did not load (a count reads '1 tower(s)')\n");

    Options o;
    QCommandLineParser parser;
    o.addTo(parser);
    if (!parser.parse(QCoreApplication::arguments())) {
        std::fprintf(stderr, "towers: %s\nRun 'towers --help' for the options.\n",
                     qPrintable(parser.errorText()));
        return 2;
    }
    if (!parser.positionalArguments().isEmpty()) {
        std::fprintf(stderr,
                     "towers: unexpected argument '%s'\nRun 'towers --help' for the options.\n",
                     qPrintable(parser.positionalArguments().first()));
        return 2;
    }
    int towers = 0;
    if (parser.isSet(o.towers)) {
        bool ok = false;
        towers = parser.value(o.towers).toInt(&ok);
        if (!ok || towers < 1 || towers > 256) {
            std::fprintf(stderr, "towers: --towers must be an integer from 1 to 256, got '%s'\n",
                         qPrintable(parser.value(o.towers)));
            return 2;
        }
    }
    if (parser.isSet(o.dark)) {
        QApplication::setStyle(QStringLiteral("Fusion"));
        QApplication::setPalette(towers::ui::darkPalette());
    }

    // The tour trains a run and leaves its configuration behind: without --settings, in a folder
    // of its own that goes at the end, not in the user's settings and runs folder (a first start
    // there: the first dataset found, the user's data folder).
    std::unique_ptr<QTemporaryDir> tourHome;
    if (parser.isSet(o.tour) && !parser.isSet(o.settings)) {
        tourHome = std::make_unique<QTemporaryDir>();
        if (!tourHome->isValid()) {
            std::fprintf(stderr, "towers: --screenshot-tour: no temporary folder: %s\n",
                         qPrintable(tourHome->errorString()));
            return 1;
        }
    }
    auto settings = parser.isSet(o.settings)
                        ? std::make_unique<towers::app::AppSettings>(parser.value(o.settings))
                    : tourHome ? std::make_unique<towers::app::AppSettings>(
                                     tourHome->filePath(QStringLiteral("towers.ini")))
                               : std::make_unique<towers::app::AppSettings>();
    if (tourHome) {
        const towers::app::AppSettings user;
        settings->setDataDir(user.dataDir());
        settings->setRunsDir(tourHome->filePath(QStringLiteral("runs")));
    }
    // A dataset the Data page's list does not have would be passed over without a word (and
    // --train would train another): refused, as a wrong option is. Imported datasets are found by
    // scanning the data folder and the search path, as the list does.
    if (parser.isSet(o.dataset)) {
        const QString name = parser.value(o.dataset);
        const QStringList known = towers::ui::DataPage::datasetNames(settings->dataDir());
        if (!known.contains(name)) {
            std::fprintf(stderr,
                         "towers: unknown dataset '%s' (--dataset); the known datasets are %s "
                         "(imported ones looked for in %s; 'towers-cli import' makes one)\n",
                         qPrintable(name), qPrintable(known.join(QStringLiteral(", "))),
                         qPrintable(towers::ui::DataPage::searchedFolders(settings->dataDir())));
            return 2;
        }
    }
    towers::ui::MainWindow window(*settings);
    window.show();
    // The window has saved its configuration: a settings file that cannot be written shows now,
    // not as changes lost at exit.
    settings->sync();
    if (const QString error = settings->readError(); !error.isEmpty()) {
        std::fprintf(stderr, "towers: %s\n", qPrintable(error));
        window.showError(error);
    }
    if (const QString error = settings->saveError(); !error.isEmpty())
        window.sayUnsavedSettings(error);
    // SIGTERM (a logout, `kill`), SIGHUP (the terminal closed) or Ctrl-C in the terminal: stop a
    // run after its current step with a checkpoint, then quit with 128 + the signal's number, as
    // towers-cli does.
    towers::app::InterruptNotifier interrupts;
    QObject::connect(
        &interrupts, &towers::app::InterruptNotifier::interrupted, &window, [&window](int sig) {
            window.closeWithoutAsking(QCoreApplication::translate("main", "Received %1: closing")
                                          .arg(sig == SIGTERM  ? QStringLiteral("SIGTERM")
                                               : sig == SIGHUP ? QStringLiteral("SIGHUP")
                                                               : QStringLiteral("SIGINT")));
        });
    if (parser.isSet(o.dataset)) window.dataPage()->setDatasetName(parser.value(o.dataset));
    if (towers > 0) window.devicesPage()->setTowers(towers);
    if (parser.isSet(o.train)) {
        // Start once the dataset (and the model's recipe) is there; a failure to start shows in
        // the banner. A dataset that cannot be loaded (not found, refused, failed to load) is said
        // in the banner, the log and on stderr, and nothing starts, then or later: the window
        // stays open to fix it (a download, another data folder).
        auto* trainPage = window.trainPage();
        auto decided = std::make_shared<bool>(false);
        auto refuseOnce = [&window, decided](const QString& why) {
            if (std::exchange(*decided, true)) return;
            const QString message =
                QCoreApplication::translate("main", "--train did not start a run: %1").arg(why);
            std::fprintf(stderr, "towers: %s\n", qPrintable(message));
            window.showError(message);
            window.showPage(towers::ui::MainWindow::Data);
        };
        // The first dataset found, shown where the saved one is missing, is not what the user
        // chose: not trained without a word.
        auto startOnce = [&window, trainPage, decided, refuseOnce] {
            if (const QString missing = window.dataPage()->missingSavedDataset();
                !missing.isEmpty()) {
                refuseOnce(QCoreApplication::translate(
                               "main", "the saved dataset %1 is not found (the Data page shows %2 "
                                       "in its place): choose the dataset there, or name it with "
                                       "--dataset")
                               .arg(missing, window.dataPage()->datasetName()));
                return;
            }
            if (std::exchange(*decided, true)) return;
            trainPage->start();
            window.showPage(towers::ui::MainWindow::Train);
        };
        if (window.dataPage()->loadedDataset())
            QTimer::singleShot(0, &window, startOnce);
        else
            QObject::connect(window.dataPage(), &towers::ui::DataPage::datasetLoaded, &window,
                             startOnce);
        QObject::connect(window.dataPage(), &towers::ui::DataPage::datasetUnavailable, &window,
                         refuseOnce);
    }
    if (parser.isSet(o.startup)) {
        QTimer::singleShot(0, &app, [&sinceMain] {
            std::fprintf(stdout, "startup: %lld ms to a shown, idle window\n",
                         static_cast<long long>(sinceMain.elapsed()));
            QCoreApplication::quit();
        });
    }
    if (parser.isSet(o.tour)) {
        auto* tour = new towers::ui::ScreenshotTour(&window, parser.value(o.tour), &app);
        tour->addStandardSteps();
        QObject::connect(tour, &towers::ui::ScreenshotTour::finished, &app,
                         [](int failures) { QCoreApplication::exit(failures == 0 ? 0 : 1); });
        QTimer::singleShot(0, tour, &towers::ui::ScreenshotTour::start);
    }
    const int code = app.exec();
    // QSettings drops what it cannot write without a word.
    settings->sync();
    if (const QString error = settings->saveError(); !error.isEmpty())
        std::fprintf(stderr, "towers: %s\n", qPrintable(error));
    return interrupts.received() ? 128 + interrupts.received() : code;
}

} // namespace
