#!/usr/bin/env python3
"""Every registered model, exported to ONNX and run in onnxruntime on 100 real test images, gives
`towers-cli classify --json`'s logits within 1e-4 (relative to each image's largest logit).

  check_classify.py --cli build/ci/app/towers-cli --venv build/ci/tests/onnx/onnxvenv

All through towers-cli, as a user runs it. For each model of `towers-cli models --json`:
* a short real training run (`towers-cli train`, moving averages on with --ema-decay 0.9 so that
  the EMA and the raw weights differ) writes a checkpoint with the trainer's own metadata
  (preprocessing recipe with the training set's statistics, class names);
* `towers-cli export` writes it three ways: NHWC at the default opset (EMA weights), NCHW at
  opset 11 (EMA weights), and NHWC with --no-ema (raw weights);
* the 100 test images are written as PNG files and classified by `towers-cli classify --json
  --top-k <all>` (and with --no-ema for the raw export);
* onnxruntime (PyPI, in the virtual environment tests/onnx/setup_venv.sh makes) runs each file
  on the same 100 images, as uint8 arrays preprocessed in Python from the file's metadata_props
  alone (run_onnx.preprocess, README.md's recipe); its logits must equal classify's within 1e-4
  of each image's largest logit, its probabilities within 1e-4, its top class be classify's;
  classify's own probabilities must be the softmax of its logits; the metadata must name the
  model, the weights, the layout, the dataset and classify's class names.

Images: the 28x28 models run on the first 100 images of Fashion-MNIST's test set (t10k), found
as towers-cli finds it (`towers-cli datasets`: Debian's dataset-fashion-mnist in
/usr/share/datasets, $TOWERS_DATA, ~/.local/share/towers/datasets), and train on the first 5,000
images of its training set (copied with those 100 test images into a folder of their own, so
that the run's final evaluation covers just them). The CIFAR-shaped models (32x32 RGB; cifar10-tutorial crops 24x24 from them) run on the
first 100 images of CIFAR-10's test_batch.bin when towers-cli finds CIFAR-10; otherwise (no
CIFAR-10 copy on the test machines, and no network is assumed) on 100 generated
test-set-like 32x32 photographs (a smooth two-colour background with low-frequency texture, one
object of a class-dependent shape and colour with soft edges, lighting and sensor noise), and
they train on 500 more such images in the CIFAR-10 binary format. The output says which.

Then a dataset of the user's own images: 4 classes of those generated photographs as PNG files in
train/ and test/ class folders, `towers-cli import`ed, and cifar10-tutorial trained on it with a
4-class head, exported and checked as above (imported_dataset).

Exit status: 0 passed, 1 failed, 77 skipped: the onnxruntime environment cannot be made (no
network to PyPI), or Fashion-MNIST is not installed (packaging/install-deps.sh installs it),
except under CI (CI=true), where either is a failure.
"""
import argparse
import gzip
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/: check_common.py
from check_common import SKIP, check, failures, in_ci, read_maybe_gz, skip_or_fail, subset_of_idx  # noqa: E402
IMAGES = 100
TOLERANCE = 1e-4  # of each image's largest |logit|
PROB_TOLERANCE = 1e-4  # absolute








def outer(args):
    """Makes the environment (or says why not), then runs the checks in it."""
    made = subprocess.run(["/bin/bash", os.path.join(HERE, "setup_venv.sh"), args.venv])
    if made.returncode != 0:
        return skip_or_fail("check_classify", "the onnxruntime virtual environment could not be made "
                            "(tests/onnx/setup_venv.sh: pip install onnxruntime numpy; see above)")
    python = os.path.join(args.venv, "bin", "python")
    return subprocess.run([python, os.path.abspath(__file__), "--inner"] + sys.argv[1:]).returncode


# --- towers-cli ---

def cli(args, what, *, expect_json=False):
    t = time.monotonic()
    r = subprocess.run([ARGS.cli] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"towers-cli {' '.join(args[:1])} ({what}) exited {r.returncode}:\n"
                           f"{r.stderr[-3000:]}")
    print(f"        towers-cli {args[0]} ({what}): {time.monotonic() - t:.1f} s", flush=True)
    return json.loads(r.stdout) if expect_json else r.stdout


# --- images ---





def idx_test_images(folder, count):
    import numpy as np
    data = read_maybe_gz(folder, "t10k-images-idx3-ubyte")
    magic, n, h, w = struct.unpack(">IIII", data[:16])
    assert magic == 0x803 and n >= count, f"{folder}: bad t10k images header"
    return np.frombuffer(data, np.uint8, count * h * w, 16).reshape(count, h, w, 1)


def cifar_test_images(folder, count):
    import numpy as np
    with open(os.path.join(folder, "test_batch.bin"), "rb") as f:
        data = f.read(count * 3073)
    records = np.frombuffer(data, np.uint8).reshape(count, 3073)
    return records[:, 1:].reshape(count, 3, 32, 32).transpose(0, 2, 3, 1).copy()


def generated_cifar(count, seed):
    """`count` test-set-like 32x32 RGB photographs and their labels (0..9): see the docstring."""
    import numpy as np
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float64)
    images = np.empty((count, 32, 32, 3), np.uint8)
    labels = rng.integers(0, 10, count)
    for i, label in enumerate(labels):
        top, bottom = rng.uniform(20, 235, 3), rng.uniform(20, 235, 3)
        angle = rng.uniform(0, math.pi)
        t = ((xx - 16) * math.cos(angle) + (yy - 16) * math.sin(angle)) / 45 + 0.5
        img = top * (1 - t[..., None]) + bottom * t[..., None]
        for _ in range(3):  # low-frequency texture
            fy, fx, phase = rng.uniform(0.05, 0.4), rng.uniform(0.05, 0.4), rng.uniform(0, 6.3)
            img += rng.uniform(4, 18) * np.sin(fy * yy + fx * xx + phase)[..., None] * rng.uniform(0.5, 1, 3)
        cy, cx, r = rng.uniform(10, 22), rng.uniform(10, 22), rng.uniform(5, 11)
        shape = label % 5
        if shape == 0:
            d = np.hypot(yy - cy, xx - cx) / r
        elif shape == 1:
            d = np.maximum(abs(yy - cy), abs(xx - cx)) / r
        elif shape == 2:
            d = (abs(yy - cy) + abs(xx - cx)) / r
        elif shape == 3:
            d = np.hypot((yy - cy) * 2.2, xx - cx) / r
        else:
            d = np.hypot(yy - cy, (xx - cx) * 2.2) / r
        alpha = np.clip((1.0 - d) * 3, 0, 1)[..., None]  # soft edges
        hue = (label / 10 + rng.normal(0, 0.03)) * 2 * math.pi
        colour = 128 + 100 * np.array([math.cos(hue), math.cos(hue - 2.1), math.cos(hue + 2.1)])
        shade = 1 + 0.25 * ((yy - cy) / r)[..., None]  # lit from above
        img = img * (1 - alpha) + colour * shade * alpha
        img = img * rng.uniform(0.7, 1.2) + rng.uniform(-20, 20)  # exposure
        img += rng.normal(0, 4, img.shape)  # sensor noise
        images[i] = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return images, labels


def write_cifar_batch(path, images, labels):
    import numpy as np
    records = np.concatenate([labels.astype(np.uint8)[:, None],
                              images.transpose(0, 3, 1, 2).reshape(len(images), 3072)], axis=1)
    records.tofile(path)


def write_png(path, image):
    """An 8-bit grayscale or RGB PNG of one HWC uint8 image, byte for byte (no gamma chunk)."""
    h, w, c = image.shape

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + image[y].tobytes() for y in range(h))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0 if c == 1 else 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


# --- the comparison ---

def compare(label, onnx_logits, onnx_probs, classify, meta, expect):
    import numpy as np
    results = classify["results"]
    want = np.array([r["logits"] for r in results], np.float64)
    check(want.shape == onnx_logits.shape,
          f"{label}: classify gives {want.shape} logits, onnxruntime {onnx_logits.shape}")
    if want.shape != onnx_logits.shape:
        return
    scale = np.abs(want).max(axis=1)
    diff = np.abs(onnx_logits - want).max(axis=1)
    worst = int(np.argmax(diff / np.maximum(scale, 1e-30)))
    print(f"        {label}: max |onnxruntime - classify| / the image's largest |logit| = "
          f"{diff[worst] / max(scale[worst], 1e-30):.3g} (image {worst}: {diff[worst]:.3g} of "
          f"{scale[worst]:.3g})")
    check(bool((scale > 0).all()), f"{label}: no image has all-zero logits")
    check(bool((diff <= TOLERANCE * scale).all()),
          f"{label}: onnxruntime's logits equal classify's within {TOLERANCE} on all {len(want)} images")
    softmax = np.exp(want - want.max(axis=1, keepdims=True))
    softmax /= softmax.sum(axis=1, keepdims=True)
    top = [max(r["top"], key=lambda s: s["probability"]) for r in results]
    check(all(abs(t["probability"] - softmax[i, t["label"]]) < 1e-12 for i, t in enumerate(top))
          and all(len(r["top"]) == want.shape[1] for r in results),
          f"{label}: classify's probabilities are the softmax of its logits, every class listed")
    own = np.exp(onnx_logits - onnx_logits.max(axis=1, keepdims=True))
    own /= own.sum(axis=1, keepdims=True)
    check(np.abs(onnx_probs - own).max() <= 1e-6,
          f"{label}: the file's probabilities are the softmax of its logits")
    pdiff = np.abs(onnx_probs - softmax).max()
    check(pdiff <= PROB_TOLERANCE, f"{label}: probabilities equal classify's within {PROB_TOLERANCE} "
                                   f"(max difference {pdiff:.3g})")
    # Top classes agree wherever classify's top two are further apart than the tolerance.
    order = np.sort(want, axis=1)
    clear = order[:, -1] - order[:, -2] > 2 * TOLERANCE * scale
    same = onnx_logits.argmax(axis=1) == want.argmax(axis=1)
    check(bool(same[clear].all()), f"{label}: the same top class as classify on the "
                                   f"{int(clear.sum())} images with a clear one")
    check(len(set(want.argmax(axis=1).tolist())) >= 2,
          f"{label}: the model does not give every image the same class (a comparison that means "
          f"something)")
    names = [r["top"][0]["class"] for r in results]
    classes = json.loads(meta["towers.class_names"])
    check(all(classes[r["top"][0]["label"]] == n for r, n in zip(results, names)),
          f"{label}: towers.class_names are classify's class names")
    for key, value in expect.items():
        check(meta.get(key) == value, f"{label}: metadata {key} = {meta.get(key)!r} (want {value!r})")


def run_model(model, data, work, images, onnx_run):
    import numpy as np
    name = model["name"]
    print(f"--- {name} on {data['what']}", flush=True)
    run = os.path.join(work, name, "run")
    steps = {"mnist-convnet": 6}.get(name, 30)
    batch = {"mnist-convnet": 16}.get(name, 32)
    # The recipe's one-cycle to 0.2 over 30 steps leaves cifar10-resnet with all-zero logits.
    lr = {"cifar10-resnet": ["--lr", "0.02"]}.get(name, [])
    cli(["train", "--model", name, "--dataset", data["dataset"], "--data-dir", data["folder"],
         "--run-dir", run, "--steps", str(steps), "--batch-size", str(batch), "--ema-decay", "0.9",
         "--histogram-every", "0", "--log-every", str(steps), "--checkpoint-every", "0"] + lr,
        f"{steps} steps")
    folder = os.path.join(run, "checkpoints")
    checkpoints = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    if not check(len(checkpoints) == 1, f"{name}: the run wrote its checkpoint"):
        return
    checkpoint = os.path.join(folder, checkpoints[0])

    files = []
    for i, image in enumerate(images):
        files.append(os.path.join(work, name, f"test-{i:03d}.png"))
        write_png(files[-1], image)
    classify = {}
    for ema in (True, False):
        classify[ema] = cli(["classify", "--checkpoint", checkpoint, "--json", "--top-k", "1000"]
                            + ([] if ema else ["--no-ema"]) + files,
                            f"{len(files)} images" + ("" if ema else ", --no-ema"), expect_json=True)
        check(classify[ema]["ema"] is ema and [r["image"] for r in classify[ema]["results"]] == files,
              f"{name}: classify{'' if ema else ' --no-ema'} says ema={ema} and lists every image")
    a = np.array([r["logits"] for r in classify[True]["results"]])
    b = np.array([r["logits"] for r in classify[False]["results"]])
    check(np.abs(a - b).max() > 100 * TOLERANCE * np.abs(b).max(),
          f"{name}: the moving averages change the logits (so the EMA/raw checks mean something)")

    raw = os.path.join(work, name, "images.u8")
    images.tofile(raw)
    for variant, extra, ema, layout in [("nhwc", [], True, "NHWC"),
                                        ("nchw-opset11", ["--layout", "nchw", "--opset", "11"], True, "NCHW"),
                                        ("nhwc-no-ema", ["--no-ema"], False, "NHWC")]:
        label = f"{name} {variant}"
        onnx = os.path.join(work, name, f"{variant}.onnx")
        summary = cli(["export", "--checkpoint", checkpoint, "--output", onnx, "--json"] + extra,
                      variant, expect_json=True)
        check(summary["ema"] is ema and summary["layout"] == layout.lower(),
              f"{label}: export --json says ema={summary['ema']}, layout {summary['layout']}")
        prefix = onnx + ".out"
        t = time.monotonic()
        onnx_run({"model": onnx, "images": raw, "shape": list(images.shape), "output": prefix})
        print(f"        onnxruntime ({label}): {time.monotonic() - t:.1f} s", flush=True)
        with open(prefix + ".json", encoding="utf-8") as f:
            info = json.load(f)
        k = info["logitsShape"][1]
        logits = np.fromfile(prefix + ".logits", "<f4").reshape(-1, k).astype(np.float64)
        probs = np.fromfile(prefix + ".probabilities", "<f4").reshape(-1, k).astype(np.float64)
        compare(label, logits, probs, classify[ema], info["metadata"],
                {"towers.model": name, "towers.weights": "ema" if ema else "raw",
                 "towers.input_layout": layout, "towers.dataset": data["dataset"],
                 "towers.source_shape": json.dumps(list(images.shape[1:]), separators=(",", ":"))})
        check(info["inputs"][0]["shape"][0] == "batch", f"{label}: the batch dimension is dynamic")
        os.unlink(onnx)  # mnist-convnet's are 80 MB each


def imported_dataset(work, onnx_run):
    """A dataset of the user's own images (`towers-cli import`): generated 32x32 photographs of 4
    classes as PNG files in train/ and test/ class folders, imported, then cifar10-tutorial (24x24
    crops of the 32x32 images: the checkpoint's recorded image shape decides the ONNX crop) with
    a 4-class head, exported and run as every registered model is."""
    import numpy as np
    source = os.path.join(work, "imported", "photos")
    names = ["disc", "square", "diamond", "oval"]
    test_images = None
    for split, seeds in (("train", range(11, 16)), ("test", [2024])):
        kept = []
        for seed in seeds:
            images, labels = generated_cifar(100, seed)
            for i, label in enumerate(labels):
                if label < len(names):
                    folder = os.path.join(source, split, names[label])
                    os.makedirs(folder, exist_ok=True)
                    write_png(os.path.join(folder, f"{seed}-{i:03d}.png"), images[i])
                    kept.append(images[i])
        if split == "test":
            test_images = np.stack(kept)
    data_dir = os.path.join(work, "imported", "data")
    result = cli(["import", source, "--name", "shapes", "--data-dir", data_dir, "--json"],
                 "a folder of PNG files", expect_json=True)
    check(result["image_shape"] == [32, 32, 3] and [c["name"] for c in result["classes"]] == sorted(names),
          f"import: 32x32x3 images of the 4 class folders ({result['image_shape']}, "
          f"{[c['name'] for c in result['classes']]})")
    data = {"dataset": "shapes", "folder": data_dir,
            "what": f"{len(test_images)} generated 32x32 photographs imported from PNG files, 4 classes"}
    run_model({"name": "cifar10-tutorial"}, data, os.path.join(work, "imported"), test_images,
              onnx_run)


def inner(args):
    import numpy as np
    sys.path.insert(0, HERE)
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    import run_onnx  # noqa: E402  (tests/onnx/run_onnx.py: README's preprocessing)

    found = {d["name"]: d for d in cli(["datasets", "--json"], "where", expect_json=True)["datasets"]}
    if "fashion-mnist" not in found:
        return skip_or_fail("check_classify", "Fashion-MNIST is not installed (Debian's dataset-fashion-mnist, "
                            "/usr/share/datasets/fashion-mnist: packaging/install-deps.sh)")
    work = tempfile.mkdtemp(prefix="towers-onnx-classify-")
    source = found["fashion-mnist"]["location"]
    fashion = {"dataset": "fashion-mnist", "folder": os.path.join(work, "fashion-mnist"),
               "what": f"the first {IMAGES} Fashion-MNIST test images ({source})"}
    subset_of_idx(source, fashion["folder"], 5000, IMAGES)
    fashion_images = idx_test_images(fashion["folder"], IMAGES)
    check(fashion_images.tobytes() == idx_test_images(source, IMAGES).tobytes(),
          f"the test images are the first {IMAGES} of {source}")
    if "cifar10" in found:
        cifar = {"dataset": "cifar10", "folder": found["cifar10"]["location"]}
        cifar["what"] = f"the first {IMAGES} CIFAR-10 test images ({cifar['folder']})"
        cifar_images = cifar_test_images(cifar["folder"], IMAGES)
    else:
        folder = os.path.join(work, "cifar10")
        os.makedirs(folder)
        cifar_images, labels = generated_cifar(IMAGES, 2024)
        write_cifar_batch(os.path.join(folder, "test_batch.bin"), cifar_images, labels)
        for b in range(1, 6):
            train, labels = generated_cifar(100, b)
            write_cifar_batch(os.path.join(folder, f"data_batch_{b}.bin"), train, labels)
        with open(os.path.join(folder, "batches.meta.txt"), "w") as f:
            f.write("\n".join(["airplane", "automobile", "bird", "cat", "deer", "dog", "frog",
                               "horse", "ship", "truck"]) + "\n")
        cifar = {"dataset": "cifar10", "folder": folder,
                 "what": f"{IMAGES} generated test-set-like 32x32 images (towers-cli finds no "
                         f"CIFAR-10 here: `towers-cli download cifar10` makes the test use the real ones)"}
    print(f"onnxruntime {run_onnx.ort.__version__}, work folder {work}", flush=True)

    models = cli(["models", "--json"], "the registry", expect_json=True)
    check(len(models) >= 5, f"{len(models)} registered models")
    for model in models:
        if args.model and model["name"] not in args.model:
            continue
        shape = model["input_shape"]
        if shape[2] == 1 and shape[:2] == [28, 28]:
            data, images = fashion, fashion_images
        elif shape[2] == 3 and shape[0] <= 32 and shape[1] <= 32:
            data, images = cifar, cifar_images
        else:
            check(False, f"{model['name']}: no test images for input {shape}: extend check_classify.py")
            continue
        try:
            run_model(model, data, work, images, run_onnx.run)
        except Exception as e:  # a command that failed: that model fails, the others still run
            check(False, f"{model['name']}: {e}")
    if not args.model or "imported" in args.model:
        try:
            imported_dataset(work, run_onnx.run)
        except Exception as e:
            check(False, f"imported dataset: {e}")
    if failures:
        print(f"\n{len(failures)} check(s) FAILED (work folder kept: {work}):")
        for f in failures:
            print("  " + f)
        return 1
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    print("\nall checks passed")
    return 0


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", required=True, help="towers-cli")
    parser.add_argument("--venv", required=True, help="the onnxruntime virtual environment")
    parser.add_argument("--model", action="append", help="only this model, or imported: the imported dataset (repeatable; default: all)")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ARGS = parser.parse_args()
    return inner(ARGS) if ARGS.inner else outer(ARGS)


if __name__ == "__main__":
    sys.exit(main())
