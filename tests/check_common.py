"""What the command-driven checks (tests/onnx/check_classify.py, tests/readme/check_readme_examples.py,
tests/tensorboard/check_events.py) share: the check log and its failures, CTest's skip status, the
rule that a missing environment fails under CI and is skipped elsewhere, and reading the first
examples of an IDX dataset."""
import gzip
import os
import struct

SKIP = 77  # CTest's SKIP_RETURN_CODE for these tests
failures = []


def check(ok, what):
    """Prints one check's outcome; a failed one is remembered in `failures`."""
    print(("ok      " if ok else "FAILED  ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def in_ci():
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_or_fail(program, reason):
    """The exit status for a check that cannot run: 1 under CI, else SKIP; says which and why."""
    if in_ci():
        print(f"{program}: FAILED: {reason}; under CI (CI={os.environ['CI']}) this fails the test")
        return 1
    print(f"{program}: SKIPPED: {reason}")
    return SKIP


def read_maybe_gz(folder, name):
    """The bytes of `name` in `folder`, or of `name`.gz uncompressed."""
    for candidate in (name, name + ".gz"):
        path = os.path.join(folder, candidate)
        if os.path.exists(path):
            with (gzip.open(path) if candidate.endswith(".gz") else open(path, "rb")) as f:
                return f.read()
    raise FileNotFoundError(f"{folder}: no {name} or {name}.gz")


def subset_of_idx(source, folder, train, test):
    """The first `train` training and `test` test examples of the 28x28 IDX dataset in `source`,
    as plain IDX files in `folder`: real images, and a short run's evaluations over just these."""
    os.makedirs(folder)
    for kind, count in (("train", train), ("t10k", test)):
        for what, item in (("images-idx3-ubyte", 784), ("labels-idx1-ubyte", 1)):
            data = read_maybe_gz(source, f"{kind}-{what}")
            header = 16 if item > 1 else 8
            assert struct.unpack(">I", data[4:8])[0] >= count, f"{source}: fewer than {count} {kind} {what}"
            with open(os.path.join(folder, f"{kind}-{what}"), "wb") as f:
                f.write(data[:4] + struct.pack(">I", count) + data[8:header] + data[header:header + count * item])
