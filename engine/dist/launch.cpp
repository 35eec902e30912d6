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
        // srun without --mpi=pmix or pmi2: the tasks carry Slurm's numbering but no PMI, and MPI
        // would start each as a world of one. SLURM_STEP_NUM_TASKS is srun's (a batch script's
        // own shell has SLURM_NTASKS and SLURM_PROCID=0 too, but it is one process: not refused).
        int tasks = 0, step = 0;
        const bool inStep = number("SLURM_STEP_NUM_TASKS", tasks) ||
                            ((number("SLURM_STEP_ID", step) || number("SLURM_STEPID", step)) &&
                             number("SLURM_NTASKS", tasks));
        if (inStep && tasks > 1 && number("SLURM_PROCID", rank) && rank < tasks) {
            info.launcher = "Slurm";
            info.rank = rank;
            info.size = tasks;
            info.unjoinable = true;
        }
        return info;
    }
    if (size < 1 || rank >= size) return LaunchInfo{};
    info.rank = rank;
    info.size = size;
    info.launched = size > 1;
    return info;
}

std::string unjoinableReason(const LaunchInfo& launch)
{
    if (!launch.unjoinable) return {};
    return "srun started " + std::to_string(launch.size) +
           " tasks without MPI's process management (PMIx or PMI-2), so MPI cannot join them "
           "into one run: each would train alone, all in the same run folder. Start them with "
           "srun --mpi=pmix (or --mpi=pmi2, whichever 'srun --mpi=list' offers), or with mpirun "
           "inside the allocation";
}

} // namespace towers::engine
