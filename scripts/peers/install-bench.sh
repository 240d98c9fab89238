#!/usr/bin/env bash
# The peers of the end-to-end benchmark (examples/bench), pinned, in the git-ignored virtual
# environment .venv-bench (about 20 s with a warm pip cache). Prints the Python to pass as
# --python (or JOKER_BENCH_PYTHON).
#   scikit-learn 1.7.2 (libsvm SVC/SVR, KernelRidge, RBFSampler, Nystroem, LinearSVC, Ridge),
#   scikit-learn-intelex 2026.2.0 (oneDAL SVC), thundersvm-cpu 0.3.3, liblinear-official 2.50.0.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=.venv-bench
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q "numpy==2.1.3" "scipy==1.17.1" "scikit-learn==1.7.2" \
    "scikit-learn-intelex==2026.2.0" "thundersvm-cpu==0.3.3" "liblinear-official==2.50.0" >&2
"$VENV/bin/python" -c "import sklearn, sklearnex, thundersvm, liblinear" >&2
echo "$(pwd)/$VENV/bin/python"
