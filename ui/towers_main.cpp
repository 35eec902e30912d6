// towers: the desktop application.
#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QTimer>
#include <cstdio>
#include <memory>

#include "app/settings/app_settings.h"
#include "ui/main_window.h"
#include "ui/pages/data_page.h"
#include "ui/pages/devices_page.h"
#include "ui/pages/train_page.h"
#include "ui/plots/plot_theme.h"
#include "ui/screenshot_tour.h"

int main(int argc, char** argv)
{
    QElapsedTimer sinceMain;
    sinceMain.start();
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Towers"));
    QApplication::setApplicationName(QStringLiteral("towers"));
    QApplication::setApplicationDisplayName(QStringLiteral("Towers"));
    QApplication::setApplicationVersion(QStringLiteral(TOWERS_VERSION));

    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Trains convolutional networks with replicated towers."));
    parser.addHelpOption();
    parser.addVersionOption();
    const QCommandLineOption settingsOption(QStringLiteral("settings"),
                                            QStringLiteral("Keep the settings in this INI file."),
                                            QStringLiteral("file"));
    parser.addOption(settingsOption);
    const QCommandLineOption tourOption(
        QStringLiteral("screenshot-tour"),
        QStringLiteral(
            "Walk through every page, save a screenshot of each into this folder, and quit."),
        QStringLiteral("dir"));
    parser.addOption(tourOption);
    const QCommandLineOption darkOption(
        QStringLiteral("dark"),
        QStringLiteral("Use a dark palette (Fusion style) whatever the desktop theme."));
    parser.addOption(darkOption);
    const QCommandLineOption startupOption(
        QStringLiteral("measure-startup"),
        QStringLiteral("Print the milliseconds from start to the first idle event loop with the "
                       "window shown, and quit."));
    parser.addOption(startupOption);
    const QCommandLineOption datasetOption(
        QStringLiteral("dataset"), QStringLiteral("Show this dataset (cifar10, mnist, fashion-mnist, ...)."),
        QStringLiteral("name"));
    parser.addOption(datasetOption);
    const QCommandLineOption towersOption(QStringLiteral("towers"),
                                          QStringLiteral("Train with this many CPU towers."),
                                          QStringLiteral("n"));
    parser.addOption(towersOption);
    const QCommandLineOption trainOption(
        QStringLiteral("train"),
        QStringLiteral("Start training with the model's recipe as soon as the dataset is loaded."));
    parser.addOption(trainOption);
    parser.process(app);
    int towers = 0;
    if (parser.isSet(towersOption)) {
        bool ok = false;
        towers = parser.value(towersOption).toInt(&ok);
        if (!ok || towers < 1 || towers > 256) {
            std::fprintf(stderr, "towers: --towers must be an integer from 1 to 256, got '%s'\n",
                         qPrintable(parser.value(towersOption)));
            return 2;
        }
    }
    if (parser.isSet(darkOption)) {
        QApplication::setStyle(QStringLiteral("Fusion"));
        QApplication::setPalette(towers::ui::darkPalette());
    }

    auto settings = parser.isSet(settingsOption)
                        ? std::make_unique<towers::app::AppSettings>(parser.value(settingsOption))
                        : std::make_unique<towers::app::AppSettings>();
    towers::ui::MainWindow window(*settings);
    window.show();
    if (parser.isSet(datasetOption)) window.dataPage()->setDatasetName(parser.value(datasetOption));
    if (towers > 0) window.devicesPage()->setTowers(towers);
    if (parser.isSet(trainOption)) {
        // Start once the dataset (and the model's recipe) is there; a failure shows in the banner.
        auto* trainPage = window.trainPage();
        auto started = std::make_shared<bool>(false);
        auto startOnce = [&window, trainPage, started] {
            if (*started) return;
            *started = true;
            trainPage->start();
            window.showPage(towers::ui::MainWindow::Train);
        };
        if (window.dataPage()->loadedDataset())
            QTimer::singleShot(0, &window, startOnce);
        else
            QObject::connect(window.dataPage(), &towers::ui::DataPage::datasetLoaded, &window, startOnce);
    }
    if (parser.isSet(startupOption)) {
        QTimer::singleShot(0, &app, [&sinceMain] {
            std::fprintf(stdout, "startup: %lld ms to a shown, idle window\n",
                         static_cast<long long>(sinceMain.elapsed()));
            QCoreApplication::quit();
        });
    }
    if (parser.isSet(tourOption)) {
        auto* tour = new towers::ui::ScreenshotTour(&window, parser.value(tourOption), &app);
        tour->addStandardSteps();
        QObject::connect(tour, &towers::ui::ScreenshotTour::finished, &app,
                         [](int failures) { QCoreApplication::exit(failures == 0 ? 0 : 1); });
        QTimer::singleShot(0, tour, &towers::ui::ScreenshotTour::start);
    }
    return app.exec();
}
