#!/usr/bin/python3
"""PyTorch oracle for Towers' optimizers and learning-rate schedules.

    /usr/bin/python3 tests/optim_crosscheck.py EXCHANGE.safetensors... [--tol 1e-6]

Several files are checked in one run (importing torch is the slow part). Each exchange file
(written by tests/engine/tst_optimizers.cpp and tst_lr_schedule.cpp) says in its metadata what it
holds; an optional "tol" metadata value overrides --tol for that file:

  kind=optimizer: "optimizer" (sgd, momentum, nesterov, adam, adamw) and its hyper-parameters
    (momentum, dampening, beta1, beta2, epsilon as strings; adamw's "weight_decay", each
    parameter's decay separated by commas; optionally "clip_grad_norm", the largest gradient
    norm, > 0 to clip), "steps" and "params". Tensors: "param.<i>" the initial values, "lr" F64
    [steps], "grad.<s>.<i>" the gradient of step s, "after.<s>.<i>" Towers' parameter after step
    s, "state.<i>.<slot>" Towers' final state; with clipping, "clipped.<s>.<i>" Towers' gradient
    of step s once clipped (torch.nn.utils.clip_grad_norm_ before every torch step).
    torch.optim recomputes every step in the exchange's dtype; every "after" and "state" tensor
    is compared by max|ours - torch| / max(max|torch|, 1e-12) < tol.

  kind=schedule: "schedule" (exponential, step, cosine, onecycle) and its parameters, "steps"
    (total), "stepsPerEpoch". Tensor "lr" F64 [steps]: Towers' learning rate of every step,
    compared with the torch.optim.lr_scheduler that corresponds (the same relative measure).

Exit status: 0 all match, 1 some mismatch, 2 some bad input, 77 PyTorch is missing.
"""

import argparse
import math
import os
import sys

try:
    import torch
except ImportError as e:
    print(f"optim_crosscheck: PyTorch cannot be imported ({e}); skipping", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import towers_torch as tt  # noqa: E402
from crosscheck_common import (  # noqa: E402
    EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK, BadInput, need, rel_error)

def meta_float(meta, key):
    try:
        return float(meta[key])
    except (KeyError, ValueError):
        raise BadInput(f"metadata '{key}' is missing or not a number") from None


def meta_int(meta, key):
    try:
        return int(meta[key])
    except (KeyError, ValueError):
        raise BadInput(f"metadata '{key}' is missing or not an integer") from None


def check_optimizer(tensors, meta, tol, out):
    kind = meta.get("optimizer")
    steps, count = meta_int(meta, "steps"), meta_int(meta, "params")
    params = [need(tensors, f"param.{i}").clone().requires_grad_(True) for i in range(count)]
    lrs = need(tensors, "lr")
    if lrs.numel() != steps:
        raise BadInput(f"'lr' has {lrs.numel()} values for {steps} steps")
    if kind == "sgd":
        opt, slots = torch.optim.SGD(params, lr=1.0), []
    elif kind in ("momentum", "nesterov"):
        opt = torch.optim.SGD(params, lr=1.0, momentum=meta_float(meta, "momentum"),
                              dampening=meta_float(meta, "dampening"), nesterov=kind == "nesterov")
        slots = ["momentum_buffer"]
    elif kind == "adam":
        opt = torch.optim.Adam(params, lr=1.0, betas=(meta_float(meta, "beta1"), meta_float(meta, "beta2")),
                               eps=meta_float(meta, "epsilon"))
        slots = ["exp_avg", "exp_avg_sq"]
    elif kind == "adamw":
        # Each parameter's own decoupled decay: a parameter group each.
        try:
            decays = [float(d) for d in meta["weight_decay"].split(",")]
        except (KeyError, ValueError):
            raise BadInput("metadata 'weight_decay' is missing or not numbers separated by commas") from None
        if len(decays) != count:
            raise BadInput(f"metadata 'weight_decay' has {len(decays)} values for {count} parameters")
        groups = [{"params": [p], "weight_decay": d} for p, d in zip(params, decays)]
        opt = torch.optim.AdamW(groups, lr=1.0, betas=(meta_float(meta, "beta1"), meta_float(meta, "beta2")),
                                eps=meta_float(meta, "epsilon"))
        slots = ["exp_avg", "exp_avg_sq"]
    else:
        raise BadInput(f"metadata 'optimizer' is {kind!r}, not sgd, momentum, nesterov, adam or adamw")
    clip = meta_float(meta, "clip_grad_norm") if "clip_grad_norm" in meta else 0.0
    pairs = []
    for s in range(steps):
        for group in opt.param_groups:
            group["lr"] = lrs[s].item()
        for i, p in enumerate(params):
            p.grad = need(tensors, f"grad.{s}.{i}").to(p.dtype)
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, max_norm=clip)
            for i, p in enumerate(params):
                pairs.append((f"clipped.{s}.{i}", p.grad.clone()))
        opt.step()
        for i, p in enumerate(params):
            pairs.append((f"after.{s}.{i}", p.detach().clone()))  # not a view: p changes in place
    for i, p in enumerate(params):
        for slot in slots:
            pairs.append((f"state.{i}.{slot}", opt.state[p][slot]))
    return compare(tensors, pairs, tol, out, kind)


def torch_schedule(meta, total, per_epoch):
    """Torch's learning rates for steps 0..total-1 ({step: lr}; steps without a torch twin are left
    out)."""
    kind = meta.get("schedule")
    lr = meta_float(meta, "lr")

    def run(make, n, every=1):
        p = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([p], lr=lr)
        sched = make(opt)
        values = []
        for _ in range(n):
            values.append(opt.param_groups[0]["lr"])
            for _ in range(every):
                opt.step()
            sched.step()
        return values

    if kind == "exponential":
        decay_steps = max(1, math.floor(per_epoch * meta_float(meta, "decayEpochs")))
        rate = meta_float(meta, "decayRate")
        if meta.get("staircase") == "true":  # tf.train.exponential_decay(staircase=True)
            values = run(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=decay_steps, gamma=rate), total)
        else:
            values = run(lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=rate ** (1.0 / decay_steps)), total)
        return dict(enumerate(values))
    if kind == "step":  # MultiStepLR stepped once per epoch
        milestones = [int(m) for m in meta.get("milestones", "").split(",") if m]
        epochs = (total - 1) // per_epoch + 1
        per = run(lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=milestones,
                                                                 gamma=meta_float(meta, "gamma")), epochs)
        return {s: per[s // per_epoch] for s in range(total)}
    if kind == "cosine":  # LinearLR warm-up, then CosineAnnealingLR
        warm = min(total, round(meta_float(meta, "warmupEpochs") * per_epoch))
        min_lr = meta_float(meta, "minLr")
        out = {}
        if warm > 1:
            up = run(lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=1.0 / warm, end_factor=1.0,
                                                                 total_iters=warm - 1), warm)
            out.update(enumerate(up))
        elif warm == 1:
            out[0] = lr
        down = run(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=max(1, total - warm),
                                                                        eta_min=min_lr), total - warm)
        out.update({warm + i: v for i, v in enumerate(down)})
        return out
    if kind == "onecycle":
        anneal = meta.get("anneal")
        values = run(lambda o: torch.optim.lr_scheduler.OneCycleLR(
            o, max_lr=lr, total_steps=total, pct_start=meta_float(meta, "warmupFraction"), anneal_strategy=anneal,
            div_factor=meta_float(meta, "divFactor"), final_div_factor=meta_float(meta, "finalDivFactor"),
            cycle_momentum=False), total)
        if anneal == "linear":
            return dict(enumerate(values))
        # Towers warms up linearly whatever the way down; only the cosine descent corresponds.
        peak = meta_float(meta, "warmupFraction") * total - 1
        return {s: v for s, v in enumerate(values) if s > peak}
    raise BadInput(f"metadata 'schedule' is {kind!r}, not exponential, step, cosine or onecycle")


def check_schedule(tensors, meta, tol, out):
    total, per_epoch = meta_int(meta, "steps"), meta_int(meta, "stepsPerEpoch")
    ours = need(tensors, "lr").double()
    if ours.numel() != total:
        raise BadInput(f"'lr' has {ours.numel()} values for {total} steps")
    ref = torch_schedule(meta, total, per_epoch)
    if not ref:
        raise BadInput("no step to compare")
    steps = sorted(ref)
    pairs = [("lr", torch.tensor([ref[s] for s in steps], dtype=torch.float64))]
    sub = {"lr": ours[steps]}
    return compare(sub, pairs, tol, out, meta.get("schedule"))


def compare(tensors, pairs, tol, out, what):
    failures, worst = 0, ("", 0.0)
    for key, ref in pairs:
        ours = need(tensors, key)
        if tuple(ours.shape) != tuple(ref.shape):
            print(f"{key:<40} shape {list(ours.shape)} != {list(ref.shape)}  FAIL", file=out)
            failures += 1
            continue
        err = rel_error(ours, ref)
        ok = err < tol  # False for NaN
        failures += not ok
        if not ok or err >= worst[1]:
            worst = (key, err)
        if not ok:
            print(f"{key:<40} {err:10.3e}  FAIL", file=out)
    print(f"{what}: {len(pairs) - failures}/{len(pairs)} tensors within {tol:g}; worst {worst[0]} "
          f"({worst[1]:.3e})", file=out)
    return EXIT_OK if failures == 0 else EXIT_MISMATCH


def check_file(path, tol, out):
    """Checks one exchange file; returns its exit status."""
    try:
        tensors, meta = tt.load_safetensors(path)
        if "tol" in meta:
            tol = meta_float(meta, "tol")
        if meta.get("kind") == "optimizer":
            return check_optimizer(tensors, meta, tol, out)
        if meta.get("kind") == "schedule":
            return check_schedule(tensors, meta, tol, out)
        raise BadInput(f"metadata 'kind' is {meta.get('kind')!r}, not optimizer or schedule")
    except (OSError, ValueError, BadInput) as e:
        print(f"optim_crosscheck: bad input: {path}: {e}", file=out)
        return EXIT_BAD_INPUT


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("exchange", nargs="+", help="exchange .safetensors files written by Towers")
    ap.add_argument("--tol", type=float, default=1e-6, help="relative error bound (1e-6)")
    args = ap.parse_args()
    worst = EXIT_OK
    for path in args.exchange:
        print(f"== {os.path.basename(path)}")
        status = check_file(path, args.tol, sys.stdout)
        if status == EXIT_BAD_INPUT or (status == EXIT_MISMATCH and worst == EXIT_OK):
            worst = status
    return worst


if __name__ == "__main__":
    sys.exit(main())
