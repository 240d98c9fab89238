#!/usr/bin/env bash
# The out-of-core measurement of docs/out-of-core.md: a training file larger than this
# machine's memory, trained on under a hard memory cap (a cgroup v1 memory controller, as root),
# against the first million of its rows.
#
#   scripts/out-of-core.sh DIR [ROWS] [CAP_GIB] [M] [SOLVER]
#
# DIR receives big.npy (ROWS x 784 float32, default 12,000,000 rows = 37.6 GB), sub.npy (the
# same generator's first 1,000,000 rows), test.npy (100,000 rows of another seed), the logs
# and record.json (every run: command, wall seconds, bytes read from disk, peak memory, test
# accuracy; commit, date and CPU).
# For each of big.npy and sub.npy it runs:
#  - "pass": one pass over the rows, explicitly (M random features, default 512; SOLVER dbcd,
#    n / 512 iterations of block 512, or cdsg, n / 256 steps of 256 rows in file order), with
#    one check at its end;
#  - "default" (SOLVER dbcd only): `joker train --no-standardize` with nothing else set, as a
#    user runs it; with M = 2048 (the default's map) the "pass" run is the same fit's one pass.
# Bytes read are `read_bytes` of /proc/PID/io, sampled every 0.2 s until the process ends, the
# page cache dropped first. STEPS, when set, caps the iterations or steps of the "pass" fits;
# ONLY=pass or ONLY=default runs those fits only, FILES=big or FILES=sub those files only, and KEEP=1 adds the runs to the record's
# earlier ones (runs.jsonl) instead of starting it again.
set -euo pipefail
DIR="$1"; ROWS="${2:-12000000}"; CAP="${3:-4}"; M="${4:-512}"; SOLVER="${5:-dbcd}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
cargo build --release --example make_npy --bin joker
JOKER="$ROOT/target/release/joker"
mkdir -p "$DIR"
make() { [[ -f "$DIR/$1.npy" ]] || target/release/examples/make_npy "$DIR/$1.npy" --rows "$2" --seed "$3"; }
make big "$ROWS" 1
make sub 1000000 1
make test 100000 2
CG=/sys/fs/cgroup/memory/joker-ooc
mkdir -p "$CG"
echo $((CAP << 30)) > "$CG/memory.limit_in_bytes"
RUNS="$DIR/runs.jsonl"
[[ "${KEEP:-}" == 1 ]] || : > "$RUNS"

run() {  # run NAME FILE ARGS...: one joker train under the cap, measured
    local name="$1" file="$2"; shift 2
    local log="$DIR/$name.log" cmd="$JOKER train $* -v $DIR/test.npy $DIR/$file.npy $DIR/$name.json"
    echo 0 > "$CG/memory.max_usage_in_bytes"; echo 0 > "$CG/memory.failcnt"
    sync; echo 3 > /proc/sys/vm/drop_caches
    local t0 rb=0 r
    t0=$(date +%s.%N)
    sh -c "echo \$\$ > $CG/cgroup.procs; exec /usr/bin/time -v $cmd" > "$log" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2> /dev/null; do
        # the joker process is the child of /usr/bin/time
        for p in $pid $(pgrep -P "$pid" || true); do
            r=$(awk '/^read_bytes/{print $2}' "/proc/$p/io" 2> /dev/null || true)
            [[ -n "$r" && "$r" -gt "$rb" ]] && rb=$r
        done
        sleep 0.2
    done
    wait "$pid" || { cat "$log"; exit 1; }
    local wall peak acc fit
    wall=$(echo "$(date +%s.%N) - $t0" | bc)
    peak=$(( $(cat "$CG/memory.max_usage_in_bytes") >> 20 ))
    acc=$(grep -oE "validation +accuracy [0-9.]+%" "$log" | grep -oE "[0-9.]+%" | tail -n 1)
    fit=$(grep -oE "^time +[0-9.]+" "$log" | grep -oE "[0-9.]+$" | tail -n 1)
    python3 - "$RUNS" "$name" "$cmd" "$wall" "$rb" "$peak" "$acc" "$fit" \
        "$(stat -c %s "$DIR/$file.npy")" "$log" <<'EOF'
import json, sys
runs, name, cmd, wall, rb, peak, acc, fit, size, log = sys.argv[1:]
start = [l.strip() for l in open(log) if l.startswith(("start:", "iterations", "gap"))]
rec = {"run": name, "command": cmd, "wall_seconds": float(wall), "fit_seconds": float(fit or "nan"),
       "read_bytes": int(rb), "file_bytes": int(size), "read_over_file": int(rb) / int(size),
       "cgroup_peak_mib": int(peak), "test_accuracy": acc, "summary": start}
open(runs, "a").write(json.dumps(rec) + "\n")
print(f"{name}: {float(wall):.1f} s wall (fit {fit} s), read {int(rb) / 1e9:.2f} GB "
      f"({int(rb) / int(size):.2f}x the file), peak {peak} MiB, test {acc}")
EOF
}

for file in ${FILES:-big sub}; do
    rows=$ROWS; [[ "$file" == sub ]] && rows=1000000
    iters=$(( rows / 512 )) solver=""
    if [[ "$SOLVER" == cdsg ]]; then iters=$(( rows / 256 )); solver="--solver cdsg"; fi
    if [[ -n "${STEPS:-}" && "$STEPS" -lt "$iters" ]]; then iters="$STEPS"; fi
    echo "== $file.npy: $rows rows"
    if [[ "${ONLY:-pass}" == pass ]]; then
        run "$file.pass-$SOLVER-m$M" "$file" -q --no-standardize -l svc -m "$M" $solver \
            --max-iter "$iters" --check-every "$iters"
    fi
    if [[ "$SOLVER" == dbcd && "${ONLY:-default}" == default ]]; then
        run "$file.default" "$file" --no-standardize
    fi
done

python3 - "$RUNS" "$DIR/record.json" "$ROWS" "$CAP" <<'EOF'
import json, os, platform, subprocess, sys, time
runs, out, rows, cap = sys.argv[1:]
cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = bool(subprocess.run(["git", "status", "--porcelain", "src"], capture_output=True, text=True).stdout.strip())
json.dump({"commit": commit, "src_modified": dirty,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "cpu": cpu[0] if cpu else platform.processor(), "logical_cpus": os.cpu_count(),
           "threads": "all logical CPUs (rayon)", "rows": int(rows), "cap_gib": int(cap),
           "read_ahead_kb": {d: open(f"/sys/block/{d}/queue/read_ahead_kb").read().strip()
                             for d in os.listdir("/sys/block") if not d.startswith(("loop", "zram"))},
           "runs": [json.loads(l) for l in open(runs)]}, open(out, "w"), indent=1)
print("record:", out)
EOF
