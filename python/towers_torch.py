"""PyTorch twins of the Towers models, and a pure-Python safetensors reader/writer.

The modules' ``state_dict`` names and layouts are exactly those of Towers checkpoints (conv
weights OIHW, linear weights [out, in], flatten in C,H,W order), so a checkpoint loads directly::

    import towers_torch as tt
    tensors, meta = tt.load_safetensors("run/checkpoints/step-1000.safetensors")
    model = tt.build_for_checkpoint(meta)  # a built-in model, or your model file's network
    model.load_state_dict(tensors)
    model.eval()
    logits = model(images_nchw)

Inputs are NCHW float tensors (Towers feeds NHWC; permute with ``x.permute(0, 3, 1, 2)``).
See docs/pytorch-mapping.md. Needs only the standard library and torch.
"""

import json
import math
import os
import struct
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "MODELS", "INPUT_SHAPES", "build", "weight_decay", "total_loss", "tf_same_max_pool",
    "tf_same_avg_pool",
    "FromDefinition", "from_definition", "build_for_checkpoint",
    "load_safetensors", "save_safetensors",
]


# --------------------------------------------------------------------------------------------
# Building blocks


def _tf_same_pad(x, kernel, stride, value):
    """TensorFlow's SAME padding of a window (the odd pixel at the bottom and right); `kernel` is
    a side or (height, width)."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    pads = []
    for size, k in ((x.shape[-1], kw), (x.shape[-2], kh)):  # F.pad wants the last dim first
        out = math.ceil(size / stride)
        total = max((out - 1) * stride + k - size, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads, value=value) if any(pads) else x


def tf_same_max_pool(x, kernel, stride):
    """Max pooling with TensorFlow's SAME padding (extra padding goes bottom/right, as -inf)."""
    return F.max_pool2d(_tf_same_pad(x, kernel, stride, -math.inf), kernel, stride)


def tf_same_avg_pool(x, kernel, stride):
    """Average pooling with TensorFlow's SAME padding, the pads not counted (a border window
    averages its real elements only): the zero-padded windows' means over those of a mask of ones."""
    ones = torch.ones_like(x[:1, :1])
    return (F.avg_pool2d(_tf_same_pad(x, kernel, stride, 0.0), kernel, stride)
            / F.avg_pool2d(_tf_same_pad(ones, kernel, stride, 0.0), kernel, stride))


def tf_lrn(depth_radius=4, bias=1.0, alpha=0.001 / 9.0, beta=0.75):
    """tf.nn.lrn as nn.LocalResponseNorm: PyTorch divides alpha by the window size."""
    size = 2 * depth_radius + 1
    return nn.LocalResponseNorm(size=size, alpha=alpha * size, beta=beta, k=bias)


class ConvBN(nn.Module):
    """conv 3x3 (no bias) -> BatchNorm -> ReLU."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class ResLayer(nn.Module):
    """ConvBN -> 2x2 max pool, then optionally out = pooled + res2(res1(pooled))."""

    def __init__(self, cin, cout, residual):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        if residual:
            self.res1 = ConvBN(cout, cout)
            self.res2 = ConvBN(cout, cout)
        self.residual = residual

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        if self.residual:
            x = x + self.res2(self.res1(x))
        return x


# --------------------------------------------------------------------------------------------
# The four models


class Cifar10Tutorial(nn.Module):
    """TensorFlow's CIFAR-10 tutorial network, 3x24x24 input, 1,068,298 parameters."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 5, padding=2)
        self.norm1 = tf_lrn()
        self.conv2 = nn.Conv2d(64, 64, 5, padding=2)
        self.norm2 = tf_lrn()
        self.local3 = nn.Linear(64 * 6 * 6, 384)
        self.local4 = nn.Linear(384, 192)
        self.softmax_linear = nn.Linear(192, num_classes)

    def forward(self, x):
        x = tf_same_max_pool(F.relu(self.conv1(x)), 3, 2)  # pool1: 24 -> 12
        x = self.norm1(x)
        x = self.norm2(F.relu(self.conv2(x)))
        x = tf_same_max_pool(x, 3, 2)  # pool2: 12 -> 6
        x = torch.flatten(x, 1)
        x = F.relu(self.local3(x))
        x = F.relu(self.local4(x))
        return self.softmax_linear(x)


class MnistConvnet(nn.Module):
    """The seeds' multi-GPU MNIST net, 1x28x28 input. fc1/fc2 have no activation (as the seed)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 64, 5)
        self.conv2 = nn.Conv2d(64, 256, 3)
        self.conv3 = nn.Conv2d(256, 512, 3)
        self.fc1 = nn.Linear(512 * 4 * 4, 2048)
        self.drop1 = nn.Dropout(0.25)
        self.fc2 = nn.Linear(2048, 1024)
        self.drop2 = nn.Dropout(0.25)
        self.fc3 = nn.Linear(1024, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # 28 -> 24 -> 12
        x = F.relu(self.conv2(x))  # 10
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)  # 8 -> 4
        x = torch.flatten(x, 1)
        x = self.drop1(self.fc1(x))
        x = self.drop2(self.fc2(x))
        return self.fc3(x)


class FashionFast(nn.Module):
    """A small fast net for 28x28 grayscale images."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.drop1 = nn.Dropout(0.25)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)  # 28 -> 14
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)  # 14 -> 7
        x = torch.flatten(x, 1)
        x = self.drop1(F.relu(self.fc1(x)))
        return self.fc2(x)


class FashionWide(nn.Module):
    """The longer Fashion-MNIST recipe's network: 2 x (2 x conv 3x3 + BN + ReLU, max-pool 2)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 32, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(64)
        self.conv4 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
        self.bn4 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * 7 * 7, 256)
        self.drop1 = nn.Dropout(0.4)
        self.fc2 = nn.Linear(256, num_classes)

    def forward(self, x):
        x = F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))
        x = F.max_pool2d(x, 2)  # 28 -> 14
        x = F.relu(self.bn4(self.conv4(F.relu(self.bn3(self.conv3(x))))))
        x = F.max_pool2d(x, 2)  # 14 -> 7
        x = torch.flatten(x, 1)
        x = self.drop1(F.relu(self.fc1(x)))
        return self.fc2(x)


class Cifar10Resnet(nn.Module):
    """Half-width ResNet-9 (airbench style), 3x32x32 input."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.prep = ConvBN(3, 32)
        self.layer1 = ResLayer(32, 64, residual=True)  # 32 -> 16
        self.layer2 = ResLayer(64, 128, residual=False)  # 16 -> 8
        self.layer3 = ResLayer(128, 256, residual=True)  # 8 -> 4
        self.fc = nn.Linear(256, num_classes, bias=False)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.prep(x))))
        x = F.adaptive_max_pool2d(x, 1).flatten(1)  # global max pool over 4x4
        return self.fc(x)


class FromDefinition(nn.Module):
    """A network of a Towers model file (docs/models.md): its layers as this module's children,
    under the file's layer names (none has a dot), so its state_dict is the checkpoint's."""

    def __init__(self, definition, num_classes=10):
        super().__init__()
        if isinstance(definition, str):
            definition = json.loads(definition)
        self.model_name = definition["name"]
        h, w, c = definition["input"]
        self.input_shape = (c, h, w)
        self.weight_decays = {}
        self._counts = {}
        self._plan = self._build(definition["layers"], (c, h, w), num_classes)
        del self._counts

    _PREFIX = {"conv2d": "conv", "batchnorm": "bn", "maxpool": "pool", "avgpool": "avgpool",
               "lrn": "norm", "flatten": "flatten", "linear": "fc", "dropout": "drop",
               "residual": "res", "concat": "concat"}

    # A pool's global, SAME and VALID forms.
    _POOLS = {"maxpool": (F.adaptive_max_pool2d, tf_same_max_pool, F.max_pool2d),
              "avgpool": (F.adaptive_avg_pool2d, tf_same_avg_pool, F.avg_pool2d)}

    def _name(self, layer):
        kind = layer["type"]
        n = self._counts[kind] = self._counts.get(kind, 0) + 1
        prefix = self._PREFIX[kind]
        return layer.get("name", prefix if kind == "flatten" and n == 1 else f"{prefix}{n}")

    def _build(self, layers, shape, num_classes):
        """[(kind, name, options, body)], registering the modules; `shape` is (C, H, W) or (F,)."""
        plan = []
        for layer in layers:
            kind, name = layer["type"], self._name(layer)
            body = None
            if kind == "conv2d":
                kernel = layer.get("kernel", 3)  # a side, or [height, width]
                module = nn.Conv2d(shape[0], layer["filters"],
                                   kernel if isinstance(kernel, int) else tuple(kernel),
                                   layer.get("stride", 1), bias=layer.get("bias", True))
                self.add_module(name, module)
                if layer.get("weight_decay", 0):
                    self.weight_decays[f"{name}.weight"] = layer["weight_decay"]
            elif kind == "batchnorm":
                self.add_module(name, nn.BatchNorm2d(shape[0], eps=layer.get("epsilon", 1e-5),
                                                     momentum=layer.get("momentum", 0.1)))
            elif kind == "linear":
                units = num_classes if layer["units"] == "classes" else layer["units"]
                self.add_module(name, nn.Linear(shape[0], units, bias=layer.get("bias", True)))
                if layer.get("weight_decay", 0):
                    self.weight_decays[f"{name}.weight"] = layer["weight_decay"]
            elif kind == "lrn":
                self.add_module(name, tf_lrn(layer.get("radius", 5), layer.get("bias", 1.0),
                                             layer.get("alpha", 1.0), layer.get("beta", 0.5)))
            elif kind == "dropout":
                self.add_module(name, nn.Dropout(layer["rate"]))
            elif kind == "residual":
                body = self._build(layer["layers"], shape, num_classes)
            elif kind == "concat":  # each branch's own plan; an empty one passes its input
                body = [self._build(branch, shape, num_classes) for branch in layer["branches"]]
            plan.append((kind, name, layer, body))
            shape = self._shape_after(plan[-1], shape)
        return plan

    def _shape_after(self, step, shape):
        """The shape after one step, by running it on zeros (no gradient, evaluation mode)."""
        probe = torch.zeros((1,) + tuple(shape))
        was = self.training
        self.eval()
        with torch.no_grad():
            out = self._run([step], probe)
        self.train(was)
        return tuple(out.shape[1:])

    def _run(self, plan, x):
        for kind, name, layer, body in plan:
            if kind == "conv2d":
                conv = getattr(self, name)
                pad = layer.get("padding", "same")
                if pad == "same":
                    x = _tf_same_pad(x, tuple(conv.kernel_size), conv.stride[0], 0.0)
                elif isinstance(pad, int) and pad:
                    x = F.pad(x, [pad] * 4)
                x = conv(x)
                if layer.get("activation") == "relu":
                    x = F.relu(x)
            elif kind == "batchnorm":
                x = getattr(self, name)(x)
                if layer.get("relu", False):
                    x = F.relu(x)
            elif kind in self._POOLS:
                global_pool, same_pool, valid_pool = self._POOLS[kind]
                if layer.get("global", False):
                    x = global_pool(x, 1)
                else:
                    size = layer.get("size", 2)
                    stride = layer.get("stride", size)
                    same = layer.get("padding", "valid") == "same"
                    x = (same_pool if same else valid_pool)(x, size, stride)
            elif kind == "flatten":
                x = torch.flatten(x, 1)
            elif kind == "linear":
                x = getattr(self, name)(x)
                if layer.get("activation") == "relu":
                    x = F.relu(x)
            elif kind in ("lrn", "dropout"):
                x = getattr(self, name)(x)
            elif kind == "residual":
                x = x + self._run(body, x)
            elif kind == "concat":
                x = torch.cat([self._run(branch, x) for branch in body], 1)
        return x

    def forward(self, x):
        return self._run(self._plan, x)


def from_definition(definition, num_classes=10):
    """The PyTorch twin of a model file's network: `definition` is the file's JSON (text or
    dict), as a run keeps it in config.json's "modelDefinition" and every checkpoint's "config"
    metadata (see build_for_checkpoint)."""
    return FromDefinition(definition, num_classes)


def build_for_checkpoint(meta):
    """The module for a checkpoint's metadata (load_safetensors' second result): a built-in
    model by name, or the network of the model file its run was trained from."""
    classes = len(json.loads(meta.get("class_names", "[]"))) or 10
    config = json.loads(meta.get("config") or "{}")
    if "modelDefinition" in config:
        return from_definition(config["modelDefinition"], classes)
    return build(meta["model"], classes)


MODELS = {
    "cifar10-tutorial": Cifar10Tutorial,
    "mnist-convnet": MnistConvnet,
    "fashion-fast": FashionFast,
    "fashion-wide": FashionWide,
    "cifar10-resnet": Cifar10Resnet,
}

# (C, H, W) of one input image.
INPUT_SHAPES = {
    "cifar10-tutorial": (3, 24, 24),
    "mnist-convnet": (1, 28, 28),
    "fashion-fast": (1, 28, 28),
    "fashion-wide": (1, 28, 28),
    "cifar10-resnet": (3, 32, 32),
}

_WEIGHT_DECAY = {
    "cifar10-tutorial": {"local3.weight": 0.004, "local4.weight": 0.004},
}


def build(name, num_classes=10):
    """A freshly initialised module for model `name` with `num_classes` outputs (a checkpoint's:
    len(json.loads(meta["class_names"]))); KeyError lists the known names."""
    if name not in MODELS:
        raise KeyError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    return MODELS[name](num_classes)


def weight_decay(name):
    """{parameter name: L2 coefficient} of model `name`; parameters not listed have none."""
    if name not in MODELS:
        raise KeyError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    return dict(_WEIGHT_DECAY.get(name, {}))


def total_loss(name, module, logits, labels, label_smoothing=0.0):
    """Mean cross-entropy (with label smoothing, as Towers' --label-smoothing) + sum of
    wd * 0.5 * ||w||^2 (TensorFlow's l2_loss) over decayed params (a model file's network: its
    layers' "weight_decay")."""
    loss = F.cross_entropy(logits, labels.long(), label_smoothing=label_smoothing)
    params = dict(module.named_parameters())
    decays = module.weight_decays if isinstance(module, FromDefinition) else weight_decay(name)
    for pname, wd in decays.items():
        loss = loss + wd * 0.5 * params[pname].pow(2).sum()
    return loss


# --------------------------------------------------------------------------------------------
# safetensors, by hand (no dependency on the `safetensors` package)

_DTYPES = {
    "F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16,
    "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8,
    "F16": torch.float16, "I16": torch.int16, "I8": torch.int8, "BOOL": torch.bool,
}
_CODES = {v: k for k, v in _DTYPES.items()}
_MAX_HEADER = 100_000_000


def _reject_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key '{key}' in the header")
        out[key] = value
    return out


def load_safetensors(path):
    """Reads a safetensors file: (dict name -> CPU tensor in file order, metadata dict).

    Validates the file and raises ValueError naming it and what is wrong.
    """
    with open(path, "rb") as f:
        blob = f.read()

    def bad(what):
        return ValueError(f"{path}: not a valid safetensors file: {what}")

    if len(blob) < 8:
        raise bad(f"{len(blob)} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > _MAX_HEADER or n > len(blob) - 8:
        raise bad(f"header length {n} does not fit in a {len(blob)}-byte file")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except (UnicodeDecodeError, ValueError) as e:
        raise bad(f"bad JSON header: {e}") from None
    if not isinstance(header, dict):
        raise bad("the header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise bad("__metadata__ must map strings to strings")
    data = memoryview(blob)[8 + n:]
    entries = []
    for name, info in header.items():
        try:
            code, shape, (begin, end) = info["dtype"], list(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise bad(f"tensor '{name}': needs dtype, shape and data_offsets [begin, end]"
                      ) from None
        if code not in _DTYPES:
            raise bad(f"tensor '{name}': unsupported dtype {code!r}")
        ints = shape + [begin, end]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
            raise bad(f"tensor '{name}': shape and offsets must be non-negative integers")
        dtype = _DTYPES[code]
        size = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if not begin <= end <= len(data) or end - begin != size:
            raise bad(f"tensor '{name}': data_offsets [{begin}, {end}] do not hold {code} "
                      f"{shape} ({size} bytes) inside the {len(data)}-byte data region")
        entries.append((begin, end, name, dtype, shape))
    entries.sort()
    cursor = 0
    for begin, end, name, _, _ in entries:
        if begin != cursor:
            raise bad(f"tensor '{name}' starts at {begin}, expected {cursor} (overlap or gap)")
        cursor = max(cursor, end)
    if cursor != len(data):
        raise bad(f"{len(data) - cursor} trailing bytes belong to no tensor")
    tensors = {}
    for begin, end, name, dtype, shape in entries:
        chunk = bytearray(data[begin:end])
        if chunk:
            t = torch.frombuffer(chunk, dtype=dtype)
        else:
            t = torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(shape).clone()
    return tensors, dict(meta)


def _tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def save_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (in its order) and string metadata; atomic (temp file + rename)."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        if t.dtype not in _CODES:
            raise ValueError(f"tensor '{name}': dtype {t.dtype} has no safetensors code")
        raw = _tensor_bytes(t)
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for raw in chunks:
                f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
