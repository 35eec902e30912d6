#!/usr/bin/env bash
# The GPU checks of issue 5, for a machine with an NVIDIA GPU that has no Qt or oneDNN (the lent
# device machine): build here, carry the programs with the libraries they load, run there in parts,
# each run one command of the device tool (at most 10 minutes each; a task that is lent a machine
# has 15 minutes of device time in all, every start of the machine included).
#
#   tools/gpu-check.sh pack [BUILD_DIR]   # here: BUILD_DIR (default build/ci, built first so that
#                                         # it is its sources') -> .carry/gpu.tar.xz,
#                                         # the programs started in a root with nothing but the C
#                                         # runtime and the pack (bare_check), and a check that the
#                                         # tarball and the working tree fit the carry
#   tools/gpu-check.sh run [PART[,PART...]]   # there, from the repository root, with .carry carried
#
# A run unpacks the tarball afresh, shows the machine (nvidia-smi; towers-cli --version and
# devices), then takes its parts in the order given, within one time budget. The parts (PART):
#   first (the default)   what a first GPU session must learn, in about five minutes, the most
#                         important first: towers-cli selftest --device cuda (the op-case table and
#                         the training checks on the GPU); tst_gpu_backend (every op, GPU towers,
#                         device errors, captures; then its NCCL worlds, a step of their own,
#                         once more without NCCL's cuMem host probe where they fail);
#                         300 steps of the main job on 2 GPU towers
#                         (CUDA graphs, buckets); the cifar10-tutorial step against PyTorch
#                         (default, channels-last)
#   checks                towers-cli selftest --device cuda (also with --tf32, and the bf16 ops);
#                         tst_op_cases (the op-case table on CUDA, float32, TF32 and bf16, beside
#                         oneDNN's rows); CUDA's GPU numbers matched to NVML's by PCI bus id
#                         (devices --json); selftest --gpu 99 refused; tst_gpu_backend; a run
#                         under ulimit -v 16 GiB (trains, or says the limit is why not);
#                         tst_process_communicator; tst_bf16 on the host's CPU (AMX where a Xeon
#                         has it)
#   sanitizer             parts of tst_gpu_backend under compute-sanitizer (memcheck, racecheck,
#                         synccheck); skipped, saying so, where compute-sanitizer is not found.
#                         The device library's KINDS.md saw it work on the lent H200 under
#                         Firecracker (the runtime it lists now) and refuse it under gVisor
#                         ("Device not supported", then error 999 at the first allocation,
#                         2026-11-04): there these steps fail for that reason, not Towers'.
#   train                 a real training run on Fashion-MNIST on the GPU, its checkpoint evaluated
#                         on the GPU against the CPU (eval --device cuda); a run too large for
#                         the GPU refused before it takes the memory; --gpu-data auto against
#                         off (the same losses, bitwise); CUDA graphs on against off for 1 and 2
#                         towers (the same losses, bitwise), and for 2 towers accumulating 2
#                         batches a step (--accumulate 2); 2 towers with every launch waited for
#                         (CUDA_LAUNCH_BLOCKING=1) against asynchronous (the same losses, bitwise)
#   compare               bench/compare.py --device cuda against PyTorch (default, channels-last,
#                         channels-last+bf16) for cifar10-tutorial and cifar10-resnet, and the
#                         forward pass in evaluation mode (--inference: batch norms folded, as
#                         eval runs) for fashion-fast and cifar10-resnet
#   compile               the same two models against PyTorch's torch.compile (channels-last, in
#                         float32 and bf16 autocast; TorchInductor's Triton kernels, compiled in
#                         the warm-up), issue 17's "torch.compile if it works there"
#   bf16                  --precision bf16 on the GPU (bf16_part below)
#   race                  the Fashion-MNIST time-to-accuracy race against PyTorch (race_part)
# Each run is one call of the device tool: carry .carry, command `tools/gpu-check.sh run [PARTS]`,
# timeout_s a little over the budget (GPU_CHECK_BUDGET: 330 s for `first` alone, else 570). With
# 15 minutes of device time, a machine's start taking one or two of them: `run` (the part
# `first`) once, leaving time to fix what failed and run it again; a later session with a GPU
# takes the other parts one command each, checks and train before compare, then bf16, race,
# compile and sanitizer. give_back the machine when no run follows at once (an idle machine's time
# counts).
#
# What comes back ($OUT, else .carry/out): summary.txt, a line "NAME EXIT SECONDS" per step
# written as each step ends ("NAME skipped (time)" where the budget ran out, "NAME 124 ... timed
# out" where a step ran past its limit), and logs.tgz, the step logs (/tmp/towers-gpu/logs/NAME.log)
# archived afresh after every step, so that both survive the command being killed at its limit.
# The output shows the last lines of each step's log and, at the end, the summary table. The exit
# status is 1 when a step failed, timed out or was skipped for time; a test step whose GPU tests
# all skipped ("needs an NVIDIA GPU") counts as failed. The Python steps run the working tree's
# bench/ (it travels with the carry), so an edit there needs no new pack.
# Time limits: each step runs under `timeout` (its own limit, by default GPU_CHECK_STEP_LIMIT,
# 300 s), and the whole command keeps within GPU_CHECK_BUDGET seconds (default 570) from its start:
# a step gets at most what is left of it less a margin of 15 s, and is skipped when that is under
# 30 s.
#
# The tarball holds towers-cli, the tests above, libtowers-cuda.so, the Debian libraries they
# need that a bare machine lacks (Qt, oneDNN, ...; not glibc, not NVIDIA's, which come from the
# machine's CUDA toolkit or its Python packages), and Debian's Fashion-MNIST when installed
# (unpacked from its .gz files: xz shrinks the raw images, not the gzip streams; both Towers and
# bench/torch_train.py read plain IDX files).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

usage() {
    echo "usage: tools/gpu-check.sh pack [BUILD_DIR] | run [PART[,PART...]]" \
        "(PART: first, checks, sanitizer, train, compare, compile, bf16 or race; default first)" >&2
    exit 2
}

# The C and C++ runtimes (and the dynamic loader): every machine has them, so the pack leaves them
# to the machine.
c_runtime='/(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so'

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# bare_check STAGE: the carried programs run where nothing but the C runtime is installed, as on the
# device machine (no Qt, no oneDNN, no Open MPI): in a root of their own (chroot; unshare -r where
# not root) that holds only the C and C++ runtimes, the dynamic loader and STAGE, each program
# must start with the carried libraries alone (towers-cli --version and devices; the tests' list
# of functions), and towers-cli must train 3 steps on the carried Fashion-MNIST. A library left
# out of the carry fails here, in seconds, instead of on the GPU machine's clock. Skipped, saying
# why, where neither chroot nor a user namespace is allowed.
bare_check() {
    local stage=$1 root=.carry/bare chroot_cmd
    chroot_cmd=$(command -v chroot || true)
    local -a enter=()
    if [[ -z $chroot_cmd ]]; then
        echo "gpu-check: the bare-root check is skipped: no chroot program" >&2
        return 0
    elif [[ $(id -u) == 0 ]]; then
        enter=("$chroot_cmd")
    elif unshare -r true 2>/dev/null; then
        enter=(unshare -r "$chroot_cmd")
    else
        echo "gpu-check: the bare-root check is skipped: chroot needs root or user namespaces" >&2
        return 0
    fi
    rm -rf "$root" && mkdir -p "$root/tmp"
    # The C runtime that the pack leaves to the machine, with the loader, at the paths they have here.
    local lib
    ldd "$stage"/bin/* "$stage/lib/libtowers-cuda.so" |
        awk '/=> \// {print $3} /^[ \t]*\/[^ ]*ld-linux/ {print $1}' | sort -u | grep -E "$c_runtime" |
        while read -r lib; do
            mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib"
        done
    cp -al "$stage" "$root/g" 2>/dev/null || cp -a "$stage" "$root/g"
    local -a env=(env -i LD_LIBRARY_PATH=/g/lib HOME=/tmp TOWERS_DATA=/g/data TOWERS_RUNS=/tmp/runs
        TOWERS_CUDA_PLUGIN=/g/lib/libtowers-cuda.so QT_QPA_PLATFORM=offscreen)
    local failed=0 prog
    check_in_root() { # a command in the bare root; its output on failure
        local log
        if ! log=$("${env[@]}" "${enter[@]}" "$root" "$@" 2>&1); then
            echo "gpu-check: in a root with only the C runtime and the carry, '$*' failed:" >&2
            echo "$log" | tail -n 8 >&2
            failed=1
        fi
    }
    check_in_root /g/bin/towers-cli --version
    check_in_root /g/bin/towers-cli devices
    for prog in "$stage"/bin/tst_*; do
        check_in_root "/g/bin/$(basename "$prog")" -functions
    done
    if [[ -d $stage/data/fashion-mnist ]]; then
        check_in_root /g/bin/towers-cli train --dataset fashion-mnist --steps 3 --log-every 1 \
            --run-dir /tmp/runs/bare
    fi
    rm -rf "$root"
    if ((failed)); then
        echo "gpu-check: the carry lacks what a program loads (above): add it to pack's libraries" >&2
        rm -rf "$stage"
        exit 1
    fi
    echo "gpu-check: the carried programs start and train in a root with nothing but the C runtime" \
        "and the carry"
}

pack() {
    local build=${1:-build/ci}
    local plugin=$build/engine/cuda/libtowers-cuda.so
    for f in "$build/app/towers-cli" "$build/tests/engine/tst_gpu_backend" "$build/tests/engine/tst_op_cases" "$build/tests/engine/tst_process_communicator" "$build/tests/engine/tst_bf16" "$plugin"; do
        [[ -f $f ]] || { echo "gpu-check: $f is missing: build a CUDA build first (cmake --preset ci && cmake --build --preset ci)" >&2; exit 1; }
    done
    # A build older than its sources would carry what was (the GPU run would check old code): the
    # build brought up to date first (nothing to do when it is).
    mkdir -p .carry
    if [[ -f $build/CMakeCache.txt ]]; then
        if ! cmake --build "$build" > .carry/build.log 2>&1; then
            tail -n 20 .carry/build.log >&2
            echo "gpu-check: building $build failed (above; all of it in .carry/build.log)" >&2
            exit 1
        fi
        rm -f .carry/build.log
    fi
    local stage=.carry/gpu
    # No tarball of an earlier pack is left to be carried by mistake when this one fails.
    rm -f .carry/gpu.tar.xz
    rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$stage/data"
    cp "$build/app/towers-cli" "$build/tests/engine/tst_gpu_backend" "$build/tests/engine/tst_op_cases" \
        "$build/tests/engine/tst_process_communicator" "$build/tests/engine/tst_bf16" "$stage/bin/"
    cp "$plugin" "$stage/lib/"
    # What the programs load from Debian, except the C runtime and NVIDIA's libraries.
    ldd "$stage/bin/towers-cli" "$stage/bin/tst_gpu_backend" "$stage/bin/tst_op_cases" \
        "$stage/bin/tst_process_communicator" "$stage/bin/tst_bf16" "$plugin" |
        awk '/=> \// {print $3}' | sort -u |
        grep -Ev "$c_runtime|/libcu|/libnccl|/libnvidia|/libcudnn" |
        while read -r lib; do cp -L "$lib" "$stage/lib/"; done
    strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* 2>/dev/null || true
    # Fashion-MNIST as plain IDX files: its .gz files (31 MB) do not shrink under xz, the raw
    # images do (to about half).
    if [[ -d /usr/share/datasets/fashion-mnist ]]; then
        cp -rL /usr/share/datasets/fashion-mnist "$stage/data/"
        find "$stage/data/fashion-mnist" -name '*.gz' -exec gunzip -f {} +
    fi
    bare_check "$stage"
    # xz's x86 filter before LZMA2 (-9e): the programs and libraries, most of the bytes after
    # the dataset, shrink by a tenth more (1.6 MiB of the 64 the device tool carries); unpacking
    # needs nothing but xz, which reads the filters from the stream.
    XZ_OPT='--x86 --lzma2=preset=9e' tar -C .carry -cJf .carry/gpu.tar.xz gpu
    rm -rf "$stage"
    # What travels: the working tree (tracked and untracked files that git does not ignore) and
    # the carried folder .carry; the device tool takes 64 MiB in all, and 63 is kept as a margin.
    local tree carry max=$((63 * 1024 * 1024))
    tree=$(git ls-files -z --cached --others --exclude-standard |
        du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1) || true
    if [[ ! $tree =~ ^[0-9]+$ ]]; then
        echo "gpu-check: could not list the working tree's files with git" >&2
        exit 1
    fi
    carry=$(du -sb .carry | cut -f1)
    echo "gpu-check: .carry/gpu.tar.xz $(mib "$(du -b .carry/gpu.tar.xz | cut -f1)"), .carry in all" \
        "$(mib "$carry"), the working tree $(mib "$tree"): $(mib $((carry + tree))) travel (at most $(mib $max))"
    if ((carry + tree > max)); then
        echo "gpu-check: too large to carry: .carry ($(mib "$carry")) and the working tree ($(mib "$tree"))" \
            "make $(mib $((carry + tree))), over $(mib $max) (the device tool takes 64 MiB in all)." \
            "Carry less (fewer libraries, no dataset) or shrink the working tree." >&2
        exit 1
    fi
    echo "gpu-check: carry .carry and run 'tools/gpu-check.sh run' (the part 'first'; then checks, train, compare, ...)"
}

# What a first GPU session must learn, the most important first, each step with a limit of its
# own, about five minutes in all (tools/gpu-check.sh run, or run first).
first_part() {
    step -t 90 selftest "$cli" selftest --device cuda
    gpu_backend_steps 120 60
    step -t 60 train-300 "$cli" train --dataset fashion-mnist --device cuda --towers 2 --steps 300 \
        --log-every 50 --run-dir /tmp/towers-gpu/runs/first
    step -t 120 compare-tutorial python3 bench/compare.py --device cuda --towers-cli "$cli" \
        --python python3 --models cifar10-tutorial --batch-size 128 --steps 30 --warmup 5 \
        --torch-variants default,channels-last --timeout 100
}

# gpu_backend_steps LIMIT NCCL_LIMIT: tst_gpu_backend in two steps, its NCCL worlds (ncclWorld*:
# NCCL's start-up, its bootstrap sockets and its probes of the machine) after the rest, so that a
# crash or a stall there cannot take the op, tower and capture tests' results with it.
gpu_backend_steps() {
    local f
    local -a nccl=() rest=()
    while read -r f; do
        f=${f%"()"}
        if [[ $f == nccl* ]]; then nccl+=("$f"); elif [[ -n $f ]]; then rest+=("$f"); fi
    done < <("$g/bin/tst_gpu_backend" -functions 2> /dev/null || true)
    if ((${#rest[@]} == 0)); then # no list: the whole test, as one step
        step -t "$1" tst_gpu_backend "$g/bin/tst_gpu_backend"
        return 0
    fi
    step -t "$1" tst_gpu_backend "$g/bin/tst_gpu_backend" "${rest[@]}"
    if ((${#nccl[@]} > 0)); then
        step -t "$2" tst_gpu_backend-nccl "$g/bin/tst_gpu_backend" "${nccl[@]}"
        # NVIDIA/nccl#2106: NCCL's start-up probe of host memory through cuMem crashed with drivers
        # before r595 on some machines. Where the worlds failed, once more without that probe and
        # with NCCL's reasons, so that one run tells the two apart.
        if ((last_rc != 0 && last_rc != 124 && last_rc != 137)); then
            step -t "$2" tst_gpu_backend-nccl-cumem-host-off env NCCL_CUMEM_HOST_ENABLE=0 \
                NCCL_DEBUG=INFO "$g/bin/tst_gpu_backend" "${nccl[@]}"
        fi
    fi
}

# The checks part (tools/gpu-check.sh run checks).
checks_part() {
    step selftest "$cli" selftest --device cuda
    step selftest-tf32 "$cli" selftest --device cuda --tf32 --no-training
    step selftest-bf16-ops "$cli" selftest --device cuda --precision bf16 --no-training
    step tst_op_cases "$g/bin/tst_op_cases"
    # Each GPU CUDA sees is one of NVML's, matched by PCI bus id (towers-cli devices --json).
    step -t 30 devices-cuda-number bash -c '"$1" devices --json | python3 -c "
import json, sys
gpus = json.load(sys.stdin)[\"gpus\"]
print([(g[\"index\"], g[\"name\"], g[\"cuda_number\"], g[\"cuda_matched_by\"]) for g in gpus])
numbers = sorted(g[\"cuda_number\"] for g in gpus if g[\"trainable\"])
by_bus = all(g[\"cuda_matched_by\"] == \"pci bus id\" for g in gpus if g[\"trainable\"])
sys.exit(0 if numbers and numbers == list(range(len(numbers))) and by_bus else 1)"' _ "$cli"
    # A GPU that is not there is named as such, with how many there are (exit 1, no crash).
    step -t 30 gpu-number-checked bash -c 'rc=0; out=$("$1" selftest --gpu 99 --no-training 2>&1) ||
        rc=$?; printf "%s\n(exit %s)\n" "$out" "$rc"; ((rc == 1)) &&
        grep -q "error: --gpu 99: CUDA sees " <<< "$out"' _ "$cli"
    gpu_backend_steps "$step_limit" 120
    # Under an address-space limit of 16 GiB (ulimit -v, a batch scheduler's h_vmem), where CUDA
    # sets address space aside for the GPU's memory: it trains, or it fails saying the limit is
    # the likely cause (exit 1), never a bare "out of memory" or a crash.
    step -t 60 cuda-under-ulimit bash -c 'rc=0; out=$( (ulimit -v 16777216; "$1" train \
        --dataset fashion-mnist --device cuda --steps 3 --run-dir /tmp/towers-gpu/runs/ulimit) \
        2>&1) || rc=$?; printf "%s\n(exit %s)\n" "$out" "$rc"
        ((rc == 0)) || { ((rc == 1)) && grep -q "ulimit -v" <<< "$out"; }' _ "$cli"
    # Two "processes" (threads with a stand-in for MPI) of GPU towers on one GPU against one.
    step tst_process_communicator "$g/bin/tst_process_communicator"
    # --precision bf16 on the host's CPU (a GPU server's Xeon may have AMX: other oneDNN kernels
    # than a Zen 4's; skipped with the reason where it has no bf16). tst_op_cases has its rows.
    step tst_bf16 "$g/bin/tst_bf16"
}

# Parts of tst_gpu_backend under compute-sanitizer (tools/gpu-check.sh run sanitizer).
sanitizer_part() {
    local sanitizer
    sanitizer=$(command -v compute-sanitizer || true)
    if [[ -z $sanitizer && -x /usr/local/cuda/bin/compute-sanitizer ]]; then
        sanitizer=/usr/local/cuda/bin/compute-sanitizer
    fi
    if [[ -z $sanitizer ]]; then
        note sanitizer "skipped: compute-sanitizer not found"
        echo "=== sanitizer: skipped: compute-sanitizer not found (on PATH or in /usr/local/cuda/bin)"
        return 0
    fi
    # Instrumented kernels run 10 to 100 times slower: memcheck gets under half the budget, so
    # that the two tools after it run too.
    step -t 240 sanitizer env LD_LIBRARY_PATH="$libs" "$sanitizer" --tool memcheck --error-exitcode 3 \
        "$g/bin/tst_gpu_backend.bin" everyOpMatchesTheReference deviceErrorsAreTypedAndSayWhat \
        convolutionsRepeatBitwise twoContextsShareAGpu
    # Shared-memory races and barriers in the backend's own kernels (the column sums of batch
    # norm and bias gradients loop over chunks between __syncthreads).
    for tool in racecheck synccheck; do
        step -t 150 "sanitizer-$tool" env LD_LIBRARY_PATH="$libs" "$sanitizer" --tool "$tool" \
            --error-exitcode 3 "$g/bin/tst_gpu_backend.bin" everyOpMatchesTheReference
    done
}

# Training on the GPU (tools/gpu-check.sh run train).
train_part() {
    step train "$cli" train --dataset fashion-mnist --device cuda --towers 2 --epochs 1 --run-dir /tmp/towers-gpu/runs/fashion
    # Its checkpoint evaluated on the GPU (eval --device cuda) against the CPU: the same test set,
    # the same answers but for images on a decision boundary, and the logits (--mistakes reads
    # them) alike.
    for device in cuda cpu; do
        step "eval-$device" "$cli" eval --checkpoint /tmp/towers-gpu/runs/fashion --device $device \
            --mistakes 20 --json
    done
    step -t 30 eval-cuda-same python3 - "$logs/eval-cuda.log" "$logs/eval-cpu.log" <<'PY'
import json, sys
def result(log):
    text = open(log).read()
    return json.JSONDecoder().raw_decode(text, text.index("{\n"))[0]
g, c = (result(f) for f in sys.argv[1:3])
print({k: (g[k], c[k]) for k in ("device", "examples", "correct", "mean_cross_entropy")})
same_mistakes = [m["index"] for m in g["mistakes"]] == [m["index"] for m in c["mistakes"]]
print("the same 20 surest mistakes:", same_mistakes)
ok = (g["device"] == "cuda:0" and c["device"] == "cpu" and g["examples"] == c["examples"]
      and abs(g["correct"] - c["correct"]) <= max(2, c["examples"] // 2000)
      and abs(g["mean_cross_entropy"] - c["mean_cross_entropy"]) <= 1e-4 * (1 + c["mean_cross_entropy"])
      and all(abs(a["probability"] - b["probability"]) <= 1e-4
              for a, b in zip(g["mistakes"], c["mistakes"]) if a["index"] == b["index"]))
sys.exit(0 if ok else 1)
PY
    # A run that cannot fit on the GPU is refused before it takes the memory, naming the GPU, with
    # no folder left: 36 fully connected layers of 16384 (35 GiB of weights) need 105 GiB per tower
    # with Nesterov (weights, gradients, momentum), 211 GiB for the two sharing the GPU.
    step -t 60 gpu-memory-refused bash -c 'python3 -c "import json, sys; json.dump({\"name\": \"huge\",
        \"input\": [28, 28, 1], \"layers\": [{\"type\": \"flatten\"}] + [{\"type\": \"linear\",
        \"units\": 16384}] * 36 + [{\"type\": \"linear\", \"units\": \"classes\"}]},
        open(sys.argv[1], \"w\"))" /tmp/towers-gpu/huge.json || exit 1
        rc=0; out=$("$1" train --dataset fashion-mnist --device cuda --towers 2 --model \
            /tmp/towers-gpu/huge.json --run-dir /tmp/towers-gpu/runs/huge 2>&1) || rc=$?
        printf "%s\n(exit %s)\n" "$out" "$rc"; ((rc == 1)) &&
        grep -q "error: not enough memory on GPU 0 for this run: it needs at least " <<< "$out" &&
        [[ ! -e /tmp/towers-gpu/runs/huge ]]' _ "$cli"
    # The training set held on the GPU and distorted there (--gpu-data auto, the log says so)
    # against batches made on the host and copied: the same images, so the same losses, bitwise.
    for data in auto off; do
        step "gpu-data-$data" "$cli" train --dataset fashion-mnist --device cuda --towers 2 \
            --steps 300 --log-every 20 --gpu-data $data --run-dir /tmp/towers-gpu/runs/data-$data
    done
    same_losses gpu-data-same /tmp/towers-gpu/runs/data-auto /tmp/towers-gpu/runs/data-off \
        "$logs/gpu-data-auto.log" "the training set held on" "the training set held on cuda"
    # CUDA graphs: the steps of one GPU tower, and of two sharing the GPU (captured in parts, the
    # bucket averages started between them), captured and replayed against the same steps issued
    # op by op: the same losses, bitwise, and the log says which it was.
    for towers in 1 2; do
        for graphs in on off; do
            step "graphs-$towers-$graphs" "$cli" train --dataset fashion-mnist --device cuda \
                --towers $towers --steps 300 --log-every 20 --cuda-graphs $graphs \
                --run-dir /tmp/towers-gpu/runs/graphs-$towers-$graphs
        done
        # A capture that fails later says so in a "steps:" line of its own, after the first.
        same_losses "graphs-$towers-same" /tmp/towers-gpu/runs/graphs-$towers-on \
            /tmp/towers-gpu/runs/graphs-$towers-off "$logs/graphs-$towers-on.log" "steps: " \
            "steps: captured as CUDA graphs"
    done
    # Gradient accumulation on GPU towers (--accumulate 2: each step's forward and backward twice,
    # the parts' gradients summed on the GPU, their losses copied out), captured against issued op
    # by op: the same losses, bitwise.
    for graphs in on off; do
        step "accumulate-$graphs" "$cli" train --dataset fashion-mnist --device cuda --towers 2 \
            --batch-size 64 --accumulate 2 --steps 200 --log-every 20 --cuda-graphs $graphs \
            --run-dir /tmp/towers-gpu/runs/accumulate-$graphs
    done
    same_losses accumulate-same /tmp/towers-gpu/runs/accumulate-on \
        /tmp/towers-gpu/runs/accumulate-off "$logs/accumulate-on.log" "steps: " \
        "steps: captured as CUDA graphs"
    # The same two towers with every launch waited for (CUDA_LAUNCH_BLOCKING=1): the host never
    # runs ahead of the GPU, so a missing order between the host and the device (a page-locked
    # buffer written again too soon, a result read too early), which the tests' stand-in device
    # cannot show (its ops finish before they return), would make the losses differ.
    step blocking-2 env CUDA_LAUNCH_BLOCKING=1 "$cli" train --dataset fashion-mnist --device cuda \
        --towers 2 --steps 300 --log-every 20 --cuda-graphs off --run-dir /tmp/towers-gpu/runs/blocking-2
    same_losses blocking-2-same /tmp/towers-gpu/runs/blocking-2 /tmp/towers-gpu/runs/graphs-2-off
}

# same_losses NAME RUN_A RUN_B [LOG KEY WANT]: a step that passes when the two runs logged the
# same (step, loss) pairs in metrics.jsonl, bitwise, at least 10 of them, and, given LOG, when the
# last of its lines that contain KEY contains WANT (what the log says the run did). It prints the
# last pairs, RUN_A's data waits and those lines.
same_losses() {
    local name=$1
    shift
    step -t 60 "$name" python3 - "$@" <<'PY'
import json, os, sys
runs = [[json.loads(l) for l in open(d + "/metrics.jsonl")] for d in sys.argv[1:3]]
a, b = ([(m["step"], m["loss"]) for m in r] for r in runs)
for d, pairs in zip(sys.argv[1:3], (a, b)):
    print(os.path.basename(d) + ":", pairs[-3:])
print("data wait (ms),", os.path.basename(sys.argv[1]) + ":", [m["dataWaitMs"] for m in runs[0]][-5:])
said = True
if len(sys.argv) > 3:
    log, key, want = sys.argv[3:6]
    lines = [l for l in open(log).read().splitlines() if key in l]
    print(lines[-3:] or f"{log}: no line with '{key}'")
    said = bool(lines) and want in lines[-1]
sys.exit(0 if a == b and len(a) >= 10 and said else 1)
PY
}

# The step against PyTorch (tools/gpu-check.sh run compare).
compare_part() {
    step -t 540 compare python3 bench/compare.py --device cuda --towers-cli "$cli" --python python3 \
        --models cifar10-tutorial,cifar10-resnet --batch-size 128 --steps 50 --warmup 10 \
        --torch-variants default,channels-last,channels-last+bf16 --timeout 200
    step -t 240 compare-inference python3 bench/compare.py --device cuda --towers-cli "$cli" \
        --python python3 --inference --models fashion-fast,cifar10-resnet --batch-size 250 \
        --steps 50 --warmup 10 --torch-variants default,channels-last --timeout 100
}

# The step against PyTorch's torch.compile (tools/gpu-check.sh run compile): TorchInductor compiles
# forward and backward into Triton kernels in the warm-up steps (a minute or more each), never
# timed; a PyTorch whose compiler fails there shows "-" and the reason in the table.
compile_part() {
    step -t 540 compare-compile python3 bench/compare.py --device cuda --towers-cli "$cli" \
        --python python3 --models cifar10-tutorial,cifar10-resnet --batch-size 128 --steps 50 \
        --warmup 10 --torch-variants channels-last+compile,channels-last+bf16+compile --timeout 240
}

# --precision bf16 on the GPU (tools/gpu-check.sh run bf16): the op-case table and training
# checks in bf16, the default Fashion-MNIST recipe on one GPU tower in fp32 and bf16 (issue 17's
# parity: within 0.3 points of test precision), and the step against PyTorch's bf16 autocast.
bf16_part() {
    step selftest-bf16 "$cli" selftest --device cuda --precision bf16
    for precision in fp32 bf16; do
        step "recipe-$precision" "$cli" train --dataset fashion-mnist --device cuda --towers 1 \
            --precision $precision --run-dir /tmp/towers-gpu/runs/recipe-$precision
    done
    step -t 60 recipe-parity python3 - /tmp/towers-gpu/runs/recipe-fp32 /tmp/towers-gpu/runs/recipe-bf16 <<'PY'
import json, sys
last = [json.loads(open(d + "/eval.jsonl").read().splitlines()[-1]) for d in sys.argv[1:]]
fp32, bf16 = (e["precisionAt1"] for e in last)
print(f"test precision @ 1 at step {last[0]['step']}: fp32 {fp32:.4f}, bf16 {bf16:.4f} "
      f"(difference {100 * (bf16 - fp32):+.2f} points; one run of each: a run's own spread "
      f"is of that order too, so a failure here asks for more seeds before a verdict)")
sys.exit(0 if abs(bf16 - fp32) <= 0.003 else 1)
PY
    step -t 540 compare-bf16 python3 bench/compare.py --device cuda --towers-cli "$cli" --python python3 \
        --models cifar10-tutorial,cifar10-resnet --batch-size 128 --steps 50 --warmup 10 \
        --precision bf16 --torch-variants default,channels-last --timeout 200
}

# The time-to-accuracy race on Fashion-MNIST (tools/gpu-check.sh run race): Towers' default recipe
# on one GPU tower against PyTorch's twin on the same GPU, float32 and bf16.
race_part() {
    step -t 540 race-fp32 python3 bench/compare_train.py --device cuda --towers-cli "$cli" \
        --python python3 --data-dir "$g/data"
    step -t 540 race-bf16 python3 bench/compare_train.py --device cuda --towers-cli "$cli" \
        --python python3 --data-dir "$g/data" --precision bf16
}

# The state of a run, shared by the functions below (set by run).
g=/tmp/towers-gpu/gpu
logs=/tmp/towers-gpu/logs
out=
cli=
libs=
deadline=0
status=0
last_rc=0     # the exit code of the last step that ran
step_limit=300
margin=15     # seconds of the budget kept back from a step: timeout's -k 10, the archive, the summary
min_step=30   # a step that would get less is skipped
summary=()

# note NAME RESULT...: one line of $out/summary.txt, written at once, and the archive of the logs
# made afresh (to a temporary name first, so that a kill leaves the last whole one).
note() {
    local line="$*"
    summary+=("$line")
    echo "$line" >> "$out/summary.txt"
    if tar -C /tmp/towers-gpu -czf "$out/logs.tgz.part" logs 2>/dev/null; then
        mv -f "$out/logs.tgz.part" "$out/logs.tgz"
    else
        rm -f "$out/logs.tgz.part"
    fi
}

# step [-t LIMIT] NAME COMMAND...: runs COMMAND under timeout (LIMIT seconds, default step_limit,
# at most what is left of the budget less the margin), logs to $logs/NAME.log, prints its last
# lines, notes the exit code and seconds in the summary.
step() {
    local limit=$step_limit
    if [[ $1 == -t ]]; then
        limit=$2
        shift 2
    fi
    local name=$1 base=$1 n=2
    shift
    while [[ -e $logs/$name.log ]]; do # a step of the same name in an earlier part of this run
        name=$base-$n
        n=$((n + 1))
    done
    local left=$((deadline - SECONDS - margin))
    if ((left < min_step)); then
        echo "=== $name: skipped (time: $((deadline - SECONDS)) s of the budget left)"
        note "$name" "skipped (time)"
        status=1
        last_rc=0 # nothing ran: nothing to retry
        return 0
    fi
    if ((limit > left)); then
        limit=$left
    fi
    echo "=== $name (at most $limit s): $*" | cut -c1-160
    local t0=$SECONDS rc=0
    timeout -k 10 "$limit" "$@" > "$logs/$name.log" 2>&1 || rc=$?
    local secs=$((SECONDS - t0))
    tail -n 6 "$logs/$name.log" | cut -c1-160
    # A test whose GPU functions all skipped exits 0: here, where a GPU is the point, that fails
    # the step (the plugin or NVIDIA's libraries not found, say), with the test's reason.
    if ((rc == 0)) && [[ $base == tst_* || $base == sanitizer* ]] &&
        grep -q '^SKIP .*needs an NVIDIA GPU' "$logs/$name.log"; then
        echo "=== $name: its GPU tests skipped: $(grep -m1 -o 'needs an NVIDIA GPU.*' "$logs/$name.log" | cut -c1-140)"
        rc=1
    fi
    if ((rc == 124 || rc == 137)); then
        echo "=== $name: timed out after $secs s (limit $limit s; exit $rc)"
        note "$name" "$rc" "$secs" "timed out (limit $limit s)"
    else
        echo "=== $name: exit $rc, $secs s"
        note "$name" "$rc" "$secs"
    fi
    if ((rc != 0)); then
        status=1
    fi
    last_rc=$rc
}

run() {
    local parts=$1 part
    local -a list
    IFS=, read -r -a list <<< "$parts"
    ((${#list[@]} > 0)) || usage
    for part in "${list[@]}"; do
        case $part in
            first | checks | sanitizer | train | compare | compile | bf16 | race) ;;
            *) usage ;;
        esac
    done
    local budget=570
    if [[ $parts == first ]]; then
        budget=330
    fi
    budget=${GPU_CHECK_BUDGET:-$budget}
    step_limit=${GPU_CHECK_STEP_LIMIT:-300}
    if [[ ! $budget =~ ^[0-9]+$ || ! $step_limit =~ ^[0-9]+$ ]]; then
        echo "gpu-check: GPU_CHECK_BUDGET and GPU_CHECK_STEP_LIMIT are whole seconds" >&2
        exit 2
    fi
    local start=$SECONDS
    deadline=$((start + budget))
    out=${OUT:-.carry/out}
    [[ -f .carry/gpu.tar.xz ]] || { echo "gpu-check: .carry/gpu.tar.xz is missing: run 'tools/gpu-check.sh pack' here and carry .carry" >&2; exit 1; }
    rm -rf /tmp/towers-gpu && mkdir -p "$out" "$logs"
    rm -f "$out/summary.txt" "$out/logs.tgz"
    echo "# tools/gpu-check.sh run $parts: NAME EXIT SECONDS per step (budget $budget s)" > "$out/summary.txt"
    local t0=$SECONDS
    if command -v xz > /dev/null; then
        tar -C /tmp/towers-gpu -xJf .carry/gpu.tar.xz
    else # tar needs the xz program for -J; Python's tarfile reads xz through lzma
        python3 - .carry/gpu.tar.xz /tmp/towers-gpu <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    t.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
PY
    fi
    note unpack 0 $((SECONDS - t0))
    # NVIDIA's libraries: the toolkit's, and those of the Python packages (nvidia-cudnn-cu13, ...).
    local nvlibs
    nvlibs=$(python3 - <<'EOF' 2>/dev/null || true
import glob, os, site
try:  # the namespace package spans every folder of sys.path (a user site, a venv's system site)
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = [os.path.join(r, "nvidia") for r in site.getsitepackages()]
dirs = set()
for root in roots:
    for lib in glob.glob(os.path.join(root, "**", "lib*.so*"), recursive=True):
        dirs.add(os.path.dirname(lib))
print(":".join(sorted(dirs)))
EOF
)
    # The carried Debian libraries go to the carried programs only (wrappers), never to python3,
    # whose PyTorch has its own. The driver's libcuda may be found only through the machine's
    # own LD_LIBRARY_PATH or /usr/local/nvidia/lib64: both stay, after ours.
    libs=$g/lib
    if [[ -n $nvlibs ]]; then
        libs+=:$nvlibs
    fi
    libs+=:/usr/local/cuda/lib64
    if [[ -d /usr/local/nvidia/lib64 ]]; then
        libs+=:/usr/local/nvidia/lib64
    fi
    if [[ -n ${LD_LIBRARY_PATH:-} ]]; then
        libs+=:$LD_LIBRARY_PATH
    fi
    for prog in towers-cli tst_gpu_backend tst_op_cases tst_process_communicator tst_bf16; do
        mv "$g/bin/$prog" "$g/bin/$prog.bin"
        printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$libs" "$g/bin/$prog.bin" > "$g/bin/$prog"
        chmod +x "$g/bin/$prog"
    done
    export TOWERS_CUDA_PLUGIN=$g/lib/libtowers-cuda.so TOWERS_DATA=$g/data TOWERS_RUNS=/tmp/towers-gpu/runs
    export QT_QPA_PLATFORM=offscreen
    # NCCL's reasons for a failure, in the logs; Python's output as it comes (a killed step's log).
    export NCCL_DEBUG=WARN PYTHONUNBUFFERED=1
    cli=$g/bin/towers-cli
    status=0

    # The machine and what Towers makes of it, once a run, before its parts.
    step -t 60 nvidia-smi nvidia-smi
    step -t 60 version "$cli" --version
    step -t 60 devices "$cli" devices
    for part in "${list[@]}"; do
        "${part}_part"
    done

    local failed=() timed=() skipped=() line
    local -a f
    for line in "${summary[@]}"; do
        read -r -a f <<< "$line"
        if [[ ${f[1]} == skipped* ]]; then
            skipped+=("${f[0]}")
        elif [[ ${f[1]} == 124 || ${f[1]} == 137 ]]; then
            timed+=("${f[0]}")
        elif [[ ${f[1]} != 0 ]]; then
            failed+=("${f[0]}")
        fi
    done
    echo
    echo "=== summary: run $parts, $((SECONDS - start)) s of the $budget s budget (logs in $out/logs.tgz)"
    for line in "${summary[@]}"; do
        read -r -a f <<< "$line"
        printf '  %-26s %s\n' "${f[0]}" "${f[*]:1}"
    done
    echo "=== failed: ${failed[*]:-none}; timed out: ${timed[*]:-none}; skipped: ${skipped[*]:-none}"
    return $status
}

case $mode in
    pack) shift; pack "$@" ;;
    run) run "${2:-first}" ;;
    *) usage ;;
esac
