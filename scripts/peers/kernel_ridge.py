#!/usr/bin/env python3
"""scikit-learn KernelRidge (exact RBF KRR, dense solve) on a joker-prepared split.

usage: kernel_ridge.py TRAIN.csv TEST.csv GAMMA LAMBDA
Both files: preprocessed features, target last (as written by examples/bench_krr.rs).
KernelRidge(alpha=lambda) solves (K + lambda I) w = y, joker's unnormalised system.
Prints one JSON line: test RMSE in the file's units, fit and predict seconds, peak RSS (MB).
"""
import json
import sys
import time

import numpy as np

from memory import peak_rss_mb  # scripts/peers/memory.py (the script's own folder)
from sklearn.kernel_ridge import KernelRidge


def main():
    tr = np.loadtxt(sys.argv[1], delimiter=",")
    te = np.loadtxt(sys.argv[2], delimiter=",")
    gamma, lam = float(sys.argv[3]), float(sys.argv[4])
    t0 = time.perf_counter()
    model = KernelRidge(alpha=lam, kernel="rbf", gamma=gamma).fit(tr[:, :-1], tr[:, -1])
    t1 = time.perf_counter()
    pred = model.predict(te[:, :-1])
    t2 = time.perf_counter()
    rmse = float(np.sqrt(np.mean((pred - te[:, -1]) ** 2)))
    rss = peak_rss_mb()
    print(json.dumps({"rmse": rmse, "fit_s": t1 - t0, "predict_s": t2 - t1, "peak_rss_mb": rss}))


if __name__ == "__main__":
    main()
