#include "ui_test_support.h"

#include <QDir>

namespace towers::test {

QString settingsFile(const QString& dir)
{
    return QDir(dir).filePath(QStringLiteral("settings.ini"));
}

} // namespace towers::test
