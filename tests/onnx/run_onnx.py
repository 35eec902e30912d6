"""Runs exported ONNX models in onnxruntime, for tests/app/tst_onnx_export.cpp (and for
check_classify.py beside it, which imports run() and preprocess()).

usage: run_onnx.py MANIFEST.json

The manifest is a list of cases, each {"model": FILE, "output": PREFIX} and either
  "input": FILE, "shape": [...]   raw little-endian float32, fed to the model's input as it is, or
  "images": FILE, "shape": [...]  raw uint8 images [N, H, W, C] of the model's towers.source_shape,
                                  preprocessed from the model's metadata_props by preprocess()
                                  below, as README.md ("ONNX") tells users to.
For each case it writes PREFIX.logits and PREFIX.probabilities (raw float32, [N, classes]) and
PREFIX.json (the input's and outputs' names and shapes, and the metadata_props). Exit status 0
when every case ran; anything else is an error with its traceback.
"""

import json
import sys

import numpy as np
import onnxruntime as ort


def preprocess(images, meta):
    """uint8 images [N, H, W, C] of towers.source_shape -> the model's input, as classify does."""
    top, left, height, width = json.loads(meta["towers.crop"])
    x = images[:, top:top + height, left:left + width, :].astype(np.float64)
    norm = meta["towers.normalization"]
    if norm == "mean_std":
        x = (x / 255 - np.array(json.loads(meta["towers.mean"]))) / np.array(json.loads(meta["towers.std"]))
    elif norm == "per_image":  # tf.image.per_image_standardization
        std = np.maximum(x.std(axis=(1, 2, 3), keepdims=True), 1 / np.sqrt(x[0].size))
        x = (x - x.mean(axis=(1, 2, 3), keepdims=True)) / std
    else:  # "scale"
        x = x / 255
    if meta["towers.input_layout"] == "NCHW":
        x = x.transpose(0, 3, 1, 2)
    return x.astype(np.float32)


def run(case):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(case["model"], options, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    shape = case["shape"]
    if "images" in case:
        images = np.fromfile(case["images"], dtype=np.uint8).reshape(shape)
        x = preprocess(images, meta)
    else:
        x = np.fromfile(case["input"], dtype="<f4").reshape(shape)
    inputs = session.get_inputs()
    logits, probabilities = session.run(["logits", "probabilities"], {inputs[0].name: x})
    prefix = case["output"]
    logits.astype("<f4").tofile(prefix + ".logits")
    probabilities.astype("<f4").tofile(prefix + ".probabilities")
    info = {
        "inputs": [{"name": i.name, "shape": i.shape, "type": i.type} for i in inputs],
        "outputs": [{"name": o.name, "shape": o.shape} for o in session.get_outputs()],
        "logitsShape": list(logits.shape),
        "metadata": meta,
        "onnxruntime": ort.__version__,
    }
    with open(prefix + ".json", "w", encoding="utf-8") as f:
        json.dump(info, f)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    for case in cases:
        run(case)
    print(f"ran {len(cases)} cases in onnxruntime {ort.__version__}")


if __name__ == "__main__":
    main()
