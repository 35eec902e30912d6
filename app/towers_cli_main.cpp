#include <QCoreApplication>
#include <QLoggingCategory>

#include "app/cli/cli.h"
#include "engine/cpu/host_memory.h"
#include "engine/gpu/gpu_backend.h"

int main(int argc, char** argv)
{
    towers::engine::setCudaDeviceOrder();           // before any thread
    towers::engine::cpu::fitMallocToAddressLimit(); // so too
    if (towers::app::refuseUndecodableArgument("towers-cli", argc, argv)) return 2;
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("towers-cli"));
    QCoreApplication::setApplicationVersion(QStringLiteral(TOWERS_VERSION));
    // Qt's image decoders' own warnings ("Corrupt JPEG data: ...") name no file: towers-cli names
    // each file it cannot read, with the reason (QT_LOGGING_RULES still shows them).
    QLoggingCategory::setFilterRules(QStringLiteral("qt.gui.imageio*=false"));
    return towers::app::runCli(QCoreApplication::arguments());
}
