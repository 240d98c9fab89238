#!/usr/bin/env python3
"""Writes a 7-class set with the class balance of the UCI Statlog (Shuttle) data: one class at
78%, two of a handful of rows; 9 features on scales from 1 to 50; each class a mixture of three
Gaussian blobs. 43,500 training and 14,498 test rows in LIBSVM format.

    python3 scripts/imbalanced-classes.py DIR    -> DIR/imbalanced.train, DIR/imbalanced.test

Used by docs/solver.md ("The diagonal norm"): one-vs-rest KLR on it stalled in the Euclidean
trust-region norm. Needs numpy; seeded, so every run writes the same files.
"""
import sys
from pathlib import Path

import numpy as np

COUNTS = [34108, 37, 132, 6748, 2458, 6, 11]  # Statlog (Shuttle) training counts
SCALE = np.array([1, 5, 1, 20, 1, 3, 1, 1, 50])


def main(out: Path) -> None:
    rng = np.random.default_rng(7)
    centers = rng.normal(0, 3, size=(7, 9))
    blobs = [centers[k] + rng.normal(0, 1.5, size=(3, 9)) for k in range(7)]

    def draw(share):
        xs, ys = [], []
        for k, count in enumerate(COUNTS):
            m = max(1, int(count * share))
            pick = rng.integers(0, 3, m)
            xs.append(blobs[k][pick] + rng.normal(0, 1.0, size=(m, 9)) * SCALE)
            ys += [k + 1] * m
        x, y = np.vstack(xs), np.array(ys)
        order = rng.permutation(len(y))
        return x[order], y[order]

    out.mkdir(parents=True, exist_ok=True)
    for name, share in (("train", 1.0), ("test", 1 / 3)):
        x, y = draw(share)
        with open(out / f"imbalanced.{name}", "w") as f:
            for row, label in zip(x, y):
                feats = " ".join(f"{i + 1}:{v:.4g}" for i, v in enumerate(row))
                f.write(f"{label} {feats}\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
