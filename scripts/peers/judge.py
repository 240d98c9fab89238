#!/usr/bin/env python3
"""joker's default fit against scikit-learn's defaults, side by side, on one half of the shared
sets (docs/bench/sets.md says which half each set is in, and why).

For each set: `joker train TRAIN MODEL` with nothing set beyond what the file needs (the label
column of a label-first CSV, `--task regression` for a regression target) plus, per variant,
the options given (`--variants`), then `joker predict TEST MODEL OUT`; against scikit-learn's
`SVC()` / `SVR()` with every default (gamma='scale', C=1, epsilon=0.1, no feature scaling, no
target scaling) on the same features as joker reads them (LIBSVM files through
sklearn.datasets.load_svmlight_files; CSV files with the label column the data README gives).
Accuracy (%) or RMSE (the target's units) on the test split, computed here the same way for
every system from the predicted values; fit seconds of each (joker: the model's
`training.seconds` and the wall time of the `joker train` process; scikit-learn: `fit` alone,
in a child process with one thread). Medians of --repeats runs (3) up to --repeat-rows training
rows (20,000), one run above. scikit-learn runs only up to --peer-rows training rows (20,000)
and once more only when its first fit took at most --slow-seconds (60); a fit is stopped after
--peer-timeout seconds (180) and recorded as a timeout.

usage: /tmp/jvenv/bin/python scripts/peers/judge.py --half tuning|judging|all [--sets a,b]
       [--variants "median=;scale=--bandwidth scale;msd=--bandwidth msd"] [--joker-args "ARGS"]
       [--single-thread] [--scaled-peer] [--joker BIN] [--out docs/bench/judge/NAME.json]
       [--list] [--extra DIR] [--peer-rows N] [--repeats R]
       /tmp/jvenv/bin/python scripts/peers/judge.py --report RECORD.json [...]
--scaled-peer also runs SVC()/SVR() after joker's preprocessing (features and regression target
z-scored). --peer-rows 0 runs joker only. --report prints the markdown tables and the
better/worse counts of records.
--joker-args adds one variant named after its options. --single-thread also runs every variant
once with RAYON_NUM_THREADS=1. --list prints the table of docs/bench/sets.md and exits.
--extra DIR (default target/extra-sets) adds the sets written by scripts/peers/extra_sets.py to
the judging half when the folder exists. Data from $JOKER_DATA_DIR or ../shared/datasets.
"""
import datetime, gzip, json, os, platform, statistics, subprocess, sys, tempfile, time
import numpy as np

DATA = os.environ.get("JOKER_DATA_DIR", "../shared/datasets")
ARGS = sys.argv[1:]


def arg(name, default):
    return type(default)(ARGS[ARGS.index(name) + 1]) if name in ARGS else default


J = os.path.abspath(arg("--joker", "target/release/joker"))
REPEATS = arg("--repeats", 3)
REPEAT_ROWS = arg("--repeat-rows", 20000)
PEER_ROWS = arg("--peer-rows", 20000)
SLOW = arg("--slow-seconds", 60.0)
PEER_TIMEOUT = arg("--peer-timeout", 180.0)
HALF = arg("--half", "tuning")
ONLY = set(arg("--sets", "").split(",")) - {""}
EXTRA = arg("--extra", "target/extra-sets")
SPLITS = os.path.abspath(arg("--splits", "target/judge-splits"))  # split files written here


def parse_variants():
    out = []
    for v in arg("--variants", "median=").split(";"):
        if v.strip():
            name, _, opts = v.partition("=")
            out.append((name.strip(), opts.split()))
    if "--joker-args" in ARGS:
        opts = arg("--joker-args", "").split()
        out.append((" ".join(opts) or "default", opts))
    return out


VARIANTS = parse_variants()


# ---- the sets ------------------------------------------------------------------------------
# Each loader returns dict(train=path, test=path, jargs=[...], xa, ya, xb, yb): the files joker
# reads and the same rows as numpy arrays (dense, float64) for scikit-learn.

def svmlight(train, test=None, every=5):
    def load():
        from sklearn.datasets import load_svmlight_files, dump_svmlight_file
        if test:
            xa, ya, xb, yb = load_svmlight_files([f"{DATA}/{train}", f"{DATA}/{test}"])
            return dict(train=f"{DATA}/{train}", test=f"{DATA}/{test}", jargs=[],
                        xa=xa.toarray(), ya=ya, xb=xb.toarray(), yb=yb)
        x, y = load_svmlight_files([f"{DATA}/{train}"])
        mask = np.arange(len(y)) % every == 0  # every fifth row is a test row
        base = f"{SPLITS}/{os.path.basename(train)}"
        os.makedirs(SPLITS, exist_ok=True)
        # one-based like the source files; the last feature written on the first row keeps
        # joker's width equal to scikit-learn's even where a split lacks the widest feature
        for path, rows in ((base + ".train", ~mask), (base + ".test", mask)):
            dump_svmlight_file(x[rows], y[rows], path, zero_based=False)
        return dict(train=base + ".train", test=base + ".test",
                    jargs=["--n-features", str(x.shape[1])],
                    xa=x[~mask].toarray(), ya=y[~mask], xb=x[mask].toarray(), yb=y[mask])
    return load


def label_first(train, test, sep):
    def load():
        a = np.loadtxt(f"{DATA}/{train}", delimiter=sep)
        b = np.loadtxt(f"{DATA}/{test}", delimiter=sep)
        return dict(train=f"{DATA}/{train}", test=f"{DATA}/{test}",
                    jargs=["--label-column", "first"],
                    xa=a[:, 1:], ya=a[:, 0], xb=b[:, 1:], yb=b[:, 0])
    return load


def write_csv_split(name, a, test):
    os.makedirs(SPLITS, exist_ok=True)
    base = f"{SPLITS}/{name}"
    np.savetxt(base + ".train.csv", a[~test], delimiter=",", fmt="%.17g")
    np.savetxt(base + ".test.csv", a[test], delimiter=",", fmt="%.17g")
    return dict(train=base + ".train.csv", test=base + ".test.csv",
                jargs=["--label-column", "last"],
                xa=a[~test, :-1], ya=a[~test, -1], xb=a[test, :-1], yb=a[test, -1])


def cadata():
    a = np.loadtxt(f"{DATA}/cadata/cal_housing.data", delimiter=",", skiprows=1)
    return write_csv_split("cadata", a, np.arange(len(a)) % 5 == 0)


def uci(name):
    def load():
        with gzip.open(f"{DATA}/uci_gp/{name}/data.csv.gz", "rt") as f:
            a = np.loadtxt(f, delimiter=",", ndmin=2)
        with gzip.open(f"{DATA}/uci_gp/{name}/test_mask.csv.gz", "rt") as f:
            m = np.loadtxt(f, delimiter=",")
        test = m[:, 0].astype(bool) if m.ndim == 2 else m.astype(bool)  # the first split
        return write_csv_split(f"uci-{name}", a, test)
    return load


def extra(name, task):
    def load():
        a = np.loadtxt(f"{EXTRA}/{name}.train.csv", delimiter=",", ndmin=2)
        b = np.loadtxt(f"{EXTRA}/{name}.test.csv", delimiter=",", ndmin=2)
        return dict(train=f"{EXTRA}/{name}.train.csv", test=f"{EXTRA}/{name}.test.csv",
                    jargs=["--label-column", "first"],
                    xa=a[:, 1:], ya=a[:, 0], xb=b[:, 1:], yb=b[:, 0])
    return load


# name, task, training rows (checked when loaded), loader
SETS = [
    ("a9a", "cls", 32561, svmlight("libsvm/a9a", "libsvm/a9a.t")),
    ("w8a", "cls", 49749, svmlight("libsvm/w8a", "libsvm/w8a.t")),
    ("ijcnn1", "cls", 49990, svmlight("libsvm/ijcnn1", "libsvm/ijcnn1.t")),
    ("mushrooms", "cls", 6499, svmlight("libsvm/mushrooms")),
    ("pendigits", "cls", 7494, svmlight("libsvm/pendigits", "libsvm/pendigits.t")),
    ("dna", "cls", 2000, svmlight("libsvm/dna.scale", "libsvm/dna.scale.t")),
    ("covtype 5k", "cls", 4858, label_first("covtype_small/covtype.5000.train.csv",
                                            "covtype_small/covtype.5000.test.csv", ",")),
    ("covtype 1k", "cls", 976, label_first("covtype_small/covtype.1000.train.csv",
                                           "covtype_small/covtype.1000.test.csv", ",")),
    ("higgs 7k", "cls", 7000, label_first("higgs_small/binary.train", "higgs_small/binary.test",
                                          None)),
    ("cadata", "reg", 16512, cadata),
    ("cpusmall", "reg", 5734, svmlight("libsvm/cpusmall_scale", "libsvm/cpusmall_scale.t")),
    ("abalone", "reg", 3341, svmlight("libsvm/abalone_scale")),
    ("housing", "reg", 404, svmlight("libsvm/housing_scale")),
]
UCI_ROWS = {  # training rows of the first of the ten splits
    "airfoil": 1353, "autompg": 353, "autos": 144, "bike": 15642, "breastcancer": 175,
    "challenger": 21, "concrete": 927, "concreteslump": 93, "elevators": 14940, "energy": 692,
    "fertility": 90, "forest": 466, "gas": 2309, "housing": 456, "keggdirected": 43945,
    "keggundirected": 57248, "kin40k": 36000, "machine": 189, "parkinsons": 5288,
    "pendulum": 567, "pol": 13500, "protein": 41157, "pumadyn32nm": 7373, "servo": 151,
    "skillcraft": 3005, "sml": 3724, "solar": 960, "stock": 483, "tamielectric": 41203,
    "wine": 1440, "yacht": 278,
}
SETS += [(f"uci {n}", "reg", r, uci(n)) for n, r in sorted(UCI_ROWS.items())]


def halves():
    """The rule of docs/bench/sets.md: sort by task (classification first), then training rows,
    then name; alternate tuning, judging, tuning, ... down the whole list."""
    order = sorted(SETS, key=lambda s: (s[1] != "cls", s[2], s[0]))
    return {s[0]: ("tuning" if i % 2 == 0 else "judging") for i, s in enumerate(order)}, order


def extra_sets():
    path = f"{EXTRA}/index.json"
    if not os.path.exists(path):
        return []
    return [(e["name"], e["task"], e["n_train"], extra(e["name"], e["task"]))
            for e in json.load(open(path))]


# ---- the runs ------------------------------------------------------------------------------

CHILD = r"""
import json, sys, time
import numpy as np
d = np.load(sys.argv[1]); task = sys.argv[2]; scaled = sys.argv[3] == "scaled"
from sklearn.svm import SVC, SVR
est = SVC() if task == "cls" else SVR()
xa, ya, xb, yb = d["xa"], d["ya"], d["xb"], d["yb"]
mu, sd = 0.0, 1.0
t0 = time.perf_counter()
if scaled:  # joker's preprocessing: features z-scored with training statistics, and the target
    c, s = xa.mean(axis=0), xa.std(axis=0)
    s[s == 0] = 1.0
    xa, xb = (xa - c) / s, (xb - c) / s
    if task == "reg":
        mu, sd = ya.mean(), ya.std()
est.fit(xa, (ya - mu) / sd)
fit = time.perf_counter() - t0
t1 = time.perf_counter()
p = est.predict(xb) * sd + mu
pred = time.perf_counter() - t1
metric = 100 * np.mean(p == yb) if task == "cls" else float(np.sqrt(np.mean((p - yb) ** 2)))
params = {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
          for k, v in est.get_params().items()}
gamma = est._gamma if hasattr(est, "_gamma") else None
print(json.dumps({"fit": fit, "predict": pred, "metric": float(metric), "gamma": float(gamma),
                  "n_support": int(np.sum(est.n_support_)) if task == "cls" else len(est.support_),
                  "params": params}))
"""


def loadavg():
    return [float(v) for v in open("/proc/loadavg").read().split()[:3]]


def score(task, pred, y):
    if task == "cls":
        return float(100 * np.mean(pred == y))
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def run_joker(d, task, opts, tmp, threads=None):
    model, out = f"{tmp}/model.json", f"{tmp}/pred.txt"
    args = [J, "train", "--quiet", d["train"], model, "--force"] + d["jargs"]
    if task == "reg":
        args += ["--task", "regression"]
    args += opts
    env = dict(os.environ)
    if threads:
        env["RAYON_NUM_THREADS"] = str(threads)
    t0 = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:300], "args": args[1:]}
    m = json.load(open(model))
    t1 = time.perf_counter()
    pargs = d["jargs"] if "--label-column" in d["jargs"] else []  # predict has no --n-features
    p = subprocess.run([J, "predict", d["test"], model, out, "--force"] + pargs,
                       capture_output=True, text=True, env=env)
    pwall = time.perf_counter() - t1
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    pred = np.loadtxt(out, ndmin=1)
    said = [l for l in (p.stdout + p.stderr).splitlines() if "=" in l]
    tr = m["training"]
    return {"fit": tr["seconds"], "wall": wall, "predict_wall": pwall,
            "metric": score(task, pred, d["yb"]), "joker_says": said[-1] if said else "",
            "gamma": m["kernel"].get("gamma"), "iterations": tr.get("iterations"),
            "stop": tr.get("stop"), "gap": tr.get("gap"),
            "representation": tr.get("representation", ""), "args": args[1:],
            "threads": threads or "all"}


def run_peer(npz, task, scaled=False):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, npz, task,
                            "scaled" if scaled else "raw"], capture_output=True,
                           text=True, timeout=PEER_TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {PEER_TIMEOUT:.0f} s"}
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def med(runs, key):
    vals = [r[key] for r in runs if key in r and "error" not in r]
    return statistics.median(vals) if vals else None


def machine():
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
    import sklearn, scipy
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "src"],
                           capture_output=True, text=True).stdout.strip()
    ver = subprocess.run([J, "--version"], capture_output=True, text=True).stdout.strip()
    import hashlib
    st = os.stat(J)
    return {"commit": commit, "worktree_src_modified_at_run_time (the binary may predate it)": bool(dirty), "joker_binary": J,
            "joker_binary_sha256": hashlib.sha256(open(J, "rb").read()).hexdigest(),
            "joker_binary_mtime": datetime.datetime.fromtimestamp(
                st.st_mtime, datetime.timezone.utc).isoformat(timespec="seconds"),
            "joker_version": ver,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpu": cpu[0] if cpu else platform.processor(), "logical_cpus": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__,
            "scikit-learn": sklearn.__version__, "scipy": scipy.__version__,
            "threads": {"joker": "all logical CPUs (rayon) unless RAYON_NUM_THREADS; runs "
                                 "with threads=1 set RAYON_NUM_THREADS=1",
                        "scikit-learn": "1 (LIBSVM is single-threaded; OMP/OPENBLAS/MKL "
                                        "threads set to 1)"}}


SETTINGS = {
    "joker": "train with nothing set: exact kernel where the n x n matrix fits --kernel-cache "
             "2048 MiB, else 2048 Nystrom centres; lambda 1 (C = 1); --bandwidth median unless "
             "the variant says; features z-scored; regression targets z-scored; --tol 1e-3 "
             "with the stall rule; f32; seed 42. --task regression is given for regression "
             "sets, --label-column for CSV files, --n-features for split LIBSVM files.",
    "scikit-learn": "SVC() / SVR() defaults: kernel rbf, gamma 'scale' = 1 / (d Var X) on the "
                    "raw features, C 1, epsilon 0.1 (SVR, on the raw target), tol 1e-3, "
                    "cache_size 200 MB, shrinking True; the full get_params() is in every run",
    "scikit-learn scaled": "with --scaled-peer, also SVC() / SVR() defaults after joker's "
                           "preprocessing: features z-scored with training statistics (a "
                           "constant column divided by 1), regression targets z-scored and "
                           "predictions mapped back; the fit time includes the scaling",
    "metric": "test accuracy in % (classification) or RMSE in the target's units (regression), "
              "computed by this script from each system's predictions",
    "repeats": f"median of {REPEATS} runs up to {REPEAT_ROWS} training rows, 1 run above",
    "peer_rows": f"scikit-learn only up to {PEER_ROWS} training rows; repeated only when its "
                 f"first fit took <= {SLOW} s; stopped after {PEER_TIMEOUT} s",
}


def main():
    half_of, order = halves()
    ex = extra_sets()
    if "--list" in ARGS:
        print("| # | set | task | train rows | half |\n|---|---|---|---|---|")
        for i, s in enumerate(order):
            print(f"| {i + 1} | {s[0]} | {s[1]} | {s[2]} | {half_of[s[0]]} |")
        return
    chosen = [s for s in order if HALF == "all" or half_of[s[0]] == HALF]
    if HALF in ("judging", "all"):
        chosen += ex
    if ONLY:
        chosen = [s for s in chosen if s[0] in ONLY]
    out = arg("--out", f"docs/bench/judge/{HALF}.json")
    record = {"half": HALF, "machine": machine(), "settings": SETTINGS,
              "variants": {n: o for n, o in VARIANTS}, "load_before": loadavg(), "sets": []}
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    names = [n for n, _ in VARIANTS]
    print("| set | task | n train x d, test | " + " | ".join(f"joker {n}" for n in names)
          + " | sklearn default | sklearn default, scaled |")
    print("|" + "---|" * (5 + len(names)))
    for name, task, rows, load in chosen:
        d = load()
        n, dim = d["xa"].shape
        assert n == rows, (name, n, rows)
        repeats = REPEATS if n <= REPEAT_ROWS else 1
        entry = {"set": name, "task": task, "half": half_of.get(name, "judging"),
                 "origin": "shared" if name in half_of else "extra", "n_train": n,
                 "d": dim, "n_test": len(d["yb"]), "train_file": d["train"],
                 "test_file": d["test"], "load_before": loadavg(), "joker": {}, "joker_1thread": {},
                 "sklearn": []}
        with tempfile.TemporaryDirectory() as tmp:
            for vname, opts in VARIANTS:
                entry["joker"][vname] = [run_joker(d, task, opts, tmp) for _ in range(repeats)]
                if "--single-thread" in ARGS:
                    entry["joker_1thread"][vname] = [run_joker(d, task, opts, tmp, threads=1)]
            if n <= PEER_ROWS:
                np.savez(f"{tmp}/split.npz", xa=d["xa"], ya=d["ya"], xb=d["xb"], yb=d["yb"])
                for key, scaled in (("sklearn", False), ("sklearn_scaled", True)):
                    if scaled and "--scaled-peer" not in ARGS:
                        continue
                    entry[key] = []
                    for i in range(repeats):
                        r = run_peer(f"{tmp}/split.npz", task, scaled)
                        entry[key].append(r)
                        if "error" in r or r["fit"] > SLOW:
                            break
            else:
                entry["sklearn_skipped"] = f"more than {PEER_ROWS} training rows"
        entry["load_after"] = loadavg()
        record["sets"].append(entry)
        fmt = (lambda v: f"{v:.2f}%") if task == "cls" else (lambda v: f"{v:.4g}")

        def cell(runs):
            if not runs:
                return entry.get("sklearn_skipped", "")
            bad = [r for r in runs if "error" in r]
            if bad and len(bad) == len(runs):
                return "failed: " + bad[0]["error"][:60]
            return f"{fmt(med(runs, 'metric'))} ({med(runs, 'fit'):.2f} s)"
        print(f"| {name} | {task} | {n} x {dim}, {len(d['yb'])} | "
              + " | ".join(cell(entry["joker"][v]) for v in names)
              + f" | {cell(entry['sklearn'])} | {cell(entry.get('sklearn_scaled', []))} |",
              flush=True)
        record["load_after"] = loadavg()
        json.dump(record, open(out, "w"), indent=1)


def report(paths):
    """Markdown tables and counts from records written by main(): --report A.json [B.json ...]."""
    import math
    for path in paths:
        rec = json.load(open(path))
        names = list(rec["variants"])
        m = rec["machine"]
        print(f"\n### {rec['half']} half ({path})\n")
        print(f"commit {m['commit'][:7]}, {m['date']}, {m['cpu']}, {m['logical_cpus']} logical "
              f"CPUs, scikit-learn {m['scikit-learn']}, numpy {m['numpy']}; load average "
              f"{rec['load_before'][0]:.2f} before, {rec.get('load_after', ['?'])[0]} after\n")
        print("| set | task | train x d | joker representation | "
              + " | ".join(f"joker {n}" for n in names)
              + " | SVC()/SVR() | SVC()/SVR() scaled | joker median fit, 1 thread |")
        print("|" + "---|" * (7 + len(names)))
        diffs = {n: [] for n in names if n != names[0]}
        for e in rec["sets"]:
            cls = e["task"] == "cls"
            fmt = (lambda v: f"{v:.2f}%") if cls else (lambda v: f"{v:.4g}")

            def cell(runs):
                if not runs:
                    sk = e.get("sklearn_skipped", "")
                    return "not run" if sk.startswith("more than 0 ") else (f"skipped ({sk})" if sk else "")
                if all("error" in r for r in runs):
                    return "failed: " + runs[0]["error"][:40]
                return f"{fmt(med(runs, 'metric'))} ({med(runs, 'fit'):.2f} s, {len(runs)})"
            j0 = e["joker"][names[0]]
            rep = next((r["representation"] for r in j0 if "representation" in r), "")
            if not rep and "rff" in " ".join(j0[0].get("args", [])):
                rep = "random features"  # -m given: the model names no automatic choice
            rep = "Nystrom" if "Nystrom" in rep else ("exact" if "exact" in rep else "RFF" if "random" in rep else rep[:20])
            one = e.get("joker_1thread", {}).get(names[0], [])
            print(f"| {e['set']} | {e['task']} | {e['n_train']} x {e['d']} | {rep} | "
                  + " | ".join(cell(e["joker"][n]) for n in names) + f" | {cell(e['sklearn'])} | "
                  + f"{cell(e.get('sklearn_scaled', []))} | "
                  + (f"{med(one, 'fit'):.2f} s" if one and med(one, 'fit') is not None else "")
                  + " |")
            base = med(j0, "metric")
            peers = {"SVC()/SVR()": e["sklearn"], "SVC()/SVR() scaled": e.get("sklearn_scaled", [])}
            for n in list(names[1:]) + list(peers):
                v = med(peers[n], "metric") if n in peers else med(e["joker"][n], "metric")
                if v is None or base is None:
                    continue
                # gain of the variant over joker's median: accuracy points, or RMSE ratio
                g = v - base if cls else math.log(base / v) if v > 0 and base > 0 else 0.0
                origin = e.get("origin", "extra" if e["set"].startswith(("sk-", "r-")) else "shared")
                diffs.setdefault(n, []).append((e["task"], f"{rep}, {origin} sets", g))
        print()
        for n, ds in diffs.items():
            for task, rep in sorted({(x[0], x[1]) for x in ds}):
                g = [x[2] for x in ds if x[0] == task and x[1] == rep]
                if not g:
                    continue
                tol = 0.2 if task == "cls" else math.log(1.01)
                better, worse = sum(x > tol for x in g), sum(x < -tol for x in g)
                mean = statistics.mean(g)
                what = (f"mean {mean:+.2f} accuracy points" if task == "cls"
                        else f"geometric-mean RMSE ratio {math.exp(-mean):.3f}")
                print(f"- {n} against joker {names[0]}, {task}, {rep} ({len(g)} sets): better on "
                      f"{better}, worse on {worse}, within {'0.2 points' if task == 'cls' else '1%'}"
                      f" on {len(g) - better - worse}; {what}")


if __name__ == "__main__":
    if "--report" in ARGS:
        report([a for a in ARGS[ARGS.index("--report") + 1:] if a.endswith(".json")])
    else:
        main()
