#pragma once
// Small file helpers shared by the app tests.
#include <QByteArray>
#include <QString>
#include <QStringList>

namespace towers::test {

// `size` bytes from a generator seeded with `seed` (the same bytes every run).
QByteArray randomBytes(qsizetype size, quint32 seed);
// MD5 of `data` as 32 lowercase hex digits.
QByteArray md5Hex(const QByteArray& data);
// Every file and folder under `dir`, hidden ones included, as sorted relative paths; folders end
// with '/'.
QStringList listTree(const QString& dir);
// The whole file, or a null QByteArray when it cannot be read.
QByteArray readAll(const QString& path);
// Writes `data` to `path` (creating the folder); false on failure.
bool writeAll(const QString& path, const QByteArray& data);

} // namespace towers::test
