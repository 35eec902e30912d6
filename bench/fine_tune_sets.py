#!/usr/bin/python3
"""Fashion-MNIST split by class into two folders of PNG files, for the fine-tuning figure.

    /usr/bin/python3 bench/fine_tune_sets.py --out sets --per-class 100

writes, in the layout `towers-cli import` reads (train/<class>/, test/<class>/):

* sets/first5: classes 0-4 (T-shirt/top ... Coat), every training and test image;
* sets/last5: classes 5-9 (Sandal ... Ankle boot), the first --per-class training images of each
  class and every test image of those classes.

A network trained on first5 is then the start (`towers-cli train --init-from`) for the few
images of last5, whose classes it has never seen. Reads Debian's dataset-fashion-mnist (or
--data); needs only the standard library.
"""
import argparse
import gzip
import os
import struct
import zlib

NAMES = ['T-shirt_top', 'Trouser', 'Pullover', 'Dress', 'Coat',
         'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle_boot']


def read_idx(path):
    """The images ([n] of 28*28 bytes) or labels ([n] ints) of an IDX file, gzip'ed or not."""
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rb') as f:
        data = f.read()
    magic, n = struct.unpack('>II', data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack('>II', data[8:16])
        size = rows * cols
        return [data[16 + i * size:16 + (i + 1) * size] for i in range(n)], (rows, cols)
    if magic == 0x801:
        return list(data[8:8 + n]), None
    raise SystemExit(f'{path}: not an IDX file of unsigned bytes (magic {magic:#x})')


def write_png(path, pixels, rows, cols):
    """An 8-bit grayscale PNG."""
    raw = b''.join(b'\x00' + pixels[y * cols:(y + 1) * cols] for y in range(rows))

    def chunk(kind, body):
        return (struct.pack('>I', len(body)) + kind + body +
                struct.pack('>I', zlib.crc32(kind + body) & 0xffffffff))
    with open(path, 'wb') as f:
        f.write(b'\x89PNG\r\n\x1a\n' +
                chunk(b'IHDR', struct.pack('>IIBBBBB', cols, rows, 8, 0, 0, 0, 0)) +
                chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))


def find(folder, name):
    for candidate in (name, name + '.gz'):
        if os.path.exists(os.path.join(folder, candidate)):
            return os.path.join(folder, candidate)
    raise SystemExit(f'{folder}: no {name} (install dataset-fashion-mnist, or pass --data)')


def examples(data):
    """Every image of Fashion-MNIST's IDX files in `data`: (split, index, pixels, label, rows,
    cols), the training set's ('train') first, then the test set's ('test')."""
    for split, prefix in (('train', 'train'), ('test', 't10k')):
        images, (rows, cols) = read_idx(find(data, f'{prefix}-images-idx3-ubyte'))
        labels, _ = read_idx(find(data, f'{prefix}-labels-idx1-ubyte'))
        for i, (pixels, label) in enumerate(zip(images, labels)):
            yield split, i, pixels, label, rows, cols


def last_five_capped(data, per_class):
    """examples(data) with only the first `per_class` training images of each of classes 5-9 (every
    training image of classes 0-4, every test image)."""
    if per_class < 1:
        raise SystemExit('--per-class must be at least 1')
    kept = [0] * 10  # training images of each class passed on
    for example in examples(data):
        split, _, _, label, _, _ = example
        if split == 'train' and label >= 5:
            kept[label] += 1
            if kept[label] > per_class:
                continue
        yield example


def write_example(folder, i, pixels, rows, cols):
    """Example `i` as <folder>/<i, five digits>.png, the folder made where it is not."""
    os.makedirs(folder, exist_ok=True)
    write_png(os.path.join(folder, f'{i:05d}.png'), pixels, rows, cols)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--data', default='/usr/share/datasets/fashion-mnist',
                    help='the folder of Fashion-MNIST\'s IDX files')
    ap.add_argument('--out', required=True, help='where first5/ and last5/ are written')
    ap.add_argument('--per-class', type=int, default=100,
                    help='training images of each class of last5 (default 100)')
    args = ap.parse_args()
    for split, i, pixels, label, rows, cols in last_five_capped(args.data, args.per_class):
        half = 'first5' if label < 5 else 'last5'
        write_example(os.path.join(args.out, half, split, NAMES[label]), i, pixels, rows, cols)


if __name__ == '__main__':
    main()
