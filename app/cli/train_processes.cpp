// towers-cli train under mpirun or srun: joins the processes of the run, lets rank 0 alone print
// its progress, and makes sure a process that fails tells the others (which then stop with its
// message) instead of leaving them waiting.
#include <QFile>

#include "app/cli/train_command.h"

namespace towers::app {

namespace {

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
    QString errors;
    QTextStream errorStream(&errors);
    const int rank = group->rank();
    CommandIo inner{rank == 0 ? io.out : quiet, errorStream};
    const auto printErrors = [&] {
        errorStream.flush();
        if (errors.isEmpty()) return;
        const QString prefix = rankPrefix(rank);
        for (const QString& line : errors.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
            io.err << prefix << line << "\n";
        io.err.flush();
        errors.clear();
    };
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
        QString message = failureMessage(errors, code);
        message.remove(QStringLiteral("towers-cli train: error: "));
        group->announceFailure(QStringLiteral("%1 (on %2)")
                                   .arg(message, QString::fromStdString(group->hostName()))
                                   .toStdString());
    }
    printErrors();
    return code;
}

} // namespace towers::app
