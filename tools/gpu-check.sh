#!/usr/bin/env bash
# The GPU checks of issue 5 in one go, for a machine with an NVIDIA GPU that has no Qt or oneDNN
# (the lent device machine): build here, carry the programs with the libraries they load, run
# there.
#
#   tools/gpu-check.sh pack [BUILD_DIR]   # here: BUILD_DIR (default build/ci) -> .carry/gpu.tar.xz
#   tools/gpu-check.sh run bf16           # there: --precision bf16 on the GPU (bf16_checks)
#   tools/gpu-check.sh run race           # there: the Fashion-MNIST race against PyTorch
#   tools/gpu-check.sh run                # there, from the repository root, with .carry carried:
#                                         # unpacks, then runs and logs (to $OUT, else .carry/out):
#     nvidia-smi; towers-cli --version / devices; towers-cli selftest --device cuda (and --tf32);
#     tst_op_cases (the op-case table on CUDA, float32, TF32 and bf16, beside oneDNN's rows);
#     tst_gpu_backend (every op, GPU towers, device errors, NCCL aborts); tst_bf16 on the host's
#     CPU (AMX where a Xeon has it); parts of tst_gpu_backend under
#     compute-sanitizer (memcheck, racecheck, synccheck);
#     a real training run on Fashion-MNIST on the GPU; bench/compare.py --device cuda against
#     PyTorch (default, channels-last, channels-last+bf16) for cifar10-tutorial and cifar10-resnet.
#
# The tarball holds towers-cli, the tests above, libtowers-cuda.so, the Debian libraries they
# need that a bare machine lacks (Qt, oneDNN, ...; not glibc, not NVIDIA's, which come from the
# machine's CUDA toolkit or its Python packages), and Debian's Fashion-MNIST when installed.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

pack() {
    local build=${1:-build/ci}
    local plugin=$build/engine/cuda/libtowers-cuda.so
    for f in "$build/app/towers-cli" "$build/tests/engine/tst_gpu_backend" "$build/tests/engine/tst_op_cases" "$build/tests/engine/tst_process_communicator" "$build/tests/engine/tst_bf16" "$plugin"; do
        [[ -f $f ]] || { echo "gpu-check: $f is missing: build a CUDA build first (cmake --preset ci && cmake --build --preset ci)" >&2; exit 1; }
    done
    local stage=.carry/gpu
    rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$stage/data"
    cp "$build/app/towers-cli" "$build/tests/engine/tst_gpu_backend" "$build/tests/engine/tst_op_cases" \
        "$build/tests/engine/tst_process_communicator" "$build/tests/engine/tst_bf16" "$stage/bin/"
    cp "$plugin" "$stage/lib/"
    # What the programs load from Debian, except the C runtime and NVIDIA's libraries.
    ldd "$stage/bin/towers-cli" "$stage/bin/tst_gpu_backend" "$stage/bin/tst_op_cases" \
        "$stage/bin/tst_process_communicator" "$stage/bin/tst_bf16" "$plugin" |
        awk '/=> \// {print $3}' | sort -u |
        grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so|/libcu|/libnccl|/libnvidia|/libcudnn' |
        while read -r lib; do cp -L "$lib" "$stage/lib/"; done
    strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* 2>/dev/null || true
    [[ -d /usr/share/datasets/fashion-mnist ]] && cp -r /usr/share/datasets/fashion-mnist "$stage/data/"
    mkdir -p "$stage/bench" "$stage/python" && cp bench/*.py "$stage/bench/" && cp python/towers_torch.py "$stage/python/"
    XZ_OPT=-9 tar -C .carry -cJf .carry/gpu.tar.xz gpu
    rm -rf "$stage"
    echo "gpu-check: .carry/gpu.tar.xz ($(du -h .carry/gpu.tar.xz | cut -f1)); carry .carry and run 'tools/gpu-check.sh run'"
}

# --precision bf16 on the GPU (tools/gpu-check.sh run bf16; its own command, as the main checks
# take most of one): the op-case table and training checks in bf16, the default Fashion-MNIST recipe
# on one GPU tower in fp32 and bf16 (issue 17's parity: within 0.3 points of test precision), and
# the step against PyTorch's bf16 autocast.
bf16_checks() {
    step selftest-bf16 "$cli" selftest --device cuda --precision bf16
    for precision in fp32 bf16; do
        step "recipe-$precision" "$cli" train --dataset fashion-mnist --device cuda --towers 1 \
            --precision $precision --run-dir /tmp/towers-gpu/runs/recipe-$precision
    done
    step recipe-parity python3 - /tmp/towers-gpu/runs/recipe-fp32 /tmp/towers-gpu/runs/recipe-bf16 <<'PY'
import json, sys
last = [json.loads(open(d + "/eval.jsonl").read().splitlines()[-1]) for d in sys.argv[1:]]
fp32, bf16 = (e["precisionAt1"] for e in last)
print(f"test precision @ 1 at step {last[0]['step']}: fp32 {fp32:.4f}, bf16 {bf16:.4f} "
      f"(difference {100 * (bf16 - fp32):+.2f} points)")
sys.exit(0 if abs(bf16 - fp32) <= 0.003 else 1)
PY
    step compare-bf16 python3 "$g/bench/compare.py" --device cuda --towers-cli "$cli" --python python3 \
        --models cifar10-tutorial,cifar10-resnet --batch-size 128 --steps 50 --warmup 10 \
        --precision bf16 --torch-variants default,channels-last
}

# The time-to-accuracy race on Fashion-MNIST (tools/gpu-check.sh run race): Towers' default recipe
# on one GPU tower against PyTorch's twin on the same GPU, float32 and bf16.
race_checks() {
    step race-fp32 python3 "$g/bench/compare_train.py" --device cuda --towers-cli "$cli" \
        --python python3 --data-dir "$g/data"
    step race-bf16 python3 "$g/bench/compare_train.py" --device cuda --towers-cli "$cli" \
        --python python3 --data-dir "$g/data" --precision bf16
}

run() {
    local part=${1:-main}
    local out=${OUT:-.carry/out}
    rm -rf /tmp/towers-gpu && mkdir -p "$out" /tmp/towers-gpu
    tar -C /tmp/towers-gpu -xJf .carry/gpu.tar.xz
    local g=/tmp/towers-gpu/gpu
    # NVIDIA's libraries: the toolkit's, and those of the Python packages (nvidia-cudnn-cu13, ...).
    local nvlibs
    nvlibs=$(python3 - <<'EOF' 2>/dev/null || true
import glob, os, site
dirs = set()
for root in site.getsitepackages():
    for lib in glob.glob(os.path.join(root, "nvidia", "**", "lib*.so*"), recursive=True):
        dirs.add(os.path.dirname(lib))
print(":".join(sorted(dirs)))
EOF
)
    # The carried Debian libraries go to the carried programs only (wrappers), never to python3,
    # whose PyTorch has its own.
    local libs="$g/lib:${nvlibs}:/usr/local/cuda/lib64"
    for prog in towers-cli tst_gpu_backend tst_op_cases tst_process_communicator tst_bf16; do
        mv "$g/bin/$prog" "$g/bin/$prog.bin"
        printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$libs" "$g/bin/$prog.bin" > "$g/bin/$prog"
        chmod +x "$g/bin/$prog"
    done
    export TOWERS_CUDA_PLUGIN=$g/lib/libtowers-cuda.so TOWERS_DATA=$g/data TOWERS_RUNS=/tmp/towers-gpu/runs
    export QT_QPA_PLATFORM=offscreen
    local cli=$g/bin/towers-cli status=0
    step() { # step NAME COMMAND...: runs it, logs to $out/NAME.log, notes the exit code
        local name=$1; shift
        echo "=== $name: $*"
        set +e; "$@" > "$out/$name.log" 2>&1; local rc=$?; set -e
        tail -n 25 "$out/$name.log"
        echo "=== $name: exit $rc"
        [[ $rc == 0 ]] || status=1
    }
    step nvidia-smi nvidia-smi
    step version "$cli" --version
    step devices "$cli" devices
    if [[ $part == bf16 || $part == race ]]; then
        "${part}_checks"
        return $status
    fi
    step selftest "$cli" selftest --device cuda
    step selftest-tf32 "$cli" selftest --device cuda --tf32 --no-training
    step selftest-bf16-ops "$cli" selftest --device cuda --precision bf16 --no-training
    step tst_op_cases "$g/bin/tst_op_cases"
    step tst_gpu_backend "$g/bin/tst_gpu_backend"
    # Two "processes" (threads with a stand-in for MPI) of GPU towers on one GPU against one.
    step tst_process_communicator "$g/bin/tst_process_communicator"
    # --precision bf16 on the host's CPU (a GPU server's Xeon may have AMX: other oneDNN kernels
    # than a Zen 4's; skipped with the reason where it has no bf16). tst_op_cases has its rows.
    step tst_bf16 "$g/bin/tst_bf16"
    if command -v compute-sanitizer > /dev/null; then
        step sanitizer env LD_LIBRARY_PATH="$libs" compute-sanitizer --tool memcheck --error-exitcode 3 \
            "$g/bin/tst_gpu_backend.bin" everyOpMatchesTheReference deviceErrorsAreTypedAndSayWhat \
            convolutionsRepeatBitwise twoContextsShareAGpu
        # Shared-memory races and barriers in the backend's own kernels (the column sums of batch
        # norm and bias gradients loop over chunks between __syncthreads).
        for tool in racecheck synccheck; do
            step "sanitizer-$tool" env LD_LIBRARY_PATH="$libs" compute-sanitizer --tool "$tool" \
                --error-exitcode 3 "$g/bin/tst_gpu_backend.bin" everyOpMatchesTheReference
        done
    fi
    step train "$cli" train --dataset fashion-mnist --device cuda --towers 2 --epochs 1 --run-dir /tmp/towers-gpu/runs/fashion
    # The training set held on the GPU and distorted there (--gpu-data auto, the log says so)
    # against batches made on the host and copied: the same images, so the same losses, bitwise.
    for data in auto off; do
        step "gpu-data-$data" "$cli" train --dataset fashion-mnist --device cuda --towers 2 \
            --steps 300 --log-every 20 --gpu-data $data --run-dir /tmp/towers-gpu/runs/data-$data
    done
    step gpu-data-same python3 - /tmp/towers-gpu/runs/data-auto /tmp/towers-gpu/runs/data-off <<'PY'
import json, sys
runs = [[json.loads(l) for l in open(d + "/metrics.jsonl")] for d in sys.argv[1:]]
held, host = ([(m["step"], m["loss"]) for m in r] for r in runs)
print("held on the GPU:", held[-3:]); print("made on the host:", host[-3:])
waits = [m["dataWaitMs"] for m in runs[0]]
print("data wait (ms) with the set on the GPU:", waits[-5:])
sys.exit(0 if held == host and len(held) >= 10 else 1)
PY
    # CUDA graphs: the steps of one GPU tower, and of two sharing the GPU (captured in parts, the
    # bucket averages started between them), captured and replayed against the same steps issued
    # op by op: the same losses, bitwise, and the log says which it was.
    for towers in 1 2; do
        for graphs in on off; do
            step "graphs-$towers-$graphs" "$cli" train --dataset fashion-mnist --device cuda \
                --towers $towers --steps 300 --log-every 20 --cuda-graphs $graphs \
                --run-dir /tmp/towers-gpu/runs/graphs-$towers-$graphs
        done
        step "graphs-$towers-same" python3 - "$out/graphs-$towers-on.log" \
            /tmp/towers-gpu/runs/graphs-$towers-on /tmp/towers-gpu/runs/graphs-$towers-off <<'PY'
import json, sys
log = open(sys.argv[1]).read()
print([l for l in log.splitlines() if "steps:" in l])
runs = [[json.loads(l) for l in open(d + "/metrics.jsonl")] for d in sys.argv[2:]]
on, off = ([(m["step"], m["loss"]) for m in r] for r in runs)
print("graphs on:", on[-3:]); print("graphs off:", off[-3:])
sys.exit(0 if on == off and len(on) >= 10 and "steps: captured as CUDA graphs" in log else 1)
PY
    done
    step compare python3 "$g/bench/compare.py" --device cuda --towers-cli "$cli" --python python3 \
        --models cifar10-tutorial,cifar10-resnet --batch-size 128 --steps 50 --warmup 10 \
        --torch-variants default,channels-last,channels-last+bf16
    return $status
}

case $mode in
    pack) shift; pack "$@" ;;
    run) run "${2:-main}" ;;
    *) echo "usage: tools/gpu-check.sh pack [BUILD_DIR] | run [main|bf16|race]" >&2; exit 2 ;;
esac
