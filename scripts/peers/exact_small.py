#!/usr/bin/env python3
"""joker's default exact fit (`joker train --exact`, the kernel cached) against scikit-learn's
LIBSVM SVC (C = 1) or KernelRidge (alpha = 1) on small LIBSVM sets, with joker's kernel width
(read from its model file) and the same z-scored features; wall time of each fit and its test
metric. usage: exact_small.py (run from the repository root after `cargo build --release`; joker's time is
the whole `joker train` process without a validation set, data loading included;
needs numpy, scipy and scikit-learn; data from ../shared/datasets/libsvm)."""
import json, subprocess, sys, time
import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.kernel_ridge import KernelRidge
import os
D = os.environ.get("JOKER_DATA_DIR", "../shared/datasets") + "/libsvm/"
J = "target/release/joker"
sets = [("dna.scale", "dna.scale.t", "cls"), ("mushrooms", None, "cls"), ("pendigits", "pendigits.t", "cls"),
        ("cpusmall_scale", "cpusmall_scale.t", "reg")]
for tr, te, task in sets:
    xtr, ytr = load_svmlight_file(D + tr)
    d = xtr.shape[1]
    if te:
        xte, yte = load_svmlight_file(D + te, n_features=d)
    else:
        xte, yte = xtr, ytr
    args = [J, "train", "--quiet", "--exact", D + tr, "/tmp/peer.model"]
    if task == "reg":
        args += ["--loss", "krr"]
    # the fit alone (no validation set, whose checks would be timed too); the test metric after
    t0 = time.time(); subprocess.run(args, capture_output=True, text=True, check=True); tj = time.time() - t0
    m = json.load(open("/tmp/peer.model"))
    gamma = m["kernel"]["gamma"]
    pred = subprocess.run([J, "predict", D + (te or tr), "/tmp/peer.model", "/tmp/peer.out"],
                          capture_output=True, text=True, check=True)
    line = [l for l in (pred.stdout + pred.stderr).splitlines() if "=" in l]
    sc = StandardScaler().fit(xtr.toarray())
    a, b = sc.transform(xtr.toarray()), sc.transform(xte.toarray())
    a = np.nan_to_num(a); b = np.nan_to_num(b)
    t0 = time.time()
    if task == "cls":
        est = SVC(C=1.0, gamma=gamma).fit(a, ytr); metric = f"{100*np.mean(est.predict(b) == yte):.2f}%"
    else:
        ys = (ytr - ytr.mean()) / ytr.std()
        est = KernelRidge(alpha=1.0, kernel="rbf", gamma=gamma).fit(a, ys)
        pred = est.predict(b) * ytr.std() + ytr.mean(); metric = f"RMSE {np.sqrt(np.mean((pred - yte)**2)):.4f}"
    ts = time.time() - t0
    print(f"| {tr} ({xtr.shape[0]} x {d}) | gamma {gamma:.4g} | joker {tj:.2f} s: {line[-1] if line else out.stderr[-200:]} | sklearn {ts:.2f} s: {metric} |", flush=True)
