#pragma once
// Which implementation each primitive of the oneDNN backend ran on. oneDNN picks one per primitive
// and per CPU, and where it has no optimised kernel it silently runs a reference loop (its name
// has "ref" in it: "lrn_ref:any", "ref:any"), tens to hundreds of times slower: LRN on AVX2 was
// 72 % of a cifar10-tutorial step. Tests and reports read this list. Free of oneDNN types.
#include <string>
#include <vector>

#include "engine/ops/ops.h"

namespace towers::engine::cpu {

struct PrimitiveImplementation
{
    // The backend's name for the op and its geometry (its cache key): "maxpool bwd 128x24x24x64
    // ...".
    std::string label;
    // The primitive's kind, direction and memory layouts in oneDNN's words:
    // "pooling backward_data diff_src:acdb diff_dst:acdb".
    std::string primitive;
    // oneDNN's name for the implementation ("jit:avx512_core", "lrn_ref:any"), or "towers:<SIMD
    // target>" for Towers' own kernels.
    std::string impl;
};

// What `ops` (a backend from makeOneDnnOps; InvalidArgument for another) has run so far, each
// distinct entry once, in the order they first ran.
std::vector<PrimitiveImplementation> primitiveImplementations(Ops& ops);

// From now on (impls set) until recordImplementations(ops, nullptr), `impls` gets the
// implementation (PrimitiveImplementation::impl) of every primitive and kernel `ops`
// (makeOneDnnOps) runs, each time it runs: what one stretch of work, such as a layer's forward
// pass, ran, even where an earlier stretch ran the same geometry first. The vector must outlive
// the recording; the recording thread alone runs `ops` meanwhile.
void recordImplementations(Ops& ops, std::vector<std::string>* impls);

// Whether `impl` is a reference implementation (a plain loop, no SIMD kernel).
bool isReferenceImplementation(const std::string& impl);

} // namespace towers::engine::cpu
