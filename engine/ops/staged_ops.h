#pragma once
// An Ops whose tensors live on one device while another backend computes: inputs are copied to
// the computing backend's device, the op runs there, outputs (and in-place arguments) are copied
// back. Slow by design. With host tensors and a GPU backend inside, every host-side check (the
// self-test's op comparisons, the op suites) runs unchanged on the GPU; with a stand-in device
// outside and a CPU backend inside, the GPU towers' whole path (replicas, copies, collectives,
// checkpoints) runs in tests on machines without a GPU. Backend-private state (workspaces,
// `saved`) makes the round trip as bytes.
#include <memory>

#include "engine/ops/ops.h"

namespace towers::engine {

// Computes with `inner` (on inner->device()) for tensors on `outer`; name() is
// "<inner's name> (staged)".
//
// With `capture`, it captures (Ops::beginCapture) as a CUDA graph does, the stand-in device's
// graphs: each op and copy is recorded with its tensors as handles on their storage and every
// other argument by value, and a replay runs them again in order. It keeps to a graph's rules as
// strictly as a GPU would make them matter: nothing that waits is allowed in a capture
// (synchronize, marks: Unsupported), and a replay throws Error naming the op when a tensor it
// writes would be made anew, or when a tensor it uses has been let go of by everyone but the
// capture (on a GPU, freed memory the graph would still write: a stale capture). The first
// `refusedLaunches` launches of its captures throw BackendError having run nothing, as CUDA can
// refuse a graph it made and uploaded (for tests of what follows).
std::unique_ptr<Ops> makeStagedOps(std::unique_ptr<Ops> inner, const Device& outer = Device::host(),
                                   bool capture = false, int refusedLaunches = 0);

} // namespace towers::engine
