#!/usr/bin/env python3
"""TensorBoard reads what towers-cli writes: TensorBoard's own reader (PyPI's tensorboard, in a
virtual environment that setup_venv.sh makes once) on short real runs of towers-cli train on a
small generated Fashion-MNIST-format dataset.

  check_events.py --cli build/ci/app/towers-cli --venv build/ci/tests/tensorboard/tbvenv

Checks, with tensorboard.backend.event_processing (EventAccumulator, the reader the web UI uses,
and EventFileLoader):
* every tag of the run is there; the scalars equal metrics.jsonl's and eval.jsonl's at their steps;
* histograms of every parameter and its gradient decode (counts, limits, the checkpoint's values);
* the image grid is a PNG of the right size; the configuration is in the text plugin;
* a resumed run adds a second file, the steps continue, and what the first run logged beyond the
  checkpoint it resumed from is dropped (from the file, and by TensorBoard at the restart
  marker), as it is from metrics.jsonl;
* a file cut in the middle of a record (a killed run) reads up to its last whole record, and on
  into the next file; a damaged record stops the reader (the CRCs are checked, and ours pass).

Exit status: 0 passed, 1 failed, 77 skipped (the environment cannot be made here: no network to
PyPI, no venv module), except under CI (CI=true), where that is a failure.
"""
import argparse
import gzip
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/: check_common.py
from check_common import SKIP, check, failures, in_ci  # noqa: E402






def outer(args):
    """Makes the environment (or says why not), then runs the checks in it."""
    made = subprocess.run([os.path.join(HERE, "setup_venv.sh"), args.venv])
    if made.returncode != 0:
        reason = "the TensorBoard virtual environment could not be made (see above)"
        if in_ci():
            print(f"check_events: FAILED: {reason}; under CI (CI={os.environ['CI']}) this fails the test")
            return 1
        print(f"check_events: SKIPPED: {reason}")
        return SKIP
    python = os.path.join(args.venv, "bin", "python")
    return subprocess.run([python, os.path.abspath(__file__), "--inner"] + sys.argv[1:]).returncode


# --- a small dataset in the real format (gzip'ed IDX) ---

def idx_images(count, rng):
    return struct.pack(">IIII", 0x803, count, 28, 28) + bytes(rng.getrandbits(8) for _ in range(count * 28 * 28))


def idx_labels(count, rng):
    return struct.pack(">II", 0x801, count) + bytes(rng.randrange(10) for _ in range(count))


def make_dataset(folder):
    os.makedirs(folder)
    rng = random.Random(7)
    for name, data in [("train-images-idx3-ubyte", idx_images(256, rng)), ("train-labels-idx1-ubyte", idx_labels(256, rng)),
                       ("t10k-images-idx3-ubyte", idx_images(64, rng)), ("t10k-labels-idx1-ubyte", idx_labels(64, rng))]:
        with gzip.open(os.path.join(folder, name + ".gz"), "wb") as f:
            f.write(data)


# --- reading what the run wrote, without TensorBoard ---

def json_lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def record_spans(data):
    """(start, end) of each whole TFRecord of `data` (framing only, no CRC check)."""
    spans, at = [], 0
    while len(data) - at >= 12:
        (length,) = struct.unpack_from("<Q", data, at)
        end = at + 12 + length + 4
        if end > len(data):
            break
        spans.append((at, end))
        at = end
    return spans


def safetensors_tensor(path, name):
    import numpy as np
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    t = header[name]
    begin, end = t["data_offsets"]
    return np.frombuffer(data[begin:end], dtype={"F32": np.float32, "F64": np.float64}[t["dtype"]])


def png_size(png):
    """(width, height, colour type, inflated image data) of a PNG, each chunk's CRC checked."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
    at, idat, width, height, colour = 8, b"", 0, 0, -1
    while at < len(png):
        (n,) = struct.unpack_from(">I", png, at)
        kind, body = png[at + 4:at + 8], png[at + 8:at + 8 + n]
        (crc,) = struct.unpack_from(">I", png, at + 8 + n)
        assert crc == zlib.crc32(kind + body), f"bad CRC in {kind}"
        if kind == b"IHDR":
            width, height, _, colour = struct.unpack_from(">IIBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    return width, height, colour, zlib.decompress(idat)


# --- the checks ---

def inner(args):
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea
    from tensorboard.compat.proto import event_pb2
    from tensorboard.util import tensor_util

    everything = {ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.IMAGES: 0, ea.TENSORS: 0, ea.COMPRESSED_HISTOGRAMS: 0}

    def accumulate(folder):
        acc = ea.EventAccumulator(folder, size_guidance=everything)
        acc.Reload()
        return acc

    def load_events(path):
        return list(event_file_loader.EventFileLoader(path).Load())

    tmp = tempfile.mkdtemp(prefix="tst_tensorboard_")
    try:
        make_dataset(os.path.join(tmp, "data", "fashion-mnist"))
        env = dict(os.environ, HOME=os.path.join(tmp, "home"), XDG_DATA_HOME=os.path.join(tmp, "xdg"),
                   TOWERS_DATA=os.path.join(tmp, "data"), TOWERS_RUNS=os.path.join(tmp, "runs"), OMP_NUM_THREADS="1",
                   TOWERS_CUDA_PLUGIN="/nonexistent/libtowers-cuda.so")
        run_dir = os.path.join(tmp, "runs", "run1")

        def cli(*argv, expect=0):
            r = subprocess.run([args.cli, *argv], env=env, capture_output=True, text=True, timeout=300)
            if not check(r.returncode == expect, f"towers-cli {' '.join(argv)} exits {expect} (got {r.returncode})"):
                print(r.stdout[-3000:], r.stderr[-3000:], sep="\n")
                raise SystemExit(1)
            return r

        bad = cli("train", "--histogram-every", "-1", expect=2)
        check("--histogram-every" in bad.stderr, "a bad --histogram-every is refused naming the option")

        # Run 1: 6 steps of fashion-fast with its distortions on 2 towers, then the last checkpoint
        # taken away: as if the run was killed after logging step 5 but before checkpoint 6.
        common = ["--towers", "2", "--batch-size", "16", "--log-every", "1", "--eval-every", "3",
                  "--checkpoint-every", "3", "--histogram-every", "3", "--run-dir", run_dir, "--json"]
        cli("train", "--dataset", "fashion-mnist", "--steps", "6", "--ema-decay", "0.9", *common)
        files1 = sorted(f for f in os.listdir(run_dir) if f.startswith("events.out.tfevents."))
        check(len(files1) == 1, f"a run writes one events file ({files1})")
        first = os.path.join(run_dir, files1[0])
        first_copy = os.path.join(tmp, "first-events")
        shutil.copyfile(first, first_copy)
        os.rename(os.path.join(run_dir, "checkpoints", "ckpt-00000006.safetensors"), os.path.join(tmp, "ckpt-6"))
        # Run 2: resumed from step 3, extended to 9 steps.
        cli("train", "--resume", "--steps", "9", *common)
        files = sorted(f for f in os.listdir(run_dir) if f.startswith("events.out.tfevents."))
        check(len(files) == 2 and files[0] == files1[0], f"the resumed run adds a second file, sorting after the first ({files})")
        second = os.path.join(run_dir, files[-1])
        kept = load_events(first)
        check(max(e.step for e in kept) == 3 and len(kept) < len(load_events(first_copy)),
              "the resume dropped what the first file held beyond step 3 (as metrics.jsonl's lines)")

        metrics = json_lines(os.path.join(run_dir, "metrics.jsonl"))
        evals = json_lines(os.path.join(run_dir, "eval.jsonl"))
        with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        steps = [m["step"] for m in metrics]
        check(steps == list(range(1, 10)), f"metrics.jsonl: steps 1 to 9 once each ({steps})")

        acc = accumulate(run_dir)
        tags = acc.Tags()
        # Scalars: every tag, at metrics.jsonl's steps, with its values (float32 on disk).
        per_step = {"train/loss": "loss", "train/cross_entropy": "crossEntropy", "train/learning_rate": "lr",
                    "train/epoch": "epoch", "throughput/examples_per_sec": "examplesPerSec", "time/step_ms": "stepMs",
                    "time/data_wait_ms": "dataWaitMs", "time/compute_ms": "computeMs",
                    "time/allreduce_ms": "allReduceMs", "time/update_ms": "updateMs", "train/grad_norm": "gradNorm"}
        expected = dict((tag, [(m["step"], f32(m[key])) for m in metrics]) for tag, key in per_step.items())
        for t in range(2):
            expected[f"time/tower_{t}/compute_ms"] = [(m["step"], f32(m["towerComputeMs"][t])) for m in metrics]
            for part in ("comm", "data", "update"):
                expected[f"time/tower_{t}/{part}_ms"] = [
                    (m["step"], f32(m["towerTimes"][t][f"{part}Ms"])) for m in metrics]
            expected[f"throughput/tower_{t}/examples_per_sec"] = [
                (m["step"], f32(16 * 1000.0 / m["towerComputeMs"][t])) for m in metrics]
        expected["test/precision_at_1_ema"] = [(e["step"], f32(e["precisionAt1"])) for e in evals]
        expected["test/cross_entropy_ema"] = [(e["step"], f32(e["meanCrossEntropy"])) for e in evals]
        check(sorted(tags["scalars"]) == sorted(expected),
              f"the scalar tags are {sorted(expected)} (got {sorted(tags['scalars'])})")
        for tag, want in expected.items():
            got = [(s.step, s.value) for s in acc.Scalars(tag)] if tag in tags["scalars"] else []
            check(got == want, f"{tag}: the values of the logs at their steps" + ("" if got == want else f": {got} != {want}"))
        check([e["step"] for e in evals] == [3, 6, 9], f"eval.jsonl: steps 3, 6, 9 ({[e['step'] for e in evals]})")

        # Histograms: every trainable parameter at 0 (the initial weights), 3, 6, 9; gradients at 3, 6, 9.
        # The trainable parameters: those with moving averages (ema.<name>) in a checkpoint.
        with open(os.path.join(run_dir, "checkpoints", "ckpt-00000009.safetensors"), "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            names = [k[4:] for k in json.loads(f.read(n)) if k.startswith("ema.")]
        want_tags = {n.replace(".", "/") for n in names} | {n.replace(".", "/") + "/gradients" for n in names}
        histogram_tags = set(tags["histograms"])
        check(len(names) >= 8 and histogram_tags == want_tags,
              f"histograms of every parameter and its gradient, none of a buffer ({sorted(histogram_tags)})")
        for tag in sorted(histogram_tags):
            events = acc.Histograms(tag)
            want = [3, 6, 9] if tag.endswith("/gradients") else [0, 3, 6, 9]
            ok = [h.step for h in events] == want
            for h in events:
                v = h.histogram_value
                ok = ok and v.num > 0 and sum(v.bucket) == v.num and list(v.bucket_limit) == sorted(v.bucket_limit)
                ok = ok and len(v.bucket) == len(v.bucket_limit) and v.min <= v.max
            check(ok, f"histogram {tag}: steps {want}, counts and limits consistent ({[h.step for h in events]})")
        weights = safetensors_tensor(os.path.join(run_dir, "checkpoints", "ckpt-00000009.safetensors"), "conv1.weight")
        last = acc.Histograms("conv1/weight")[-1].histogram_value
        check(last.num == weights.size and last.min == float(weights.min()) and last.max == float(weights.max())
              and abs(last.sum - float(weights.astype("float64").sum())) < 1e-9 * max(1.0, abs(last.sum)),
              "the histogram of conv1/weight at step 9 has the final checkpoint's values")

        # The image grid: 32 training images (2 towers x 16) of 28x28, 6 x 6 tiles with 2-pixel gaps.
        images = acc.Images("input/training_images") if "input/training_images" in tags["images"] else []
        check([i.step for i in images] == [0, 4], f"the image grid at the start of each run: steps 0 and 4 ({[i.step for i in images]})")
        for i in images:
            width, height, colour, raw = png_size(i.encoded_image_string)
            size = 6 * 28 + 7 * 2
            check((width, height, colour) == (size, size, 0) and (i.width, i.height) == (size, size)
                  and len(raw) == height * (width + 1), f"the image at step {i.step} is a {size}x{size} grayscale PNG")

        # The configuration (text plugin).
        texts = acc.Tensors("config") if "config" in tags["tensors"] else []
        check([t.step for t in texts] == [0, 4], f"the configuration at the start of each run ({[t.step for t in texts]})")
        if texts:
            text = texts[-1].tensor_proto.string_val[0].decode("utf-8")
            check(config["runId"] in text and '"steps": 9' in text and '"histogramEvery": 3' in text,
                  "the configuration text is the resumed run's config.json")

        # What the web UI's plugins see (the reader behind tensorboard --logdir).
        plugins = pea.EventAccumulator(run_dir, size_guidance={"tensors": 0})
        plugins.Reload()
        for plugin, tag in [("scalars", "train/loss"), ("histograms", "conv1/weight"),
                            ("images", "input/training_images"), ("text", "config")]:
            check(tag in plugins.PluginTagToContent(plugin), f"TensorBoard's {plugin} plugin lists {tag}")
        # The hyperparameters, as TensorBoard's HParams plugin parses its session start: the run's
        # configuration, a column each in the HParams dashboard.
        from tensorboard.plugins.hparams import metadata as hparams_metadata
        try:
            content = plugins.PluginTagToContent("hparams")["_hparams_/session_start_info"]
            start = hparams_metadata.parse_session_start_info_plugin_data(content)
            hp = dict((k, v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))) for k, v in start.hparams.items())
        except Exception as e:  # noqa: BLE001 (whatever fails, the check below names it)
            hp, start = {"error": repr(e)}, None
        want_hp = {"model": "fashion-fast", "dataset": "fashion-mnist", "lr": config["lr"], "towers": 2,
                   "batch_per_tower": 16, "accumulate": 1, "global_batch": 32, "processes": 1, "ema_decay": 0.9, "precision": "fp32",
                   "device": "cpu", "seed": 1, "dropout": True, "validation": 0, "steps": 9}
        check(all(hp.get(k) == v for k, v in want_hp.items()),
              f"the HParams plugin reads the resumed run's hyperparameters, 9 steps ({hp})")
        starts = [e for f in files for e in load_events(os.path.join(run_dir, f))
                  if any(v.tag == "_hparams_/session_start_info" for v in e.summary.value)]
        check(len(starts) == 1, f"one session start, the resumed run's: the first file's was dropped ({len(starts)})")
        ends = [hparams_metadata.parse_session_end_info_plugin_data(v.metadata.plugin_data.content)
                for f in files for e in load_events(os.path.join(run_dir, f))
                for v in e.summary.value if v.tag == "_hparams_/session_end_info"]
        check([end.status for end in ends] == [1],
              f"one session end, the resumed run's, STATUS_SUCCESS ({[end.status for end in ends]})")
        check(start is not None and start.model_uri == os.path.join(run_dir, "checkpoints"),
              "the session start names where the run keeps its checkpoints")
        loss = [(e.step, tensor_util.make_ndarray(e.tensor_proto).item()) for e in plugins.Tensors("train/loss")]
        check(loss == expected["train/loss"], "the scalars plugin's train/loss curve is one continuous curve, steps 1 to 9")

        # Had the first file not been rewritten, TensorBoard would drop its steps after 3 at the
        # second file's restart marker.
        unrewritten = os.path.join(tmp, "unrewritten")
        os.makedirs(unrewritten)
        shutil.copyfile(first_copy, os.path.join(unrewritten, files[0]))
        shutil.copyfile(second, os.path.join(unrewritten, files[-1]))
        got = [(s.step, s.value) for s in accumulate(unrewritten).Scalars("train/loss")]
        check(got == expected["train/loss"], f"the restart marker drops the first file's steps 4 to 6 ({[s for s, _ in got]})")

        # A killed run: the first file cut in the middle of the record of step 2's scalars, the
        # second file as it is. TensorBoard reads the first up to its last whole record, then the second.
        with open(first_copy, "rb") as f:
            data = f.read()
        spans = record_spans(data)
        all_events = load_events(first_copy)
        check(len(all_events) == len(spans) and record_spans(data)[-1][1] == len(data),
              f"TensorBoard reads every record of a whole file ({len(all_events)} of {len(spans)})")
        cut_record = next(i for i, e in enumerate(all_events)
                          if e.step == 2 and any(v.tag == "train/loss" for v in e.summary.value))
        for label, cut in [("in the middle of a record", (spans[cut_record][0] + spans[cut_record][1]) // 2),
                           ("inside a record's length", spans[cut_record][0] + 5),
                           ("after the length's CRC", spans[cut_record][0] + 12)]:
            killed = os.path.join(tmp, "killed-" + str(cut))
            os.makedirs(killed)
            with open(os.path.join(killed, files1[0]), "wb") as f:
                f.write(data[:cut])
            got = load_events(os.path.join(killed, files1[0]))
            check([e.SerializeToString() for e in got] == [e.SerializeToString() for e in all_events[:cut_record]],
                  f"a file cut {label} reads its {cut_record} whole records")
            shutil.copyfile(second, os.path.join(killed, files[-1]))
            steps_read = [s.step for s in accumulate(killed).Scalars("train/loss")]
            check(steps_read == [1] + list(range(4, 10)),
                  f"cut {label}: the run reads on into the resumed file (train/loss at {steps_read})")
        # A damaged record stops TensorBoard's reader there: it checks the CRC-32Cs (and ours pass).
        damaged = bytearray(data)
        damaged[spans[cut_record][0] + 14] ^= 0x01
        broken = os.path.join(tmp, "broken-events")
        with open(broken, "wb") as f:
            f.write(bytes(damaged))
        check(len(load_events(broken)) == cut_record, "a record with a flipped bit fails its CRC: reading stops before it")
        raw = event_pb2.Event.FromString(data[spans[0][0] + 12:spans[0][1] - 4])
        check(raw.file_version == "brain.Event:2", "the first record is the file version, brain.Event:2")

        # A run that diverges ends as a failure in the HParams dashboard.
        diverged = os.path.join(tmp, "diverged")
        cli("train", "--dataset", "fashion-mnist", "--steps", "30", "--lr", "1e6", "--lr-schedule", "constant",
            "--batch-size", "16", "--histogram-every", "0", "--run-dir", diverged, expect=1)
        try:
            dplugins = pea.EventAccumulator(diverged)
            dplugins.Reload()
            dend = hparams_metadata.parse_session_end_info_plugin_data(
                dplugins.PluginTagToContent("hparams")["_hparams_/session_end_info"])
            status = dend.status
        except Exception as e:  # noqa: BLE001 (whatever fails, the check below names it)
            status = repr(e)
        check(status == 2, f"a diverged run's session ends with STATUS_FAILURE ({status})")

        # A run that holds a validation set out: its evaluations are validation/ scalars.
        validated = os.path.join(tmp, "validated")
        cli("train", "--dataset", "fashion-mnist", "--steps", "4", "--towers", "2", "--batch-size", "16",
            "--eval-every", "2", "--validation", "0.25", "--histogram-every", "0", "--run-dir", validated, "--json")
        vevals = json_lines(os.path.join(validated, "eval.jsonl"))
        check([e["set"] for e in vevals] == ["validation", "validation"], "eval.jsonl names the validation set")
        vtags = accumulate(validated).Tags()["scalars"]
        check("test/precision_at_1" not in vtags, "no test/ scalars for a run evaluated on its validation set")
        for name, key in [("precision_at_1", "precisionAt1"), ("cross_entropy", "meanCrossEntropy")]:
            got = [(s.step, s.value) for s in accumulate(validated).Scalars("validation/" + name)] \
                if "validation/" + name in vtags else []
            check(got == [(e["step"], f32(e[key])) for e in vevals], f"validation/{name}: eval.jsonl's values at steps 2, 4")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"check_events: {'FAILED: ' + str(len(failures)) + ' check(s)' if failures else 'all checks passed'}")
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", required=True, help="the towers-cli to run")
    p.add_argument("--venv", required=True, help="the virtual environment with TensorBoard (made when missing)")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    return inner(args) if args.inner else outer(args)


if __name__ == "__main__":
    sys.exit(main())
