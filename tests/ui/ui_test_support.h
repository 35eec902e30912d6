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
// std::filesystem::path of a QString path.
inline std::filesystem::path fsPath(const QString& p)
{
    return std::filesystem::path(p.toStdString());
}

} // namespace towers::test
