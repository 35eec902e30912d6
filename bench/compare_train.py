#!/usr/bin/python3
"""Trains the same recipe with Towers and with PyTorch, one after the other on this machine, and
prints test accuracy against wall time side by side.

    /usr/bin/python3 bench/compare_train.py --towers-cli build/cpu/app/towers-cli --towers 2 \\
        [--precision bf16] [--isa avx2]

Towers: `towers-cli train --dataset fashion-mnist --towers N --json` (the fashion-fast recipe:
Nesterov, one-cycle to 0.1, weight decay 5e-4, translation by 1 and flips, batch 64 per tower).
PyTorch: bench/torch_train.py with the same recipe at the same global batch (N x 64), the same
number of threads in all. Each side evaluates on the whole test set about once per epoch; wall
time counts training and evaluation (not loading). Options after `--` go to towers-cli train.

--precision fp32 (the default) trains both in float32; --precision bf16 trains both in mixed
precision: Towers with `--precision bf16` (bfloat16 convolutions and matrix products with float32
accumulation; the CPU needs AVX512_BF16 or AMX), PyTorch with forward and loss under bf16
autocast; float32 master weights, optimizer state and loss on both sides, no loss scaling.
If a side fails (a bf16 run under --isa avx2, say), the script says which and exits with 1.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from isa_env import ISAS, bf16_note, isa_environment

HERE = os.path.dirname(os.path.abspath(__file__))
PRECISIONS = ("fp32", "bf16")


class Failed(Exception):
    """A side's run failed; the message says which and why."""


def json_lines(cmd, env, name):
    """Runs `cmd` and yields the JSON objects it prints one a line on stdout (other lines are
    passed through; its stderr goes straight to ours). Raises Failed if it cannot start or
    exits with an error; the message names `name` and quotes a "failed" event's message."""
    failed = None
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    except OSError as e:
        raise Failed(f"{name}: cannot run {cmd[0]}: {e.strerror or e}")
    with p:
        for line in p.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                e = None
            if not isinstance(e, dict):
                print(line, end="", flush=True)
                continue
            if e.get("event") == "failed":
                failed = e.get("message")
            yield e
    if p.returncode != 0:
        raise Failed(f"{name} failed with exit code {p.returncode}"
                     + (f": {failed}" if failed else " (its message is above)"))


def run_towers(cli, model, towers, epochs, data_dir, threads, extra, isa="native", precision="fp32"):
    run_dir = tempfile.mkdtemp(prefix="towers-compare-")
    steps_per_epoch = 60000 // (towers * 64)
    cmd = [cli, "train", "--dataset", "fashion-mnist", "--model", model, "--towers", str(towers), "--epochs", str(epochs),
           "--eval-every", str(steps_per_epoch), "--log-every", "100", "--run-dir", run_dir, "--json"]
    # fp32 is towers-cli's default: left unsaid, so that builds without --precision still run.
    cmd += (["--precision", precision] if precision != "fp32" else []) + extra
    if data_dir:
        cmd += ["--data-dir", data_dir]
    env = isa_environment(isa, dict(os.environ, OMP_NUM_THREADS=str(threads)))
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    start = None
    speed = float("nan")  # no step logged yet
    rows = []
    for e in json_lines(cmd, env, "towers-cli train"):
        if e.get("event") == "log" and e["message"].startswith("training ") and start is None:
            start = time.perf_counter()  # the dataset is loaded: training starts
        if e.get("event") == "step":
            speed = e["examples_per_sec"]
        if e.get("event") == "eval":
            rows.append({"epoch": e["step"] / steps_per_epoch, "wall_s": time.perf_counter() - (start or t0),
                         "test_accuracy": e["precision_at_1"], "images_per_sec": speed})
            print(f"  towers  epoch {rows[-1]['epoch']:5.2f}  {rows[-1]['wall_s']:6.1f} s  "
                  f"{100 * e['precision_at_1']:.2f}%", flush=True)
    try:  # the run's configuration says what it trained in (builds before --precision: nothing)
        with open(os.path.join(run_dir, "config.json")) as f:
            ran = json.load(f).get("precision", precision)
    except (OSError, ValueError, AttributeError):
        ran = precision
    if ran != precision:
        raise Failed(f"towers-cli train ran {ran}, not the {precision} asked for")
    return rows


def run_torch(model, towers, epochs, data_dir, threads, isa="native", precision="fp32"):
    # Towers' recipes translate by 1 pixel, by 2 for fashion-wide (engine/train/recipe.cpp).
    cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_train.py"), "--model", model,
           "--translate", "2" if model == "fashion-wide" else "1", "--epochs", str(epochs),
           "--batch-size", str(towers * 64), "--threads", str(threads), "--precision", precision, "--json"]
    if data_dir:
        cmd += ["--dataset-dir", os.path.join(data_dir, "fashion-mnist")]
    print("$ " + " ".join(cmd), flush=True)
    rows = []
    for e in json_lines(cmd, isa_environment(isa), "torch_train.py"):
        rows.append(e)
        print(f"  pytorch epoch {e['epoch']:5.2f}  {e['wall_s']:6.1f} s  {100 * e['test_accuracy']:.2f}%",
              flush=True)
    return rows


def first_reaching(rows, target):
    for r in rows:
        if r["test_accuracy"] >= target:
            return r
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--towers-cli", default=os.path.join(HERE, "..", "build", "cpu", "app", "towers-cli"))
    ap.add_argument("--model", default="fashion-fast", choices=["fashion-fast", "fashion-wide"])
    ap.add_argument("--towers", type=int, default=2)
    ap.add_argument("--epochs", type=float, default=0, help="default: the recipe's (8, 20 for fashion-wide)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for each side in all")
    ap.add_argument("--data-dir", default="", help="folder holding fashion-mnist/ (default: Towers' search path, "
                                                   "/usr/share/datasets for PyTorch)")
    ap.add_argument("--target", type=float, default=0.92)
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--isa", choices=sorted(ISAS), default="native",
                    help="hold both sides to this instruction set (see bench/isa_env.py)")
    ap.add_argument("--precision", choices=PRECISIONS, default="fp32",
                    help="fp32, or bf16: mixed precision on both sides (Towers --precision bf16, "
                         "PyTorch bf16 autocast)")
    ap.add_argument("extra", nargs="*", help="after --: more towers-cli train options")
    a = ap.parse_args()
    epochs = a.epochs or (20 if a.model == "fashion-wide" else 8)
    try:
        ours = run_towers(a.towers_cli, a.model, a.towers, epochs, a.data_dir, a.threads, a.extra, a.isa,
                          a.precision)
        theirs = [] if a.skip_torch else run_torch(a.model, a.towers, epochs, a.data_dir, a.threads, a.isa,
                                                   a.precision)
    except Failed as e:
        note = bf16_note(a.isa) if a.precision == "bf16" else ""
        print(f"compare_train: {e}" + (f" [{note}]" if note else ""), file=sys.stderr)
        return 1

    precision = {"fp32": "float32", "bf16": "bf16 mixed precision (PyTorch: autocast)"}[a.precision]
    print(f"\nFashion-MNIST, {a.model} recipe, global batch {a.towers * 64}, {a.threads} thread(s) per side, "
          f"{precision} on both sides")
    print(f"{'epoch':>6} | {'Towers s':>9} {'acc':>7} {'img/s':>7} | {'PyTorch s':>9} {'acc':>7} {'img/s':>7}")
    for i in range(max(len(ours), len(theirs))):
        o = ours[i] if i < len(ours) else None
        t = theirs[i] if i < len(theirs) else None
        epoch = (o or t)["epoch"]
        left = f"{o['wall_s']:9.1f} {100 * o['test_accuracy']:6.2f}% {o['images_per_sec']:7.0f}" if o else " " * 25
        right = f"{t['wall_s']:9.1f} {100 * t['test_accuracy']:6.2f}% {t['images_per_sec']:7.0f}" if t else ""
        print(f"{epoch:6.2f} | {left} | {right}")
    for name, rows in (("Towers", ours), ("PyTorch", theirs)):
        if not rows:
            continue
        hit = first_reaching(rows, a.target)
        best = max(rows, key=lambda r: r["test_accuracy"])
        reach = (f"reached {100 * a.target:.0f}% at {hit['wall_s']:.1f} s (epoch {hit['epoch']:.2f})" if hit
                 else f"did not reach {100 * a.target:.0f}%")
        print(f"{name}: {reach}; best {100 * best['test_accuracy']:.2f}% at {best['wall_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
