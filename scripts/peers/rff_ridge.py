#!/usr/bin/env python3
"""scikit-learn's RBFSampler + Ridge on a CSV regression set, with the split and preprocessing
that joker's tests use, printing the test RMSE in the target's original units.

usage: rff_ridge.py DATA.csv GAMMA N_COMPONENTS LAMBDA [SEED ...]

Split: row i is a test row when i % 5 == 0. Features are z-scored with training statistics,
the target is z-scored for fitting and predictions are mapped back. Ridge(alpha=lambda) on
the random features solves min lambda ||w||^2 + sum (y - psi w)^2, the same problem as joker's
KRR on random features with that lambda.
"""
import sys

import numpy as np
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import Ridge


def main():
    path, gamma, m, lam = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    seeds = [int(s) for s in sys.argv[5:]] or [0]
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    x, y = data[:, :-1], data[:, -1]
    test = np.arange(len(y)) % 5 == 0
    xtr, ytr, xte, yte = x[~test], y[~test], x[test], y[test]
    mu, sd = xtr.mean(0), xtr.std(0)
    sd[sd == 0] = 1.0
    xtr, xte = (xtr - mu) / sd, (xte - mu) / sd
    ym, ys = ytr.mean(), ytr.std()
    for seed in seeds:
        rff = RBFSampler(gamma=gamma, n_components=m, random_state=seed)
        ftr = rff.fit_transform(xtr)
        model = Ridge(alpha=lam, fit_intercept=False).fit(ftr, (ytr - ym) / ys)
        pred = model.predict(rff.transform(xte)) * ys + ym
        print(f"{np.sqrt(np.mean((pred - yte) ** 2)):.6f}")


if __name__ == "__main__":
    main()
