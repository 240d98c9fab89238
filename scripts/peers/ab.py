#!/usr/bin/env python3
"""Two or more joker binaries in turn on the same training files: the median, fastest and
slowest `training.seconds` of each (the fit alone, as `defaults.py` reports it) and its peak
resident memory, for a change whose effect is smaller than one machine's run-to-run spread.

Files: the training halves of `defaults.py`'s sets (`--sets`, default the five classification
sets that fit the exact kernel's cache) and, with `--blobs`, `classes.py`-shaped Gaussian
classes in 16 dimensions (8,000 rows, seed 7): K = 4, 10, 26 classes, overlapping (spread 0.5)
and separated (spread 1). Written once to target/ab/.

With `--pause S`, every run waits S seconds first. On a virtual machine whose system hands
freed memory back to the host, a process that starts after an idle moment pays again for its
first touch of fresh pages, which one started right after another reuses: back-to-back runs
measure the second case, `defaults.py` (each fit after the peers' processes) and a user's
single fit the first (docs/bench/defaults.md, "Cold and warm").

usage: .venv-bench/bin/python scripts/peers/ab.py [--reps R] [--pause S] [--sets a,b] [--blobs]
BIN BIN... (from the repository root, e.g. a copy of an earlier build's target/release/joker
and the current one; R runs of each, default 7, the binaries alternating)."""
import json, os, statistics, subprocess, sys, time

import numpy as np

ARGS = sys.argv[1:]


def take(name, default):
    if name in ARGS:
        i = ARGS.index(name)
        value = ARGS[i + 1]
        del ARGS[i:i + 2]
        return type(default)(value)
    return default


REPS = take("--reps", 7)
PAUSE = take("--pause", 0.0)
SETS = take("--sets", "mushrooms,pendigits,dna,covtype 5k,higgs 7k").split(",")
BLOBS = "--blobs" in ARGS
BINS = [a for a in ARGS if a != "--blobs"]
OUT = "target/ab"


def training_files():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import defaults  # the loaders and the LIBSVM writer; its main() runs only as a script

    os.makedirs(OUT, exist_ok=True)
    files = []
    for name, _task, load in defaults.SETS:
        if name not in SETS:
            continue
        path = f"{OUT}/{name.replace(' ', '_')}.train"
        if not os.path.exists(path):
            xa, ya, _xb, _yb = load()
            defaults.write_libsvm(path, xa, ya)
        files.append(path)
    if BLOBS:
        for k in (4, 10, 26):
            for spread, tag in ((0.5, "overlapping"), (1.0, "separated")):
                path = f"{OUT}/blobs{k}-{tag}.train"
                if not os.path.exists(path):
                    rng = np.random.default_rng(7)
                    centres = rng.normal(size=(k, 16)) * spread
                    y = rng.integers(0, k, size=8000)
                    x = centres[y] + rng.normal(size=(8000, 16))
                    defaults.write_libsvm(path, x, y)
                files.append(path)
    return files


def main():
    if not BINS:
        sys.exit(__doc__)
    for path in training_files():
        secs = {b: [] for b in BINS}
        mem = {b: [] for b in BINS}
        for _ in range(REPS):
            for b in BINS:
                time.sleep(PAUSE)
                r = subprocess.run(["/usr/bin/time", "-f", "RSS %M", b, "train", "--quiet", path,
                                    f"{OUT}/model.json"], capture_output=True, text=True,
                                   check=True)
                secs[b].append(json.load(open(f"{OUT}/model.json"))["training"]["seconds"])
                rss = [l for l in r.stderr.splitlines() if l.startswith("RSS")][-1]
                mem[b].append(int(rss.split()[1]) // 1024)
        cells = [f"{b}: {statistics.median(secs[b]):.3f} s [{min(secs[b]):.3f}-{max(secs[b]):.3f}], "
                 f"{max(mem[b])} MB" for b in BINS]
        print(f"{os.path.basename(path)[:-6]} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
