// towers-cli download: fetches, verifies and unpacks one dataset into the data directory.
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QPair>
#include <QQueue>
#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include "app/cli/command.h"
#include "app/data/data_dirs.h"
#include "app/data/dataset_downloader.h"
#include "app/process/interrupt_notifier.h"

namespace towers::app {

namespace {

QString megabytes(qint64 bytes)
{
    return QString::number(double(bytes) / 1e6, 'f', 1);
}

// Progress on stderr: one line rewritten in place on a terminal, else a plain line at every
// tenth of the way (logs and pipes do not want hundreds of carriage returns).
class ProgressPrinter
{
public:
    ProgressPrinter(QTextStream& err, const QString& dataset)
        : m_err(err), m_dataset(dataset), m_tty(::isatty(::fileno(stderr)) == 1)
    {
        m_clock.start();
    }

    void fileStarted(const QString& file, int index, int count)
    {
        m_file =
            count > 1 ? QStringLiteral("%1 (%2/%3)").arg(file).arg(index + 1).arg(count) : file;
    }

    void status(const QString& text)
    {
        clearLine();
        m_err << m_dataset << ": " << text << "\n";
        m_err.flush();
        m_lastDraw = -1; // redraw at the next update
    }

    void progress(qint64 done, qint64 total)
    {
        const qint64 now = m_clock.elapsed();
        m_samples.enqueue({now, done});
        while (m_samples.size() > 2 && now - m_samples.head().first > 5000) m_samples.dequeue();
        if (m_tty) {
            if (m_lastDraw >= 0 && now - m_lastDraw < 100 && done != total) return;
            m_lastDraw = now;
            m_err << "\r\x1b[K" << line(done, total);
            m_err.flush();
            m_lineShown = true;
            return;
        }
        // Plain: every 10 %, or every 10 MB while the size is unknown.
        const qint64 step = total > 0 ? (done * 10) / total : done / 10'000'000;
        if (step <= m_lastStep) return;
        m_lastStep = step;
        m_err << line(done, total) << "\n";
        m_err.flush();
    }

    void clearLine()
    {
        if (m_tty && m_lineShown) m_err << "\r\x1b[K";
        m_lineShown = false;
    }

private:
    QString line(qint64 done, qint64 total) const
    {
        QString text = m_dataset + QStringLiteral(": ");
        if (total > 0)
            text += QStringLiteral("%1%  %2 of %3 MB")
                        .arg(done * 100 / total, 3)
                        .arg(megabytes(done), megabytes(total));
        else
            text += QStringLiteral("%1 MB").arg(megabytes(done));
        const auto& [t0, b0] = m_samples.head();
        const auto& [t1, b1] = m_samples.last();
        if (t1 - t0 >= 500)
            text +=
                QStringLiteral("  %1 MB/s").arg(double(b1 - b0) / 1e3 / double(t1 - t0), 0, 'f', 1);
        if (m_tty && !m_file.isEmpty()) text += QStringLiteral("  ") + m_file;
        return text;
    }

    QTextStream& m_err;
    QString m_dataset, m_file;
    bool m_tty;
    bool m_lineShown = false;
    QElapsedTimer m_clock;
    qint64 m_lastDraw = -1, m_lastStep = 0;
    QQueue<QPair<qint64, qint64>> m_samples; // (ms, bytes) over the last few seconds
};

// --base-url or $TOWERS_DOWNLOAD_BASE_URL: an http(s) URL with a host, or a file:// folder.
bool baseUrlOption(const QCommandLineParser& p, QUrl& url, CommandIo& io)
{
    QString text = p.value(QStringLiteral("base-url"));
    QString from = QStringLiteral("--base-url");
    if (!p.isSet(QStringLiteral("base-url"))) {
        text = qEnvironmentVariable("TOWERS_DOWNLOAD_BASE_URL");
        from = QStringLiteral("TOWERS_DOWNLOAD_BASE_URL");
        if (text.isEmpty()) return true;
    }
    url = QUrl(text, QUrl::StrictMode);
    const QString scheme = url.scheme().toLower();
    const bool ok =
        url.isValid() && (((scheme == QLatin1String("http") || scheme == QLatin1String("https")) &&
                           !url.host().isEmpty()) ||
                          (scheme == QLatin1String("file") && !url.path().isEmpty()));
    if (!ok) {
        io.err << "towers-cli download: " << from
               << " must be an http://, https:// or file:// URL, got '" << text << "'\n";
        return false;
    }
    return true;
}

} // namespace

int runDownload(const QStringList& args, CommandIo& io)
{
    const QStringList known = builtInDatasetNames();
    QString description = QStringLiteral(
        "Downloads a dataset, checks every file against its published MD5, unpacks it, and puts\n"
        "it in <data-dir>/<dataset>/. An interrupted download resumes where it stopped; a\n"
        "complete dataset is not downloaded again unless --force. Datasets:\n");
    qsizetype width = 0;
    for (const auto& spec : builtInDatasets()) width = std::max(width, spec.name.size());
    for (const auto& spec : builtInDatasets())
        description +=
            QStringLiteral("  %1  %2\n").arg(spec.name.leftJustified(width), spec.description);
    description += QStringLiteral(
        "The data directory defaults to the first folder of $TOWERS_DATA, else\n"
        "$XDG_DATA_HOME/towers/datasets (~/.local/share/towers/datasets). Files come from their\n"
        "published URLs, or from <base-url>/<file name> with --base-url or\n"
        "$TOWERS_DOWNLOAD_BASE_URL (a mirror). Exit codes: 0 done, 1 failed, 2 bad usage,\n"
        "130 cancelled (Ctrl-C; the partial download is kept and the next run resumes it).");
    QCommandLineParser p;
    p.setApplicationDescription(description);
    p.addPositionalArgument(QStringLiteral("dataset"), known.join(QStringLiteral(", ")),
                            QStringLiteral("<dataset>"));
    p.addOptions({
        {QStringLiteral("data-dir"), QStringLiteral("Folder that holds the datasets."),
         QStringLiteral("dir")},
        {QStringLiteral("base-url"), QStringLiteral("Fetch each file from <url>/<file name>."),
         QStringLiteral("url")},
        {QStringLiteral("force"),
         QStringLiteral("Download again even when the dataset is complete.")},
    });
    int code = 0;
    if (!parseOrExplain(p, args, io, code)) return code;
    const QStringList pos = p.positionalArguments();
    if (pos.size() != 1) {
        io.err << "towers-cli download: " << (pos.isEmpty() ? "name a dataset" : "name one dataset")
               << ": " << known.join(QStringLiteral(", ")) << "\n"
               << "Run 'towers-cli download --help' for usage.\n";
        return ExitUsage;
    }
    const auto spec = findBuiltInDataset(pos.first());
    if (!spec) {
        io.err << "towers-cli download: unknown dataset '" << pos.first()
               << "'; known datasets: " << known.join(QStringLiteral(", ")) << "\n";
        return ExitUsage;
    }
    DatasetDownloader::Options options;
    options.dataDir = p.isSet(QStringLiteral("data-dir")) ? p.value(QStringLiteral("data-dir"))
                                                          : defaultDataDir();
    if (options.dataDir.isEmpty()) {
        io.err << "towers-cli download: no data directory (no home folder known); pass --data-dir "
                  "or set TOWERS_DATA\n";
        return ExitUsage;
    }
    if (!baseUrlOption(p, options.baseUrl, io)) return ExitUsage;
    options.force = p.isSet(QStringLiteral("force"));

    DatasetDownloader downloader(*spec, options);
    ProgressPrinter printer(io.err, spec->name);
    InterruptNotifier interrupts;
    QEventLoop loop;
    QObject::connect(&interrupts, &InterruptNotifier::interrupted, &downloader, [&] {
        printer.status(QStringLiteral("cancelling..."));
        downloader.cancel();
    });
    QObject::connect(&downloader, &DatasetDownloader::fileStarted, &downloader,
                     [&](const QString& file, int index, int count) {
                         printer.fileStarted(file, index, count);
                     });
    QObject::connect(&downloader, &DatasetDownloader::statusMessage, &downloader,
                     [&](const QString& text) { printer.status(text); });
    QObject::connect(&downloader, &DatasetDownloader::progress, &downloader,
                     [&](qint64 done, qint64 total) { printer.progress(done, total); });
    QObject::connect(&downloader, &DatasetDownloader::finished, &loop, &QEventLoop::quit);
    downloader.start();
    loop.exec();
    printer.clearLine();
    io.err.flush();

    switch (downloader.outcome()) {
    case DatasetDownloader::Outcome::Downloaded:
        io.out << spec->name << " is ready in " << downloader.datasetFolder() << "\n";
        return ExitOk;
    case DatasetDownloader::Outcome::AlreadyPresent:
        io.out << spec->name << " is already complete in " << downloader.datasetFolder()
               << " (--force downloads it again)\n";
        return ExitOk;
    case DatasetDownloader::Outcome::Cancelled:
        io.err << "towers-cli download: " << downloader.errorMessage() << "\n";
        return ExitInterrupted;
    default:
        io.err << "towers-cli download: error: " << downloader.errorMessage() << "\n";
        return ExitFailure;
    }
}

} // namespace towers::app
