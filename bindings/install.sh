#!/usr/bin/env bash
# Installs libjoker for C/C++ (and the R and Julia bindings) under a prefix:
#   PREFIX/lib/libjoker.so.VERSION, libjoker.so.0 -> (SONAME), libjoker.so -> (link time),
#   PREFIX/lib/libjoker.a, PREFIX/include/joker.h and joker.hpp,
#   PREFIX/lib/pkgconfig/joker.pc   (pkg-config --cflags --libs joker)
# Usage: bindings/install.sh PREFIX [LIBDIR]   (LIBDIR: where cargo put the library, default
# ${CARGO_TARGET_DIR:-target}/release; build it first with cargo build --release --lib).
# A program linked against the shared library under a PREFIX the system's loader does not
# search finds it at run time only through an rpath recorded at link time
#   cc prog.c $(pkg-config --cflags --libs joker) -Wl,-rpath,PREFIX/lib
# or through LD_LIBRARY_PATH=PREFIX/lib when it runs (or after adding PREFIX/lib to ldconfig);
# the static library (-l:libjoker.a) needs neither. The script prints these lines.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${1:?usage: bindings/install.sh PREFIX [LIBDIR]}"
libdir="${2:-${CARGO_TARGET_DIR:-$root/target}/release}"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)"
abi="$(sed -n 's/^#define JOKER_ABI_VERSION \([0-9]*\)/\1/p' "$root/include/joker.h")"
[ -f "$libdir/libjoker.so" ] || { echo "no $libdir/libjoker.so: run cargo build --release --lib" >&2; exit 1; }
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
install -m 755 "$libdir/libjoker.so" "$prefix/lib/libjoker.so.$version"
ln -sf "libjoker.so.$version" "$prefix/lib/libjoker.so.$abi"
ln -sf "libjoker.so.$abi" "$prefix/lib/libjoker.so"
install -m 644 "$libdir/libjoker.a" "$prefix/lib/libjoker.a"
install -m 644 "$root/include/joker.h" "$root/bindings/cpp/joker.hpp" "$prefix/include/"
prefix_abs="$(cd "$prefix" && pwd)"
sed -e "s|@PREFIX@|$prefix_abs|" -e "s|@VERSION@|$version|" \
    "$root/bindings/pkgconfig/joker.pc.in" > "$prefix/lib/pkgconfig/joker.pc"
echo "installed joker $version (ABI $abi) under $prefix_abs"
echo "  link: PKG_CONFIG_PATH=\"$prefix_abs/lib/pkgconfig\" cc prog.c \$(pkg-config --cflags --libs joker) -Wl,-rpath,$prefix_abs/lib"
echo "  or run with: LD_LIBRARY_PATH=\"$prefix_abs/lib\" ./prog   (unless $prefix_abs/lib is on the loader's path)"
