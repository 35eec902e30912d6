#!/usr/bin/python3
"""Times a PyTorch training step (forward, backward, SGD update) of a Towers model, or its forward
pass in evaluation mode (--inference).

    /usr/bin/python3 bench/torch_bench.py --model cifar10-tutorial --batch-size 128 --threads 2 \\
        [--precision bf16]
    python3 bench/torch_bench.py --model cifar10-tutorial --device cuda [--channels-last] \\
        [--precision bf16]

Synthetic data (random inputs and labels), train() mode (dropout and BatchNorm active), SGD with
lr 0.01 and no momentum; the loss includes the model's weight decay. The three phases are timed
separately after --warmup steps (on a GPU each up to torch.cuda.synchronize()). On the CPU the
step time is their sum; on a GPU it is that of --steps more steps issued back to back, as a
training loop issues them (one synchronize at the end; `towers-cli bench` does the same), and
phases_ms is the sum of the phases. images/s = batch size / mean step time.

--precision fp32 (the default) runs everything in float32. --precision bf16 is PyTorch's mixed
precision recipe, as `towers-cli bench --precision bf16` runs it: forward and loss under
torch.autocast(device_type=cpu|cuda, dtype=torch.bfloat16) (convolutions and matrix products in
bfloat16 with float32 accumulation), backward and the SGD update outside it, float32 master
weights, no loss scaling. On the CPU it wants AVX512_BF16 or AMX to be fast; --bf16 is short for
--precision bf16.

On a GPU, TF32 is off unless --tf32 (PyTorch lets cuDNN use it by default; Towers does not), and
--channels-last stores activations NHWC as Towers does.

--compile runs the model through torch.compile (PyTorch 2.0 or later; TorchInductor, the default
backend: fused kernels, on a GPU Triton's, and on the CPU C++ that it compiles with the machine's
compiler): forward and backward compiled, the SGD update as before. The compilation happens in the
first warm-up steps, so --warmup must be at least 1; it is never timed. A PyTorch too old for it,
or a compilation that fails, is an error of one line.

--inference times the forward pass alone as `towers-cli bench --inference` does: eval() mode
(BatchNorm with its running statistics, dropout off) under torch.inference_mode(), no loss,
backward or update, with bf16 autocast for --precision bf16; forward_ms is the pass, backward_ms
and update_ms are 0.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

PRECISIONS = ("fp32", "bf16")
MODEL_NAMES = ["cifar10-tutorial", "mnist-convnet", "fashion-fast", "fashion-wide", "cifar10-resnet"]


def _import_torch(threads):
    """Imports torch with every thread pool (OpenMP, OpenBLAS) sized before it is loaded."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    global torch, tt
    import torch
    import towers_torch as tt


def autocast(device, precision):
    """The context a training step's forward and loss run in: bf16 autocast (PyTorch's mixed
    precision) for --precision bf16, a no-op for fp32. bench/torch_train.py uses it too; call it
    after torch is imported (with the thread pools sized)."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision '{precision}' (known: {', '.join(PRECISIONS)})")
    return torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=precision == "bf16")


def bench(model_name, batch_size, threads, steps, warmup, seed=0, device="cpu", channels_last=False,
          precision="fp32", tf32=False, inference=False, compile=False):
    """Returns the result dict (same keys as `towers-cli bench --json`)."""
    _import_torch(threads)
    if compile and not hasattr(torch, "compile"):
        raise RuntimeError(f"--compile: torch.compile needs PyTorch 2.0 or later, this is "
                           f"{torch.__version__}")
    bf16 = precision == "bf16"
    gpu = device == "cuda"
    if gpu:
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: PyTorch sees no GPU")
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True  # measured algorithms, as Towers chooses them
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or inter-op work already started
        pass
    torch.manual_seed(seed)
    model = tt.build(model_name).train().to(device)
    c, h, w = tt.INPUT_SHAPES[model_name]
    x = torch.randn(batch_size, c, h, w, device=device)
    y = torch.randint(0, 10, (batch_size,), device=device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.0)
    # The loss reads the module's own weights (weight decay), so the compiled model is another
    # object that shares them: the same parameters, trained by the same optimizer.
    net = _compiled(model) if compile else model
    backend = _backend_name(gpu, channels_last, bf16, tf32, compile)
    if inference:
        return _bench_inference(net, x, steps, warmup, sync, gpu, precision, device) | {
            "model": model_name, "batch_size": batch_size, "threads": threads,
            "backend": backend}
    fwd, bwd, upd = [], [], []
    for step in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        with autocast(device, precision):
            logits = net(x)
            # Cross-entropy and weight decay in float32, as Towers computes its loss.
            loss = tt.total_loss(model_name, model, logits.float(), y)
        sync()
        t1 = time.perf_counter()
        loss.backward()
        sync()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        t3 = time.perf_counter()
        if step >= warmup:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            upd.append(t3 - t2)
        if not torch.isfinite(loss):
            raise RuntimeError(f"loss became {loss.item()} at step {step}")
    ms = lambda v: 1000.0 * statistics.fmean(v)  # noqa: E731
    phases_ms = ms([a + b + c for a, b, c in zip(fwd, bwd, upd)])
    step_ms = phases_ms
    if gpu:  # back to back, the loss checked once at the end
        sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            with autocast(device, precision):
                loss = tt.total_loss(model_name, model, net(x).float(), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        sync()
        step_ms = 1000.0 * (time.perf_counter() - t0) / steps
        if not torch.isfinite(loss):
            raise RuntimeError(f"loss became {loss.item()} in the steps issued back to back")
    return {
        "model": model_name,
        "batch_size": batch_size,
        "threads": threads,
        "steps": steps,
        "images_per_sec": batch_size / (step_ms / 1000.0),
        "step_ms": step_ms,
        "forward_ms": ms(fwd),
        "backward_ms": ms(bwd),
        "update_ms": ms(upd),
        "phases_ms": phases_ms,
        "back_to_back": gpu,
        "precision": precision,
        "mode": "training",
        "backend": backend,
    }


def _compiled(model):
    """torch.compile(model); the compilation itself runs at the first calls, where its errors
    come too (bench() turns them into one line)."""
    try:
        return torch.compile(model)
    except Exception as e:  # noqa: BLE001 - any failure of the compiler is the variant's
        raise RuntimeError(f"torch.compile failed: {type(e).__name__}: {e}") from e


def _backend_name(gpu, channels_last, bf16, tf32, compiled=False):
    # The GPU, its layout and TF32 are said on a GPU only (on the CPU TF32 does not apply).
    details = [part for part, on in ((torch.cuda.get_device_name(0) if gpu else "", gpu),
                                     ("channels-last", gpu and channels_last),
                                     ("bf16 autocast", bf16), ("TF32", gpu and tf32),
                                     ("torch.compile", compiled)) if on]
    return f"pytorch {torch.__version__}" + (f" ({', '.join(details)})" if details else "")


def _bench_inference(model, x, steps, warmup, sync, gpu, precision, device):
    """The forward pass in eval() mode under inference_mode, each pass timed up to its end; on a
    GPU, --steps more issued back to back give step_ms."""
    model.eval()
    passes = []
    with torch.inference_mode(), autocast(device, precision):
        for step in range(warmup + steps):
            sync()
            t0 = time.perf_counter()
            logits = model(x)
            sync()
            if step >= warmup:
                passes.append(time.perf_counter() - t0)
        step_ms = 1000.0 * statistics.fmean(passes)
        phases_ms = step_ms
        if gpu:
            sync()
            t0 = time.perf_counter()
            for _ in range(steps):
                logits = model(x)
            sync()
            step_ms = 1000.0 * (time.perf_counter() - t0) / steps
        if not torch.isfinite(logits.float()).all():
            raise RuntimeError("a logit is not finite after the timed passes")
    return {
        "steps": steps,
        "images_per_sec": x.shape[0] / (step_ms / 1000.0),
        "step_ms": step_ms,
        "forward_ms": phases_ms,
        "backward_ms": 0.0,
        "update_ms": 0.0,
        "phases_ms": phases_ms,
        "back_to_back": gpu,
        "precision": precision,
        "mode": "inference",
    }


def bf16_hint(args):
    """Why a bf16 run may have failed on the CPU: oneDNN held below its bf16 kernels."""
    held = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    if args.precision != "bf16" or args.device != "cpu" or not held:
        return ""
    return f" (bf16 autocast wants oneDNN's bf16 kernels; ONEDNN_MAX_CPU_ISA={held} may rule them out)"


def first_lines(e, n=3):
    """An error's first n non-empty lines as one: a failed torch.compile says only "backend=
    'inductor' raised:" on its first line, its cause on the next."""
    return " | ".join([line.strip() for line in str(e).splitlines() if line.strip()][:n])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, choices=MODEL_NAMES)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--channels-last", action="store_true", help="NHWC activations (cuda)")
    ap.add_argument("--precision", choices=PRECISIONS, default="fp32",
                    help="fp32, or bf16: forward and loss under bf16 autocast (mixed precision)")
    ap.add_argument("--bf16", dest="precision", action="store_const", const="bf16",
                    help="short for --precision bf16")
    ap.add_argument("--tf32", action="store_true", help="let cuDNN and cuBLAS use TF32 (cuda)")
    ap.add_argument("--inference", action="store_true",
                    help="time the forward pass alone in eval() mode under inference_mode")
    ap.add_argument("--compile", action="store_true",
                    help="the model through torch.compile (PyTorch 2.0 or later), compiled in the "
                         "warm-up")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if min(args.batch_size, args.threads, args.steps) < 1 or args.warmup < 0:
        ap.error("batch size, threads and steps must be positive, warmup non-negative")
    if args.compile and args.warmup < 1:
        ap.error("--compile needs --warmup of at least 1: the compilation must not be timed")
    try:
        r = bench(args.model, args.batch_size, args.threads, args.steps, args.warmup,
                  device=args.device, channels_last=args.channels_last, precision=args.precision,
                  tf32=args.tf32, inference=args.inference, compile=args.compile)
    except RuntimeError as e:  # no GPU, a kernel oneDNN cannot make, a diverged loss, a failed
        # compilation: one line
        print(f"torch_bench.py: error: {first_lines(e)}{bf16_hint(args)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(r))
    elif args.inference:
        print(f"{r['model']}  batch {r['batch_size']}  threads {r['threads']}  {r['precision']}  "
              f"{r['backend']}, inference\n"
              f"  {r['images_per_sec']:.1f} images/s, forward {r['step_ms']:.2f} ms" +
              (" issued back to back" if r["back_to_back"] else "") +
              f" (mean of {r['steps']} passes)")
    else:
        print(f"{r['model']}  batch {r['batch_size']}  threads {r['threads']}  {r['precision']}  "
              f"{r['backend']}\n"
              f"  {r['images_per_sec']:.1f} images/s, step {r['step_ms']:.2f} ms" +
              (f" issued back to back; phases {r['phases_ms']:.2f} ms, each synchronized: "
               if r["back_to_back"] else " = ") +
              f"forward {r['forward_ms']:.2f} + backward {r['backward_ms']:.2f} + update "
              f"{r['update_ms']:.2f} ms (mean of {r['steps']} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
