#!/usr/bin/env python3
"""Multi-class fits against the number of classes: joker's default (`joker train`: the cached
exact kernel) one-vs-rest (every class a target column of one fit) and one-vs-one
(`--multiclass ovo`: a fit per pair of classes on its rows) against LIBSVM's `SVC`
(one-vs-one), LIBSVM one-vs-rest (`OneVsRestClassifier(SVC)`) and oneDAL's `SVC` (one-vs-one),
with joker's kernel width, C = 1 and z-scored features.

Data: K Gaussian classes in 16 dimensions, unit spread around centres drawn N(0, s^2): s = 1
(`--separated`: few support vectors) or s = 0.5 (the default: classes overlap, many support
vectors), 8,000 training and 4,000 test rows, seeded; K = 2, 4, 8, 16, 26.

usage: .venv-bench/bin/python scripts/peers/classes.py [--repeats R] [--separated]   (from the repository root
after `cargo build --release`; medians over R runs, default 3). Prints a markdown table."""
import json, os, statistics, subprocess, sys, tempfile, time
import numpy as np

J = os.path.abspath("target/release/joker")
R = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 3
SPREAD = 1.0 if "--separated" in sys.argv else 0.5


def blobs(k, n, seed):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, 16)) * SPREAD
    y = rng.integers(0, k, size=n)
    return centres[y] + rng.normal(size=(n, 16)), y


def write(path, x, y):
    with open(path, "w") as f:
        for row, label in zip(x, y):
            f.write(f"{label} " + " ".join(f"{j + 1}:{v:.7g}" for j, v in enumerate(row)) + "\n")


def main():
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import SVC
    from sklearnex.svm import SVC as DalSVC
    print("| classes | joker one-vs-rest fit | test | joker one-vs-one fit | test | LIBSVM one-vs-one | test | LIBSVM one-vs-rest | test | oneDAL one-vs-one | test |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in (2, 4, 8, 16, 26):
        rng_seed = 100 + k
        x, y = blobs(k, 12000, rng_seed)
        xa, ya, xb, yb = x[:8000], y[:8000], x[8000:], y[8000:]
        with tempfile.TemporaryDirectory() as tmp:
            write(f"{tmp}/train", xa, ya)
            write(f"{tmp}/test", xb, yb)
            joker_cells = []
            for scheme in ("ovr", "ovo"):
                jt = []
                for _ in range(R):
                    subprocess.run([J, "train", "--quiet", "--multiclass", scheme, "--force",
                                    f"{tmp}/train", f"{tmp}/m.json"],
                                   capture_output=True, check=True)
                    m = json.load(open(f"{tmp}/m.json"))
                    jt.append(m["training"]["seconds"])
                out = subprocess.run([J, "predict", f"{tmp}/test", f"{tmp}/m.json", f"{tmp}/o"],
                                     capture_output=True, text=True, check=True)
                line = [l for l in (out.stdout + out.stderr).splitlines() if "=" in l][-1]
                jm = line.split("=")[1].split("(")[0].strip()
                joker_cells.append(f"{statistics.median(jt):.2f} s | {jm}")
        st = m["standardizer"]
        c, s = np.array(st["center"]), np.array(st["scale"])
        a, b = (xa - c) / s, (xb - c) / s
        gamma = m["kernel"]["gamma"]
        cells = []
        for make in (lambda: SVC(C=1.0, gamma=gamma),
                     lambda: OneVsRestClassifier(SVC(C=1.0, gamma=gamma)),
                     lambda: DalSVC(C=1.0, gamma=gamma)):
            times = []
            for _ in range(R):
                t0 = time.perf_counter()
                est = make().fit(a, ya)
                times.append(time.perf_counter() - t0)
            acc = 100 * np.mean(est.predict(b) == yb)
            cells.append(f"{statistics.median(times):.2f} s | {acc:.2f}%")
        print(f"| {k} | " + " | ".join(joker_cells + cells) + " |", flush=True)


main()
