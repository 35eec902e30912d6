#pragma once
// What the desktop application remembers between sessions (QSettings): the data and runs
// folders, the chosen dataset, the last run configuration, window geometry and page. Every value
// has a sensible default, so a first start needs no setup. A change is written within a moment
// (kWriteDelayMs), and a file that cannot be written then is said at once (saveFailed), not only at
// exit; one that can be written again is said too (saveRecovered), QSettings then writing what it
// kept.
#include <QByteArray>
#include <QObject>
#include <QSettings>
#include <QString>
#include <QStringList>

#include <memory>

class QTimer;

namespace towers::app {

class AppSettings : public QObject
{
    Q_OBJECT
public:
    // A change is written (sync()) this long after it, changes in between together.
    static constexpr int kWriteDelayMs = 250;

    // The user's settings (organisation "Towers", application "towers", native format).
    AppSettings();
    // Settings in an INI file (tests, --settings).
    explicit AppSettings(const QString& iniFile);
    ~AppSettings();

    // Searched first for datasets and where downloads go; default: defaultDataDir().
    QString dataDir() const;
    void setDataDir(const QString& dir);
    // The folder of run directories; default: defaultRunsDir().
    QString runsDir() const;
    void setRunsDir(const QString& dir);
    // The dataset the Data page shows; empty until one is chosen (the Data page then takes the
    // first dataset discovery finds).
    QString datasetName() const;
    void setDatasetName(const QString& name);
    // The last run configuration as TrainConfig JSON; empty when none was saved.
    QString lastConfigJson() const;
    void setLastConfigJson(const QString& json);

    // The Runs page's hidden columns, by RunListModel::columnKey; default: model, dataset and
    // checkpoints (the run's name and the page's title say them).
    QStringList hiddenRunColumns() const;
    void setHiddenRunColumns(const QStringList& columns);
    // What the Runs page's left plot shows: "loss" (the default) or "rates" (the learning rate
    // and the gradients' norm).
    QString runsLeftPlot() const;
    void setRunsLeftPlot(const QString& plot);

    QByteArray windowGeometry() const;
    void setWindowGeometry(const QByteArray& geometry);
    int lastPage() const;
    void setLastPage(int page);

    // Writes pending changes to storage now (also done kWriteDelayMs after each change), and
    // finds whether it could (saveError); emits nothing.
    void sync();
    // Empty while the last write (sync()) could be made. Else why not, in a sentence that names
    // the file: "the settings could not be saved to /x/towers.ini: it is a folder". QSettings
    // keeps the changes in memory, says nothing, and writes them at a later sync() that can. A
    // file that cannot be written is noticed when there is something to write (a folder in its
    // place, at once).
    QString saveError() const { return m_saveError; }
    // Empty unless the file had lines that are not INI, in a sentence that names it: QSettings
    // reads the rest and writes the file again without them.
    QString readError() const;
    QString fileName() const { return m_settings->fileName(); }

    // app::defaultRunsDir(), where towers-cli train puts its runs ($TOWERS_RUNS, else
    // ~/.local/share/towers/runs), or ./towers-runs when no home folder is known.
    static QString defaultRunsDir();

signals:
    // Writing changes, a moment after them, failed where the write before could be made (a
    // file that became a folder or read-only during the session): once until it can again.
    // `error` is saveError()'s. A failure found by a sync() of the caller's is not signalled.
    void saveFailed(const QString& error);
    // Writing changes, a moment after them, could be made again after a failure: what QSettings
    // kept is in the file now.
    void saveRecovered();

private:
    explicit AppSettings(std::unique_ptr<QSettings> settings);
    void setValue(const QString& key, const QVariant& value);
    void writeChanges();

    std::unique_ptr<QSettings> m_settings;
    QTimer* m_writeTimer;
    QString m_saveError; // as of the last sync()
    // QSettings' AccessError (it keeps its first error for good): seen, and whether the file's
    // path told why when it came.
    bool m_statusErrorSeen = false, m_statusErrorUnexplained = false;
};

} // namespace towers::app
