#!/usr/bin/env bash
# Compiles the CUDA kernels for the host with the emulator in cuda/hostemu and runs their tests
# (no GPU needed). Needs g++ with C++20 (gcc 12).
#   scripts/emu-cuda.sh           logic tests, twice: built as plain C++ (no FMA contraction, like
#                                 the Rust code), then with FMA contraction as nvcc compiles
#                                 (a*b+c fused: -mfma -ffp-contract=fast on x86-64; test_exact on
#                                 its --quick subset); 45-60 s on 2 cores, a third of it compiling
#   scripts/emu-cuda.sh --tsan    under ThreadSanitizer (missing __syncthreads = race), on a
#                                 subset of the exact and trust-region cases, without
#                                 contraction (about 2 min)
# The contracted build is required: the script fails at the start, before compiling anything,
# on a CPU that cannot run it (x86-64 without the fma flag in /proc/cpuinfo, or another
# architecture than x86-64 and AArch64), and fails when g++ does not produce fused
# multiply-adds with the flags (checked with objdump, from binutils, which is then required).
# Tests:
#   test_rff       cuda/rff.cu against Phi built explicitly from the same generator
#   test_exact     cuda/exact.cu against f64 direct sums
#   test_trsolve   cuda/trsolve.cu against the Rust solver's results in cuda/hostemu/tr_vectors.txt
#                  (written and checked by tests/suite/tr_vectors.rs): all 48 cases with the kernel
#                  built for 64 threads per block (the emulator runs a CUDA thread as an OS
#                  thread, so every barrier costs a round of context switches), and cases 0, 8,
#                  24, 32 and 47 (b = 37 and 270 > 256; the Euclidean norm, the Nystrom metric,
#                  and KLR in the diagonal norm) with
#                  the real 256 threads per block. The comparison rule (counts
#                  within one, iterates equal up to rounding or within what the KKT residuals
#                  certify) is the one of tr_solve_matches_the_host_solver in tests/suite/gpu.rs; the
#                  contracted build is how it is exercised without a GPU.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tsan=0
[[ "${1:-}" == "--tsan" ]] && tsan=1
flags=(-std=c++20 -O2 -pthread -Wno-unknown-pragmas)
if (( tsan )); then flags=(-std=c++20 -O1 -g -fsanitize=thread -pthread -Wno-unknown-pragmas); fi

# FMA contraction the way nvcc compiles (it fuses a*b+c into fma.rn; trsolve.ptx holds over a
# thousand fma.rn.f64): x86-64 needs the CPU's fma flag and -mfma, AArch64 always has FMA.
contract=()
no_fma=""
if (( ! tsan )); then
    case "$(uname -m)" in
        x86_64)
            if grep -qw fma /proc/cpuinfo; then
                contract=(-mfma -ffp-contract=fast -DEMU_FP_CONTRACT)
            else
                no_fma="this CPU has no FMA (no fma flag in /proc/cpuinfo)"
            fi ;;
        aarch64 | arm64) contract=(-ffp-contract=fast -DEMU_FP_CONTRACT) ;;
        *) no_fma="unknown architecture $(uname -m)" ;;
    esac
    if [[ -n "$no_fma" ]]; then
        echo "emu-cuda: FAILED: $no_fma: the build with FMA contraction (nvcc's arithmetic) is required" >&2
        exit 1
    fi
    command -v objdump > /dev/null ||
        { echo "emu-cuda: FAILED: objdump (binutils) is needed to check the FMA build" >&2; exit 1; }
fi

# Two compilations at a time (they dominate the run time).
build() { nice -n 10 g++ "${flags[@]}" "${@:2}" -o "$tmp/$1" "cuda/hostemu/${1%%.*}.cpp"; }
build test_rff & p1=$!
build test_exact & p2=$!
wait $p1; wait $p2
build test_trsolve.64 -DTR_THREADS=64 & p1=$!
build test_trsolve.256 & p2=$!
wait $p1; wait $p2
if (( ${#contract[@]} )); then
    build test_rff.fma "${contract[@]}" & p1=$!
    build test_exact.fma "${contract[@]}" & p2=$!
    wait $p1; wait $p2
    build test_trsolve.64.fma -DTR_THREADS=64 "${contract[@]}" & p1=$!
    build test_trsolve.256.fma "${contract[@]}" & p2=$!
    wait $p1; wait $p2
    # the flags must have produced fused multiply-adds (vfmadd... on x86-64, fmadd on AArch64)
    for t in test_rff.fma test_exact.fma test_trsolve.64.fma; do
        n=$(objdump -d "$tmp/$t" | grep -cE '\b(v?fn?m(add|sub)[0-9a-z]*)\b' || true)
        echo "emu-cuda: $t: $n fused multiply-add instructions"
        (( n > 0 )) || { echo "emu-cuda: FAILED: $t was built without FMA instructions"; exit 1; }
    done
fi

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
    tr64_cases=(0 1 2 3 4 5 6 7 8 16 24 32 40 47)
    tr256_cases=(0)
else
    exact_args=()
    tr64_cases=()
    tr256_cases=(0 8 24 32 47)
fi
echo "=== without FMA contraction"
run "$tmp/test_rff" || status=1
run "$tmp/test_exact" "${exact_args[@]}" || status=1
run "$tmp/test_trsolve.64" cuda/hostemu/tr_vectors.txt "${tr64_cases[@]}" || status=1
run "$tmp/test_trsolve.256" cuda/hostemu/tr_vectors.txt "${tr256_cases[@]}" || status=1
if (( ${#contract[@]} )); then
    echo "=== with FMA contraction (${contract[*]})"
    run "$tmp/test_rff.fma" || status=1
    run "$tmp/test_exact.fma" --quick || status=1  # every kernel family, dense, CSR and far points
    run "$tmp/test_trsolve.64.fma" cuda/hostemu/tr_vectors.txt || status=1
    run "$tmp/test_trsolve.256.fma" cuda/hostemu/tr_vectors.txt "${tr256_cases[@]}" || status=1
fi
if (( status )); then
    echo "emu-cuda: FAILED"
    exit 1
fi
if (( tsan )); then
    echo "emu-cuda: all host emulation tests passed under ThreadSanitizer (without contraction)"
else
    echo "emu-cuda: all host emulation tests passed, without and with FMA contraction"
fi
