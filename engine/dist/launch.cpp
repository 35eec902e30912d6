// What the launchers tell a process through its environment, read without initialising MPI: a
// towers-cli started alone never touches MPI (no singleton start-up, no daemon).
#include <cstdlib>
#include <string>

#include "engine/dist/process_group.h"

namespace towers::engine {

namespace {

bool number(const char* name, int& out)
{
    const char* v = std::getenv(name);
    if (!v || !*v) return false;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 0 || n > (1 << 24)) return false;
    out = int(n);
    return true;
}

} // namespace

LaunchInfo detectLaunch()
{
    LaunchInfo info;
    int rank = 0, size = 0;
    if (number("OMPI_COMM_WORLD_SIZE", size) && number("OMPI_COMM_WORLD_RANK", rank)) {
        info.launcher = "Open MPI";
    } else if (number("PMI_SIZE", size) && number("PMI_RANK", rank)) {
        info.launcher = "PMI"; // MPICH's Hydra, Slurm's srun --mpi=pmi2
    } else if (number("PMIX_RANK", rank) &&
               (number("SLURM_NTASKS", size) || number("PMIX_SIZE", size))) {
        info.launcher = "PMIx"; // srun --mpi=pmix
    } else {
        return info;
    }
    if (size < 1 || rank >= size) return LaunchInfo{};
    info.rank = rank;
    info.size = size;
    info.launched = size > 1;
    return info;
}

} // namespace towers::engine
