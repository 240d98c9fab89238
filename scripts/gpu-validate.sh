#!/usr/bin/env bash
# The GPU validation in one command: every GPU test (each kernel against its CPU twin, the
# device engines against the host engines, fits on the GPU against fits on the CPU), the rest
# of the test suite with Device::Auto on the GPU, and bench_gpu. Prints the device, its compute
# capability and driver, one verdict line per test group, and writes the table row for
# docs/gpu-validation.md. Every suite runs whatever the others did; the last lines summarise,
# and the exit status is 0 only when every group passed on a GPU and every test binary (and
# bench_gpu) exited with status 0. First it loads every kernel image
# (scripts/gpu-load-check.py: the fat binaries and the PTX through the JIT).
#
#   scripts/gpu-validate.sh                 build with cargo, then run
#   scripts/gpu-validate.sh --bins DIR      run prebuilt binaries (a GPU machine without Rust):
#                                           DIR holds gpu, joker_unit, api, solver, krr,
#                                           tr_vectors (test binaries) and bench_gpu
#
# Environment: JOKER_VALIDATE_OUT (default target/gpu-validation; logs and row.md go there),
#              JOKER_COMMIT (the commit to record when git is not available),
#              JOKER_BENCH_ARGS (arguments for bench_gpu; default "--iters 20 --reps 20").
# JOKER_REQUIRE_GPU=1 is set for the tests: without a usable GPU every GPU test fails with the
# probe's reason instead of being skipped.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUTDIR="${JOKER_VALIDATE_OUT:-$ROOT/target/gpu-validation}"
mkdir -p "$OUTDIR"
export JOKER_REQUIRE_GPU=1

BINS=""
if [[ "${1:-}" == "--bins" ]]; then
    BINS="$(cd "$2" && pwd)"
else
    BINS="$OUTDIR/bin"
    mkdir -p "$BINS"
    cargo build --release --example bench_gpu || exit 1
    cp "${CARGO_TARGET_DIR:-target}/release/examples/bench_gpu" "$BINS/"
    # The test binaries, by target name, from cargo's JSON messages.
    cargo test --release --no-run --message-format=json 2>/dev/null |
        python3 -c '
import json, shutil, sys
dest = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    t = m["target"]
    name = "joker_unit" if "rlib" in t["kind"] or "lib" in t["kind"] else t["name"]
    if t["kind"] == ["bin"]:
        continue
    shutil.copy(m["executable"], f"{dest}/{name}")
' "$BINS" || exit 1
fi

commit="${JOKER_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
date="$(date -u +%Y-%m-%d)"
gpu="$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
[[ -n "$gpu" ]] || gpu="no GPU reported by nvidia-smi"
echo "device: $gpu"
echo "commit: $commit"

verdicts=()
failed=0
# Runs one test binary; prints one line per group of tests whose names match the patterns.
# suite LOG BINARY ARGS...: runs BINARY with ARGS, output in $OUTDIR/LOG.log.
suite() {
    local log="$OUTDIR/$1.log" bin="$2"
    shift 2
    (cd "$ROOT" && "$BINS/$bin" "$@") >"$log" 2>&1
    echo "$?" >"$log.rc"
}
# group LOG LABEL PATTERN: the verdict of the tests in LOG whose names match PATTERN.
group() {
    local label="$2" pattern="$3" log="$OUTDIR/$1.log"
    local ok bad names
    # test names carry their module's path (gpu::name in the suite binary)
    ok=$(grep -E "^test ([a-z_]+::)*($pattern)" "$log" | grep -c ' \.\.\. ok$' || true)
    bad=$(grep -E "^test ([a-z_]+::)*($pattern)" "$log" | grep -c 'FAILED$' || true)
    # --nocapture output can split "test name ... " from its verdict: count FAILED names.
    names=$(awk '/^failures:$/{f=1;next} f&&/^    /{print $1}' "$log" | sort -u | grep -E "^([a-z_]+::)*($pattern)" | tr '\n' ' ')
    [[ -n "$names" ]] && bad=$(wc -w <<<"$names")
    if (( bad == 0 && ok > 0 )); then
        verdicts+=("PASS $label ($ok tests)")
    else
        verdicts+=("FAIL $label: $ok passed, $bad failed ${names:+($names)}[$log]")
        failed=1
    fi
}

# exited LOG: a failure when the suite behind LOG exited non-zero (a test in no group failed,
# or the binary itself did).
exited() {
    local rc
    rc=$(cat "$OUTDIR/$1.log.rc")
    if [[ "$rc" != 0 ]]; then
        verdicts+=("FAIL suite $1 exited with status $rc [$OUTDIR/$1.log]")
        failed=1
    fi
}

# The kernel images load (fat binaries and PTX through the JIT), with the driver's logs.
if python3 "$ROOT/scripts/gpu-load-check.py" >"$OUTDIR/load.log" 2>&1; then
    verdicts+=("PASS kernel images load ($(grep -c '^ok' "$OUTDIR/load.log") files)")
else
    verdicts+=("FAIL kernel images load [$OUTDIR/load.log]")
    failed=1
fi

suite gpu suite gpu:: --ignored --test-threads=1
group gpu "random-feature kernels (W, features, Gram, update, prediction)" \
    "weights_|features_match|block_gram|update_theta|predict_matches"
group gpu "device engines against host engines, the self-check" "device_engine|exact_engine|kernel_model_engine|the_gpu_passes"
group gpu "trust-region block solve on the device" "tr_solve"
group gpu "exact kernels against f64 direct sums" "exact_kernels"
group gpu "fits on the GPU against fits on the CPU" "end_to_end|exact_fit|full_krr|many_columns|kernel_model_fit|distributed_fit|mapped_rows|intercept_fit"
group gpu "Nystrom maps: features and a fit on the GPU against the CPU" "nystrom_"
exited gpu
suite gpu-everywhere suite gpu::
group gpu-everywhere "device errors, the GPU requirement, CPU fits without the driver" "a_missing_gpu|a_required_gpu|gpu_tests_fail|a_cpu_fit"
exited gpu-everywhere
# the library's unit tests, then modules of the integration-test binary `suite`
for s in joker_unit api solver krr tr_vectors; do
    bin=suite filter="$s::"
    [[ $s == joker_unit ]] && bin=joker_unit filter=""
    if [[ -x "$BINS/$bin" ]]; then
        suite "$s" "$bin" $filter --test-threads=4
        group "$s" "suite $s with Device::Auto" "."
        exited "$s"
    else
        verdicts+=("FAIL suite $s: binary missing")
        failed=1
    fi
done

# shellcheck disable=SC2086
"$BINS/bench_gpu" ${JOKER_BENCH_ARGS:---iters 20 --reps 20} >"$OUTDIR/bench_gpu.log" 2>&1
brc=$?
if (( brc == 0 )); then verdicts+=("PASS bench_gpu"); else verdicts+=("FAIL bench_gpu (status $brc)"); failed=1; fi

echo
printf '%s\n' "${verdicts[@]}"
sumline="$(printf '%s; ' "${verdicts[@]}")"
verdict=$([[ $failed == 0 ]] && echo "all passed" || echo "FAILED")
row="| $date | $gpu | $commit | \`scripts/gpu-validate.sh\` | $verdict: ${sumline%; } |"
echo "$row" >"$OUTDIR/row.md"
echo
echo "table row (docs/gpu-validation.md), also in $OUTDIR/row.md:"
echo "$row"
echo
cat "$OUTDIR/bench_gpu.log"
echo
# the summary last: every suite has run whatever the others did
nfail=0
for v in "${verdicts[@]}"; do [[ $v == FAIL* ]] && nfail=$((nfail + 1)); done
if (( failed )); then
    printf '%s\n' "${verdicts[@]}" | grep '^FAIL'
    echo "gpu-validate: FAILED: $nfail of ${#verdicts[@]} checks failed (logs in $OUTDIR)"
else
    echo "gpu-validate: all ${#verdicts[@]} checks passed"
fi
exit $failed
