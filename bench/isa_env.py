"""Holding both sides of a benchmark to one instruction set, to see on an AVX-512 machine what an
AVX2 machine (most desktops: Intel client parts since Alder Lake, AMD Zen 2/3) runs.

Each library has its own switch: oneDNN (Towers' and PyTorch's) reads ONEDNN_MAX_CPU_ISA (and the
older DNNL_MAX_CPU_ISA), PyTorch's own kernels ATEN_CPU_CAPABILITY, Towers' Highway kernels
TOWERS_SIMD_TARGET. The result is an emulation: the instruction set is AVX2's, but the cache,
memory and clock are the machine's own, so a real AVX2 machine's figures can differ; the tables
in docs/benchmarks.md say which is which.

bf16 (--precision bf16) wants oneDNN's bf16 kernels: native on AVX512_BF16 or AMX. --isa avx512
holds oneDNN to AVX512_CORE, below them: Towers refuses bf16 there, PyTorch's oneDNN emulates it
(slowly). --isa avx2 holds oneDNN below both, so a bf16 run fails on both sides (Towers refuses;
PyTorch's oneDNN finds no bf16 convolution).
"""

import os

ISAS = {
    "native": {},
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
             "TOWERS_SIMD_TARGET": "AVX2"},
    "avx512": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "DNNL_MAX_CPU_ISA": "AVX512_CORE",
               "ATEN_CPU_CAPABILITY": "avx512", "TOWERS_SIMD_TARGET": "AVX3"},
}


def isa_environment(isa, base=None):
    """os.environ (or `base`) with the switches that hold every library to `isa`."""
    env = dict(os.environ if base is None else base)
    env.update(ISAS[isa])
    return env


def bf16_note(isa):
    """What holding the CPU to `isa` does to a bf16 run, to add to a failed run's message ("" when
    it changes nothing)."""
    if isa == "avx2":
        return "--isa avx2 rules out bf16: it needs AVX512_BF16 or AMX (or AVX-512 to emulate it)"
    if isa == "avx512":
        return ("--isa avx512 holds oneDNN to AVX512_CORE, below native bf16: Towers refuses bf16 "
                "there, PyTorch emulates it")
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(f.read().split())
    except OSError:
        return ""
    if "flags" in flags and not flags & {"avx512_bf16", "amx_bf16"}:
        return "this CPU has neither AVX512_BF16 nor AMX-BF16"
    return ""
