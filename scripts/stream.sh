#!/usr/bin/env bash
# The streamed measurement of docs/out-of-core.md: a CSV training file larger than this
# machine's memory, trained on by CDSG with `joker train --stream` under a hard memory cap (a
# cgroup v1 memory controller, as root), against the file's first million rows in memory for
# the same number of steps.
#
#   scripts/stream.sh DIR [ROWS] [CAP_GIB] [STEPS] [M]
#
# DIR receives big.csv (ROWS x 28 rows from examples/make_npy --csv, default 150,000,000 rows,
# about 36 GB), sub.csv (its first 1,000,000 rows), test.csv (100,000 rows of another seed)
# and the logs. Each fit takes STEPS CDSG steps of 256 rows (default 40,000) with M random
# features (default 512), checks once, and is scored on test.csv.
set -euo pipefail
DIR="$1"; ROWS="${2:-150000000}"; CAP="${3:-4}"; STEPS="${4:-40000}"; M="${5:-512}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
cargo build --release --example make_npy --bin joker
JOKER="$ROOT/target/release/joker"
mkdir -p "$DIR"
make() { [[ -f "$DIR/$1.csv" ]] || target/release/examples/make_npy "$DIR/$1.csv" --csv --dim 28 --rows "$2" --seed "$3"; }
make big "$ROWS" 1
make sub 1000000 1
make test 100000 2
CG=/sys/fs/cgroup/memory/joker-stream
mkdir -p "$CG"
echo $((CAP << 30)) > "$CG/memory.limit_in_bytes"
fit() {  # fit NAME [--stream]
    echo 0 > "$CG/memory.max_usage_in_bytes"; echo 0 > "$CG/memory.failcnt"
    sync; echo 3 > /proc/sys/vm/drop_caches
    sh -c "echo \$\$ > $CG/cgroup.procs; exec /usr/bin/time -v $JOKER train -q $2 -l svc -m $M --solver cdsg \
        --max-iter $STEPS --check-every $STEPS -v $DIR/test.csv $DIR/$1.csv $DIR/$1.json" \
        > "$DIR/$1.log" 2>&1
    echo "cgroup peak $(( $(cat $CG/memory.max_usage_in_bytes) >> 20 )) MiB (cap ${CAP} GiB)" >> "$DIR/$1.log"
    grep -E "iterations|validation|train  |time  |Maximum resident|Elapsed|cgroup" "$DIR/$1.log"
}
echo "== big.csv: $ROWS rows, streamed"; fit big --stream
echo "== sub.csv: 1,000,000 rows in memory"; fit sub ""
