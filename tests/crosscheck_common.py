"""What the PyTorch oracles (torch_crosscheck.py, optim_crosscheck.py) share: the exit codes,
the bad-input error, the relative-error measure and the tensor lookup of an exchange file."""

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """The exchange file is unusable (exit status 2)."""


def rel_error(ours, ref):
    """max|ours - ref| / max(max|ref|, 1e-12), in float64."""
    ours, ref = ours.double(), ref.double()
    if ref.numel() == 0:
        return 0.0
    scale = max(ref.abs().max().item(), 1e-12)
    return (ours - ref).abs().max().item() / scale


def need(tensors, key, why=""):
    """tensors[key], or BadInput naming the missing tensor."""
    if key not in tensors:
        raise BadInput(f"missing tensor '{key}'{why}")
    return tensors[key]
