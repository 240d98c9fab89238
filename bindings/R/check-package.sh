#!/usr/bin/env bash
# R CMD build and R CMD check --no-manual of the joker R package against an installed libjoker.
#
#   bash bindings/R/check-package.sh PREFIX     # PREFIX as made by bindings/install.sh
#
# Fails (non-zero exit) on any ERROR or WARNING of the check; prints its NOTEs, the test
# output and timings. Real data for the tests: $JOKER_DATA_DIR, else ../shared/datasets
# beside the repository when present. No network is used.
set -euo pipefail

if [ $# -ne 1 ] || [ ! -f "$1/lib/pkgconfig/joker.pc" ]; then
    echo "usage: $0 PREFIX   (PREFIX/lib/pkgconfig/joker.pc must exist: bash bindings/install.sh PREFIX)" >&2
    exit 2
fi
prefix=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
pkg="$here/joker"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if [ -z "${JOKER_DATA_DIR:-}" ] && [ -d "$root/../shared/datasets" ]; then
    export JOKER_DATA_DIR
    JOKER_DATA_DIR=$(cd "$root/../shared/datasets" && pwd)
fi
# As CI runs it: no suggested packages needed, no clock or network look-ups.
export _R_CHECK_FORCE_SUGGESTS_=false _R_CHECK_SYSTEM_CLOCK_=0 _R_CHECK_CRAN_INCOMING_=false
export _R_CHECK_CRAN_INCOMING_REMOTE_=false

work=$(mktemp -d "${TMPDIR:-/tmp}/joker-r-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The dependency check reads a package index; an empty local one keeps it off the network.
mkdir -p "$work/repo/src/contrib"
: > "$work/repo/src/contrib/PACKAGES"
echo "options(repos = c(CRAN = \"file://$work/repo\"))" > "$work/Rprofile"
export R_PROFILE_USER="$work/Rprofile"
t0=$SECONDS
# The tarball is built from a copy, so nothing is written into the source tree.
mkdir "$work/src"
cp -R "$pkg" "$work/src/joker"
rm -f "$work/src/joker/src/Makevars" "$work/src/joker/src/"*.o "$work/src/joker/src/"*.so
cd "$work"
echo "== R CMD build (libjoker from $prefix, data: ${JOKER_DATA_DIR:-synthetic})"
R CMD build --no-build-vignettes --no-manual src/joker > build.log 2>&1 || { cat build.log; exit 1; }
tarball=$(ls joker_*.tar.gz)
t_build=$((SECONDS - t0))

echo "== R CMD check --no-manual $tarball"
status=0
R CMD check --no-manual --no-build-vignettes "$tarball" > check.log 2>&1 || status=$?
t_check=$((SECONDS - t0 - t_build))

echo "-- test output"
# What the tests printed, without R's echo of their code; a failed test in full.
for f in joker.Rcheck/tests/*.Rout; do
    [ -f "$f" ] || continue
    echo "---- $(basename "$f")"
    awk 'shown; /^Type .q\(\). to quit R\.$/ { shown = 1 }' "$f" |  # skip R's banner
        grep -vE '^(iter [0-9]+: gap|[>+] |>$|$)' || true
done
for f in joker.Rcheck/tests/*.Rout.fail; do
    [ -f "$f" ] || continue
    echo "---- $(basename "$f") (FAILED)"
    grep -vE '^iter [0-9]+: gap' "$f"
done
echo "-- check summary"
sed -n '/^Status:/p' check.log
grep -E '^\* checking .*\.\.\. *(NOTE|WARNING|ERROR)' check.log || true
# Each NOTE, WARNING or ERROR with the lines that explain it.
awk '/^\* checking .*(NOTE|WARNING|ERROR)$/ { show = 1; print; next }
     /^\* / { show = 0 } show' check.log
echo "-- timings: build ${t_build}s, check ${t_check}s, total $((SECONDS - t0))s"

if [ "$status" -ne 0 ] || grep -qE '^\* checking .*\.\.\. *(WARNING|ERROR)' check.log ||
   ! grep -q '^Status:' check.log || grep -qE '^Status:.*(ERROR|WARNING)' check.log; then
    echo "R CMD check failed (exit $status); its log:" >&2
    cat check.log >&2
    exit 1
fi
echo "R CMD check passed with no ERROR or WARNING"
