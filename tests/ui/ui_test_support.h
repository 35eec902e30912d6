#pragma once
// Helpers shared by the UI tests.
#include "ui/plots/plot_theme.h"

#include <QPalette>
#include <QString>

#include <filesystem>

namespace towers::test {

// A dark palette (what a dark desktop theme gives), to check that widgets follow the palette:
// the application's own, which towers uses when the desktop asks for a dark scheme.
using towers::ui::darkPalette;
// A temporary settings file path inside `dir`.
QString settingsFile(const QString& dir);
// The English plural forms of the counting messages ("%n tower(s)": "1 tower", "2 towers"), as
// towers installs them at start (ui/plural_forms.h): in initTestCase of a test that reads them.
// False where they did not load.
bool installPluralForms();
// std::filesystem::path of a QString path.
inline std::filesystem::path fsPath(const QString& p)
{
    return std::filesystem::path(p.toStdString());
}

} // namespace towers::test
