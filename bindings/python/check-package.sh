#!/usr/bin/env bash
# Checks the Python package as a user gets it, as CI runs it after the release build:
#  1. a fresh virtual environment in a temporary directory, from $JOKER_PYTHON_BASE (default
#     python3), with numpy 2.1.3, scikit-learn 1.5.2, scipy, pandas, and onnx 1.19.1 and
#     onnxruntime 1.22.1 for the ONNX export's tests (tests/test_onnx.py);
#  2. `pip wheel ./bindings/python` (the wheel: joker/*.py and libjoker.so) and
#     `pip install ./bindings/python`: the build backend (build_backend/joker_backend.py) runs
#     `cargo build --release --lib`, which reuses the library already built in
#     $CARGO_TARGET_DIR (or target/) when the environment is the one it was built with;
#  3. the unit tests (bindings/python/tests, JOKER_TEST_INSTALLED=1) and the example, run from a
#     directory outside the repository with JOKER_LIB and PYTHONPATH unset, so that they import
#     the installed package and the library installed with it.
# Prints the time of each step. Real data from $JOKER_DATA_DIR (default ../shared/datasets
# beside the repository) when present, synthetic otherwise. JOKER_DATA_DIR is passed to the
# tests only: build.rs reads it, and a value other than the build's would recompile the crate.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
base="${JOKER_PYTHON_BASE:-python3}"
data="${JOKER_DATA_DIR:-$root/../shared/datasets}"
work="$(mktemp -d "${TMPDIR:-/tmp}/joker-python-package.XXXXXX")"
trap 'rm -rf "$work"' EXIT

start=$(date +%s.%N)
last=$start
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
step() {
    if [ "$last" != "$start" ]; then echo "    ($(elapsed "$last") s)"; fi
    last=$(date +%s.%N)
    echo
    echo "--- python package: $* (at $(elapsed "$start") s)"
}

step "fresh virtual environment ($base: $("$base" --version 2>&1))"
"$base" -m venv "$work/venv"
py="$work/venv/bin/python"
pip=("$py" -m pip --disable-pip-version-check)
# in-tree builds (the backend finds the crate two levels up): pip >= 21.3
"$py" - <<'EOF'
import sys
from importlib.metadata import version
v = tuple(int(p) for p in version("pip").split(".")[:2])
print("pip", version("pip"))
sys.exit(0 if v >= (21, 3) else "pip >= 21.3 is needed to build in place: upgrade pip in the base Python")
EOF

step "pip install numpy==2.1.3 scikit-learn==1.5.2 scipy pandas onnx==1.19.1 onnxruntime==1.22.1"
"${pip[@]}" install -q "numpy==2.1.3" "scikit-learn==1.5.2" scipy pandas "onnx==1.19.1" "onnxruntime==1.22.1"
"$py" -c "import numpy, sklearn, scipy, pandas, onnx, onnxruntime; print('numpy', numpy.__version__, '| scikit-learn', sklearn.__version__, '| scipy', scipy.__version__, '| pandas', pandas.__version__, '| onnx', onnx.__version__, '| onnxruntime', onnxruntime.__version__)"

step "pip wheel ./bindings/python"
(cd "$root" && "${pip[@]}" wheel -q --no-deps -w "$work/wheels" ./bindings/python)
"$py" - "$work/wheels" <<'EOF'
import glob, sys, zipfile
wheel, = glob.glob(sys.argv[1] + "/joker-*.whl")
names = zipfile.ZipFile(wheel).namelist()
print(wheel.rsplit("/", 1)[1], ":", ", ".join(names))
assert "joker/libjoker.so" in names and "joker/estimators.py" in names, "the wheel lacks the library or the estimators"
EOF

step "pip install ./bindings/python"
(cd "$root" && "${pip[@]}" install -q ./bindings/python)

# from outside the repository, without the development overrides
run=(env -u JOKER_LIB -u PYTHONPATH JOKER_DATA_DIR="$data")
mkdir -p "$work/run"
cd "$work/run"

step "import joker (installed)"
"${run[@]}" "$py" -c "import joker, joker.core; print('joker', joker.__version__, 'from', joker.__file__); print('library', joker.core._lib_path)"

step "unit tests (python -m unittest discover -s bindings/python/tests)"
"${run[@]}" JOKER_TEST_INSTALLED=1 "$py" -m unittest discover -s "$root/bindings/python/tests" 2>&1 |
    grep -v '^iter '

step "example (bindings/python/example.py)"
"${run[@]}" "$py" "$root/bindings/python/example.py"

step "done"
echo "python package checked in $(elapsed "$start") s"
