"""The PEP 517 build backend of the joker Python package (``pyproject.toml``: ``backend-path``).

It runs ``cargo build --release --lib`` on the crate two levels above this package (the
repository's ``Cargo.toml``) and packs ``libjoker`` with the Python sources into a wheel. That
is the very command CI and developers run, with the target directory cargo chooses itself
(``$CARGO_TARGET_DIR``, else ``target/`` of the crate), so a library already built in release
mode with the default features is reused as it is: cargo finds nothing to do. A backend that
builds with other arguments (setuptools-rust runs ``cargo rustc --crate-type cdylib``) would
recompile the crate, and the next plain ``cargo build`` would recompile it again.

The wheel holds ``joker/*.py`` and ``joker/libjoker.so`` (``.dylib`` on macOS); its tag is
``py3-none-<platform>``: the library is a plain C ABI loaded by ctypes, the same for every
Python. The metadata comes from ``[project]`` of ``pyproject.toml`` (name, description,
requires-python, dependencies, license) and the version from the crate's ``Cargo.toml``.

Environment: ``CARGO`` (the cargo program, default ``cargo``); ``JOKER_CRATE_DIR`` (the
crate's directory, when this package is built outside the repository, for example by a pip
older than 21.3, which copies the source tree to a temporary directory first).

There is no source distribution: the package is the crate's, built from the repository
(``pip install ./bindings/python`` or ``pip wheel ./bindings/python``).
"""

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import zipfile
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python < 3.11: the build requirement of pyproject.toml
    import tomli as tomllib

_PROJECT = Path(__file__).resolve().parents[1]  # bindings/python
_PACKAGE = "joker"
# What cargo names the shared library on each system.
_LIBRARY_SUFFIXES = (".so", ".dylib", ".dll")

__all__ = ["build_wheel", "build_sdist", "prepare_metadata_for_build_wheel",
           "get_requires_for_build_wheel", "get_requires_for_build_sdist"]


def _log(message):
    print(f"joker build: {message}", file=sys.stderr, flush=True)


def _crate_dir():
    """The directory of the crate's Cargo.toml, checked to be the joker crate."""
    given = os.environ.get("JOKER_CRATE_DIR")
    crate = Path(given).resolve() if given else _PROJECT.parents[1]
    manifest = crate / "Cargo.toml"
    if not manifest.is_file() or _cargo_package(manifest).get("name") != "joker":
        where = "$JOKER_CRATE_DIR" if given else "two levels above the Python package"
        raise RuntimeError(
            f"the joker crate is not at {crate} ({where}): build the package from the "
            "repository with pip >= 21.3 (`pip install ./bindings/python`), which builds it "
            "where it lies, or set JOKER_CRATE_DIR to the directory of joker's Cargo.toml")
    return crate


def _cargo_package(manifest):
    with open(manifest, "rb") as f:
        return tomllib.load(f).get("package", {})


def _project():
    """The [project] table of pyproject.toml."""
    with open(_PROJECT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _version():
    return _cargo_package(_crate_dir() / "Cargo.toml")["version"]


def _metadata():
    """The METADATA file (core metadata 2.1) of the wheel."""
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {_version()}"]
    if "description" in p:
        lines.append(f"Summary: {p['description']}")
    lic = p.get("license")
    if isinstance(lic, dict):
        lic = lic.get("text")
    if lic:
        lines.append(f"License: {lic}")
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def _tag():
    platform = re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())
    return f"py3-none-{platform}"


def _wheel_file():
    return ("Wheel-Version: 1.0\nGenerator: joker_backend\nRoot-Is-Purelib: false\n"
            f"Tag: {_tag()}\n")


def _dist_info_name():
    return f"{_project()['name']}-{_version()}.dist-info"


# Seconds between the "still building" lines while cargo compiles.
_HEARTBEAT_S = 30.0


def _cargo_build():
    """Runs ``cargo build --release --lib`` and returns the path of the shared library.

    Everything it says goes to stderr, which pip shows with ``pip install -v`` (without -v pip
    shows its spinner and keeps the output for an error): first what is built and that a
    first build takes minutes, then cargo's own lines (``Compiling ...``) as they come, a line
    every 30 s while cargo compiles, and the time taken."""
    crate = _crate_dir()
    cargo = os.environ.get("CARGO", "cargo")
    cmd = [cargo, "build", "--release", "--lib", "--manifest-path", str(crate / "Cargo.toml"),
           "--message-format=json-render-diagnostics"]
    target = os.environ.get("CARGO_TARGET_DIR")
    _log("building the Rust library libjoker with cargo, in release mode: the first build "
         "takes a few minutes (about 2 on 2 CPU cores, more with fewer); a library already "
         "built is reused at once. `pip install -v` shows cargo's progress.")
    _log(" ".join(cmd) + (f" (CARGO_TARGET_DIR={target})" if target else ""))
    start = time.monotonic()
    try:
        # JSON messages on stdout (read here as they come), cargo's own output on stderr
        proc = subprocess.Popen(cmd, cwd=crate, stdout=subprocess.PIPE, text=True)
    except FileNotFoundError:
        raise RuntimeError(
            f"cannot run {cargo!r}: building the joker package needs Rust's cargo on PATH "
            "(https://rustup.rs), or its path in $CARGO") from None
    done = threading.Event()

    def heartbeat():
        while not done.wait(_HEARTBEAT_S):
            _log(f"cargo is still building ({time.monotonic() - start:.0f} s)")

    beat = threading.Thread(target=heartbeat, name="joker-build-heartbeat", daemon=True)
    beat.start()
    try:
        lines = [line for line in proc.stdout]
        proc.wait()
    except BaseException:  # Ctrl-C: stop cargo too
        proc.kill()
        proc.wait()
        raise
    finally:
        done.set()
        beat.join()
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed with exit status {proc.returncode}")
    library = None
    for line in lines:
        msg = json.loads(line) if line.startswith("{") else {}
        target_info = msg.get("target", {})
        if (msg.get("reason") == "compiler-artifact" and target_info.get("name") == "joker"
                and "cdylib" in target_info.get("crate_types", [])):
            library = next((f for f in msg["filenames"] if f.endswith(_LIBRARY_SUFFIXES)), None)
    if library is None:
        raise RuntimeError(f"`{' '.join(cmd)}` reported no shared library of the joker crate")
    _log(f"{library} ({time.monotonic() - start:.1f} s)")
    return Path(library)


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_dist_info(directory):
    """Writes the .dist-info directory's METADATA, WHEEL and top_level.txt under ``directory``."""
    dist_info = Path(directory) / _dist_info_name()
    dist_info.mkdir(parents=True, exist_ok=True)
    files = {"METADATA": _metadata(), "WHEEL": _wheel_file(), "top_level.txt": f"{_PACKAGE}\n"}
    for name, text in files.items():
        (dist_info / name).write_text(text, encoding="utf-8")
    return dist_info.name


def get_requires_for_build_wheel(config_settings=None):
    """No build requirements beyond those of pyproject.toml (cargo is not a Python package)."""
    return []


def get_requires_for_build_sdist(config_settings=None):
    """No build requirements (there is no source distribution)."""
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """Writes the wheel's .dist-info directory without building the library; returns its name."""
    return _write_dist_info(metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds libjoker with cargo and writes the wheel into ``wheel_directory``; returns its
    file name."""
    library = _cargo_build()
    start = time.monotonic()
    name, version = _project()["name"], _version()
    wheel_name = f"{name}-{version}-{_tag()}.whl"
    dist_info = _dist_info_name()
    files = []  # (name in the wheel, bytes)
    package = _PROJECT / _PACKAGE
    for path in sorted(package.glob("*.py")):
        files.append((f"{_PACKAGE}/{path.name}", path.read_bytes()))
    files.append((f"{_PACKAGE}/{library.name}", library.read_bytes()))
    with tempfile.TemporaryDirectory() as tmp:
        _write_dist_info(tmp)
        for meta in ("METADATA", "WHEEL", "top_level.txt"):
            files.append((f"{dist_info}/{meta}", (Path(tmp) / dist_info / meta).read_bytes()))
    record = [_record_line(arcname, data) for arcname, data in files]
    record.append(f"{dist_info}/RECORD,,")
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    os.makedirs(wheel_directory, exist_ok=True)
    partial = Path(wheel_directory) / (wheel_name + ".part")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as whl:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            # the library executable, the sources read-only for the group and others
            mode = 0o755 if arcname.endswith(_LIBRARY_SUFFIXES) else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
    shutil.move(partial, Path(wheel_directory) / wheel_name)
    size = (Path(wheel_directory) / wheel_name).stat().st_size
    _log(f"{wheel_name}: {size / 2**20:.1f} MiB ({time.monotonic() - start:.1f} s to pack)")
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    """Not supported: the package is built from the crate in the repository."""
    raise RuntimeError(
        "joker has no source distribution: the Python package is built from the Rust crate in "
        "the repository. Build a wheel instead: `pip wheel ./bindings/python` or "
        "`pip install ./bindings/python` from the repository's root.")
