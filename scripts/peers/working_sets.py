#!/usr/bin/env python3
"""joker's default fit (`joker train`, which takes the exact kernel where it fits the kernel
cache) with each working-set rule (`--working-set shrinking|random|greedy`) against
scikit-learn's LIBSVM `SVC` (C = 1) or `SVR` (C = 1, epsilon = 0.1 on z-scored targets) with
joker's kernel width and the same z-scored features. Wall time of each `joker train` process
(data loading included) and of scikit-learn's fit; test metric; joker's iterations.

usage: python scripts/peers/working_sets.py [--repeats R]   (from the repository root after
`cargo build --release`; needs numpy, scipy, scikit-learn; data from $JOKER_DATA_DIR or
../shared/datasets). Prints a markdown table; medians over R runs (default 1)."""
import json, os, statistics, subprocess, sys, time
import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR

DATA = os.environ.get("JOKER_DATA_DIR", "../shared/datasets")
J = "target/release/joker"
R = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 1

# name, train, test, task, joker's reading options
SETS = [
    ("dna", "libsvm/dna.scale", "libsvm/dna.scale.t", "cls", []),
    ("mushrooms", "libsvm/mushrooms", None, "cls", []),
    ("pendigits", "libsvm/pendigits", "libsvm/pendigits.t", "cls", []),
    ("covtype 5k", "covtype_small/covtype.5000.train.csv", "covtype_small/covtype.5000.test.csv",
     "cls", ["--label-column", "first"]),
    ("higgs 7k", "higgs_small/binary.train", "higgs_small/binary.test", "cls",
     ["--label-column", "first"]),
    ("cpusmall", "libsvm/cpusmall_scale", "libsvm/cpusmall_scale.t", "reg", []),
    ("abalone", "libsvm/abalone_scale", None, "reg", []),
]


def load(path, opts, d=None):
    if "--label-column" in opts:
        a = np.loadtxt(path, delimiter="," if path.endswith(".csv") else None)
        return a[:, 1:], a[:, 0]
    x, y = load_svmlight_file(path, n_features=d) if d else load_svmlight_file(path)
    return x.toarray(), y


def joker(train, test, task, opts, rule):
    args = [J, "train", "--quiet", "--working-set", rule, *opts, train, "/tmp/ws.model"]
    if task == "reg":
        args += ["--task", "regression"]
    t0 = time.time()
    subprocess.run(args, capture_output=True, text=True, check=True)
    secs = time.time() - t0
    model = json.load(open("/tmp/ws.model"))
    pred = subprocess.run([J, "predict", *opts, test or train, "/tmp/ws.model", "/tmp/ws.out"],
                          capture_output=True, text=True, check=True)
    line = [l for l in (pred.stdout + pred.stderr).splitlines() if "=" in l][-1]
    metric = line.split("=")[1].split("(")[0].strip()
    return secs, metric, model["training"]["iterations"], model


def main():
    print("| data (n x d) | rule | joker | iterations | test | LIBSVM | test |")
    print("|---|---|---|---|---|---|---|")
    for name, tr, te, task, opts in SETS:
        train, test = f"{DATA}/{tr}", (f"{DATA}/{te}" if te else None)
        xtr, ytr = load(train, opts)
        xte, yte = load(test, opts, xtr.shape[1]) if test else (xtr, ytr)
        for rule in ["shrinking", "random", "greedy"]:
            runs = [joker(train, test, task, opts, rule) for _ in range(R)]
            secs = statistics.median(r[0] for r in runs)
            _, metric, iters, model = runs[0]
            if rule == "shrinking":
                gamma = model["kernel"]["gamma"]
                sc = StandardScaler().fit(xtr)
                a, b = np.nan_to_num(sc.transform(xtr)), np.nan_to_num(sc.transform(xte))
                times = []
                for _ in range(R):
                    t0 = time.time()
                    if task == "cls":
                        est = SVC(C=1.0, gamma=gamma).fit(a, ytr)
                        peer = f"{100 * np.mean(est.predict(b) == yte):.2f}%"
                    else:
                        m, s = ytr.mean(), ytr.std()
                        est = SVR(C=1.0, gamma=gamma).fit(a, (ytr - m) / s)
                        rmse = np.sqrt(np.mean((est.predict(b) * s + m - yte) ** 2))
                        peer = f"RMSE {rmse:.4f}"
                    times.append(time.time() - t0)
                peer = f"{statistics.median(times):.2f} s | {peer}"
            else:
                peer = " | "
            shape = f"{xtr.shape[0]} x {xtr.shape[1]}"
            print(f"| {name} ({shape}) | {rule} | {secs:.2f} s | {iters} | {metric} | {peer} |",
                  flush=True)


main()
