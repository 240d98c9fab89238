#!/usr/bin/env bash
# The out-of-core measurement of docs/out-of-core.md: a training file larger than this
# machine's memory, trained on under a hard memory cap (a cgroup v1 memory controller, as root),
# against the first million of its rows trained on for the same number of passes.
#
#   scripts/out-of-core.sh DIR [ROWS] [CAP_GIB] [M] [SOLVER]
#
# DIR receives big.npy (ROWS x 784 float32, default 12,000,000 rows = 37.6 GB), sub.npy (the
# same generator's first 1,000,000 rows), test.npy (100,000 rows of another seed) and the logs.
# Each fit runs one pass over its rows, M random features (default 512), and is scored on
# test.npy. SOLVER is dbcd (default: DBCD-TR, n / 512 iterations of block 512) or cdsg (n / 256
# steps of 256 rows, sweeping the rows in file order). STEPS, when set, caps the iterations or
# steps of every fit.
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
fit() {  # fit NAME ROWS
    local iters=$(( $2 / 512 )) solver=""
    if [[ "$SOLVER" == cdsg ]]; then iters=$(( $2 / 256 )); solver="--solver cdsg"; fi
    if [[ -n "${STEPS:-}" && "$STEPS" -lt "$iters" ]]; then iters="$STEPS"; fi
    echo 0 > "$CG/memory.max_usage_in_bytes"; echo 0 > "$CG/memory.failcnt"
    sync; echo 3 > /proc/sys/vm/drop_caches
    sh -c "echo \$\$ > $CG/cgroup.procs; exec /usr/bin/time -v $JOKER train -q --no-standardize -l svc -m $M $solver \
        --max-iter $iters --check-every $iters -v $DIR/test.npy $DIR/$1.npy $DIR/$1.$SOLVER.json" \
        > "$DIR/$1.$SOLVER.log" 2>&1
    echo "cgroup peak $(( $(cat $CG/memory.max_usage_in_bytes) >> 20 )) MiB (cap ${CAP} GiB)" >> "$DIR/$1.$SOLVER.log"
    grep -E "iterations|validation|train  |time  |data:|Maximum resident|Elapsed|cgroup" "$DIR/$1.$SOLVER.log"
}
echo "== big.npy: $ROWS rows"; fit big "$ROWS"
echo "== sub.npy: 1,000,000 rows"; fit sub 1000000
