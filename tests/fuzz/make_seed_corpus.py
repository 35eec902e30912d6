#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the parser corpus (tests/engine/fuzz_corpus/{idx,cifar}/seed_*):
small valid files of every format and a few broken ones. The fuzzers grow the corpus from these;
the Qt test tst_data_fuzz_corpus runs the parsers over all of it."""
import gzip
import os
import struct
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine", "fuzz_corpus")


def write(kind, name, data):
    os.makedirs(os.path.join(root, kind), exist_ok=True)
    with open(os.path.join(root, kind, "seed_" + name), "wb") as f:
        f.write(data)


def pixels(n):
    return bytes((i * 37 + 11) % 256 for i in range(n))


def idx_images(count, rows, cols, dims=3):
    return struct.pack(">IIII", 0x800 | dims, count, rows, cols) + pixels(count * rows * cols)


def idx_colour_images(count, rows, cols, channels=3):
    """4-dimensional IDX, channels last (what towers-cli import writes for colour)."""
    return struct.pack(">IIIII", 0x804, count, rows, cols, channels) + pixels(count * rows * cols * channels)


def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)


def idx_wide_labels(labels):
    return struct.pack(">II", 0xC01, len(labels)) + b"".join(struct.pack(">I", l) for l in labels)


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


write("idx", "images_3x4x5", idx_images(3, 4, 5))
write("idx", "images_1x28x28", idx_images(1, 28, 28))
write("idx", "labels_6", idx_labels([0, 1, 2, 9, 5, 3]))
write("idx", "images_3x4x5.gz", gz(idx_images(3, 4, 5)))
write("idx", "labels_6.gz", gz(idx_labels([0, 1, 2, 9, 5, 3])))
write("idx", "labels_out_of_range", idx_labels([0, 12, 3]))
write("idx", "wide_labels_5", idx_wide_labels([0, 9, 4, 1, 7]))
write("idx", "wide_labels_5.gz", gz(idx_wide_labels([0, 9, 4, 1, 7])))
write("idx", "wide_labels_out_of_range", idx_wide_labels([0, 300, 0xFFFFFFFF]))
write("idx", "images_truncated", idx_images(3, 4, 5)[:40])
write("idx", "images_truncated.gz", gz(idx_images(3, 4, 5)[:40]))
write("idx", "gzip_stream_cut", gz(idx_images(2, 8, 8))[:30])
write("idx", "header_only", struct.pack(">IIII", 0x803, 1000, 28, 28))
write("idx", "four_dims", idx_images(2, 3, 3, dims=4))
write("idx", "colour_2x3x4x3", idx_colour_images(2, 3, 4))
write("idx", "colour_2x3x4x3.gz", gz(idx_colour_images(2, 3, 4)))
write("idx", "colour_2_channels", idx_colour_images(1, 2, 2, channels=2))
write("idx", "empty", b"")

def cifar(count, label_bytes, bad_label=None):
    out = b""
    for i in range(count):
        labels = bytes([i % 10]) if label_bytes == 1 else bytes([i % 20, (i * 7) % 100])
        if bad_label is not None and i == count - 1:
            labels = labels[:-1] + bytes([bad_label])
        out += labels + pixels(3072)
    return out

write("cifar", "cifar10_2", cifar(2, 1))
write("cifar", "cifar100_2", cifar(2, 2))
write("cifar", "cifar10_bad_label", cifar(2, 1, bad_label=10))
write("cifar", "cifar10_truncated", cifar(2, 1)[:5000])
write("cifar", "one_byte", b"\x03")
print("seed corpus written under", os.path.normpath(root), file=sys.stderr)
