#!/usr/bin/env bash
# Installs the CUDA 12.6 kernel tool chain (NVRTC, ptxas, nvFatbin) from pinned PyPI wheels into
# .venv-cuda at the repository root, and prints the absolute path of the directory that holds
# nvidia/{cuda_nvrtc,cuda_nvcc,nvfatbin} on stdout (all other output goes to stderr); ptxas is
# <that>/nvidia/cuda_nvcc/bin/ptxas. Idempotent: a second run only checks and prints.
#
# No GPU, no CUDA install and no host compiler are needed. The CUDA 12 wheels ship no nvcc:
# nvidia-cuda-nvcc-cu12 holds ptxas, libnvvm and libdevice only. scripts/build-kernels.py
# compiles with NVRTC (nvidia-cuda-nvrtc-cu12: front end, NVVM and libdevice built in),
# assembles with ptxas and packs the fat binaries with libnvfatbin (nvidia-nvfatbin-cu12).
#
# CUDA 12.6 writes PTX ISA 8.5, which every driver that runs a GPU newer than sm_90 can
# JIT-compile, and its sm_80/sm_90 code runs on any R525 or newer driver (CUDA minor version
# compatibility). All three wheels are pinned and installed with --no-deps.
#
# Environment: JOKER_CUDA_VENV (default <repo>/.venv-cuda), PYTHON (default python3),
#              JOKER_CUDA_NO_VENV=1 (skip `python -m venv`, install with pip --target instead;
#              used automatically when the venv module is unavailable, as on Debian without
#              python3-venv).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${JOKER_CUDA_VENV:-$ROOT/.venv-cuda}"
PY="${PYTHON:-python3}"
PKGS=(nvidia-cuda-nvrtc-cu12==12.6.85 nvidia-cuda-nvcc-cu12==12.6.85 nvidia-nvfatbin-cu12==12.6.77)
STAMP="$VENV/.joker-cuda-toolchain"
WANT="${PKGS[*]}"

# The site-packages directory of the install (it holds nvidia/cuda_nvcc/bin/ptxas).
find_toolchain() {
    [[ -d "$VENV" ]] || return 1
    local f
    f="$(find "$VENV" -path '*/nvidia/cuda_nvcc/bin/ptxas' -type f 2>/dev/null | head -n 1)"
    [[ -n "$f" && -x "$f" ]] || return 1
    f="$(cd "$(dirname "$f")/../../.." && pwd)"
    [[ -f "$f/nvidia/cuda_nvrtc/lib/libnvrtc.so.12" && -f "$f/nvidia/nvfatbin/lib/libnvfatbin.so.12" ]] || return 1
    echo "$f"
}

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] && TC="$(find_toolchain)"; then
    echo "$TC"
    exit 0
fi

echo "cuda-toolchain: installing ${WANT} into $VENV" >&2
rm -rf "$VENV"
if [[ "${JOKER_CUDA_NO_VENV:-0}" != 1 ]] && "$PY" -m venv "$VENV" >/dev/null 2>&1 && [[ -x "$VENV/bin/python" ]] \
    && "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "${PKGS[@]}" >&2
else
    # No usable venv module: a plain target directory works just as well for these wheels
    # (nothing in them depends on the interpreter) and is not subject to PEP 668.
    echo "cuda-toolchain: python venv unavailable, using pip --target" >&2
    rm -rf "$VENV"
    mkdir -p "$VENV"
    "$PY" -m pip install --quiet --disable-pip-version-check --no-deps --target "$VENV/site-packages" "${PKGS[@]}" >&2
fi

TC="$(find_toolchain)" || { echo "cuda-toolchain: error: ptxas, NVRTC or nvFatbin not found under $VENV after install" >&2; exit 1; }
"$TC/nvidia/cuda_nvcc/bin/ptxas" --version >&2
echo "$WANT" > "$STAMP"
echo "$TC"
