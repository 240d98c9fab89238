#!/usr/bin/env bash
# Installs the CUDA 13.0 compiler tool chain (nvcc, cicc, ptxas, headers) from pinned PyPI wheels
# into .venv-cuda at the repository root, and prints the absolute path of nvcc on stdout (all
# other output goes to stderr). Idempotent: a second run only checks and prints.
#
# No GPU and no CUDA install are needed. The wheels' bin/nvcc.profile points nvcc at the wheel's
# own cicc (../nvvm/bin), libdevice, ptxas (same dir) and headers (../include), so nvcc needs no
# environment variables or extra flags; it does need a host C++ compiler (g++) because it
# preprocesses the .cu file with `gcc -E -x c++`. On a fresh Debian 12 machine run as root with
# apt-get this script installs g++ if it is missing.
#
# All four wheels are pinned and installed with --no-deps: unpinned, pip pulls 13.x parts that
# emit a newer PTX ISA than ptxas 13.0 and the R580 driver accept.
#
# Environment: JOKER_CUDA_VENV (default <repo>/.venv-cuda), PYTHON (default python3),
#              JOKER_CUDA_NO_VENV=1 (skip `python -m venv`, install with pip --target instead;
#              used automatically when the venv module is unavailable, as on Debian without
#              python3-venv).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${JOKER_CUDA_VENV:-$ROOT/.venv-cuda}"
PY="${PYTHON:-python3}"
PKGS=(nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96)
STAMP="$VENV/.joker-cuda-toolchain"
WANT="${PKGS[*]}"

find_nvcc() {
    [[ -d "$VENV" ]] || return 1
    local f
    f="$(find "$VENV" -path '*/nvidia/cu13/bin/nvcc' -type f 2>/dev/null | head -n 1)"
    [[ -n "$f" && -x "$f" ]] || return 1
    echo "$f"
}

ensure_host_compiler() {
    command -v g++ >/dev/null 2>&1 && return 0
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "cuda-toolchain: installing g++ (nvcc preprocesses with the host compiler)" >&2
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ >&2
    else
        echo "cuda-toolchain: error: nvcc needs a host C++ compiler; install g++" >&2
        exit 1
    fi
}

ensure_host_compiler

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] && NVCC="$(find_nvcc)"; then
    echo "$NVCC"
    exit 0
fi

echo "cuda-toolchain: installing ${WANT} into $VENV" >&2
rm -rf "$VENV"
if [[ "${JOKER_CUDA_NO_VENV:-0}" != 1 ]] && "$PY" -m venv "$VENV" >/dev/null 2>&1 && [[ -x "$VENV/bin/python" ]] \
    && "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "${PKGS[@]}" >&2
else
    # No usable venv module: a plain target directory works just as well for these wheels
    # (nvcc finds everything relative to itself) and is not subject to PEP 668.
    echo "cuda-toolchain: python venv unavailable, using pip --target" >&2
    rm -rf "$VENV"
    mkdir -p "$VENV"
    "$PY" -m pip install --quiet --disable-pip-version-check --no-deps --target "$VENV/site-packages" "${PKGS[@]}" >&2
fi

NVCC="$(find_nvcc)" || { echo "cuda-toolchain: error: nvcc not found under $VENV after install" >&2; exit 1; }
"$NVCC" --version >&2
echo "$WANT" > "$STAMP"
echo "$NVCC"
