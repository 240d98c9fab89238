#!/usr/bin/env python3
"""Checks README.md (standard library only; run from anywhere, exits non-zero on any failure):

1. it has at most 250 lines;
2. it names no commit id: no run of 7 to 40 hexadecimal characters with at least one letter
   a-f and one digit (a run of digits alone is a number, not an id);
3. every number in its results table (the first table under `## Results`) comes from the raw
   record its row links to. A row names its set (first cell) and links its record
   (`[...](docs/bench/judge/NAME.json)`, a record written by scripts/peers/judge.py). Cells:
     - `N x D`: the set's training rows and features (`n_train`, `d`);
     - `METRIC (FIT s)` in the joker, SVC()/SVR() raw and SVC()/SVR() z-scored columns: the
       median test metric and the median fit seconds of the runs of that system in the record
       (joker: the record's first variant; raw: `sklearn`; z-scored: `sklearn_scaled`),
       equal to the record's value rounded to the decimals printed (`97.88%` against 97.8845...);
       `not run` where the record ran no such peer on the set;
     - `J / P` threads: joker's threads (the record machine's logical CPUs for runs with all
       threads, else the number set) and scikit-learn's (1, as the record's settings say);
     - a `--sets NAME` cell: NAME must be the row's set.
   Any other number in a row, a row whose record or set is missing, or a table without rows
   is an error.
"""
import json
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
MAX_LINES = 250
COMMIT = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*[0-9])"
                    r"[0-9a-fA-F]{7,40}(?![0-9A-Za-z])")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?")
errors = []


def err(msg):
    errors.append(msg)


def median(runs, key):
    vals = [r[key] for r in runs if isinstance(r, dict) and "error" not in r and key in r]
    return statistics.median(vals) if vals else None


def same(printed, value):
    """printed (a string such as '97.88', '0.007025', '1,234') equals value rounded as printed."""
    if value is None:
        return False
    text = printed.replace(",", "")
    if "e" in text.lower():
        mant, _, exp = text.lower().partition("e")
        decimals = len(mant.partition(".")[2])
        return f"{value:.{decimals}e}" == f"{float(mant):.{decimals}f}e{int(exp):+03d}"
    decimals = len(text.partition(".")[2])
    return f"{value:.{decimals}f}" == f"{float(text):.{decimals}f}"


def cells_of(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def check_metric_cell(where, cell, runs, task):
    """`97.88% (0.12 s)` or `not run`; returns the text left once the checked numbers are cut."""
    if cell.strip().lower().startswith("not run"):
        if runs:
            err(f"{where}: 'not run' but the record has {len(runs)} run(s)")
        return cell.strip()[len("not run"):]
    m = re.fullmatch(r"\s*(\S+?)(%?)\s*\(\s*(\S+)\s*s\s*\)\s*", cell)
    if not m:
        err(f"{where}: cannot read `{cell}` (expected `METRIC (SECONDS s)` or `not run`)")
        return ""
    metric, pct, fit = m.groups()
    if not runs:
        err(f"{where}: the record has no runs for `{cell}`")
        return ""
    if (task == "cls") != (pct == "%"):
        err(f"{where}: `{cell}`: accuracy carries %, RMSE does not (task {task})")
    rec_metric, rec_fit = median(runs, "metric"), median(runs, "fit")
    if not same(metric, rec_metric):
        err(f"{where}: metric {metric} but the record's median is {rec_metric}")
    if not same(fit, rec_fit):
        err(f"{where}: fit {fit} s but the record's median is {rec_fit}")
    return ""


def check_table(lines):
    start = next((i for i, l in enumerate(lines) if l.strip() == "## Results"), None)
    if start is None:
        err("no `## Results` section")
        return 0
    i = start + 1
    while i < len(lines) and not lines[i].lstrip().startswith("|"):
        if lines[i].startswith("## "):
            err("no table in the `## Results` section")
            return 0
        i += 1
    header = cells_of(lines[i])
    cols = [h.lower() for h in header]

    def col(pred, what):
        hit = [k for k, h in enumerate(cols) if pred(h)]
        if len(hit) != 1:
            err(f"results table: {len(hit)} columns for {what} in its header {header}")
            return None
        return hit[0]
    c_shape = col(lambda h: " x " in h or "rows x" in h, "the shape")
    c_joker = col(lambda h: h.startswith("joker"), "joker")
    c_raw = col(lambda h: ("svc" in h or "svr" in h) and "z-scored" not in h, "SVC()/SVR() raw")
    c_scaled = col(lambda h: ("svc" in h or "svr" in h) and "z-scored" in h, "SVC()/SVR() z-scored")
    c_threads = col(lambda h: "thread" in h, "threads")
    for k, h in enumerate(header):
        if NUMBER.search(h):
            err(f"results table: a number in the header cell `{h}`")
    records, rows = {}, 0
    for line in lines[i + 2:]:
        if not line.lstrip().startswith("|"):
            break
        rows += 1
        cells = cells_of(line)
        name = cells[0].strip("* `")
        where = f"results table, row `{name}`"
        links = re.findall(r"\]\((docs/bench/judge/[^)\s]+\.json)\)", line)
        if len(links) != 1:
            err(f"{where}: {len(links)} record links (one expected)")
            continue
        path = os.path.join(ROOT, links[0])
        if path not in records:
            try:
                records[path] = json.load(open(path))
            except (OSError, ValueError) as e:
                err(f"{where}: record {links[0]} cannot be read: {e}")
                records[path] = None
        rec = records[path]
        if rec is None:
            continue
        entry = next((e for e in rec.get("sets", []) if e.get("set") == name), None)
        if entry is None:
            err(f"{where}: no set `{name}` in {links[0]}")
            continue
        task = entry["task"]
        variant = next(iter(rec["variants"]))
        left = []  # text of the row whose numbers no rule below accounts for
        for k, cell in enumerate(cells):
            if k == 0:
                continue
            if k == c_shape:
                m = re.fullmatch(r"\s*([\d,]+)\s*x\s*([\d,]+)\s*", cell)
                if not m:
                    err(f"{where}: cannot read the shape `{cell}`")
                elif (int(m[1].replace(",", "")), int(m[2].replace(",", ""))) != (entry["n_train"], entry["d"]):
                    err(f"{where}: shape {cell} but the record has {entry['n_train']} x {entry['d']}")
            elif k == c_joker:
                left.append(check_metric_cell(where + ", joker", cell,
                                              entry["joker"].get(variant, []), task))
            elif k == c_raw:
                left.append(check_metric_cell(where + ", raw peer", cell,
                                              entry.get("sklearn", []), task))
            elif k == c_scaled:
                left.append(check_metric_cell(where + ", z-scored peer", cell,
                                              entry.get("sklearn_scaled", []), task))
            elif k == c_threads:
                m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", cell)
                runs = entry["joker"].get(variant, [])
                t = {r.get("threads") for r in runs if isinstance(r, dict)}
                jt = (rec["machine"]["logical_cpus"] if t == {"all"}
                      else next(iter(t)) if len(t) == 1 else None)
                sk = rec["machine"].get("threads", {}).get("scikit-learn", "")
                pt = int(sk.split()[0]) if sk.split() and sk.split()[0].isdigit() else None
                if not m:
                    err(f"{where}: cannot read the threads `{cell}` (expected `J / P`)")
                elif (int(m[1]), int(m[2])) != (jt, pt):
                    err(f"{where}: threads {cell} but the record says {jt} / {pt}")
            else:
                m = re.fullmatch(r"`?--sets\s+\"?([^\"`]+)\"?`?", cell)
                if m:
                    if m[1] != name:
                        err(f"{where}: `--sets {m[1]}` names another set")
                else:
                    left.append(re.sub(r"\[[^\]]*\]\([^)]*\)", "", cell))
        for text in left:
            for n in NUMBER.findall(text):
                err(f"{where}: the number {n} in `{text.strip()}` is not checked against the record")
    if rows == 0:
        err("results table: no rows")
    return rows


def main():
    try:
        text = open(README, encoding="utf-8").read()
    except OSError as e:
        print(f"check-readme: {e}", file=sys.stderr)
        return 1
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        err(f"README.md has {len(lines)} lines, more than {MAX_LINES}")
    for n, line in enumerate(lines, 1):
        for m in COMMIT.finditer(line):
            err(f"README.md:{n}: `{m.group(0)}` looks like a commit id")
    rows = check_table(lines)
    for e in errors:
        print(f"check-readme: {e}", file=sys.stderr)
    if errors:
        print(f"check-readme: {len(errors)} problem(s)", file=sys.stderr)
        return 1
    print(f"README.md: {len(lines)} lines, no commit ids, {rows} results rows match their records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
