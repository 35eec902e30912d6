#include "ui/widgets/open_folder.h"

#include <QClipboard>
#include <QCoreApplication>
#include <QDesktopServices>
#include <QDir>
#include <QGuiApplication>
#include <QUrl>

namespace towers::ui {

namespace {
std::function<bool(const QUrl&)>& opener()
{
    static std::function<bool(const QUrl&)> f;
    return f;
}
} // namespace

QString openFolder(const QString& path)
{
    const QUrl url = QUrl::fromLocalFile(path);
    if (opener() ? opener()(url) : QDesktopServices::openUrl(url)) return {};
    if (auto* clipboard = QGuiApplication::clipboard()) clipboard->setText(path);
    return QCoreApplication::translate("towers::ui::openFolder",
                                       "No file manager opened the folder %1; its path is copied "
                                       "to the clipboard.")
        .arg(QDir::toNativeSeparators(path));
}

void setFolderOpenerForTests(std::function<bool(const QUrl&)> f)
{
    opener() = std::move(f);
}

} // namespace towers::ui
