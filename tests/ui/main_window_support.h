#pragma once
// What the MainWindow tests share (tst_main_window, tst_main_window_runs): XDG_DATA_HOME in a
// temporary folder and TOWERS_DATA unset for the whole test; a window's Devices page, its settings
// for a tiny generated MNIST, and waiting for its dataset.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/settings/app_settings.h"
#include "training_fixture.h"
#include "ui/main_window.h"
#include "ui/pages/data_page.h"
#include "ui/pages/devices_page.h"

namespace towers::test {

inline ui::DevicesPage* devicesOf(const ui::MainWindow& w)
{
    return qobject_cast<ui::DevicesPage*>(w.page(ui::MainWindow::Devices));
}

// A window's settings for a tiny generated MNIST in `dir`, with its runs folder there too.
inline void useTinyMnist(towers::app::AppSettings& settings, const QTemporaryDir& dir)
{
    towers::test::writeTinyMnist(dir.filePath(QStringLiteral("data")).toStdString());
    settings.setDatasetName(QStringLiteral("mnist"));
    settings.setDataDir(dir.filePath(QStringLiteral("data")));
    settings.setRunsDir(dir.filePath(QStringLiteral("runs")));
}

// Waits for the window's Data page to load its dataset (at once where it has); whether it did.
inline bool waitForDataset(ui::MainWindow& w)
{
    if (w.dataPage()->loadedDataset()) return true;
    QSignalSpy loaded(w.dataPage(), &towers::ui::DataPage::datasetLoaded);
    return loaded.wait(20000);
}

class MainWindowTest : public QObject
{
    Q_OBJECT
    QTemporaryDir m_home;

private slots:
    void initTestCase()
    {
        qputenv("XDG_DATA_HOME", m_home.filePath(QStringLiteral("xdg")).toUtf8());
        qunsetenv("TOWERS_DATA");
    }
};

} // namespace towers::test
