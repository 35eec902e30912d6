#pragma once
// File and folder names that are not UTF-8. Qt 6 reads every name as UTF-8: it leaves such an
// entry out of a folder's listing without a word (QDir), and reads such an argument with U+FFFD
// in place of its invalid bytes, which names another file. What Towers lists and what it is
// given is checked with these, so that such a name is said, never silently lost or replaced.
#include <QByteArray>
#include <QString>
#include <QStringList>

namespace towers::app {

// Whether `bytes` are UTF-8 text (no invalid, overlong or surrogate sequence).
bool isUtf8(const QByteArray& bytes);

// `bytes` for a message: its UTF-8 text as it is, each byte that is not part of it as \xNN (as
// `ls -b` shows it).
QString escapedName(const QByteArray& bytes);

// The entries of folder `dir` (not hidden: no leading dot) whose names are not UTF-8, by
// escapedName, sorted; empty when there are none or the folder cannot be listed.
QStringList namesNotUtf8(const QString& dir);

} // namespace towers::app
