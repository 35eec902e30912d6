// towers-cli train under mpirun or srun: joins the processes of the run, lets rank 0 alone print
// its progress, and makes sure a process that fails tells the others (which then stop with its
// message) instead of leaving them waiting.
#include <QFile>
#include <QIODevice>

#include <mutex>

#include "app/cli/train_command.h"

namespace towers::app {

namespace {

// A process's error stream: each whole line goes out at once to `err`, marked with `prefix` (a
// note of rank 1 in the middle of a run reads then, not when the rank ends), and the text is kept
// for the message the other processes are told when this one fails.
class EchoedLines final : public QIODevice
{
public:
    EchoedLines(QTextStream& err, QString prefix) : m_err(err), m_prefix(std::move(prefix))
    {
        open(QIODevice::WriteOnly);
    }

    // Everything written so far.
    QString text()
    {
        std::lock_guard lock(m_mutex);
        return m_text;
    }

    // A last line without its newline goes out too.
    void finish()
    {
        std::lock_guard lock(m_mutex);
        if (m_pending.isEmpty()) return;
        m_err << m_prefix << QString::fromUtf8(m_pending) << "\n";
        m_err.flush();
        m_pending.clear();
    }

protected:
    qint64 readData(char*, qint64) override { return -1; }
    qint64 writeData(const char* data, qint64 size) override
    {
        std::lock_guard lock(m_mutex);
        const QByteArray bytes(data, size);
        m_text += QString::fromUtf8(bytes);
        m_pending += bytes;
        for (qsizetype end; (end = m_pending.indexOf('\n')) >= 0;) {
            const QByteArray line = m_pending.left(end);
            m_pending.remove(0, end + 1);
            if (!line.isEmpty()) m_err << m_prefix << QString::fromUtf8(line) << "\n";
        }
        m_err.flush();
        return size;
    }

private:
    QTextStream& m_err;
    const QString m_prefix;
    std::mutex m_mutex;
    QString m_text;
    QByteArray m_pending;
};

// The last line that says "error", else the last line: what the other processes are told.
QString failureMessage(const QString& errors, int code)
{
    const QStringList lines = errors.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
        if (it->contains(QLatin1String("error"))) return *it;
    if (!lines.isEmpty()) return lines.back();
    return QStringLiteral("towers-cli train exited with code %1").arg(code);
}

} // namespace

QString rankPrefix(int rank)
{
    return rank == 0 ? QString() : QStringLiteral("[rank %1] ").arg(rank);
}

int runTrain(const QStringList& args, CommandIo& io)
{
    std::unique_ptr<engine::ProcessGroup> group;
    try {
        group = engine::joinProcessGroup();
    } catch (const engine::Error& e) {
        // Every process says so (MPI did not start, srun gave no PMI, a bad TOWERS_MPI_TIMEOUT):
        // marked with the rank its launcher gave it, as its other messages are.
        io.err << rankPrefix(engine::detectLaunch().rank) << "towers-cli train: error: " << e.what()
               << "\n";
        return exitCodeOf(e);
    }
    if (!group) return runTrainIn(args, io, nullptr);

    // Rank 0 prints the run's progress; the others only their errors, each line marked with the
    // rank (the launcher interleaves every process's output).
    QFile null(QStringLiteral("/dev/null"));
    null.open(QIODevice::WriteOnly);
    QTextStream quiet(&null);
    const int rank = group->rank();
    EchoedLines errors(io.err, rankPrefix(rank));
    QTextStream errorStream(&errors);
    CommandIo inner{rank == 0 ? io.out : quiet, errorStream};
    int code = ExitFailure;
    try {
        code = runTrainIn(args, inner, group.get());
    } catch (const std::exception& e) {
        // towers-cli's message and exit code (cli.cpp's), marked with the rank.
        errorStream << "towers-cli train: error: " << e.what() << "\n";
        code = exitCodeOf(e);
    }
    errorStream.flush();
    // A failure (not a stop by a signal, 128 + its number) is news for the other processes.
    if (code != ExitOk && code < 128) {
        // (Not echoed when the news came from another process: the group knows.)
        // The others say "rank R failed: <this>".
        QString message = failureMessage(errors.text(), code);
        message.remove(QStringLiteral("towers-cli train: error: "));
        group->announceFailure(QStringLiteral("%1 (on %2)")
                                   .arg(message, QString::fromStdString(group->hostName()))
                                   .toStdString());
    }
    errors.finish();
    return code;
}

} // namespace towers::app
