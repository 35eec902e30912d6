#pragma once
// A stand-in for MPI in the tests: the "processes" of a run are threads of the test, each with its
// own ThreadProcessGroup of one ThreadWorld. The collectives have MPI's contract (the same calls
// in the same order on every member, per channel) and the failure news of the real group
// (announceFailure, ProcessFailed on the others, a timeout), so the engine's process logic (the
// ProcessCommunicator, a TowerSet's share of a run) is tested without mpirun.
#include <memory>

#include "engine/dist/process_group.h"

namespace towers::test {

class ThreadWorld;

// `size` members; every wait gives up after timeoutSeconds with ProcessFailed.
std::shared_ptr<ThreadWorld> makeThreadWorld(int size, double timeoutSeconds = 30);
// Member `rank` of the world (one per thread).
std::unique_ptr<engine::ProcessGroup> joinThreadWorld(std::shared_ptr<ThreadWorld> world, int rank);

} // namespace towers::test
