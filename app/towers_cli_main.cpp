#include <QCoreApplication>

#include "app/cli/cli.h"

int main(int argc, char** argv)
{
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("towers-cli"));
    QCoreApplication::setApplicationVersion(QStringLiteral(TOWERS_VERSION));
    return towers::app::runCli(QCoreApplication::arguments());
}
