#!/usr/bin/python3
"""Towers vs PyTorch: the same training-step benchmark, side by side.

    /usr/bin/python3 bench/compare.py --models cifar10-tutorial,mnist-convnet \\
        --batch-size 128 --threads 2 --steps 20

    /usr/bin/python3 bench/compare.py --models mnist-convnet,fashion-fast --precision bf16

    python3 bench/compare.py --device cuda --models cifar10-tutorial,cifar10-resnet \\
        --torch-variants default,channels-last,channels-last+bf16

    /usr/bin/python3 bench/compare.py --models fashion-fast,cifar10-resnet --inference \\
        --batch-size 250

For each model runs `towers-cli bench ... --json`, then bench/torch_bench.py with the same
settings (one after the other, never concurrently), and prints a table; --json prints the rows.
On a GPU (--device cuda) both run on GPU 0, float32 without TF32 unless --tf32, each with the
convolution algorithms its cuDNN measures fastest (Towers' --cudnn-benchmark on, PyTorch's
torch.backends.cudnn.benchmark).

--precision fp32 (the default) runs both sides in float32. --precision bf16 runs both in mixed
precision: Towers with `--precision bf16` (convolutions and matrix products in bfloat16 with
float32 accumulation; the CPU needs AVX512_BF16 or AMX), PyTorch with forward and loss under
torch.autocast(dtype=torch.bfloat16) on the same device; float32 master weights on both sides.
PyTorch runs once per --torch-variants entry: default, channels-last (NHWC, as Towers stores
activations), bf16 (autocast on the PyTorch side alone), compile (the model through torch.compile,
PyTorch 2.0 or later, compiled during the warm-up and never timed), or combinations joined by +
such as channels-last+bf16 or channels-last+compile; --precision bf16 adds bf16 to every entry.
Towers runs again for each entry, and each row's ratio is Towers against that row's PyTorch. The
table's precision column and each JSON row's towers_precision and pytorch_precision say what each
side ran. bf16 needs
AVX512_BF16 or AMX: under --isa avx2 it fails on both sides, under --isa avx512 on the Towers
side (PyTorch emulates it there); the table then shows "-", the error line below it says why,
and the exit status is 1.

--inference compares the forward pass alone in evaluation mode (what eval and classify run):
`towers-cli bench --inference` against torch_bench.py --inference (eval() under
torch.inference_mode()); the fwd/bwd/upd columns then show the pass and two zeros.
"""

import argparse
import json
import os
import subprocess
import sys

from isa_env import ISAS, bf16_note, isa_environment

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
KEYS = ("images_per_sec", "step_ms", "forward_ms", "backward_ms", "update_ms")
PRECISIONS = ("fp32", "bf16")
VARIANT_PARTS = ("default", "channels-last", "bf16", "compile")


def run_json(cmd, timeout, env=None, name=None):
    """Runs `cmd` and returns (the JSON object on its stdout, None) or (None, error text that
    calls it `name`, by default the program's file name)."""
    name = name or os.path.basename(cmd[0])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        return None, f"{cmd[0]}: not found"
    except PermissionError:
        return None, f"{cmd[0]}: not executable"
    except subprocess.TimeoutExpired:
        return None, f"{cmd[0]}: timed out after {timeout} s"
    if p.returncode != 0:
        lines = [x.strip() for x in (p.stderr or p.stdout).strip().splitlines() if x.strip()]
        # A Python traceback says what went wrong on its last line; anything else in its last few.
        tail = lines[-1:] if any(x.startswith("Traceback") for x in lines) else lines[-3:]
        if tail and tail[0].startswith(name + ":"):  # "towers-cli: ..." after "towers-cli exited"
            tail[0] = tail[0][len(name) + 1:].strip()
        return None, (f"{name} exited with {p.returncode}"
                      + (f": {' | '.join(tail)}" if tail else ""))
    obj = last_json_object(p.stdout)
    if obj is None:
        return None, f"{name}: no JSON object on stdout"
    missing = [k for k in KEYS if k not in obj]
    if missing:
        return None, f"{name}: JSON lacks {', '.join(missing)}"
    return obj, None


def last_json_object(text):
    """The JSON object (one line or pretty-printed) that ends `text`, after any log lines."""
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(text) if ch == "{" and (i == 0 or text[i - 1] == "\n")]
    for i in reversed(starts):
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            continue
        if isinstance(obj, dict) and not text[end:].strip():
            return obj
    return None


def torch_options(variant, precision):
    """(torch_bench.py options, PyTorch's precision) for a --torch-variants entry, or raises
    ValueError for an unknown part. bf16 in the entry or --precision bf16: autocast."""
    parts = [p for p in variant.split("+") if p]
    for part in parts:
        if part not in VARIANT_PARTS:
            raise ValueError(f"unknown PyTorch variant '{part}' (known: {', '.join(VARIANT_PARTS)}, "
                             f"joined by +)")
    torch_precision = "bf16" if precision == "bf16" or "bf16" in parts else "fp32"
    options = (["--channels-last"] if "channels-last" in parts else []) + (
        ["--compile"] if "compile" in parts else []) + [
        "--precision", torch_precision]
    return options, torch_precision


def compare(args, model, variant=""):
    row = {"model": model + (f" [torch {variant}]" if variant and variant != "default" else "")
                    + (f" [{args.isa}]" if args.isa != "native" else ""),
           "batch_size": args.batch_size, "threads": args.threads, "steps": args.steps,
           "mode": "inference" if args.inference else "training",
           "towers_precision": args.precision, "pytorch_precision": None,
           "towers": None, "pytorch": None}
    try:
        torch_extra, row["pytorch_precision"] = torch_options(variant, args.precision)
    except ValueError as e:
        row["error"] = str(e)
        return row
    common = ["--model", model, "--batch-size", str(args.batch_size), "--threads",
              str(args.threads), "--steps", str(args.steps), "--warmup", str(args.warmup)] + (
        ["--inference"] if args.inference else [])
    gpu = args.device == "cuda"
    # fp32 is towers-cli's default: left unsaid, so that builds without --precision still run.
    towers_extra = ((["--backend", "cuda", "--cudnn-benchmark", "on"] if gpu else []) +
                    (["--tf32"] if args.tf32 else []) +
                    (["--precision", args.precision] if args.precision != "fp32" else []))
    env = isa_environment(args.isa)
    towers, terr = run_json([args.towers_cli, "bench"] + common + towers_extra + ["--json"],
                            args.timeout, env)
    if towers and towers.get("precision", args.precision) != args.precision:
        terr = f"towers-cli ran {towers['precision']}, not the {args.precision} asked for"
        towers = None
    elif towers and args.inference and towers.get("mode") != "inference":
        terr = "towers-cli timed a training step, not the inference asked for"
        towers = None
    torch_cmd = [args.python, os.path.join(HERE, "torch_bench.py")] + common + [
        "--json", "--device", args.device] + (
        ["--tf32"] if args.tf32 else []) + torch_extra
    torch, perr = run_json(torch_cmd, args.timeout, env, "torch_bench.py")
    row["towers"], row["pytorch"] = towers, torch
    if terr or perr:
        row["error"] = "; ".join(e for e in (terr, perr) if e)
        bf16_failed = (terr and args.precision == "bf16") or (
            perr and row["pytorch_precision"] == "bf16")
        note = bf16_note(args.isa) if bf16_failed and not gpu else ""
        if note:
            row["error"] += f" [{note}]"
    if towers and torch:
        row["ratio"] = towers["images_per_sec"] / torch["images_per_sec"]
        if towers.get("graph_images_per_sec", 0) > 0:  # a GPU: the step replayed from a capture
            row["graph_ratio"] = towers["graph_images_per_sec"] / torch["images_per_sec"]
    if gpu and towers and not args.inference and towers.get("graphs_unavailable"):
        row["graphs_note"] = towers["graphs_unavailable"]  # why its graphs column is empty
    return row


def progress(row):
    """One line on stderr as each row finishes, so that a run killed before the table (a time
    limit) keeps the rows it had."""
    t, p = row["towers"], row["pytorch"]
    line = (f"compare: {row['model']} ({row['towers_precision']}/{row['pytorch_precision'] or '-'})"
            f": Towers {t['images_per_sec']:.1f} img/s" if t else
            f"compare: {row['model']}: Towers -")
    line += f", PyTorch {p['images_per_sec']:.1f} img/s" if p else ", PyTorch -"
    if "ratio" in row:
        line += f", ratio {row['ratio']:.2f}x"
    if "graph_ratio" in row:
        line += f", graphs {t['graph_images_per_sec']:.1f} img/s ({row['graph_ratio']:.2f}x)"
    if "error" in row:
        line += f" [{row['error']}]"
    print(line, file=sys.stderr, flush=True)


def split(r):
    return (f"{r['forward_ms']:.1f}/{r['backward_ms']:.1f}/{r['update_ms']:.1f}" if r else "-")


def print_table(rows, args=None):
    head = ["model", "batch", "threads", "precision", "Towers img/s", "PyTorch img/s", "ratio",
            "Towers fwd/bwd/upd ms", "PyTorch fwd/bwd/upd ms"]
    graphs = any("graph_ratio" in r for r in rows)  # GPU rows with CUDA graphs
    if graphs:
        head[7:7] = ["Towers graphs img/s", "graphs ratio"]
    body = []
    for r in rows:
        t, p = r["towers"], r["pytorch"]
        line = [r["model"], str(r["batch_size"]), str(r["threads"]),
                f"{r['towers_precision']}/{r['pytorch_precision'] or '-'}",
                f"{t['images_per_sec']:.1f}" if t else "-",
                f"{p['images_per_sec']:.1f}" if p else "-",
                f"{r['ratio']:.2f}x" if "ratio" in r else "-", split(t), split(p)]
        if graphs:
            line[7:7] = [f"{t['graph_images_per_sec']:.1f}" if "graph_ratio" in r else "-",
                         f"{r['graph_ratio']:.2f}x" if "graph_ratio" in r else "-"]
        body.append(line)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    print(fmt.format(*head))
    print("  ".join("-" * w for w in widths))
    for line in body:
        print(fmt.format(*line))
    for r in rows:
        if "error" in r:
            print(f"{r['model']}: {r['error']}", file=sys.stderr)
        if "graphs_note" in r:
            print(f"{r['model']}: no CUDA graphs: {r['graphs_note']}")
    backends = {x["backend"] for r in rows for x in (r["towers"], r["pytorch"]) if x and
                "backend" in x}
    if backends:
        print("backends: " + ", ".join(sorted(backends)))
    if args is not None and args.device == "cuda":
        print("TF32: " + ("on, both sides (--tf32)" if args.tf32 else
                          "off, both sides (PyTorch's own default lets cuDNN use it; --tf32 turns "
                          "it on for both)") + "; threads: the host's, which a GPU row does not use")
    print("precision = Towers/PyTorch: fp32, or bf16 mixed precision (PyTorch: autocast)")
    print("ratio = Towers / PyTorch images/s (above 1: Towers is faster)")
    if any(x and x.get("mode") == "inference" for r in rows for x in (r["towers"], r["pytorch"])):
        print("inference: the forward pass in evaluation mode (PyTorch: eval() under "
              "inference_mode)")
    if graphs:
        print("graphs = Towers' step replayed from one capture (CUDA graphs), as a GPU "
              "tower trains")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="cifar10-tutorial",
                    help="comma-separated model names (default cifar10-tutorial)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps, both sides")
    ap.add_argument("--towers-cli", default=os.path.join(REPO, "build", "cpu", "app", "towers-cli"))
    ap.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                    else sys.executable, help="interpreter with torch for torch_bench.py")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--tf32", action="store_true", help="cuda: TF32 on both sides")
    ap.add_argument("--precision", choices=PRECISIONS, default="fp32",
                    help="fp32, or bf16: mixed precision on both sides (Towers --precision bf16, "
                         "PyTorch bf16 autocast)")
    ap.add_argument("--torch-variants", default="default",
                    help="comma-separated PyTorch runs per model: default, channels-last, bf16 "
                         "(autocast on the PyTorch side only), compile (torch.compile), or "
                         "combinations joined by + (channels-last+bf16); --precision bf16 adds "
                         "bf16 to each")
    ap.add_argument("--isa", choices=sorted(ISAS), default="native",
                    help="cpu: hold both sides to this instruction set (avx2: what an AVX2 machine "
                         "runs, emulated on a newer one; see bench/isa_env.py)")
    ap.add_argument("--inference", action="store_true",
                    help="compare the forward pass in evaluation mode instead of the training step")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    if not os.path.isfile(args.towers_cli):
        print(f"compare: towers-cli not found at {args.towers_cli} (build it, or pass "
              f"--towers-cli)", file=sys.stderr)
        return 2
    models = [m for m in args.models.split(",") if m]
    variants = [v for v in args.torch_variants.split(",") if v] or ["default"]
    rows = []
    for m in models:
        for v in variants:
            rows.append(compare(args, m, v))
            progress(rows[-1])
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows, args)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
