#!/usr/bin/env python3
"""joker's default fit (`joker train TRAIN MODEL`, nothing tuned: the automatic exact-or-features
choice, C = 1, the median bandwidth, tolerance 1e-3 with the stall rule) against scikit-learn's
LIBSVM (`SVC` / `SVR`), oneDAL's (`sklearnex.svm.SVC` / `SVR`) and, for regression up to
20,000 training rows, `KernelRidge` (a dense solve), on every classification and regression set
of the shared data folder, each peer with joker's kernel width, C and z-scored features.

Each fit runs in its own process: joker's `training.seconds` (the fit alone) and the wall time of
the whole `joker train` process (loading and the training-set score included); the peers' fit
time; the test metric (accuracy, or RMSE in the target's units); the peak resident memory of
the process (joker: `joker train`; peers: the Python process that loads the split and fits).
Medians over --repeats runs (default 3) for every set up to --repeat-rows training rows (default
20,000), one run above, said in the table.

usage: .venv-bench/bin/python scripts/peers/defaults.py [--repeats R] [--repeat-rows N]
       [--sets a,b,...] [--skip-peers-above N] [--peers libsvm,onedal,krr] [--joker-args "ARGS"]
(from the repository root after `cargo build --release` and `bash scripts/peers/install-bench.sh`;
data from $JOKER_DATA_DIR or ../shared/datasets). Prints a markdown table and writes every run
to target/defaults.json."""
import gzip, json, os, statistics, subprocess, sys, tempfile, time
import numpy as np

DATA = os.environ.get("JOKER_DATA_DIR", "../shared/datasets")
J = os.path.abspath("target/release/joker")
ARGS = sys.argv[1:]


def arg(name, default):
    return type(default)(ARGS[ARGS.index(name) + 1]) if name in ARGS else default


REPEATS = arg("--repeats", 3)
REPEAT_ROWS = arg("--repeat-rows", 20000)
PEERS_UP_TO = arg("--skip-peers-above", 60000)
ONLY = set(arg("--sets", "").split(",")) - {""}
# which peers run (all three by default)
PEERS = set(arg("--peers", "libsvm,onedal,krr").split(","))
# options added to every `joker train` (for measuring a choice against the default)
JOKER_ARGS = arg("--joker-args", "").split()

# name, task, loader: () -> (Xtrain, ytrain, Xtest, ytest)
def svmlight(train, test=None, every=5):
    def load():
        from sklearn.datasets import load_svmlight_file
        x, y = load_svmlight_file(f"{DATA}/{train}")
        if test:
            xt, yt = load_svmlight_file(f"{DATA}/{test}", n_features=x.shape[1])
            return x.toarray(), y, xt.toarray(), yt
        x = x.toarray()
        mask = np.arange(len(y)) % every == 0  # every fifth row is a test row
        return x[~mask], y[~mask], x[mask], y[mask]
    return load


def label_first(train, test, sep):
    def load():
        a = np.loadtxt(f"{DATA}/{train}", delimiter=sep)
        b = np.loadtxt(f"{DATA}/{test}", delimiter=sep)
        return a[:, 1:], a[:, 0], b[:, 1:], b[:, 0]
    return load


def cadata():
    a = np.loadtxt(f"{DATA}/cadata/cal_housing.data", delimiter=",", skiprows=1)
    mask = np.arange(len(a)) % 5 == 0
    return a[~mask, :-1], a[~mask, -1], a[mask, :-1], a[mask, -1]


def uci(name):
    def load():
        with gzip.open(f"{DATA}/uci_gp/{name}/data.csv.gz", "rt") as f:
            a = np.loadtxt(f, delimiter=",")
        with gzip.open(f"{DATA}/uci_gp/{name}/test_mask.csv.gz", "rt") as f:
            m = np.loadtxt(f, delimiter=",")
        test = m[:, 0].astype(bool) if m.ndim == 2 else m.astype(bool)  # the first split
        return a[~test, :-1], a[~test, -1], a[test, :-1], a[test, -1]
    return load


SETS = [
    ("a9a", "cls", svmlight("libsvm/a9a", "libsvm/a9a.t")),
    ("w8a", "cls", svmlight("libsvm/w8a", "libsvm/w8a.t")),
    ("ijcnn1", "cls", svmlight("libsvm/ijcnn1", "libsvm/ijcnn1.t")),
    ("mushrooms", "cls", svmlight("libsvm/mushrooms")),
    ("pendigits", "cls", svmlight("libsvm/pendigits", "libsvm/pendigits.t")),
    ("dna", "cls", svmlight("libsvm/dna.scale", "libsvm/dna.scale.t")),
    ("covtype 5k", "cls", label_first("covtype_small/covtype.5000.train.csv",
                                      "covtype_small/covtype.5000.test.csv", ",")),
    ("higgs 7k", "cls", label_first("higgs_small/binary.train", "higgs_small/binary.test", None)),
    ("cadata", "reg", cadata),
    ("cpusmall", "reg", svmlight("libsvm/cpusmall_scale", "libsvm/cpusmall_scale.t")),
    ("abalone", "reg", svmlight("libsvm/abalone_scale")),
    ("housing", "reg", svmlight("libsvm/housing_scale")),
] + [(f"uci {n}", "reg", uci(n)) for n in sorted(os.listdir(f"{DATA}/uci_gp"))
     if os.path.exists(f"{DATA}/uci_gp/{n}/data.csv.gz")]

# The peer's fit, in a child process: argv = split.npz model.json system task.
CHILD = r"""
import json, sys, time
import numpy as np
d = np.load(sys.argv[1]); m = json.load(open(sys.argv[2])); system, task = sys.argv[3], sys.argv[4]
st = m["standardizer"]; c, s = np.array(st["center"]), np.array(st["scale"])
if len(c) < d["xa"].shape[1]:  # trailing all-zero columns: the LIBSVM file does not show them
    c = np.concatenate([c, np.zeros(d["xa"].shape[1] - len(c))])
    s = np.concatenate([s, np.ones(d["xa"].shape[1] - len(s))])
s[s == 0] = 1.0
xa, xb = (d["xa"] - c) / s, (d["xb"] - c) / s
gamma, C = m["kernel"]["gamma"], 1.0 / m["lambda"]
ya, yb = d["ya"], d["yb"]
mu, sd = (ya.mean(), ya.std()) if task == "reg" else (0.0, 1.0)
if system == "onedal":
    from sklearnex.svm import SVC, SVR
else:
    from sklearn.svm import SVC, SVR
from sklearn.kernel_ridge import KernelRidge
t0 = time.perf_counter()
if task == "cls":
    est = SVC(C=C, gamma=gamma).fit(xa, ya)
elif system == "krr":
    est = KernelRidge(alpha=1.0 / C, kernel="rbf", gamma=gamma).fit(xa, (ya - mu) / sd)
else:
    est = SVR(C=C, gamma=gamma, epsilon=0.1).fit(xa, (ya - mu) / sd)
fit = time.perf_counter() - t0
p = est.predict(xb)
metric = 100 * np.mean(p == yb) if task == "cls" else float(np.sqrt(np.mean((p * sd + mu - yb) ** 2)))
# VmHWM (not ru_maxrss, which keeps the forking parent's high-water mark across exec)
rss = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0] / 1024
print(json.dumps({"fit": fit, "metric": float(metric), "rss_mb": rss}))
"""


def write_libsvm(path, x, y):
    with open(path, "w") as f:
        for row, label in zip(x, y):
            nz = np.nonzero(row)[0]
            f.write(f"{label:g} " + " ".join(f"{j + 1}:{row[j]:.9g}" for j in nz) + "\n")


def joker(tmp, task):
    model = f"{tmp}/model.json"
    args = ["/usr/bin/time", "-f", "RSS %M", J, "train", "--quiet", f"{tmp}/train", model]
    if task == "reg":
        args += ["--task", "regression"]
    args += JOKER_ARGS
    t0 = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    rss = int([l for l in r.stderr.splitlines() if l.startswith("RSS")][-1].split()[1]) / 1024
    m = json.load(open(model))
    pred = subprocess.run([J, "predict", f"{tmp}/test", model, f"{tmp}/out"],
                          capture_output=True, text=True, check=True)
    line = [l for l in (pred.stdout + pred.stderr).splitlines() if "=" in l][-1]
    metric = float(line.split("=")[1].split("(")[0].strip().rstrip("%"))
    tr = m["training"]
    return {"fit": tr["seconds"], "wall": wall, "metric": metric, "rss_mb": rss,
            "iterations": tr["iterations"], "stop": tr["stop"],
            "representation": tr.get("representation", "")}, m


def peer(tmp, system, task):
    r = subprocess.run([sys.executable, "-c", CHILD, f"{tmp}/split.npz", f"{tmp}/model.json",
                        system, task], capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1][:200]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def median(runs, key):
    vals = [r[key] for r in runs if key in r]
    return statistics.median(vals) if vals else None


def main():
    results = []
    cls_head = "| data (train x d, test) | runs | joker fit (process) | joker test | joker MB | how joker fit | LIBSVM fit | test | MB | oneDAL fit | test | MB | KernelRidge fit | test | MB |"
    print(cls_head)
    print("|" + "---|" * (cls_head.count("|") - 1))
    for name, task, load in SETS:
        if ONLY and name not in ONLY:
            continue
        xa, ya, xb, yb = load()
        n, d = xa.shape
        if n > 50000:
            continue
        repeats = REPEATS if n <= REPEAT_ROWS else 1
        with tempfile.TemporaryDirectory() as tmp:
            write_libsvm(f"{tmp}/train", xa, ya)
            write_libsvm(f"{tmp}/test", xb, yb)
            np.savez(f"{tmp}/split.npz", xa=xa, ya=ya, xb=xb, yb=yb)
            runs = {"joker": [], "libsvm": [], "onedal": [], "krr": []}
            for _ in range(repeats):
                r, _m = joker(tmp, task)
                runs["joker"].append(r)
                if n <= PEERS_UP_TO:
                    for system in ("libsvm", "onedal"):
                        if system in PEERS:
                            runs[system].append(peer(tmp, system, task))
                    if task == "reg" and n <= 20000 and "krr" in PEERS:
                        runs["krr"].append(peer(tmp, "krr", task))
        results.append({"data": name, "task": task, "n": n, "d": d, "n_test": len(yb),
                        "runs": runs})
        fmt = (lambda v: f"{v:.2f}%") if task == "cls" else (lambda v: f"{v:.4g}")

        def cell(system):
            rs = runs[system]
            if not rs:
                return " | | "
            if any("error" in r for r in rs):
                return f"failed: {rs[0].get('error', '')} | | "
            return f"{median(rs, 'fit'):.2f} s | {fmt(median(rs, 'metric'))} | {median(rs, 'rss_mb'):.0f}"
        jr = runs["joker"]
        how = jr[0]["representation"].split(" (")[0] + f", {jr[0]['iterations']} it., {jr[0]['stop']}"
        print(f"| {name} ({n} x {d}, {len(yb)}) | {repeats} | {median(jr, 'fit'):.2f} s ({median(jr, 'wall'):.2f} s) | "
              f"{fmt(median(jr, 'metric'))} | {median(jr, 'rss_mb'):.0f} | {how} | {cell('libsvm')} | "
              f"{cell('onedal')} | {cell('krr')} |", flush=True)
        os.makedirs("target", exist_ok=True)
        json.dump(results, open("target/defaults.json", "w"), indent=1)


def summary(results):
    """Counts over the sets: joker's fit against each peer's, in time and test metric."""
    def med(r, system, key):
        return median(r["runs"][system], key) if r["runs"][system] and not any(
            "error" in x for x in r["runs"][system]) else None
    lines = []
    for task, peers in (("cls", ("libsvm", "onedal")), ("reg", ("libsvm", "onedal", "krr"))):
        rs = [r for r in results if r["task"] == task]
        for peer in peers:
            timed = close = faster = both = 0
            for r in rs:
                jt, pt = med(r, "joker", "fit"), med(r, peer, "fit")
                jm, pm = med(r, "joker", "metric"), med(r, peer, "metric")
                if pt is None:
                    continue
                timed_here = max(jt, pt) >= 0.05  # shorter fits are below the timer's use
                ok = (jm >= pm - 0.2) if task == "cls" else (jm <= 1.01 * pm)
                close += ok
                if timed_here:
                    timed += 1
                    faster += jt < pt
                    both += ok and jt < pt
            n = sum(1 for r in rs if med(r, peer, "fit") is not None)
            what = "within 0.2 points of its accuracy" if task == "cls" else "within 1% of its RMSE"
            lines.append(f"- {task}, against {peer}: {what} on {close} of {n} sets; faster on "
                         f"{faster} of the {timed} sets where a fit takes 0.05 s or more "
                         f"(both on {both})")
    return "\n".join(lines)


if __name__ == "__main__":
    if "--report" in ARGS:
        print(summary(json.load(open("target/defaults.json"))))
    else:
        main()
