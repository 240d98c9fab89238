#!/usr/bin/env bash
# Compiles cuda/rff.cu for the host with the emulator in cuda/hostemu and runs its tests
# (no GPU needed; about 2 s, or about 1 min with --tsan). Needs g++ with C++20 (gcc 12).
#   scripts/emu-cuda.sh           logic tests
#   scripts/emu-cuda.sh --tsan    the same under ThreadSanitizer (missing __syncthreads = race)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
flags=(-std=c++20 -O2 -pthread -Wno-unknown-pragmas)
if [[ "${1:-}" == "--tsan" ]]; then flags=(-std=c++20 -O1 -g -fsanitize=thread -pthread -Wno-unknown-pragmas); fi
g++ "${flags[@]}" -o "$tmp/test_rff" cuda/hostemu/test_rff.cpp
if [[ "${1:-}" == "--tsan" ]]; then
    TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$tmp/test_rff"
else
    "$tmp/test_rff"
fi
