"""The models python/towers_torch.py knows, read from its source without importing torch.

    python3 tests/torch_models.py [path/to/towers_torch.py]

Prints one JSON object: {"models": [names in MODELS order], "input_shapes": {name: [C, H, W]}}.
Exits 1, saying what and where, when MODELS or INPUT_SHAPES is not a literal dict of string keys,
or when the two do not name the same models. tests/engine/tst_torch_models.cpp compares the list
with the engine's model registry, so both always know exactly the same models.
"""

import ast
import json
import os
import sys


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def top_level_dicts(path):
    """The module-level `NAME = {...}` assignments of `path`: {NAME: (ast.Dict, line)}."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found = {}
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for t in targets:
            if isinstance(t, ast.Name):
                found[t.id] = (value, node.lineno)
        # Anything else that changes them (MODELS["x"] = ..., MODELS.update(...)) would escape
        # this reading: refuse it rather than miss a model.
        for sub in ast.walk(node):
            if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store) and \
                    isinstance(sub.value, ast.Name) and sub.value.id in ("MODELS", "INPUT_SHAPES"):
                fail(f"{path}:{sub.lineno}: {sub.value.id} is changed outside its literal; list "
                     f"every model in the literal dict")
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and \
                    sub.value.id in ("MODELS", "INPUT_SHAPES") and \
                    sub.attr in ("update", "pop", "setdefault", "clear", "popitem"):
                fail(f"{path}:{sub.lineno}: {sub.value.id}.{sub.attr} changes the model list; list "
                     f"every model in the literal dict")
    return found


def literal_keys(path, dicts, name):
    if name not in dicts:
        fail(f"{path}: no module-level {name} = {{...}}")
    value, line = dicts[name]
    if not isinstance(value, ast.Dict):
        fail(f"{path}:{line}: {name} is not a literal dict")
    keys = []
    for k in value.keys:
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            fail(f"{path}:{line}: every key of {name} must be a model name in quotes")
        if k.value in keys:
            fail(f"{path}:{k.lineno}: {name} lists '{k.value}' twice")
        keys.append(k.value)
    return value, keys


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "python", "towers_torch.py")
    dicts = top_level_dicts(path)
    _, models = literal_keys(path, dicts, "MODELS")
    shapes_node, shaped = literal_keys(path, dicts, "INPUT_SHAPES")
    if set(models) != set(shaped):
        fail(f"{path}: MODELS and INPUT_SHAPES name different models (only in MODELS: "
             f"{sorted(set(models) - set(shaped))}, only in INPUT_SHAPES: "
             f"{sorted(set(shaped) - set(models))})")
    shapes = {}
    for k, v in zip(shaped, shapes_node.values):
        try:
            shape = ast.literal_eval(v)
        except ValueError:
            fail(f"{path}:{v.lineno}: the input shape of '{k}' is not a literal (C, H, W)")
        if not (isinstance(shape, tuple) and len(shape) == 3 and all(isinstance(d, int) for d in shape)):
            fail(f"{path}:{v.lineno}: the input shape of '{k}' is not (C, H, W), got {shape!r}")
        shapes[k] = list(shape)
    print(json.dumps({"models": models, "input_shapes": shapes}))


if __name__ == "__main__":
    main()
