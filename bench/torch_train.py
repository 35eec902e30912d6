#!/usr/bin/python3
"""Trains a Towers model in PyTorch with the same recipe as `towers-cli train`: the reference for
the accuracy-over-time comparison (bench/compare_train.py).

    /usr/bin/python3 bench/torch_train.py --dataset-dir /usr/share/datasets/fashion-mnist \\
        --model fashion-fast --epochs 8 --batch-size 128 --optimizer nesterov --lr 0.1 \\
        --lr-schedule one-cycle --threads 2 [--precision bf16]
    python3 bench/torch_train.py --device cuda [--channels-last] [--precision bf16] [--tf32]

On the CPU (--device cpu, the default), in float32 unless --precision bf16: PyTorch's mixed
precision recipe, the counterpart of `towers-cli train --precision bf16`, with each step's forward
and loss under torch.autocast(device_type="cpu", dtype=torch.bfloat16) (convolutions and matrix
products in bfloat16 with float32 accumulation), backward and the optimizer step outside it,
float32 master weights and optimizer state, no loss scaling; evaluation runs under autocast too.

--device cuda trains on the first GPU PyTorch sees (it says so and exits with 1 if it sees none),
with bf16 autocast on device_type "cuda" under --precision bf16, TF32 off unless --tf32 (as
Towers) and cuDNN's measured algorithms; --channels-last stores the model and the inputs NHWC.
The test set is copied to the GPU before the clock starts; the augmentation stays on the host
(--threads), each batch going over from pinned memory without blocking. The clock is read after
torch.cuda.synchronize() at every evaluation, and the loss is checked for divergence there (not
after every step, which would wait for the GPU each step).

The model is the PyTorch twin from python/towers_torch.py; the data are the IDX files (plain or
.gz) of MNIST / Fashion-MNIST, normalised by the training set's mean and standard deviation, with
the same augmentation as Towers' 28x28 recipe (random translation by up to --translate pixels
with zero padding, random left-right flips). The defaults are Towers' fashion-fast recipe
(engine/train/recipe.cpp) at a global batch of 128. Prints one line per evaluation (epoch, images
seen, wall seconds, train images/s, test accuracy) and, with --json, one JSON object per line
instead (with the GPU's name under "device" on --device cuda). Wall time counts training and
evaluation, not loading.
"""

import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from torch_bench import PRECISIONS, autocast, first_lines  # noqa: E402  (imports no torch by itself)


def _import_torch(threads):
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    global torch, F, tt
    import torch
    import torch.nn.functional as F
    import towers_torch as tt


def read_idx(path):
    """Returns (array of uint8, dims) of an IDX file, plain or gzip."""
    import numpy as np

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    if magic >> 8 != 0x08 or ndim not in (1, 3):
        raise SystemExit(f"{path}: not an IDX uint8 file (magic 0x{magic:08x})")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != math.prod(dims):
        raise SystemExit(f"{path}: header says {dims}, file holds {body.size} bytes of data")
    return body.reshape(dims)


def find(folder, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(folder, name)
        if os.path.exists(p):
            return p
    raise SystemExit(f"{folder}: no {stem}[.gz]")


def load(folder):
    import numpy as np

    xs = read_idx(find(folder, "train-images-idx3-ubyte")).astype(np.float32) / 255.0
    ys = read_idx(find(folder, "train-labels-idx1-ubyte")).astype(np.int64)
    xt = read_idx(find(folder, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0
    yt = read_idx(find(folder, "t10k-labels-idx1-ubyte")).astype(np.int64)
    mean, std = float(xs.mean()), float(xs.std())
    norm = lambda a: torch.from_numpy((a - mean) / std).unsqueeze(1)  # noqa: E731  N,1,H,W
    return norm(xs), torch.from_numpy(ys), norm(xt), torch.from_numpy(yt), (mean - 0) / std


def augment(x, translate, flip, background, gen):
    """Random shift by up to `translate` pixels (zero padding in the 0..1 scale, i.e. `background`
    after normalisation) and a random left-right flip, per image."""
    n, _, h, w = x.shape
    if translate:
        p = translate
        padded = F.pad(x, (p, p, p, p), value=background)
        dy = torch.randint(0, 2 * p + 1, (n,), generator=gen)
        dx = torch.randint(0, 2 * p + 1, (n,), generator=gen)
        rows = (dy.view(n, 1) + torch.arange(h).view(1, h))  # n,h
        cols = (dx.view(n, 1) + torch.arange(w).view(1, w))  # n,w
        idx_n = torch.arange(n).view(n, 1, 1)
        x = padded[idx_n, 0, rows.view(n, h, 1), cols.view(n, 1, w)].unsqueeze(1)
    if flip:
        m = torch.rand(n, generator=gen) < 0.5
        x = torch.where(m.view(n, 1, 1, 1), x.flip(3), x)
    return x


def make_scheduler(opt, total, peak, schedule, warmup_frac):
    """Towers' schedules: one-cycle is PyTorch's OneCycleLR (linear, div 25, final div 1e4), as in
    engine/optim/lr_schedule.h; cosine is a linear warm-up then CosineAnnealingLR."""
    if schedule == "constant":
        return None
    if schedule == "one-cycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=peak, total_steps=total, pct_start=warmup_frac, anneal_strategy="linear",
            div_factor=25.0, final_div_factor=1e4, cycle_momentum=False)
    warm = max(1, int(round(total * warmup_frac)))
    return torch.optim.lr_scheduler.SequentialLR(opt, [
        torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / warm, total_iters=warm),
        torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, total - warm))], milestones=[warm])


def evaluate(model, xt, yt, batch=1000, precision="fp32", device="cpu"):
    """Test accuracy; xt and yt lie on `device` already (xt in the model's memory format)."""
    model.eval()
    correct = 0
    with torch.no_grad(), autocast(device, precision):
        for i in range(0, xt.shape[0], batch):
            correct += (model(xt[i:i + batch]).argmax(1) == yt[i:i + batch]).sum().item()
    model.train()
    return correct / xt.shape[0]


def main():
    try:
        return train()
    except RuntimeError as e:  # no GPU, a kernel oneDNN cannot make (bf16 held to AVX2): one line
        print(f"torch_train.py: error: {first_lines(e)}", file=sys.stderr)
        return 1


def train():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--model", default="fashion-fast", choices=["fashion-fast", "fashion-wide", "mnist-convnet"])
    ap.add_argument("--epochs", type=float, default=8)
    ap.add_argument("--batch-size", type=int, default=128, help="global batch (Towers: towers x batch)")
    ap.add_argument("--optimizer", default="nesterov", choices=["sgd", "momentum", "nesterov", "adam", "adamw"])
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--label-smoothing", type=float, default=0.0, help="as towers-cli train --label-smoothing")
    ap.add_argument("--clip-grad-norm", type=float, default=0.0,
                    help="as towers-cli train --clip-grad-norm: clip_grad_norm_ of the gradient with the "
                         "L2 term in it (adamw: without, its decay is decoupled)")
    ap.add_argument("--lr-schedule", default="one-cycle", choices=["constant", "cosine", "one-cycle"])
    ap.add_argument("--warmup", type=float, default=0.15, help="warm-up fraction of the run")
    ap.add_argument("--translate", type=int, default=1)
    ap.add_argument("--no-flip", dest="flip", action="store_false",
                    help="no random left-right flips (Towers flips Fashion-MNIST, not MNIST)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--eval-every", type=float, default=1.0, help="epochs between evaluations")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", choices=PRECISIONS, default="fp32",
                    help="fp32, or bf16: forward and loss under bf16 autocast (mixed precision)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cpu, or cuda: train on the first GPU (augmentation stays on the host)")
    ap.add_argument("--channels-last", action="store_true",
                    help="model and inputs in torch.channels_last (NHWC) memory format (cuda)")
    ap.add_argument("--tf32", action="store_true", help="let cuDNN and cuBLAS use TF32 (cuda)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.epochs <= 0 or a.batch_size < 1 or a.lr <= 0 or a.threads < 1:
        ap.error("epochs, batch size, lr and threads must be positive")
    if not 0 <= a.label_smoothing < 1:
        ap.error("--label-smoothing must be in [0, 1)")
    if not 0 <= a.clip_grad_norm < math.inf:
        ap.error("--clip-grad-norm must be a finite number >= 0")
    if a.tf32 and a.device != "cuda":
        ap.error("--tf32 is for --device cuda")
    _import_torch(a.threads)
    gpu = a.device == "cuda"
    if gpu:
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: PyTorch sees no GPU")
        torch.backends.cudnn.allow_tf32 = a.tf32
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.benchmark = True  # measured algorithms, as Towers chooses them
    device = torch.device(a.device)
    memory_format = torch.channels_last if a.channels_last else torch.contiguous_format
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)

    xs, ys, xt, yt, zero_level = load(a.dataset_dir)
    background = -zero_level  # where 0.0 lands after normalisation
    model = tt.build(a.model).train()
    if gpu or a.channels_last:
        model = model.to(device, memory_format=memory_format)
        xt = xt.to(device).contiguous(memory_format=memory_format)
        yt = yt.to(device)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() > 1 else no_decay).append(p)
    # Towers' L2 weight decay is a term of the loss, so its gradient is in what --clip-grad-norm
    # clips: with clipping (and not adamw, whose decay is decoupled), the term goes into the
    # gradients here before clip_grad_norm_, instead of into the optimizer's step after it.
    l2_by_hand = a.clip_grad_norm > 0 and a.optimizer != "adamw"
    in_optimizer = 0.0 if l2_by_hand else a.weight_decay
    groups = [{"params": decay, "weight_decay": in_optimizer}, {"params": no_decay, "weight_decay": 0.0}]
    if a.optimizer == "adam":
        opt = torch.optim.Adam(groups, lr=a.lr)
    elif a.optimizer == "adamw":  # the same groups: decoupled decay on the weights only
        opt = torch.optim.AdamW(groups, lr=a.lr)
    else:
        mom = 0.0 if a.optimizer == "sgd" else a.momentum
        opt = torch.optim.SGD(groups, lr=a.lr, momentum=mom, nesterov=a.optimizer == "nesterov")

    n = xs.shape[0]
    steps_per_epoch = n // a.batch_size
    total = int(round(a.epochs * steps_per_epoch))
    eval_steps = max(1, int(round(a.eval_every * steps_per_epoch)))
    sched = make_scheduler(opt, total, a.lr, a.lr_schedule, a.warmup)
    where = ""
    if gpu:
        where = (f"cuda ({torch.cuda.get_device_name(0)}" + (", channels-last" if a.channels_last else "")
                 + (", TF32" if a.tf32 else "") + ")")
        # The CUDA libraries started before the clock, as Towers' towers have theirs (cuDNN and
        # cuBLAS handles) before its clock starts at its 'training' event: one forward pass in
        # evaluation mode, which changes no state and draws no random number.
        model.eval()
        with torch.no_grad():
            model(xt[:a.batch_size])
        model.train()
        torch.cuda.synchronize()  # the test set's copy is loading, not training
        t_seg = time.perf_counter()  # start of the training since the last evaluation
    t0 = time.perf_counter()
    train_time = 0.0
    seen = 0
    best = 0.0
    perm = None
    for step in range(total):
        epoch, i = divmod(step, steps_per_epoch)
        if i == 0:
            perm = torch.randperm(n, generator=gen)
        ts = time.perf_counter()
        idx = perm[i * a.batch_size:(i + 1) * a.batch_size]
        x = augment(xs[idx], a.translate, a.flip, background, gen)
        y = ys[idx]
        if gpu:  # from pinned host memory (PyTorch's caching host allocator), without blocking
            x = x.pin_memory().to(device, non_blocking=True)
            y = y.pin_memory().to(device, non_blocking=True)
        if a.channels_last:
            x = x.contiguous(memory_format=memory_format)
        with autocast(a.device, a.precision):
            loss = F.cross_entropy(model(x).float(), y, label_smoothing=a.label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip_grad_norm > 0:
            if l2_by_hand:
                for p in decay:
                    p.grad.add_(p.detach(), alpha=a.weight_decay)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=a.clip_grad_norm)
        opt.step()
        if sched is not None:
            sched.step()
        if not gpu:
            if not torch.isfinite(loss):
                raise SystemExit(f"model diverged with loss = {loss.item()} at step {step}")
            train_time += time.perf_counter() - ts
        seen += x.shape[0]
        if (step + 1) % eval_steps == 0 or step + 1 == total:
            if gpu:  # the steps issued so far have run: the clock is honest
                torch.cuda.synchronize()
                train_time += time.perf_counter() - t_seg
                if not torch.isfinite(loss):
                    raise SystemExit(f"model diverged with loss = {loss.item()} by step {step}")
            acc = evaluate(model, xt, yt, precision=a.precision, device=a.device)
            if gpu:
                torch.cuda.synchronize()
            best = max(best, acc)
            row = {"framework": f"pytorch {torch.__version__}", "precision": a.precision,
                   "step": step + 1,
                   "epoch": (step + 1) / steps_per_epoch, "images": seen,
                   "wall_s": time.perf_counter() - t0, "images_per_sec": seen / train_time,
                   "loss": loss.item(), "test_accuracy": acc}
            if gpu:
                row["device"] = where
            if a.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"epoch {row['epoch']:5.2f}  step {step + 1:6d}  {row['wall_s']:7.1f} s  "
                      f"{row['images_per_sec']:7.0f} img/s  loss {row['loss']:.3f}  "
                      f"test accuracy {100 * acc:.2f}%", flush=True)
            if gpu:
                t_seg = time.perf_counter()  # training resumes: evaluation is not training time
    if not a.json:
        print(f"best test accuracy {100 * best:.2f}% in {time.perf_counter() - t0:.1f} s "
              f"({a.precision}" + (f", {where}" if gpu else "") + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
