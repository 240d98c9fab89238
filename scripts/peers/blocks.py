#!/usr/bin/env python3
"""joker's default fit on `defaults.py`'s training files at several block sizes, side by side:
the median `training.seconds` of each size (the fit alone) with its iterations and CG
products, the sizes alternating within each repetition so that a slow moment of the machine
touches them all.

usage: .venv-bench/bin/python scripts/peers/blocks.py [--sets a,b] [--blocks 256,128]
       [--reps R] [--loss LOSS] [--bin target/release/joker]
(from the repository root; `--sets` names `defaults.py`'s sets, default the regression sets
whose exact kernel fits the cache and that take 0.02 s or more; each set's own task, and
`--loss` passed as `-l` to every fit). A block size of `default` leaves it to the solver.
Training files are written once to target/ab/, as `ab.py` writes them."""
import json, os, statistics, subprocess, sys, tempfile

ARGS = sys.argv[1:]


def take(name, default):
    if name in ARGS:
        i = ARGS.index(name)
        return type(default)(ARGS[i + 1])
    return default


SETS = take("--sets", "uci gas,cpusmall,abalone,uci skillcraft,uci sml,uci parkinsons,"
            "uci pumadyn32nm,uci wine,uci airfoil,uci solar,uci concrete,uci bike,uci pol,"
            "uci elevators,cadata").split(",")
BLOCKS = take("--blocks", "256,128").split(",")
REPS = take("--reps", 5)
LOSS = take("--loss", "")
BIN = take("--bin", "target/release/joker")


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import defaults  # the loaders and the LIBSVM writer; its main() runs only as a script

    os.makedirs("target/ab", exist_ok=True)
    known = {name: (task, load) for name, task, load in defaults.SETS}
    model = os.path.join(tempfile.mkdtemp(), "model.json")
    for name in SETS:
        if name not in known:
            sys.exit(f"unknown set {name!r}")
        task, load = known[name]
        path = f"target/ab/{name.replace(' ', '_')}.train"
        if not os.path.exists(path):
            xa, ya, _xb, _yb = load()
            defaults.write_libsvm(path, xa, ya)
        seconds = {b: [] for b in BLOCKS}
        counts = {}
        for _ in range(REPS):
            for b in BLOCKS:
                args = [BIN, "train", "--quiet", path, model]
                if task != "cls":
                    args += ["--task", "regression"]
                if b != "default":
                    args += ["-b", b]
                if LOSS:
                    args += ["-l", LOSS]
                subprocess.run(args, check=True, capture_output=True)
                t = json.load(open(model))["training"]
                seconds[b].append(t["seconds"])
                counts[b] = (t["iterations"], t["timings"]["cg_iters"], t["stop"])
        cells = [f"{b}: {statistics.median(seconds[b]):.3f} s ({counts[b][0]} it., "
                 f"{counts[b][1]} CG, {counts[b][2]})" for b in BLOCKS]
        print(f"{name} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
