#!/usr/bin/python3
"""Fashion-MNIST with a long tail, for the balanced-sampling figure.

    /usr/bin/python3 bench/long_tail_set.py --out tail --per-class 150

writes, in the layout `towers-cli import` reads (train/<class>/, test/<class>/), every training
image of classes 0-4 (T-shirt/top ... Coat, 6000 each), the first --per-class training images of
classes 5-9 (Sandal ... Ankle boot), and every test image of the ten classes (1000 each). A network
trained on it with `--sampling uniform` sees the five small classes 40 times less often than the
others; with `--sampling balanced`, as often. Reads Debian's dataset-fashion-mnist (or --data);
needs only the standard library (and bench/fine_tune_sets.py beside it).
"""
import argparse
import os

from fine_tune_sets import NAMES, last_five_capped, write_example


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--data', default='/usr/share/datasets/fashion-mnist',
                    help='the folder of Fashion-MNIST\'s IDX files')
    ap.add_argument('--out', required=True, help='where train/ and test/ are written')
    ap.add_argument('--per-class', type=int, default=150,
                    help='training images of each of classes 5-9 (default 150)')
    args = ap.parse_args()
    for split, i, pixels, label, rows, cols in last_five_capped(args.data, args.per_class):
        write_example(os.path.join(args.out, split, NAMES[label]), i, pixels, rows, cols)


if __name__ == '__main__':
    main()
