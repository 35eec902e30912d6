#!/usr/bin/python3
"""Trains the same recipe with Towers and with PyTorch, one after the other on this machine, and
prints test accuracy against wall time side by side.

    /usr/bin/python3 bench/compare_train.py --towers-cli build/cpu/app/towers-cli --towers 2

Towers: `towers-cli train --dataset fashion-mnist --towers N --json` (the fashion-fast recipe:
Nesterov, one-cycle to 0.1, weight decay 5e-4, translation by 1 and flips, batch 64 per tower).
PyTorch: bench/torch_train.py with the same recipe at the same global batch (N x 64), the same
number of threads in all. Each side evaluates on the whole test set about once per epoch; wall
time counts training and evaluation (not loading). Options after `--` go to towers-cli train.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from isa_env import ISAS, isa_environment

HERE = os.path.dirname(os.path.abspath(__file__))


def run_towers(cli, model, towers, epochs, data_dir, threads, extra, isa="native"):
    run_dir = tempfile.mkdtemp(prefix="towers-compare-")
    steps_per_epoch = 60000 // (towers * 64)
    cmd = [cli, "train", "--dataset", "fashion-mnist", "--model", model, "--towers", str(towers), "--epochs", str(epochs),
           "--eval-every", str(steps_per_epoch), "--log-every", "100", "--run-dir", run_dir, "--json"] + extra
    if data_dir:
        cmd += ["--data-dir", data_dir]
    env = isa_environment(isa, dict(os.environ, OMP_NUM_THREADS=str(threads)))
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    start = None
    rows = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env) as p:
        for line in p.stdout:
            e = json.loads(line)
            if e["event"] == "log" and e["message"].startswith("training ") and start is None:
                start = time.perf_counter()  # the dataset is loaded: training starts
            if e["event"] == "step":
                speed = e["examples_per_sec"]
            if e["event"] == "eval":
                rows.append({"epoch": e["step"] / steps_per_epoch, "wall_s": time.perf_counter() - (start or t0),
                             "test_accuracy": e["precision_at_1"], "images_per_sec": speed})
                print(f"  towers  epoch {rows[-1]['epoch']:5.2f}  {rows[-1]['wall_s']:6.1f} s  "
                      f"{100 * e['precision_at_1']:.2f}%", flush=True)
    if p.returncode != 0:
        sys.exit(f"towers-cli train failed with exit code {p.returncode}")
    return rows


def run_torch(model, towers, epochs, data_dir, threads, isa="native"):
    # Towers' recipes translate by 1 pixel, by 2 for fashion-wide (engine/train/recipe.cpp).
    cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_train.py"), "--model", model,
           "--translate", "2" if model == "fashion-wide" else "1", "--epochs", str(epochs),
           "--batch-size", str(towers * 64), "--threads", str(threads), "--json"]
    if data_dir:
        cmd += ["--dataset-dir", os.path.join(data_dir, "fashion-mnist")]
    print("$ " + " ".join(cmd), flush=True)
    rows = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=isa_environment(isa)) as p:
        for line in p.stdout:
            e = json.loads(line)
            rows.append(e)
            print(f"  pytorch epoch {e['epoch']:5.2f}  {e['wall_s']:6.1f} s  {100 * e['test_accuracy']:.2f}%",
                  flush=True)
    if p.returncode != 0:
        sys.exit(f"torch_train.py failed with exit code {p.returncode}")
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
    ap.add_argument("extra", nargs="*", help="after --: more towers-cli train options")
    a = ap.parse_args()
    epochs = a.epochs or (20 if a.model == "fashion-wide" else 8)
    ours = run_towers(a.towers_cli, a.model, a.towers, epochs, a.data_dir, a.threads, a.extra, a.isa)
    theirs = [] if a.skip_torch else run_torch(a.model, a.towers, epochs, a.data_dir, a.threads, a.isa)

    print(f"\nFashion-MNIST, {a.model} recipe, global batch {a.towers * 64}, {a.threads} thread(s) per side")
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
