#pragma once
// Opens a folder in the desktop's file manager; where none answers (QDesktopServices::openUrl
// returns false: no file manager, no launcher), the folder's path goes to the clipboard and the
// returned message says so, with the path, for the window to show.
#include <QString>

#include <functional>

class QUrl;

namespace towers::ui {

// Empty when the file manager took the folder; else what to tell the user.
QString openFolder(const QString& path);
// Tests: replaces QDesktopServices::openUrl (an empty function restores it).
void setFolderOpenerForTests(std::function<bool(const QUrl&)> opener);

} // namespace towers::ui
