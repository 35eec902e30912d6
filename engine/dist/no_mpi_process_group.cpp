// A build without MPI: runs alone, and says so when a launcher starts it as one of several.
#include "engine/dist/process_group.h"

namespace towers::engine {

namespace {
constexpr const char* kWhy = "this Towers was built without MPI (install libopenmpi-dev and "
                             "rebuild with -DTOWERS_WITH_MPI=ON)";
}

bool processGroupsAvailable(std::string* whyNot)
{
    if (whyNot) *whyNot = kWhy;
    return false;
}

std::unique_ptr<ProcessGroup> joinProcessGroup()
{
    const LaunchInfo launch = detectLaunch();
    if (launch.unjoinable) throw InvalidArgument(unjoinableReason(launch));
    if (!launch.launched) return nullptr;
    throw Unsupported("started by " + launch.launcher + " as rank " + std::to_string(launch.rank) +
                      " of " + std::to_string(launch.size) + ", but " + kWhy);
}

} // namespace towers::engine
