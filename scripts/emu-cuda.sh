#!/usr/bin/env bash
# Compiles the CUDA kernels for the host with the emulator in cuda/hostemu and runs their tests
# (no GPU needed). Needs g++ with C++20 (gcc 12).
#   scripts/emu-cuda.sh           logic tests (40-60 s on 2 cores, a third of it compiling)
#   scripts/emu-cuda.sh --tsan    under ThreadSanitizer (missing __syncthreads = race), on a
#                                 subset of the exact and trust-region cases (about 2 min)
# Tests:
#   test_rff       cuda/rff.cu against Phi built explicitly from the same generator
#   test_exact     cuda/exact.cu against f64 direct sums
#   test_trsolve   cuda/trsolve.cu against the Rust solver's results in cuda/hostemu/tr_vectors.txt
#                  (written and checked by tests/tr_vectors.rs): all 24 cases with the kernel
#                  built for 64 threads per block (the emulator runs a CUDA thread as an OS
#                  thread, so every barrier costs a round of context switches), and the first
#                  case of the first two matrices (b = 37, 270 > 256) with the real 256 threads per block.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tsan=0
[[ "${1:-}" == "--tsan" ]] && tsan=1
flags=(-std=c++20 -O2 -pthread -Wno-unknown-pragmas)
if (( tsan )); then flags=(-std=c++20 -O1 -g -fsanitize=thread -pthread -Wno-unknown-pragmas); fi

# Two compilations at a time (they dominate the run time).
build() { nice -n 10 g++ "${flags[@]}" "${@:2}" -o "$tmp/$1" "cuda/hostemu/${1%%.*}.cpp"; }
build test_rff & p1=$!
build test_exact & p2=$!
wait $p1; wait $p2
build test_trsolve.64 -DTR_THREADS=64 & p1=$!
build test_trsolve.256 & p2=$!
wait $p1; wait $p2

run() {
    if (( tsan )); then
        TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$@"
    else
        "$@"
    fi
}
status=0
if (( tsan )); then
    # ThreadSanitizer looks for missing barriers, which do not depend on the loss or kernel
    # id: fewer cases keep it near a minute (each emulated thread costs ~2 ms to start).
    exact_args=(--quick)
    tr64_cases=(0 1 2 3 4 5 6 7 8 16 24 32)
    tr256_cases=(0)
else
    exact_args=()
    tr64_cases=()
    tr256_cases=(0 8 24 32)
fi
run "$tmp/test_rff" || status=1
run "$tmp/test_exact" "${exact_args[@]}" || status=1
run "$tmp/test_trsolve.64" cuda/hostemu/tr_vectors.txt "${tr64_cases[@]}" || status=1
run "$tmp/test_trsolve.256" cuda/hostemu/tr_vectors.txt "${tr256_cases[@]}" || status=1
if (( status )); then
    echo "emu-cuda: FAILED"
    exit 1
fi
echo "emu-cuda: all host emulation tests passed"
