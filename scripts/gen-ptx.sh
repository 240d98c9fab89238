#!/usr/bin/env bash
# Builds every cuda/<name>.cu into its PTX and its fat binary: cuda/<name>.ptx and
# cuda/<name>.fatbin, or into <outdir> if one is given (scripts/check-ptx.sh uses that to compare
# with the committed files); with a second directory, the ptxas -v reports go there too
# (<name>.sm_80.log, <name>.sm_90.log).
#
#   scripts/gen-ptx.sh [outdir [logdir]]
#
# scripts/build-kernels.py does the work with the CUDA 12.6 wheels: NVRTC to compute_80 PTX
# (ISA 8.5), ptxas to sm_80 and sm_90 code, nvFatbin to one fat binary per file with both cubins
# and the PTX (compressed). The Rust side embeds the fat binaries; the PTX is committed as the
# reviewable text of the kernels and is what the fat binary's PTX entry holds.
#
# Determinism: NVRTC 12.6 gave a second variant of rff.ptx (and so of rff.fatbin) in about one
# build of ten, and none in 35 builds with address-space randomisation off, so the build runs
# under `setarch -R` where that works (scripts/check-ptx.sh still rebuilds a differing file a
# few times before failing). Every build runs on a copy of cuda/ at one fixed path, under a
# lock, with the same argv and environment wherever the checkout is (below), so that neither
# the source names in the output nor the variant depend on the checkout.
# No line information (it embeds paths). Never add fast-math options: the kernels rely on
# accurate cosf and on IEEE division/sqrt.
# Environment: JOKER_CUDA_TOOLCHAIN (default: the path printed by scripts/cuda-toolchain.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TC="${JOKER_CUDA_TOOLCHAIN:-$(scripts/cuda-toolchain.sh)}"
OUT="${1:-cuda}"
LOGS="${2:-}"
mkdir -p "$OUT"
[[ -z "$LOGS" ]] || mkdir -p "$LOGS"

shopt -s nullglob
sources=(cuda/*.cu)
if (( ${#sources[@]} == 0 )); then
    echo "gen-ptx: no cuda/*.cu files" >&2
    exit 1
fi
BUILD=/tmp/joker-gen-ptx
OUT_ABS="$(cd "$OUT" && pwd)"
LOGS_ABS=""
[[ -z "$LOGS" ]] || LOGS_ABS="$(cd "$LOGS" && pwd)"
exec 9>/tmp/joker-gen-ptx.lock
flock 9
rm -rf "$BUILD"
mkdir -p "$BUILD/cuda"
cp cuda/*.cu cuda/*.cuh "$BUILD/cuda/" 2>/dev/null || cp cuda/*.cu "$BUILD/cuda/"
NORAND=()
if setarch "$(uname -m)" -R true 2>/dev/null; then
    NORAND=(setarch "$(uname -m)" -R)
fi
# The compiler's process image must not depend on the checkout: with address-space
# randomisation off, the lengths of argv and the environment still move the stack and heap,
# and NVRTC's output followed them (checkouts at two paths gave two variants of rff.ptx, each
# every time). So the script, the tool chain (by a link) and the environment are the same
# fixed strings wherever the checkout is.
PY="$(python3 -c 'import sys; print(sys.executable)')"
cp scripts/build-kernels.py "$BUILD/build-kernels.py"
ln -s "$(cd "$TC" && pwd)" "$BUILD/toolchain"
(cd "$BUILD" && env -i PATH=/usr/bin:/bin LANG=C.UTF-8 "${NORAND[@]}" "$PY" build-kernels.py toolchain "${sources[@]}")
for cu in "${sources[@]}"; do
    name="$(basename "$cu" .cu)"
    cp "$BUILD/cuda/$name.ptx" "$BUILD/cuda/$name.fatbin" "$OUT_ABS/"
    [[ -z "$LOGS_ABS" ]] || cp "$BUILD/cuda/$name.sm_80.log" "$BUILD/cuda/$name.sm_90.log" "$LOGS_ABS/"
    echo "gen-ptx: $cu -> $OUT/$name.ptx, $OUT/$name.fatbin ($(stat -c %s "$OUT_ABS/$name.fatbin") bytes)" >&2
done
