#include "ui_test_support.h"

#include <QCoreApplication>
#include <QDir>

#include "ui/plural_forms.h"

namespace towers::test {

QString settingsFile(const QString& dir)
{
    return QDir(dir).filePath(QStringLiteral("settings.ini"));
}

bool installPluralForms()
{
    return towers::ui::installPluralForms(*QCoreApplication::instance());
}

} // namespace towers::test
