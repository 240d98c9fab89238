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

The library is packed stripped of its debug information (``strip --strip-debug`` on a copy;
the release profile keeps line tables for profiling, which would make the wheel 46 MiB instead
of about 9): the symbol table stays, so backtraces still name functions.

The source distribution (``build_sdist``) holds the Python package and, under ``rust/``, what
``cargo build --release --lib`` needs of the crate: ``Cargo.toml``, ``Cargo.lock``,
``build.rs``, ``cbindgen.toml``, ``src/``, the committed PTX and fat binaries of ``cuda/``
(with their CUDA sources), ``include/``, the README and the licences, and the file of each
benchmark or example ``Cargo.toml`` names (cargo refuses the manifest without them). A wheel built from it
compiles the crate there, in ``rust/target`` unless ``$CARGO_TARGET_DIR`` says otherwise.

Environment: ``CARGO`` (the cargo program, default ``cargo``); ``JOKER_CRATE_DIR`` (the
crate's directory, when this package is built outside the repository and not from the source
distribution, for example by a pip older than 21.3, which copies the source tree to a
temporary directory first); ``STRIP`` (the strip program, default ``strip``);
``JOKER_WHEEL_STRIP``: ``0`` packs the library as cargo built it, ``1`` makes a failure to
strip an error (by default it is a warning and the library is packed as built). The config
setting ``strip`` (``pip wheel --config-settings strip=0``) overrides ``JOKER_WHEEL_STRIP``.
"""

import base64
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
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


# Where the source distribution puts the crate, beside the Python package.
_SDIST_CRATE = "rust"


def _crate_dir():
    """The directory of the crate's Cargo.toml, checked to be the joker crate: $JOKER_CRATE_DIR,
    else ``rust/`` of an unpacked source distribution, else two levels above the package."""
    given = os.environ.get("JOKER_CRATE_DIR")
    if given:
        crate = Path(given).resolve()
    elif (_PROJECT / _SDIST_CRATE / "Cargo.toml").is_file():
        crate = _PROJECT / _SDIST_CRATE
    else:
        crate = _PROJECT.parents[1]
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
    """No build requirements: the source distribution is written with the standard library."""
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """Writes the wheel's .dist-info directory without building the library; returns its name."""
    return _write_dist_info(metadata_directory)


def _strip_setting(config_settings):
    """``None`` (strip, warn on failure), ``True`` (strip, fail on failure) or ``False``."""
    value = (config_settings or {}).get("strip", os.environ.get("JOKER_WHEEL_STRIP", ""))
    value = str(value).strip().lower()
    if value in ("", "auto"):
        return None
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    raise RuntimeError(f"strip={value!r}: expected 0, 1 or auto (JOKER_WHEEL_STRIP or "
                       "--config-settings strip=...)")


def _library_bytes(library, config_settings):
    """The bytes of the library to pack: a copy stripped of its debug information unless the
    setting says otherwise (see the module's documentation)."""
    required = _strip_setting(config_settings)
    if required is False:
        _log(f"packing {library.name} unstripped (strip=0)")
        return library.read_bytes()
    strip = os.environ.get("STRIP", "strip")
    # GNU and LLVM strip take --strip-debug; Apple's strip takes -S for the same
    flag = "-S" if sys.platform == "darwin" else "--strip-debug"
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / library.name
        shutil.copyfile(library, copy)
        try:
            run = subprocess.run([strip, flag, str(copy)], capture_output=True, text=True)
            problem = None if run.returncode == 0 else (
                f"`{strip} {flag}` failed with exit status {run.returncode}: {run.stderr.strip()}")
        except FileNotFoundError:
            problem = f"no {strip!r} program (binutils; or name one in $STRIP)"
        if problem is None:
            data = copy.read_bytes()
            _log(f"{library.name} stripped of debug information: "
                 f"{library.stat().st_size / 2**20:.1f} MiB -> {len(data) / 2**20:.1f} MiB")
            return data
    if required:
        raise RuntimeError(f"cannot strip {library}: {problem}")
    _log(f"WARNING: {library.name} packed with its debug information: {problem}")
    return library.read_bytes()


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
    files.append((f"{_PACKAGE}/{library.name}", _library_bytes(library, config_settings)))
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


# What the source distribution takes of the crate: files, and directories taken whole (the
# patterns of a directory are matched against the names of the files in it, recursively).
_CRATE_FILES = ("Cargo.toml", "Cargo.lock", "build.rs", "cbindgen.toml", "README.md",
                "LICENSE-APACHE", "LICENSE-MIT")
_CRATE_DIRS = {"src": ("*",), "include": ("*.h",),
               "cuda": ("*.ptx", "*.fatbin", "*.cu", "*.cuh", "README.md")}
# The directories of the targets Cargo.toml may name ([[bench]], [[example]], [[test]], [[bin]]):
# cargo refuses a manifest whose named target has no file, even for `--lib`, so the sdist takes
# the file of each named target (not the rest of these directories).
_TARGET_DIRS = {"bench": "benches", "example": "examples", "test": "tests", "bin": "src/bin"}
# and of the Python package, beside pyproject.toml
_PYTHON_FILES = ("pyproject.toml", "build_backend/joker_backend.py", "example.py")


def _sdist_files():
    """(name in the archive below its top directory, path) of every file of the sdist."""
    crate = _crate_dir()
    files = [(name, _PROJECT / name) for name in _PYTHON_FILES]
    files += [(f"{_PACKAGE}/{p.name}", p) for p in sorted((_PROJECT / _PACKAGE).glob("*.py"))]
    for name in _CRATE_FILES:
        if not (crate / name).is_file():
            raise RuntimeError(f"the crate at {crate} has no {name}")
        files.append((f"{_SDIST_CRATE}/{name}", crate / name))
    for directory, patterns in _CRATE_DIRS.items():
        found = sorted({p for pattern in patterns for p in (crate / directory).rglob(pattern)
                        if p.is_file() and "__pycache__" not in p.parts})
        if not found:
            raise RuntimeError(f"the crate at {crate} has nothing in {directory}/")
        files += [(f"{_SDIST_CRATE}/{p.relative_to(crate).as_posix()}", p) for p in found]
    with open(crate / "Cargo.toml", "rb") as f:
        manifest = tomllib.load(f)
    for kind, directory in _TARGET_DIRS.items():
        for target in manifest.get(kind, []):
            candidates = ([target["path"]] if "path" in target else
                          [f"{directory}/{target['name']}.rs", f"{directory}/{target['name']}/main.rs"])
            path = next((crate / c for c in candidates if (crate / c).is_file()), None)
            if path is None:
                raise RuntimeError(f"{crate / 'Cargo.toml'} names the {kind} {target.get('name')!r}, "
                                   f"which has no file ({' or '.join(candidates)})")
            arcname = f"{_SDIST_CRATE}/{path.relative_to(crate).as_posix()}"
            if arcname not in {a for a, _ in files}:
                files.append((arcname, path))
    for name in ("LICENSE-APACHE", "LICENSE-MIT"):  # the licences at the top as well
        files.append((name, crate / name))
    return files


def build_sdist(sdist_directory, config_settings=None):
    """Writes the source distribution ``joker-VERSION.tar.gz`` into ``sdist_directory`` and
    returns its file name: the Python package with the crate's sources under ``rust/``, enough
    for ``pip wheel``/``pip install`` of it to build libjoker with cargo (and nothing else: no
    tests or documents of the crate, and of its benchmarks and examples only the files that
    ``Cargo.toml`` names)."""
    name, version = _project()["name"], _version()
    top = f"{name}-{version}"
    sdist_name = f"{top}.tar.gz"
    # reproducible: fixed owner and modes, and the time of SOURCE_DATE_EPOCH when set
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))

    def add(tar, arcname, data, mode=0o644):
        info = tarfile.TarInfo(f"{top}/{arcname}")
        info.size, info.mode, info.mtime = len(data), mode, mtime
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        tar.addfile(info, io.BytesIO(data))

    os.makedirs(sdist_directory, exist_ok=True)
    partial = Path(sdist_directory) / (sdist_name + ".part")
    files = _sdist_files()
    with open(partial, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "PKG-INFO", _metadata().encode())
        for arcname, path in files:
            add(tar, arcname, path.read_bytes())
    shutil.move(partial, Path(sdist_directory) / sdist_name)
    size = (Path(sdist_directory) / sdist_name).stat().st_size
    _log(f"{sdist_name}: {len(files) + 1} files, {size / 2**20:.1f} MiB")
    return sdist_name
