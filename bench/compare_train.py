#!/usr/bin/python3
"""Trains the same recipe with Towers and with PyTorch, one after the other on this machine, and
prints test accuracy against wall time side by side.

    /usr/bin/python3 bench/compare_train.py --towers-cli build/cpu/app/towers-cli --towers 2 \\
        [--precision bf16] [--isa avx2]
    python3 bench/compare_train.py --towers-cli build/ci/app/towers-cli --device cuda \\
        [--torch-channels-last] [--python /path/to/python-with-cuda-torch]

Towers: `towers-cli train --dataset fashion-mnist --towers N --json` (the fashion-fast recipe:
Nesterov, one-cycle to 0.1, weight decay 5e-4, translation by 1 and flips, batch 64 per tower).
PyTorch: bench/torch_train.py with the same recipe at the same global batch (N x 64), the same
number of threads in all. Each side evaluates on the whole test set about once per epoch; wall
time counts training and evaluation (not loading). Options after `--` go to towers-cli train.
--optimizer, --lr, --weight-decay, --label-smoothing and --clip-grad-norm change the recipe on both
sides (e.g. --optimizer adamw --lr 3e-3 --weight-decay 0.05: torch.optim.AdamW, the decay on the
weights alone on both sides; --clip-grad-norm 1: clip_grad_norm_ of the gradient with the L2 term
in it, as Towers clips).

--precision fp32 (the default) trains both in float32; --precision bf16 trains both in mixed
precision: Towers with `--precision bf16` (bfloat16 convolutions and matrix products with float32
accumulation; the CPU needs AVX512_BF16 or AMX), PyTorch with forward and loss under bf16
autocast; float32 master weights, optimizer state and loss on both sides, no loss scaling.
If a side fails (a bf16 run under --isa avx2, say), the script says which and exits with 1.

--device cuda races both on one GPU: Towers with `--device cuda` (1 tower unless --towers says
more), PyTorch with torch_train.py --device cuda (--torch-channels-last: NHWC, as Towers stores
activations; --tf32 lets both use TF32; both measure their convolution algorithms: Towers'
--cudnn-benchmark on, torch.backends.cudnn.benchmark), the same recipe at the same global batch;
--threads is then the host threads of each side. The table names the GPU of each side. --isa is for the CPU
and is refused with --device cuda. The PyTorch side runs under --python (default
/usr/bin/python3, as in bench/compare.py; Debian's PyTorch there sees no GPU: name a CUDA
build's); when it sees no GPU, the script says so before Towers starts.
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


def towers_gpu_name(cli, gpu):
    """The name `towers-cli devices --json` gives GPU number `gpu`, or "" if it cannot say."""
    try:
        out = subprocess.run([cli, "devices", "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, timeout=60).stdout
        for g in json.loads(out).get("gpus", []):
            if g.get("index") == gpu:
                return str(g.get("name", ""))
    except (OSError, ValueError, AttributeError, subprocess.TimeoutExpired):
        pass
    return ""


def recipe_options(a):
    """The recipe changes both sides take, as the same options of towers-cli train and
    torch_train.py."""
    out = []
    for name in ("optimizer", "lr", "weight_decay", "label_smoothing", "clip_grad_norm"):
        value = getattr(a, name)
        if value is not None:
            out += ["--" + name.replace("_", "-"), str(value)]
    return out


def run_towers(cli, model, towers, epochs, data_dir, threads, extra, isa="native", precision="fp32",
               device="cpu", tf32=False, info=None):
    """Towers' evaluations; with `info` (a dict), sets info["device"] to what it trained on."""
    run_dir = tempfile.mkdtemp(prefix="towers-compare-")
    steps_per_epoch = 60000 // (towers * 64)
    cmd = [cli, "train", "--dataset", "fashion-mnist", "--model", model, "--towers", str(towers), "--epochs", str(epochs),
           "--eval-every", str(steps_per_epoch), "--log-every", "100", "--run-dir", run_dir, "--json"]
    # fp32 is towers-cli's default: left unsaid, so that builds without --precision still run.
    cmd += (["--precision", precision] if precision != "fp32" else [])
    # cpu is too: left unsaid, so that the CPU command line is what it was.
    cmd += (["--device", device, "--cudnn-benchmark", "on"] if device != "cpu" else [])
    cmd += (["--tf32"] if tf32 else []) + extra
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
    config = {}
    try:  # the run's configuration says what it trained in (builds before --precision: nothing)
        with open(os.path.join(run_dir, "config.json")) as f:
            config = json.load(f)
        ran = config.get("precision", precision)
    except (OSError, ValueError, AttributeError):
        ran = precision
    if ran != precision:
        raise Failed(f"towers-cli train ran {ran}, not the {precision} asked for")
    if device == "cuda":
        backend = config.get("backend", "cuda") if isinstance(config, dict) else "cuda"
        if backend != "cuda":
            raise Failed(f"towers-cli train ran on {backend}, not the GPU asked for")
        gpus = config.get("gpus") if isinstance(config, dict) else None
        gpu = gpus[0] if isinstance(gpus, list) and gpus and isinstance(gpus[0], int) else 0
        name = towers_gpu_name(cli, gpu)
        if info is not None:
            info["device"] = f"cuda ({name}" + (", TF32" if tf32 else "") + ")" if name else "cuda"
    return rows


def torch_sees_gpu(python):
    """Whether PyTorch under `python` sees a GPU (False also when it cannot be asked)."""
    try:
        return subprocess.run([python, "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def run_torch(model, towers, epochs, data_dir, threads, isa="native", precision="fp32", device="cpu",
              channels_last=False, tf32=False, python="/usr/bin/python3", recipe=()):
    # Towers' recipes translate by 1 pixel, by 2 for fashion-wide (engine/train/recipe.cpp).
    cmd = [python, os.path.join(HERE, "torch_train.py"), "--model", model,
           "--translate", "2" if model == "fashion-wide" else "1", "--epochs", str(epochs),
           "--batch-size", str(towers * 64), "--threads", str(threads), "--precision", precision, "--json"]
    cmd += list(recipe)
    if device != "cpu":
        cmd += ["--device", device] + (["--channels-last"] if channels_last else []) + (["--tf32"] if tf32 else [])
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
    ap.add_argument("--towers", type=int, default=None, help="default: 2 on the CPU, 1 with --device cuda")
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
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cpu, or cuda: both sides on one GPU (Towers --device cuda, PyTorch on cuda)")
    ap.add_argument("--torch-channels-last", action="store_true",
                    help="cuda: PyTorch's model and inputs in channels_last (NHWC) memory format")
    ap.add_argument("--tf32", action="store_true", help="cuda: let both sides use TF32 for float32")
    ap.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable,
                    help="interpreter with torch for torch_train.py (with --device cuda: one whose PyTorch "
                         "sees the GPU)")
    ap.add_argument("--optimizer", choices=["sgd", "momentum", "nesterov", "adam", "adamw"], default=None,
                    help="both sides (default: the recipe's, nesterov)")
    ap.add_argument("--lr", type=float, default=None, help="both sides: the peak of the one-cycle schedule")
    ap.add_argument("--weight-decay", type=float, default=None, help="both sides (default: 5e-4)")
    ap.add_argument("--label-smoothing", type=float, default=None, help="both sides (default: none)")
    ap.add_argument("--clip-grad-norm", type=float, default=None, help="both sides (default: none)")
    ap.add_argument("extra", nargs="*", help="after --: more towers-cli train options")
    a = ap.parse_args()
    gpu = a.device == "cuda"
    if gpu and a.isa != "native":
        ap.error(f"--isa {a.isa} holds the CPU's instruction set; it does not apply to --device cuda")
    if not gpu and (a.torch_channels_last or a.tf32):
        ap.error("--torch-channels-last and --tf32 are for --device cuda")
    if a.towers is None:
        a.towers = 1 if gpu else 2
    if a.towers < 1:
        ap.error("--towers must be positive")
    epochs = a.epochs or (20 if a.model == "fashion-wide" else 8)
    if gpu and not a.skip_torch and not torch_sees_gpu(a.python):
        print(f"compare_train: --device cuda: PyTorch under {a.python} sees no GPU (give --python a CUDA "
              f"build's, or --skip-torch)", file=sys.stderr)
        return 1
    towers_info = {}
    try:
        both = recipe_options(a)
        ours = run_towers(a.towers_cli, a.model, a.towers, epochs, a.data_dir, a.threads, both + a.extra,
                          a.isa, a.precision, a.device, a.tf32, towers_info)
        theirs = [] if a.skip_torch else run_torch(a.model, a.towers, epochs, a.data_dir, a.threads, a.isa,
                                                   a.precision, a.device, a.torch_channels_last, a.tf32,
                                                   a.python, both)
    except Failed as e:
        note = bf16_note(a.isa) if a.precision == "bf16" and not gpu else ""
        print(f"compare_train: {e}" + (f" [{note}]" if note else ""), file=sys.stderr)
        return 1

    precision = {"fp32": "float32", "bf16": "bf16 mixed precision (PyTorch: autocast)"}[a.precision]
    changed = " with " + " ".join(both) if both else ""
    if gpu:
        torch_device = theirs[0].get("device", "cuda") if theirs else "not run"
        print(f"\nFashion-MNIST, {a.model} recipe{changed}, global batch {a.towers * 64}, one GPU: "
              f"Towers {towers_info.get('device', 'cuda')} on {a.towers} tower(s), PyTorch {torch_device}, "
              f"{a.threads} host thread(s) per side, {precision} on both sides")
    else:
        print(f"\nFashion-MNIST, {a.model} recipe{changed}, global batch {a.towers * 64}, {a.threads} thread(s) per side, "
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
