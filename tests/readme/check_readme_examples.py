#!/usr/bin/env python3
"""Runs a Python example of README.md as it stands there, on a real short training run, and checks
what it prints.

  check_readme_examples.py --example pytorch|onnx|tensorboard --readme README.md \
      --cli build/ci/app/towers-cli [--venv DIR]

An example is the ```python block that follows the line `<!-- readme-example: NAME -->` in
README.md; it must have at most five lines (README promises five-line examples). It runs in the
folder of a real run, `towers-cli train --model fashion-fast` for 150 steps on Fashion-MNIST (the
first 10,000 training and 500 test images of the installed copy) with moving averages on
(--ema-decay 0.9, so an example that ignored them would print other numbers), as a user runs it
after `cd ~/.local/share/towers/runs/<run>`:

* tensorboard: in TensorBoard's virtual environment (tests/tensorboard/setup_venv.sh), on a run
  of 30 steps resumed to 50 (two event files). It must print one `step value` line per step of
  metrics.jsonl, with metrics.jsonl's loss (to float32 precision).
* pytorch: with Debian's python3-torch (/usr/bin/python3), PYTHONPATH=python/ (the package
  installs towers_torch.py in /usr/share/towers/python). It must print `class probability` lines
  for the first test images of Fashion-MNIST, equal to `towers-cli classify --json`'s top class and
  probability for those images written as PNG files (to the printed digits, plus 1e-4).
* onnx: in onnxruntime's virtual environment (tests/onnx/setup_venv.sh), after `towers-cli export
  --checkpoint <the run's checkpoint> --output X` for every relative "X.onnx" the example names;
  the same check as pytorch.

An absolute path the example reads (Debian's Fashion-MNIST in /usr/share/datasets) must exist.

Exit status: 0 passed, 1 failed, 77 skipped: the example's environment cannot be made (no network
to PyPI, no python3-torch), or Fashion-MNIST is not installed, except under CI (CI=true), where
that is a failure.
"""
import argparse
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/: check_common.py
from check_common import SKIP, check, failures, in_ci, read_maybe_gz, skip_or_fail, subset_of_idx  # noqa: E402
SOURCE = os.path.dirname(os.path.dirname(HERE))
MAX_LINES = 5








def extract(readme, name):
    """The example's code: the ```python block right after <!-- readme-example: NAME -->."""
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    marker = f"<!-- readme-example: {name} -->"
    at = [i for i, line in enumerate(lines) if line.strip() == marker]
    if len(at) != 1:
        raise ValueError(f"{readme}: {len(at)} lines '{marker}' (want exactly one)")
    i = at[0] + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or lines[i].strip() != "```python":
        raise ValueError(f"{readme}:{i + 1}: a ```python block must follow '{marker}'")
    end = i + 1
    while end < len(lines) and lines[end].strip() != "```":
        end += 1
    if end >= len(lines):
        raise ValueError(f"{readme}:{i + 1}: the block after '{marker}' is not closed")
    return "\n".join(lines[i + 1:end]) + "\n", i + 2


def cli(args, what):
    r = subprocess.run([ARGS.cli] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"towers-cli {args[0]} ({what}) exited {r.returncode}:\n{r.stderr[-3000:]}")
    return r.stdout






def test_images(folder, count):
    """The first `count` Fashion-MNIST test images, each 28 x 28 bytes."""
    for name in ("t10k-images-idx3-ubyte", "t10k-images-idx3-ubyte.gz"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            with (gzip.open(path) if name.endswith(".gz") else open(path, "rb")) as f:
                data = f.read(16 + count * 784)
            magic, n, h, w = struct.unpack(">IIII", data[:16])
            assert magic == 0x803 and (h, w) == (28, 28) and n >= count, f"{path}: bad header"
            return [data[16 + i * 784:16 + (i + 1) * 784] for i in range(count)]
    raise FileNotFoundError(f"{folder}: no t10k-images-idx3-ubyte(.gz)")


def write_png(path, pixels, h=28, w=28):
    """An 8-bit grayscale PNG, byte for byte."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + pixels[y * w:(y + 1) * w] for y in range(h))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def environment(name):
    """(python, extra environment) for the example, or (None, reason)."""
    if name == "pytorch":
        python = "/usr/bin/python3"
        r = subprocess.run([python, "-c", "import torch, numpy"], capture_output=True, text=True)
        if r.returncode != 0:
            return None, ("Debian's python3-torch and python3-numpy are not importable by "
                          "/usr/bin/python3 (packaging/install-deps.sh --test)")
        return python, {"PYTHONPATH": os.path.join(SOURCE, "python")}
    setup = {"tensorboard": os.path.join(SOURCE, "tests", "tensorboard", "setup_venv.sh"),
             "onnx": os.path.join(SOURCE, "tests", "onnx", "setup_venv.sh")}[name]
    if not ARGS.venv:
        return None, "no --venv given"
    if subprocess.run(["/bin/bash", setup, ARGS.venv]).returncode != 0:
        return None, f"the virtual environment could not be made ({os.path.relpath(setup, SOURCE)}, see above)"
    return os.path.join(ARGS.venv, "bin", "python"), {}


def run_example(python, env, code, cwd):
    path = os.path.join(os.path.dirname(cwd), "example.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(code)
    r = subprocess.run([python, path], cwd=cwd, capture_output=True, text=True, timeout=600,
                       env={**os.environ, **env})
    print("--- the example printed:\n" + r.stdout + ("--- stderr:\n" + r.stderr[-3000:] if r.stderr else ""),
          flush=True)
    check(r.returncode == 0, f"the example runs (exit status {r.returncode})")
    return r.stdout


def check_tensorboard(out, run):
    logged = {}
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
        for line in f:
            m = json.loads(line)
            logged[m["step"]] = m["loss"]
    printed = {}
    for line in out.splitlines():
        m = re.fullmatch(r"\s*(\d+)\s+([-+0-9.eE]+|nan|inf)\s*", line)
        if m:
            printed[int(m.group(1))] = float(m.group(2))
    check(sorted(printed) == sorted(logged),
          f"it prints every logged step of both event files: {sorted(printed)} "
          f"(metrics.jsonl: {sorted(logged)})")
    bad = [s for s in printed if s in logged and abs(printed[s] - logged[s]) > 1e-6 * max(1, abs(logged[s]))]
    check(not bad and printed, f"the printed losses are metrics.jsonl's (to float32 precision); "
                               f"differing at steps {bad}")


def check_predictions(out, checkpoint, fashion, work):
    rows = []
    for line in out.splitlines():
        if not line.strip():
            continue
        m = re.fullmatch(r"(.+?)\s+(\d*\.(\d+))", line.strip())
        if not check(m is not None, f"'{line}' is 'class probability'"):
            continue
        rows.append((m.group(1), float(m.group(2)), len(m.group(3))))
    if not check(3 <= len(rows) <= 100, f"it classifies {len(rows)} test images (3 to 100)"):
        return
    files = []
    for i, pixels in enumerate(test_images(fashion, len(rows))):
        files.append(os.path.join(work, f"t10k-{i:03d}.png"))
        write_png(files[-1], pixels)
    want = {}
    for ema in (True, False):
        want[ema] = json.loads(cli(["classify", "--checkpoint", checkpoint, "--json", "--top-k", "1"]
                                   + ([] if ema else ["--no-ema"]) + files, "the same images"))["results"]
    for i, (name, p, digits) in enumerate(rows):
        top = want[True][i]["top"][0]
        check(name == top["class"] and abs(p - top["probability"]) <= 0.5 * 10 ** -digits + 1e-4,
              f"test image {i}: '{name} {p}', classify says '{top['class']} {top['probability']:.6f}'")
    # The run's moving averages make a difference an example that ignored them would show.
    check(any(abs(a["top"][0]["probability"] - b["top"][0]["probability"]) > 1e-3
              or a["top"][0]["label"] != b["top"][0]["label"] for a, b in zip(want[True], want[False])),
          "the moving averages change classify's answer on these images (so the check means something)")


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--example", required=True, choices=["pytorch", "onnx", "tensorboard"])
    parser.add_argument("--readme", default=os.path.join(SOURCE, "README.md"))
    parser.add_argument("--cli", required=True, help="towers-cli")
    parser.add_argument("--venv", help="the virtual environment (tensorboard, onnx)")
    ARGS = parser.parse_args()
    ARGS.cli = os.path.abspath(ARGS.cli)
    ARGS.venv = os.path.abspath(ARGS.venv) if ARGS.venv else None

    try:
        code, line = extract(ARGS.readme, ARGS.example)
    except ValueError as e:
        check(False, str(e))
        return 1
    print(f"README.md line {line}, the '{ARGS.example}' example:\n{code}", flush=True)
    lines = [c for c in code.splitlines() if c.strip()]
    check(len(lines) <= MAX_LINES, f"the example has {len(lines)} lines (at most {MAX_LINES})")

    python, env = environment(ARGS.example)
    if python is None:
        return skip_or_fail("check_readme_examples", env)
    datasets = {d["name"]: d for d in json.loads(cli(["datasets", "--json"], "where"))["datasets"]}
    if "fashion-mnist" not in datasets:
        return skip_or_fail("check_readme_examples", "Fashion-MNIST is not installed (Debian's dataset-fashion-mnist: "
                            "packaging/install-deps.sh)")
    for path in re.findall(r"""["'](/[^"']+)["']""", code):
        if not os.path.exists(path):
            return skip_or_fail("check_readme_examples", f"the example reads {path}, which is not here (Debian's "
                                f"dataset-fashion-mnist puts Fashion-MNIST in /usr/share/datasets)")

    work = tempfile.mkdtemp(prefix=f"towers-readme-{ARGS.example}-")
    run = os.path.join(work, "run")
    try:
        data = os.path.join(work, "fashion-mnist")
        subset_of_idx(datasets["fashion-mnist"]["location"], data, 10000, 500)
        train = ["train", "--dataset", "fashion-mnist", "--data-dir", data, "--model", "fashion-fast", "--run-dir", run,
                 "--ema-decay", "0.9", "--log-every", "10", "--eval-every", "20",
                 "--histogram-every", "20"]
        if ARGS.example == "tensorboard":  # stopped at 30, resumed to 50: two event files
            cli(train + ["--steps", "30"], "30 steps")
            cli(["train", "--resume", "--run-dir", run, "--steps", "50"], "resumed to step 50")
            events = [f for f in os.listdir(run) if f.startswith("events.out.tfevents.")]
            check(len(events) == 2, f"the resumed run has two event files: {events}")
        else:
            cli(train + ["--steps", "150"], "150 steps")
        folder = os.path.join(run, "checkpoints")
        checkpoint = os.path.join(folder, sorted(os.listdir(folder))[-1])
        if ARGS.example == "onnx":
            names = re.findall(r"""["']([^"'/][^"']*\.onnx)["']""", code)
            check(bool(names), "the example opens an .onnx file by a relative path")
            for name in names:
                cli(["export", "--checkpoint", checkpoint, "--output", os.path.join(run, name)],
                    f"to {name}")
        out = run_example(python, env, code, run)
        if ARGS.example == "tensorboard":
            check_tensorboard(out, run)
        else:
            check_predictions(out, checkpoint, datasets["fashion-mnist"]["location"], work)
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
        check(False, str(e))
    if failures:
        print(f"\n{len(failures)} check(s) FAILED (work folder kept: {work})")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print(f"\nthe '{ARGS.example}' example of README.md works as it says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
