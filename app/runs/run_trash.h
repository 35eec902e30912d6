#pragma once
// Moving a run folder to the desktop's trash (the freedesktop.org trash specification), as
// the Runs page's "Move to trash…" and `towers-cli runs RUN --trash` do: the run can be restored
// from there, nothing is deleted. A run that a process trains (its lock held, this process's
// own training included), or a folder with such a run inside it, is refused, and so is a folder
// that holds no run (a config.json that is no Towers run configuration, a web project's say, and
// none of the files Towers writes into a run: checkpoints/ckpt-*.safetensors, metrics.jsonl,
// towers.lock, events.out.tfevents.*); the lock is held while the folder moves (those of the runs
// inside it too), so that no training can start in it meanwhile. Never copies: the folder is
// renamed into the home trash ($XDG_DATA_HOME/Trash) when it is on that file system, else into its
// volume's trash ($topdir/.Trash/$uid or $topdir/.Trash-$uid), with the .trashinfo record that file
// managers restore it from; where neither can be used the move is refused and the folder stays as
// it was.
#include <QString>
#include <QStringList>

namespace towers::app {

struct TrashOutcome
{
    bool ok = false;
    QString trashPath; // where the folder now is (ok)
    QString error;     // why it was not moved, naming the folder (not ok)
    // The runs inside the folder, which went with it (runsInside).
    QStringList runsInside;
};

TrashOutcome moveRunToTrash(const QString& folder);
// The runs inside `folder` (a fine-tuning run kept in its parent's folder), by their paths below
// it, but for those set aside (its own earlier runs): what moving it to the trash takes along.
QStringList runsInside(const QString& folder);

} // namespace towers::app
