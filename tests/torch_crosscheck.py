#!/usr/bin/python3
"""PyTorch oracle for one Towers training step.

    /usr/bin/python3 tests/torch_crosscheck.py EXCHANGE.safetensors [--tol 1e-4]

The exchange file (written by the C++ side) holds every parameter and buffer under its
state_dict name, "input" F32 NHWC, "labels" I32 [N], "expected.logits", "expected.loss" [1],
"expected.grad.<param>", "expected.buffer.<bn buffer>" (after the forward pass) and
"dropout.<module>" U8 keep-masks; metadata {"model": name}, for a model file's network
{"model_definition": the file's JSON}, and optionally {"label_smoothing": the loss's, as a
number} and {"clip_grad_norm": the largest norm the gradients were clipped to (clip_grad_norm_
after backward)}. The step is recomputed in float64
in train() mode and every expected tensor is compared by
    max|ours - torch| / max(max|torch|, 1e-12) < tol.

Exit status: 0 all match, 1 some mismatch, 2 bad input, 77 PyTorch is missing.

    --make-exchange MODEL OUT [--perturb] [--float32]   writes an exchange file PyTorch computed
    --self-test                             checks this script on such files
"""

import argparse
import math
import os
import sys
import tempfile

try:
    import torch
    from torch import nn
except ImportError as e:
    print(f"torch_crosscheck: PyTorch cannot be imported ({e}); skipping", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import towers_torch as tt  # noqa: E402
from crosscheck_common import (  # noqa: E402
    EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK, BadInput, need, rel_error)

class MaskedDropout(nn.Module):
    """Dropout with a given keep-mask: x * mask / (1 - p)."""

    def __init__(self, name, mask, p):
        super().__init__()
        self.name, self.mask, self.p = name, mask, p

    def forward(self, x):
        mask = self.mask
        if mask.dim() == 4 and x.dim() == 4:  # masks of image tensors come NHWC
            mask = mask.permute(0, 3, 1, 2)
        if tuple(mask.shape) != tuple(x.shape):
            raise BadInput(f"dropout.{self.name}: mask shape {list(self.mask.shape)} does not fit "
                           f"the dropout input {list(x.shape)}")
        return x * mask.to(x.dtype) / (1.0 - self.p)


def install_masks(module, masks):
    """Replaces every nn.Dropout of `module` by a MaskedDropout using masks[name]."""
    for name, m in list(module.named_modules()):
        if isinstance(m, nn.Dropout):
            if name not in masks:
                raise BadInput(f"missing tensor 'dropout.{name}' (the keep-mask of {name})")
            parent = module.get_submodule(name.rpartition(".")[0]) if "." in name else module
            setattr(parent, name.rpartition(".")[2], MaskedDropout(name, masks[name], m.p))


def run_step(name, module, x_nhwc, labels, label_smoothing=0.0, clip_grad_norm=0.0):
    """Forward (train mode), total loss, backward, and with clip_grad_norm > 0 the gradients
    clipped to that global norm. Returns (logits, loss)."""
    module.train()
    dtype = next(module.parameters()).dtype
    logits = module(x_nhwc.permute(0, 3, 1, 2).to(dtype))
    loss = tt.total_loss(name, module, logits, labels.long(), label_smoothing)
    loss.backward()
    if clip_grad_norm > 0:
        torch.nn.utils.clip_grad_norm_(module.parameters(), max_norm=clip_grad_norm)
    return logits, loss


def check(path, tol, out=sys.stdout):
    """Compares the exchange file with PyTorch; returns the exit status (raises BadInput)."""
    try:
        tensors, meta = tt.load_safetensors(path)
    except (OSError, ValueError) as e:
        raise BadInput(str(e)) from None
    name = meta.get("model")
    if "model_definition" in meta:  # a model file's network
        try:
            module = tt.from_definition(meta["model_definition"]).double()
        except (ValueError, KeyError, TypeError) as e:
            raise BadInput(f"metadata 'model_definition' describes no network: {e}") from None
        c, h, w = module.input_shape
    elif name in tt.MODELS:
        module = tt.build(name).double()
        c, h, w = tt.INPUT_SHAPES[name]
    else:
        raise BadInput(f"metadata 'model' is {name!r}, not one of {', '.join(tt.MODELS)}, and "
                       "there is no 'model_definition'")
    state = module.state_dict()
    loaded = {}
    for key, ref in state.items():
        t = need(tensors, key, " (a parameter or buffer of the model)")
        if tuple(t.shape) != tuple(ref.shape):
            raise BadInput(f"'{key}' has shape {list(t.shape)}, the model expects "
                           f"{list(ref.shape)}")
        loaded[key] = t.to(ref.dtype)
    module.load_state_dict(loaded)
    install_masks(module, {k[len("dropout."):]: v for k, v in tensors.items()
                           if k.startswith("dropout.")})

    x = need(tensors, "input")
    if x.dim() != 4 or tuple(x.shape[1:]) != (h, w, c):
        raise BadInput(f"'input' has shape {list(x.shape)}, expected NHWC [N, {h}, {w}, {c}]")
    labels = need(tensors, "labels")
    if tuple(labels.shape) != (x.shape[0],):
        raise BadInput(f"'labels' has shape {list(labels.shape)}, expected [{x.shape[0]}]")
    if labels.numel() and (labels.min() < 0 or labels.max() >= 10):
        raise BadInput("'labels' must lie in [0, 10)")

    try:
        smoothing = float(meta.get("label_smoothing", "0"))
    except ValueError:
        raise BadInput("metadata 'label_smoothing' is not a number") from None
    if not 0 <= smoothing < 1:
        raise BadInput(f"metadata 'label_smoothing' is {smoothing}, not in [0, 1)")

    try:
        clip = float(meta.get("clip_grad_norm", "0"))
    except ValueError:
        raise BadInput("metadata 'clip_grad_norm' is not a number") from None
    if not 0 <= clip < math.inf:
        raise BadInput(f"metadata 'clip_grad_norm' is {clip}, not a finite number >= 0")

    logits, loss = run_step(name, module, x, labels, smoothing, clip)

    pairs = [("expected.logits", logits.detach()), ("expected.loss", loss.detach().reshape(1))]
    for pname, p in module.named_parameters():
        pairs.append((f"expected.grad.{pname}", p.grad))
    for bname, b in module.named_buffers():
        key = f"expected.buffer.{bname}"
        if bname.endswith(("running_mean", "running_var")) or key in tensors:
            pairs.append((key, b))
    used = {k for k, _ in pairs} | set(state) | {"input", "labels"}
    used |= {k for k in tensors if k.startswith("dropout.")}
    for k in tensors:
        if k not in used:
            print(f"warning: tensor '{k}' is not used", file=sys.stderr)

    failures, worst = 0, ("", 0.0)
    for key, ref in pairs:
        ours = need(tensors, key)
        if tuple(ours.shape) != tuple(ref.shape):
            print(f"{key:<48} shape {list(ours.shape)} != {list(ref.shape)}  FAIL", file=out)
            failures += 1
            continue
        err = rel_error(ours, ref)
        ok = err < tol  # False for NaN
        failures += not ok
        if not ok or err > worst[1]:
            worst = (key, err)
        print(f"{key:<48} {err:10.3e}  {'OK' if ok else 'FAIL'}", file=out)
    print(f"{name}: {len(pairs) - failures}/{len(pairs)} tensors within {tol:g}; worst "
          f"{worst[0]} ({worst[1]:.3e})", file=out)
    return EXIT_OK if failures == 0 else EXIT_MISMATCH


# --------------------------------------------------------------------------------------------
# Writing exchange files from PyTorch (to test this script, and as an example for the C++ side)


def make_exchange(name, path, batch=4, seed=0, perturb=False, dtype=torch.float64):
    """Writes an exchange file (F32 tensors) whose expectations PyTorch computed in `dtype`.

    In float32, a value that float64 puts within rounding error of a ReLU or max-pool kink
    (rare, but it happens at random init, e.g. cifar10-resnet's global max pool) sends the
    gradient another way, and the check fails for real; float64 avoids that.
    """
    torch.manual_seed(seed)
    module = tt.build(name)
    with torch.no_grad():  # non-trivial running stats, so that the momentum update is checked
        for bname, b in module.named_buffers():
            if bname.endswith("running_mean"):
                b.uniform_(-0.5, 0.5)
            elif bname.endswith("running_var"):
                b.uniform_(0.5, 2.0)
            elif bname.endswith("num_batches_tracked"):
                b.fill_(3)
    out = {k: v.clone() for k, v in module.state_dict().items()}
    module.to(dtype)
    c, h, w = tt.INPUT_SHAPES[name]
    x = torch.randn(batch, h, w, c)
    labels = torch.randint(0, 10, (batch,), dtype=torch.int32)
    masks = {}
    probe = tt.build(name)
    shapes = {}
    hooks = [m.register_forward_pre_hook(lambda m, a, n=n: shapes.__setitem__(n, a[0].shape))
             for n, m in probe.named_modules() if isinstance(m, nn.Dropout)]
    probe(x[:1].permute(0, 3, 1, 2))
    for hk in hooks:
        hk.remove()
    for n, s in shapes.items():
        masks[n] = (torch.rand((batch,) + tuple(s[1:])) >= 0.25).to(torch.uint8)
    install_masks(module, masks)
    logits, loss = run_step(name, module, x, labels)
    out.update({"input": x, "labels": labels, "expected.logits": logits.detach().float(),
                "expected.loss": loss.detach().float().reshape(1)})
    for pname, p in module.named_parameters():
        out[f"expected.grad.{pname}"] = p.grad.float()
    for bname, b in module.named_buffers():
        if bname.endswith(("running_mean", "running_var")):
            out[f"expected.buffer.{bname}"] = b.float()
    for n, m in masks.items():
        out[f"dropout.{n}"] = m
    if perturb:  # a small error in one gradient, which the check must catch
        key = next(k for k in out if k.startswith("expected.grad.") and k.endswith("weight"))
        out[key] = out[key] * (1 + 1e-3)
    tt.save_safetensors(path, out, {"model": name})


def self_test():
    """Clean files pass, perturbed ones fail, broken ones are bad input. Returns an exit code."""
    problems = []
    with tempfile.TemporaryDirectory() as d:
        devnull = open(os.devnull, "w")
        for name in tt.MODELS:
            for perturb, want in ((False, EXIT_OK), (True, EXIT_MISMATCH)):
                path = os.path.join(d, f"{name}-{perturb}.safetensors")
                make_exchange(name, path, perturb=perturb)
                got = check(path, 1e-4, out=sys.stdout if not perturb else devnull)
                if got != want:
                    problems.append(f"{name} perturb={perturb}: exit {got}, wanted {want}")
        tensors, meta = tt.load_safetensors(os.path.join(d, "mnist-convnet-False.safetensors"))
        for what, edit in (("unknown model", lambda t, m: m.update(model="nope")),
                           ("missing grad", lambda t, m: t.pop("expected.grad.fc1.weight")),
                           ("missing mask", lambda t, m: t.pop("dropout.drop2")),
                           ("bad input shape", lambda t, m: t.update(input=torch.zeros(2, 3)))):
            t, m = dict(tensors), dict(meta)
            edit(t, m)
            path = os.path.join(d, "broken.safetensors")
            tt.save_safetensors(path, t, m)
            try:
                check(path, 1e-4, out=devnull)
                problems.append(f"{what}: not reported as bad input")
            except BadInput as e:
                print(f"bad input detected ({what}): {e}")
        devnull.close()
    for p in problems:
        print("SELF-TEST FAILURE:", p)
    print("self-test:", "FAILED" if problems else "passed")
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("exchange", nargs="?", help="exchange .safetensors file written by Towers")
    ap.add_argument("--tol", type=float, default=1e-4, help="relative error bound (1e-4)")
    ap.add_argument("--make-exchange", nargs=2, metavar=("MODEL", "OUT"),
                    help="write an exchange file computed by PyTorch instead of checking one")
    ap.add_argument("--perturb", action="store_true", help="with --make-exchange: spoil one grad")
    ap.add_argument("--batch", type=int, default=4, help="with --make-exchange: batch size")
    ap.add_argument("--seed", type=int, default=0, help="with --make-exchange: random seed")
    ap.add_argument("--float32", action="store_true",
                    help="with --make-exchange: compute in float32 (as Towers) not float64")
    ap.add_argument("--self-test", action="store_true", help="test this script")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.make_exchange:
        name, path = args.make_exchange
        if name not in tt.MODELS:
            print(f"unknown model '{name}' (known: {', '.join(tt.MODELS)})", file=sys.stderr)
            return EXIT_BAD_INPUT
        make_exchange(name, path, batch=args.batch, seed=args.seed, perturb=args.perturb,
                      dtype=torch.float32 if args.float32 else torch.float64)
        return EXIT_OK
    if not args.exchange:
        ap.error("an exchange file is required")
    try:
        return check(args.exchange, args.tol)
    except BadInput as e:
        print(f"torch_crosscheck: bad input: {args.exchange}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
