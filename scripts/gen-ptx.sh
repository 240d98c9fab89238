#!/usr/bin/env bash
# Compiles every cuda/<name>.cu to PTX: cuda/<name>.ptx, or <outdir>/<name>.ptx if an output
# directory is given (scripts/check-ptx.sh uses that to compare with the committed files).
#
#   nvcc --ptx -arch=compute_80 -O3 -o cuda/<name>.ptx cuda/<name>.cu      (run from the repo root)
#
# compute_80 PTX runs on sm_80 and newer through the driver's JIT; nvcc 13.0 writes PTX ISA 9.0,
# which needs an R580 or newer driver. The output is deterministic: no -lineinfo (it embeds an
# absolute path) and the source is always named by the same relative path. Never add
# --use_fast_math: the kernels rely on accurate cosf and on IEEE division/sqrt.
# Environment: NVCC (default: the path printed by scripts/cuda-toolchain.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
NVCC="${NVCC:-$(scripts/cuda-toolchain.sh)}"
OUT="${1:-cuda}"
mkdir -p "$OUT"

shopt -s nullglob
sources=(cuda/*.cu)
if (( ${#sources[@]} == 0 )); then
    echo "gen-ptx: no cuda/*.cu files" >&2
    exit 1
fi
# nvcc's output depends on where the checkout lives (seen: cuda/trsolve.cu gave different
# PTX in /work/main and in a clone elsewhere), so every build runs on a copy of cuda/ at one
# fixed path, under a lock.
BUILD=/tmp/joker-gen-ptx
OUT_ABS="$(cd "$OUT" && pwd)"
exec 9>/tmp/joker-gen-ptx.lock
flock 9
rm -rf "$BUILD"
mkdir -p "$BUILD/cuda"
cp cuda/*.cu cuda/*.cuh "$BUILD/cuda/" 2>/dev/null || cp cuda/*.cu "$BUILD/cuda/"
for cu in "${sources[@]}"; do
    name="$(basename "$cu" .cu)"
    (cd "$BUILD" && "$NVCC" --ptx -arch=compute_80 -O3 -o "cuda/$name.ptx" "cuda/$name.cu")
    cp "$BUILD/cuda/$name.ptx" "$OUT_ABS/$name.ptx"
    echo "gen-ptx: $cu -> $OUT/$name.ptx" >&2
done
