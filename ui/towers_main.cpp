// towers: the desktop application.
#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QTimer>
#include <cstdio>

#include "app/settings/app_settings.h"
#include "ui/main_window.h"
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
    parser.process(app);
    if (parser.isSet(darkOption)) {
        QApplication::setStyle(QStringLiteral("Fusion"));
        QApplication::setPalette(towers::ui::darkPalette());
    }

    auto settings = parser.isSet(settingsOption)
                        ? std::make_unique<towers::app::AppSettings>(parser.value(settingsOption))
                        : std::make_unique<towers::app::AppSettings>();
    towers::ui::MainWindow window(*settings);
    window.show();
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
