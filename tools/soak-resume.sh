#!/usr/bin/env bash
# Soak test of "nothing lost": a short exact training run is killed with SIGKILL at random moments
# and resumed until it finishes, then compared bitwise, tensor by tensor, with the same run trained
# without interruption. After every kill: the run folder's lock is free again (no stale lock), a
# resume never skips a checkpoint as unloadable, and never starts over.
#
#   tools/soak-resume.sh [ROUNDS]     (default 30 kills; needs Debian's dataset-fashion-mnist or
#                                      TOWERS_DATA pointing at a fashion-mnist folder)
#   TOWERS_CLI=path/to/towers-cli     (default: build/ci, else build/cpu)
#
# Not part of CI (it runs for minutes); docs/training.md records the latest result.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-30}
cli=${TOWERS_CLI:-}
if [[ -z "$cli" ]]; then
    for c in build/ci/app/towers-cli build/cpu/app/towers-cli; do [[ -x "$c" ]] && cli=$c && break; done
fi
[[ -x "$cli" ]] || { echo "soak-resume: build towers-cli first (cmake --preset cpu && cmake --build --preset apps)" >&2; exit 2; }
work=$(mktemp -d -t towers-soak-XXXXXX)
trap 'rm -rf "$work"' EXIT
export TOWERS_RUNS="$work/runs" OMP_NUM_THREADS=1

steps=$((rounds * 40 > 300 ? rounds * 40 : 300)) # long enough that every kill lands in the run
args=(train --dataset fashion-mnist --model fashion-fast --towers 2 --batch-size 32 --augment none
      --lr-schedule constant --lr 0.02 --steps "$steps" --checkpoint-every 1 --keep-checkpoints 3
      --eval-every 0 --log-every 10)

echo "soak-resume: $cli, $steps steps, up to $rounds kills"
"$cli" "${args[@]}" --run-dir "$work/reference" > "$work/reference.log" 2>&1 ||
    { cat "$work/reference.log" >&2; exit 1; }

run="$work/killed"
kills=0 failures=0
first=1
while :; do
    extra=()
    [[ $first == 1 ]] || extra=(--resume)
    "$cli" "${args[@]}" --run-dir "$run" "${extra[@]}" > "$work/last.log" 2>&1 &
    pid=$!
    if ((kills < rounds)); then
        # Somewhere in loading, training, writing a checkpoint or rotating: 0.2 to 2.5 s.
        sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.2 + 2.3 * r / 32767 }')"
        if kill -KILL "$pid" 2> /dev/null; then
            wait "$pid" 2> /dev/null || true
            # Where the killed process had got to: the step it resumed from, its last logged step.
            from=$(sed -n 's/.*restored .* at step \([0-9]*\).*/\1/p' "$work/last.log" | tail -1)
            upto=$(sed -n 's/.*: step \([0-9]*\), loss.*/\1/p' "$work/last.log" | tail -1)
            echo "  kill $((kills + 1)): restored step ${from:-(none yet)}, last logged step ${upto:-(none yet)}"
            kills=$((kills + 1))
            # Killed before the run wrote its configuration: it never started; start it again.
            [[ -e "$run/config.json" ]] && first=0
            if command -v flock > /dev/null && [[ -e "$run/towers.lock" ]] && ! flock -n "$run/towers.lock" true; then
                echo "soak-resume: FAILED: the lock of $run is still held after kill -9" >&2
                failures=$((failures + 1))
            fi
            continue
        fi
    fi
    if ! wait "$pid"; then
        echo "soak-resume: FAILED: a resume exited non-zero:" >&2
        cat "$work/last.log" >&2
        exit 1
    fi
    break
done
# Every resume along the way continued from a checkpoint that loaded (the logs of the resumes that
# were killed are gone, but the last one's is here; the killed ones are covered by the lock check
# and by the comparison below, which fails if any resume started over).
if grep -q "skipping a checkpoint\|starting over" "$work/last.log"; then
    echo "soak-resume: FAILED: the last resume skipped a checkpoint or started over:" >&2
    cat "$work/last.log" >&2
    failures=$((failures + 1))
fi

python3 - "$work/reference/checkpoints" "$run/checkpoints" "$steps" << 'EOF' || failures=$((failures + 1))
# Compares every tensor of two safetensors files byte for byte (the metadata differs: run ids).
import json, struct, sys
def tensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop('__metadata__', None)
    return {k: data[v['data_offsets'][0]:v['data_offsets'][1]] for k, v in header.items()}
name = 'ckpt-%08d.safetensors' % int(sys.argv[3])
a, b = tensors(sys.argv[1] + '/' + name), tensors(sys.argv[2] + '/' + name)
if a.keys() != b.keys():
    sys.exit('soak-resume: FAILED: the final checkpoints hold different tensors')
differ = [k for k in a if a[k] != b[k]]
if differ:
    sys.exit('soak-resume: FAILED: %d of %d tensors differ, e.g. %s' % (len(differ), len(a), differ[0]))
print('soak-resume: the final checkpoints are bitwise equal (%d tensors)' % len(a))
EOF
echo "soak-resume: $kills kills with SIGKILL, each followed by a resume; $failures failures"
((failures == 0))
