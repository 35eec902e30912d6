#pragma once
// Replicated training against single-tower training, and one set of towers against another: the
// measures and runs that tst_tower_set (oneDNN, float64 reference), tst_device_towers (stand-in
// GPUs) and tst_gpu_backend (CUDA) share.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"
#include "engine/train/tower_set.h"

namespace towers::test {

// a and b hold the same bytes (on the host: either may live on a device), with the same shape
// and dtype.
bool sameBytes(const engine::Tensor& a, const engine::Tensor& b);

// The trainable parameters of a replica, in order (host copies).
std::vector<engine::Tensor> weightsOf(engine::Model& m);

struct Comparison
{
    double worst = 0; // the largest per-tensor max |a - b| / max |b|
    std::string where;
    double normalised = 0;  // |a - b| / |b| over the whole model
    double maxRelative = 0; // max |a - b| / max |b| over the whole model
    double travelled = 0;   // |a - b| / |b - w0| over the whole model
    double lossDiff = 0;    // the largest relative loss difference over the steps
};

// b against a (the reference), and a's distance from w0.
Comparison compare(const std::vector<engine::Tensor>& a, const std::vector<engine::Tensor>& b,
                   const std::vector<engine::Tensor>& w0, const std::vector<std::string>& names);

// `steps` steps of 1 x 64 (`single`) and of 2 x 32 and 4 x 16 (`multi`, its tower count set
// here) on the same global batches of 24x24x3 images, SGD at 0.05; every split compared with the
// single tower.
struct Replication
{
    Comparison two, four;
    double firstLoss = 0, lastLoss = 0;
    Comparison previousStep; // the single tower's final weights against 2 x 32's one step earlier
};
Replication replicate(engine::TowerSetOptions single, engine::TowerSetOptions multi,
                      int steps = 10);

// Float32 replication (QtTest checks): rounding differs between a batch of 64 and two of 32, and
// now and then lands on a ReLU or max-pool kink, so each split is held on the whole model: losses
// within 1e-5 at every step, weights within 1e-3 of the largest weight, 1e-4 of their norm and
// 1e-2 of the distance they travelled; the runs learned; and, the negative control, 2 x 32 one
// step short is told apart (over 5e-2 of the distance).
void expectFloat32Replication(const Replication& r);

// Steps `want` and `got` (the same tower count) on the same batches (4 examples a tower, a NaN in
// step nanStep), checking that got computes what want does, bitwise: the losses, the skipped step,
// the weights and the optimizer state, its replicas identical (QtTest checks). The learning rate
// changes every step (a gated step reads it, as its other scalars, on the device).
void expectSameTraining(engine::TowerSet& want, engine::TowerSet& got, std::uint64_t seed,
                        int steps, int nanStep);

} // namespace towers::test
