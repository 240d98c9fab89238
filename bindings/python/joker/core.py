"""joker.core: the low-level layer of the joker package, over the C ABI of libjoker.

A thin ctypes layer over ``libjoker`` (see ``include/joker.h``), with numpy arrays in and out;
the scikit-learn estimators of :mod:`joker.estimators` are built on it. Its names are exported
by the package too (``joker.Joker``, ``joker.Model``, ...).

The library loaded is, in order: ``$JOKER_LIB`` (the path of a ``libjoker.so``, to develop
against a library of one's own); the copy installed with the package (``joker/libjoker.so``,
put there by ``pip install ./bindings/python``); in a source checkout, ``release`` / ``debug``
of ``$CARGO_TARGET_DIR`` or of the repository's ``target``; else ``libjoker.so.0`` on the
system's library path. When it cannot be loaded, importing this module raises ImportError
listing those places and how to fix it.

    import joker
    model = joker.Joker("l2-svc", c=4.0, n_components=1024).fit(X, y)
    labels = model.predict(X_test)
    model.save("model.json")
    back = joker.load("model.json")

Every error raises :class:`JokerError`, whose ``status`` names the C status
(``"JOKER_STATUS_SHAPE_MISMATCH"``, ...) and whose message is the library's, with the C and
Rust names in it replaced by this module's (``lambda_``, ``time_limit``, ``max_memory=``, ``X``,
...). Inputs are copied by the library; outputs are new numpy arrays. Models free their memory
when garbage collected, or at once with ``close()`` (or a ``with`` block); ``copy.copy``,
``copy.deepcopy`` and pickling copy them through the model file, so every copy owns its own.

Ctrl-C during :meth:`Joker.fit` (in the main thread) stops the fit within an iteration and
raises KeyboardInterrupt; an :class:`Interrupt` passed to ``fit`` stops it from another thread.

The Julia package ``bindings/julia/Joker`` mirrors this file function for function.
"""

import copy
import ctypes
import numbers
import os
import queue
import re
import tempfile
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    byref,
    c_char_p,
    c_double,
    c_float,
    c_int32,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path

import numpy as np

__all__ = ["Joker", "Model", "Progress", "Interrupt", "JokerError", "JokerValueError", "load",
           "version", "gpu_available", "device_count"]

# ---------------------------------------------------------------------------------------------
# the library

_SYSTEM_NAME = "libjoker.so.0"  # the SONAME, for the system's loader
# The copy installed with the package, under the name cargo gives it on each system.
_BUNDLED = [Path(__file__).resolve().parent / name
            for name in ("libjoker.so", "libjoker.dylib", "joker.dll")]


def _repository():
    """The repository's root when this module runs from a source checkout, else None."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "Cargo.toml").is_file() and (root / "include" / "joker.h").is_file() else None


def _target_dirs():
    """(description, directory) of the cargo target directories searched, in order: only from a
    source checkout (an installed package loads the library installed with it)."""
    root = _repository()
    if root is None:
        return []
    dirs = []
    if os.environ.get("CARGO_TARGET_DIR"):
        dirs.append(("$CARGO_TARGET_DIR", Path(os.environ["CARGO_TARGET_DIR"])))
    dirs.append(("the repository's target/", root / "target"))
    return dirs


def _find_library():
    env = os.environ.get("JOKER_LIB")
    if env:
        return env
    for p in _BUNDLED:
        if p.exists():
            return str(p)
    for _, t in _target_dirs():
        for profile in ("release", "debug"):
            p = t / profile / "libjoker.so"
            if p.exists():
                return str(p)
    return _SYSTEM_NAME


def _not_loaded(path, error):
    """The ImportError for a library that cannot be loaded: the places looked at, in the order
    of _find_library, and how to make the library found."""
    env = os.environ.get("JOKER_LIB")
    skipped = "not tried ($JOKER_LIB is set)"
    places = [("$JOKER_LIB", env if env else None, "tried" if env else "not set")]
    bundled = next((p for p in _BUNDLED if p.exists()), _BUNDLED[0])
    places.append(("the library installed with the package", str(bundled),
                   skipped if env else "tried" if str(bundled) == path else "not found"))
    if _repository() is None:
        places.append(("the cargo target directories", None,
                       "not searched (an installed package, not a source checkout)"))
    elif not os.environ.get("CARGO_TARGET_DIR"):
        places.append(("$CARGO_TARGET_DIR/{release,debug}/libjoker.so", None, "not set"))
    for what, t in _target_dirs():
        for profile in ("release", "debug"):
            p = t / profile / "libjoker.so"
            state = (skipped if env else "tried" if str(p) == path else
                     "exists" if p.exists() else "not found")
            places.append((f"{what}{'' if what.endswith('/') else '/'}{profile}", str(p), state))
    places.append(("the system's loader (LD_LIBRARY_PATH, ld.so.conf)", _SYSTEM_NAME,
                   skipped if env else "tried" if path == _SYSTEM_NAME else "not tried"))
    lines = [f"cannot load libjoker, the C library of the joker module: {error}",
             "Where it is looked for, in order (the first place set or found is loaded):"]
    for k, (what, where, state) in enumerate(places, 1):
        lines.append(f"  {k}. {what}{': ' + where if where else ''}: {state}")
    lines.append(
        "To fix it: install the package from the repository with `pip install ./bindings/python` "
        "(it builds the library with cargo and installs it with the module), or, in a source "
        "checkout, build the library with `cargo build --release` (it lands in "
        "target/release/libjoker.so), or set JOKER_LIB=/path/to/libjoker.so, or install the "
        "library where the system's loader finds libjoker.so.0 (bindings/install.sh PREFIX, "
        "then LD_LIBRARY_PATH=PREFIX/lib or ldconfig).")
    return ImportError("\n".join(lines), path=path)


_lib_path = _find_library()
try:
    _lib = ctypes.CDLL(_lib_path)
except OSError as _e:
    raise _not_loaded(_lib_path, _e) from None


class JokerError(Exception):
    """An error reported by libjoker (or found by this wrapper before calling it).

    ``status`` is the C status name, ``code`` its value, ``message`` the library's text (in this
    module's words: see :func:`_python_words`)."""

    def __init__(self, code, message):
        self.code = code
        self.status = _lib.joker_status_name(code).decode()
        self.message = message
        super().__init__(f"{self.status}: {message}")


class JokerValueError(JokerError, ValueError):
    """A :class:`JokerError` about the arguments or the input (also a ``ValueError``): raised by
    the estimators for the library's errors about their input or parameters, and by a
    :class:`Model` used after ``close()``."""


class _Progress(Structure):
    _fields_ = [
        ("iter", c_size_t),
        ("epoch", c_double),
        ("seconds", c_double),
        ("primal", c_double),
        ("dual", c_double),
        ("gap", c_double),
        ("validation", c_double),
        ("accepted", c_size_t),
        ("rel_residual", c_double),
    ]


_PROGRESS_FN = CFUNCTYPE(c_int32, POINTER(_Progress), c_void_p)
_P = c_void_p  # every handle is an opaque pointer
_dp, _fp, _sp = POINTER(c_double), POINTER(c_float), POINTER(c_size_t)


def _sig(name, *args, restype=c_int32):
    try:
        f = getattr(_lib, name)
    except AttributeError:
        raise ImportError(
            f"{_lib_path} has no function {name}: that libjoker is older than this module. "
            "Reinstall the package (`pip install ./bindings/python`), rebuild the library "
            "(`cargo build --release` in the repository) or set "
            "JOKER_LIB=/path/to/a/current/libjoker.so", path=_lib_path) from None
    f.argtypes = list(args)
    f.restype = restype


_sig("joker_version", restype=c_char_p)
_sig("joker_abi_version", restype=ctypes.c_uint32)
_sig("joker_last_error", restype=c_char_p)
_sig("joker_status_name", c_int32, restype=c_char_p)
_sig("joker_gpu_available")
_sig("joker_device_count")
_sig("joker_params_new", POINTER(_P))
_sig("joker_params_free", _P)
_sig("joker_params_set_loss", _P, c_int32, c_double)
_sig("joker_params_set_kernel", _P, c_int32)
_sig("joker_params_set_gamma", _P, c_double)
_sig("joker_params_set_bandwidth", _P, c_int32)
_sig("joker_params_set_lambda", _P, c_double)
_sig("joker_params_set_c", _P, c_double)
_sig("joker_params_set_n_components", _P, c_size_t)
_sig("joker_params_set_exact", _P)
_sig("joker_params_set_precision", _P, c_int32)
_sig("joker_params_set_task", _P, c_int32)
_sig("joker_params_set_standardize", _P, c_int32)
_sig("joker_params_set_normalize_target", _P, c_int32)
_sig("joker_params_set_class_weight", _P, c_int32)
_sig("joker_params_set_class_weights", _P, _dp, _dp, c_size_t)
_sig("joker_params_set_block_size", _P, c_size_t)
_sig("joker_params_set_max_iter", _P, c_size_t)
_sig("joker_params_set_tol", _P, c_double)
_sig("joker_params_set_time_limit", _P, c_double)
_sig("joker_params_set_check_every", _P, c_size_t)
_sig("joker_params_set_seed", _P, c_uint64)
_sig("joker_params_set_max_memory", _P, c_size_t)
_sig("joker_params_set_device", _P, c_int32)
_sig("joker_params_set_nystrom_rank", _P, c_size_t)
_sig("joker_params_set_kernel_cache", _P, c_size_t)
_sig("joker_params_set_tr_model", _P, c_int32)
_sig("joker_params_set_feature_map", _P, c_int32, c_int32)
_sig("joker_params_set_working_set", _P, c_int32)
_sig("joker_params_set_auto_exact", _P, c_int32)
_sig("joker_params_set_probability", _P, c_int32)
_sig("joker_params_set_stall", _P, c_int32)
_sig("joker_params_set_direct_krr", _P, c_int32)
_sig("joker_params_set_newton_start", _P, c_int32)
_sig("joker_params_set_intercept", _P, c_int32)
_sig("joker_params_set_auto_loss", _P, c_int32)
_sig("joker_params_set_tr_norm", _P, c_int32)
_sig("joker_params_set_bias", _P, c_double)
_sig("joker_params_set_multiclass", _P, c_int32)
_sig("joker_params_set_solver", _P, c_int32, c_size_t, c_size_t, c_double, c_double)
_sig("joker_params_set_full_krr", _P, c_int32, c_size_t, c_size_t, c_size_t, c_double, c_int32)
_sig("joker_params_set_interrupt", _P, POINTER(c_int32))
_sig("joker_data_from_dense_f64", _dp, c_size_t, c_size_t, _dp, POINTER(_P))
_sig("joker_data_from_dense_f32", _fp, c_size_t, c_size_t, _dp, POINTER(_P))
_sig("joker_data_from_csr_f64", c_size_t, c_size_t, _sp, POINTER(c_uint32), _dp, _dp, POINTER(_P))
_sig("joker_data_from_csr_f32", c_size_t, c_size_t, _sp, POINTER(c_uint32), _fp, _dp, POINTER(_P))
_sig("joker_data_free", _P)
_sig("joker_fit", _P, _P, _dp, c_size_t, _P, _PROGRESS_FN, c_void_p, POINTER(_P))
_sig("joker_fit_stream", _P, c_char_p, c_int32, c_uint64, _P, _PROGRESS_FN, c_void_p, POINTER(_P))
_sig("joker_fit_search", _P, _P, _dp, c_size_t, _dp, c_size_t, c_size_t, c_uint64, POINTER(_P))
_sig("joker_model_free", _P)
_sig("joker_model_save", _P, c_char_p)
_sig("joker_model_load", c_char_p, POINTER(_P))
for _name in ("n_features", "n_targets", "n_classes", "n_components", "iterations"):
    _sig(f"joker_model_{_name}", _P, _sp)
for _name in ("task", "loss", "kernel", "multiclass"):
    _sig(f"joker_model_{_name}", _P, POINTER(c_int32))
for _name in ("gamma", "lambda", "gap"):
    _sig(f"joker_model_{_name}", _P, _dp)
_sig("joker_model_classes", _P, _dp, c_size_t)
_sig("joker_model_stop_reason", _P, POINTER(c_char_p))
_sig("joker_model_device", _P, POINTER(c_char_p))
_sig("joker_model_tr_model", _P, POINTER(c_char_p))
_sig("joker_model_output_size", _P, _P, c_int32, _sp)
for _name in ("predict", "decision_function", "predict_proba"):
    _sig(f"joker_model_{_name}", _P, _P, _dp, c_size_t)
_sig("joker_model_score", _P, _P, _dp)

LOSSES = {"krr": 0, "huber": 1, "svr": 2, "l1": 3, "lp": 4, "l1-svc": 5, "l2-svc": 6, "klr": 7}
KERNELS = {"gaussian": 0, "laplacian": 1, "matern12": 2, "matern32": 3, "matern52": 4}
BANDWIDTHS = {"median": 0, "msd": 1, "scale": 2, "auto": 3}
PRECISIONS = {"f32": 0, "f64": 1}
TASKS = {None: 0, "classification": 1, "regression": 2}
KRR_METHODS = {None: 0, "askotch": 1, "skotch": 2, "pcg": 3}
TR_MODELS = {"gram": 0, "kernel": 1, "auto": 2}
TR_NORMS = {"euclidean": 0, "diagonal": 1, "auto": 2}
FEATURE_MAPS = {"rff": 0, "nystrom": 1}
CENTERS = {"uniform": 0, "kmeans": 1, "leverage": 2}
WORKING_SETS = {"auto": 0, "random": 1, "shrinking": 2, "greedy": 3}
MULTICLASS = {"auto": 0, "ovr": 1, "ovo": 2}
SOLVERS = {"dbcd": 0, "dsg": 1, "udsg": 2, "cdsg": 3}
_OUTPUT = {"predict": 0, "decision_function": 1, "predict_proba": 2}
_NULL_POINTER, _INVALID_ARGUMENT, _SHAPE_MISMATCH, _INVALID_LABELS = 1, 3, 5, 8
# The largest value of a size_t argument (a larger Python int would wrap in ctypes) and of a
# device ordinal (an int32_t).
SIZE_MAX = 2 ** (8 * ctypes.sizeof(c_size_t)) - 1
_DEVICE_MAX = 2**31 - 1

# The C setters' names in library messages, as the Joker arguments they stand for.
_SETTER_ARGS = {"lambda": "lambda_=", "class_weights": "class_weight=", "exact": "n_components=None",
                "loss": "loss=", "bandwidth": "bandwidth=", "interrupt": "fit(interrupt=)"}
# Names of C arguments or Rust items that mean one thing wherever the library says them.
_GLOBAL_NAMES = {"lambda": "`lambda_`"}
# Per call: what the library calls an argument (or a setter) there, in this module's words.
_LOSS_NAMES = {"delta": "`loss_param` (the huber delta)", "epsilon": "`loss_param` (the svr epsilon)",
               "p": "`loss_param` (the lp exponent p)", "joker_params_set_loss": "loss_param="}
_FULL_KRR_NAMES = {"blocks": "`krr_blocks`", "rank": "`krr_rank`", "tol": "`krr_tol`",
                   "method": "`full_krr`", "joker_params_set_tol": "krr_tol=",
                   "joker_params_set_full_krr": "full_krr=, krr_blocks=, krr_rank= or krr_tol="}
_FIT_NAMES = {"train": "`X`", "validation": "`validation`"}
_DATA_NAMES = {"data": "`X`"}


def _python_words(message, names=None):
    """The library's message in this module's vocabulary: a C setter becomes the Joker
    argument (``joker_params_set_max_memory`` -> ``max_memory=``), ``joker_data_from_*`` the
    call to ``fit``, a Rust builder call the argument, and the backquoted names of ``names``
    (and ``lambda``) their Python names; setters named in ``names`` take its words."""
    names = names or {}
    for c_name, py_name in names.items():
        if c_name.startswith("joker_"):
            message = message.replace(c_name, py_name)
    message = re.sub(r"joker_params_set_(\w+)",
                     lambda m: _SETTER_ARGS.get(m.group(1), m.group(1) + "="), message)
    message = re.sub(r"joker_data_from_\w*\*?", "fit(X, y)", message)
    message = message.replace("(.exact())", "(n_components=None)")
    for c_name, py_name in {**_GLOBAL_NAMES, **names}.items():
        message = message.replace(f"`{c_name}`", py_name)
    return message


def _last_error(code, names=None):
    """The JokerError of the last failed call on this thread."""
    return JokerError(code, _python_words(_lib.joker_last_error().decode(errors="replace"), names))


def _check(code, names=None):
    if code != 0:
        raise _last_error(code, names)


def _count(name, v):
    """A non-negative integer argument that fits a size_t: ctypes would silently wrap a
    negative or too large one, and ``int()`` truncate a fraction."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or (
            not isinstance(v, numbers.Integral) and not float(v).is_integer()):
        raise JokerError(_INVALID_ARGUMENT, f"`{name}` must be a whole number, got {v!r}")
    v = int(v)
    if v < 0:
        raise JokerError(_INVALID_ARGUMENT, f"`{name}` must be >= 0, got {v}")
    if v > SIZE_MAX:
        raise JokerError(_INVALID_ARGUMENT, f"`{name}` must be <= {SIZE_MAX} (2**64 - 1), got {v}")
    return v


def _real(name, v):
    """A number argument as a float: a string or a bool is refused (``float("1")`` would
    take the string)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise JokerError(_INVALID_ARGUMENT, f"`{name}` must be a number, got {v!r}")
    return float(v)


def _device_code(device):
    """The C ABI's code for a device choice: -1 auto, -2 cpu, N >= 0 for cuda:N."""
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool) and device >= 0:
        if device > _DEVICE_MAX:
            raise JokerError(_INVALID_ARGUMENT, f"device {device!r}: a device ordinal must be <= {_DEVICE_MAX}")
        return int(device)
    if isinstance(device, str):
        d = device.strip().lower()
        if d in ("auto", "cpu", "cuda"):
            return {"auto": -1, "cpu": -2, "cuda": 0}[d]
        if d.startswith("cuda:") and d[5:].isdigit() and int(d[5:]) <= _DEVICE_MAX:
            return int(d[5:])
    raise JokerError(_INVALID_ARGUMENT, f"device {device!r}: use 'auto', 'cpu', 'cuda', 'cuda:N' or N >= 0")


def _ptr(a, ctype):
    return a.ctypes.data_as(POINTER(ctype)) if a is not None else None


def version():
    """The library version, for example "0.1.0"."""
    return _lib.joker_version().decode()


def gpu_available():
    """Whether a GPU can be used (from the library's device probe; the CUDA path is validated on
    NVIDIA H100 and H200 GPUs, see docs/gpu-validation.md)."""
    return bool(_lib.joker_gpu_available())


def device_count():
    """The number of usable CUDA devices (0 without a driver or a device)."""
    return int(_lib.joker_device_count())


# ---------------------------------------------------------------------------------------------
# data


class _Data:
    """A JokerData handle holding a copy of X (and y). ``names``: what the messages call X and
    y (and before them, e.g. "validation: ")."""

    def __init__(self, X, y=None, names=("X", "y")):
        self.handle = _P()
        xn, yn = names
        n_rows = X.shape[0] if hasattr(X, "shape") else len(X)
        yy = None
        if y is not None:
            yy = np.ascontiguousarray(np.asarray(y, dtype=np.float64).ravel())
            if yy.shape[0] != n_rows:
                raise JokerError(
                    _SHAPE_MISMATCH, f"{xn} has {n_rows} rows but {yn} has {yy.shape[0]} values"
                )
        self.sparse = hasattr(X, "tocsr")
        if self.sparse:  # scipy.sparse
            csr = X.tocsr(copy=True)
            try:
                csr.check_format(full_check=True)  # before scipy itself touches bad indices
            except ValueError as e:
                raise JokerError(_SHAPE_MISMATCH, f"invalid sparse matrix {xn}: {e}") from None
            csr.sum_duplicates()  # also sorts the column indices
            f32 = csr.dtype == np.float32
            vals = np.ascontiguousarray(csr.data, dtype=np.float32 if f32 else np.float64)
            indptr = np.ascontiguousarray(csr.indptr, dtype=np.uintp)
            indices = np.ascontiguousarray(csr.indices, dtype=np.uint32)
            fn = _lib.joker_data_from_csr_f32 if f32 else _lib.joker_data_from_csr_f64
            _check(
                fn(
                    csr.shape[0],
                    csr.shape[1],
                    _ptr(indptr, c_size_t),
                    _ptr(indices, c_uint32),
                    _ptr(vals, c_float if f32 else c_double),
                    _ptr(yy, c_double),
                    byref(self.handle),
                )
            )
            self.n_cols = csr.shape[1]
        else:
            a = np.asarray(X)
            if a.ndim != 2:
                raise JokerError(
                    _SHAPE_MISMATCH, f"{xn} must be a 2-d array (rows x features), got {a.ndim}-d"
                )
            if a.dtype == np.float32:
                a = np.ascontiguousarray(a)
                fn, ct = _lib.joker_data_from_dense_f32, c_float
            else:
                a = np.ascontiguousarray(a, dtype=np.float64)
                fn, ct = _lib.joker_data_from_dense_f64, c_double
            _check(fn(_ptr(a, ct), a.shape[0], a.shape[1], _ptr(yy, c_double), byref(self.handle)))
            self.n_cols = a.shape[1]
        self.n_rows = n_rows

    def close(self):
        if self.handle:
            _check(_lib.joker_data_free(self.handle))
            self.handle = _P()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _validation_data(validation, train=None):
    """The validation set of a fit as a _Data, with the training set's column count when
    ``train`` is given (a scipy.sparse set may have fewer columns: the missing ones are zero,
    as for predict)."""
    try:
        X_val, y_val = validation
    except (TypeError, ValueError):
        raise JokerError(_INVALID_ARGUMENT, "validation must be a pair (X_val, y_val)") from None
    if y_val is None:
        raise JokerError(_INVALID_LABELS, "validation: y_val is None; a validation set needs labels")
    val = _Data(X_val, y_val, names=("validation: X_val", "y_val"))
    if train is None:
        return val
    if val.n_cols != train.n_cols and not (val.sparse and val.n_cols < train.n_cols):
        val.close()
        raise JokerError(
            _SHAPE_MISMATCH,
            f"validation: X_val has {val.n_cols} columns, the training X has {train.n_cols}",
        )
    return val


# ---------------------------------------------------------------------------------------------
# estimator and model


class Progress:
    """A snapshot passed to the ``progress`` callback of :meth:`Joker.fit`."""

    __slots__ = ("iter", "epoch", "seconds", "primal", "dual", "gap", "validation", "accepted",
                 "rel_residual")

    def __init__(self, p):
        for k in self.__slots__:
            setattr(self, k, getattr(p, k))
        if self.validation != self.validation:  # NaN: no validation set
            self.validation = None
        if self.rel_residual != self.rel_residual:  # NaN: not a full-KRR fit
            self.rel_residual = None

    def __repr__(self):
        return f"Progress(iter={self.iter}, gap={self.gap:.3g}, validation={self.validation})"


class Interrupt:
    """A flag that stops a running fit: pass it as ``fit(..., interrupt=flag)`` and call
    ``flag.set()`` from another thread (or a signal handler). The library reads it once per
    iteration (full KRR: at its checks) and the fit returns the model so far, with
    ``stop_reason == "cancelled"``. A flag already set stops the next fit at its first
    iteration; ``clear()`` re-arms it. Ctrl-C during a fit in the main thread sets it too."""

    __slots__ = ("_value",)

    def __init__(self):
        self._value = c_int32(0)  # what the library reads; set and cleared by aligned stores

    def set(self):
        self._value.value = 1

    def clear(self):
        self._value.value = 0

    def is_set(self):
        return self._value.value != 0

    def __repr__(self):
        return f"Interrupt(set={self.is_set()})"


def _new_params(loss, *, loss_param, kernel, gamma, bandwidth, c, lambda_, n_components, precision,
                task, standardize, normalize_target, class_weight, block_size, max_iter, tol,
                time_limit, check_every, seed, max_memory, device, nystrom_rank, tr_model,
                full_krr, krr_blocks, krr_rank, krr_tol, krr_store_preconditioners,
                kernel_cache=2 << 30, features="rff", centers="leverage", working_set="auto",
                auto_exact=False, stall=True, multiclass="auto", solver="dbcd", batch_size=None,
                feature_block=None, step_theta=None, step_t0=None, direct_krr=True,
                tr_norm="auto", bias=0.0, newton_start=True, intercept=None, auto_loss=False,
                probability=False):
    """A new JokerParams handle from the arguments of Joker (JokerError if one is invalid)."""
    h = _P()
    _check(_lib.joker_params_new(byref(h)))

    def pick(table, key, what):
        if key not in table:
            raise JokerError(
                _INVALID_ARGUMENT, f"unknown {what} {key!r}; one of {sorted(map(str, table))}"
            )
        return table[key]

    try:
        _check(_lib.joker_params_set_loss(h, pick(LOSSES, loss, "loss"),
                                              _real("loss_param", loss_param)),
               _LOSS_NAMES)
        _check(_lib.joker_params_set_kernel(h, pick(KERNELS, kernel, "kernel")))
        if gamma is not None:
            _check(_lib.joker_params_set_gamma(h, _real("gamma", gamma)))
        else:
            _check(_lib.joker_params_set_bandwidth(h, pick(BANDWIDTHS, bandwidth, "bandwidth")))
        if c is not None and lambda_ is not None:
            raise JokerError(_INVALID_ARGUMENT, "give c or lambda_, not both")
        if c is not None:
            _check(_lib.joker_params_set_c(h, _real("c", c)))
        if lambda_ is not None:
            _check(_lib.joker_params_set_lambda(h, _real("lambda_", lambda_)))
        if n_components is None:
            _check(_lib.joker_params_set_exact(h))
        else:
            _check(_lib.joker_params_set_n_components(h, _count("n_components", n_components)))
        _check(_lib.joker_params_set_precision(h, pick(PRECISIONS, precision, "precision")))
        _check(_lib.joker_params_set_task(h, pick(TASKS, task, "task")))
        _check(_lib.joker_params_set_standardize(h, int(bool(standardize))))
        _check(_lib.joker_params_set_normalize_target(h, int(bool(normalize_target))))
        if class_weight == "balanced":
            _check(_lib.joker_params_set_class_weight(h, 1))
        elif class_weight:
            labels = np.array(list(class_weight.keys()), dtype=np.float64)
            weights = np.array(list(class_weight.values()), dtype=np.float64)
            _check(
                _lib.joker_params_set_class_weights(
                    h, _ptr(labels, c_double), _ptr(weights, c_double), len(labels)
                ),
                {"labels": "`class_weight` (a label)", "weights": "`class_weight` (a weight)"},
            )
        if block_size is not None:
            _check(_lib.joker_params_set_block_size(h, _count("block_size", block_size)))
        _check(_lib.joker_params_set_max_iter(h, _count("max_iter", max_iter)))
        _check(_lib.joker_params_set_tol(h, _real("tol", tol)))
        _check(_lib.joker_params_set_time_limit(
                   h, 0.0 if time_limit is None else _real("time_limit", time_limit)),
               {"seconds": "`time_limit`"})
        _check(_lib.joker_params_set_check_every(h, _count("check_every", check_every)))
        _check(_lib.joker_params_set_seed(h, _count("seed", seed)))
        if max_memory is not None:  # None: the library's default limit
            _check(_lib.joker_params_set_max_memory(h, _count("max_memory", max_memory)))
        _check(_lib.joker_params_set_device(h, _device_code(device)))
        _check(_lib.joker_params_set_nystrom_rank(h, _count("nystrom_rank", nystrom_rank)))
        _check(_lib.joker_params_set_kernel_cache(h, _count("kernel_cache", kernel_cache)))
        _check(_lib.joker_params_set_tr_model(h, pick(TR_MODELS, tr_model, "tr_model")))
        _check(_lib.joker_params_set_feature_map(
            h, pick(FEATURE_MAPS, features, "features"), pick(CENTERS, centers, "centers")))
        _check(_lib.joker_params_set_working_set(
            h, pick(WORKING_SETS, working_set, "working_set")))
        _check(_lib.joker_params_set_auto_exact(h, int(bool(auto_exact))))
        _check(_lib.joker_params_set_probability(h, int(bool(probability))))
        _check(_lib.joker_params_set_stall(h, int(bool(stall))))
        _check(_lib.joker_params_set_direct_krr(h, int(bool(direct_krr))))
        _check(_lib.joker_params_set_newton_start(h, int(bool(newton_start))))
        _check(_lib.joker_params_set_tr_norm(h, pick(TR_NORMS, tr_norm, "tr_norm")))
        _check(_lib.joker_params_set_multiclass(
            h, pick(MULTICLASS, multiclass, "multiclass")))
        # None: the solver's default (0 and NaN in the C call)
        _check(_lib.joker_params_set_solver(
            h, pick(SOLVERS, solver, "solver"),
            0 if batch_size is None else _count("batch_size", batch_size),
            0 if feature_block is None else _count("feature_block", feature_block),
            float("nan") if step_theta is None else _real("step_theta", step_theta),
            float("nan") if step_t0 is None else _real("step_t0", step_t0)),
            {"theta": "`step_theta`", "t0": "`step_t0`"})
        _check(
            _lib.joker_params_set_full_krr(
                h,
                pick(KRR_METHODS, full_krr, "full_krr method"),
                _count("krr_blocks", krr_blocks),
                _count("krr_rank", krr_rank),
                _count("max_iter", max_iter),
                _real("krr_tol", krr_tol),
                int(bool(krr_store_preconditioners)),
            ),
            _FULL_KRR_NAMES,
        )
        # last: the bias feature is checked against the map, the exact kernel and the solver,
        # the intercept against the loss and the solver
        _check(_lib.joker_params_set_bias(h, _real("bias", bias)))
        _check(_lib.joker_params_set_intercept(h, {None: 2, False: 0, True: 1}[
            None if intercept is None else bool(intercept)]))
        # the automatic loss against the task
        _check(_lib.joker_params_set_auto_loss(h, int(bool(auto_loss))))
    except BaseException:
        _lib.joker_params_free(h)
        raise
    return h


def _run_fit(call, progress, flag, names):
    """Runs ``call(cb, out)`` -- joker_fit with the C progress callback ``cb``, writing the model
    to ``out`` -- and returns the Model. The ``progress`` function always runs on the calling
    thread. In the main thread the C call runs in a worker thread (ctypes releases the GIL) while
    this one waits in slices of 0.1 s, so that Ctrl-C (KeyboardInterrupt, which only the main
    thread receives) is seen at once: it sets ``flag`` (an Interrupt, read by the library every
    iteration), waits for the fit to stop, frees the model and re-raises. Any other exception
    raised here meanwhile (by a signal handler) does the same. Exceptions of ``progress`` stop
    the fit and are re-raised after it."""
    out = _P()
    errors = []  # exceptions of the progress function

    def call_progress(snapshot):
        try:
            return 0 if progress(snapshot) is not False else 1
        except BaseException as e:  # never let an exception into C: stop instead
            errors.append(e)
            return 1

    def finish(code, message):
        if errors or code != 0:
            if out:
                _lib.joker_model_free(out)
            if errors:
                raise errors[0]
            raise JokerError(code, _python_words(message, names))
        return Model(out)

    if threading.current_thread() is not threading.main_thread():
        # No KeyboardInterrupt here: fit in this thread (`flag` still stops it).
        cb = (_PROGRESS_FN(lambda p, _user: call_progress(Progress(p.contents)))
              if progress is not None else _PROGRESS_FN())
        code = call(cb, out)
        return finish(code, _lib.joker_last_error().decode(errors="replace") if code else "")

    requests = queue.SimpleQueue()  # (snapshot, answer, reply) from the worker; None at the end
    result = {}

    def on_progress(p, _user):  # in the worker: hand the snapshot to the caller's thread
        if flag.is_set():
            return 1
        answer, reply = [1], threading.Event()
        requests.put((Progress(p.contents), answer, reply))
        while not reply.wait(0.1):
            if flag.is_set():  # the caller was interrupted and will not answer
                return 1
        return answer[0]

    cb = _PROGRESS_FN(on_progress) if progress is not None else _PROGRESS_FN()

    def work():
        try:
            code = call(cb, out)
            result["code"] = code
            # joker_last_error is per thread: read it here
            result["message"] = _lib.joker_last_error().decode(errors="replace") if code else ""
        except BaseException as e:  # a ctypes error: re-raised by the caller
            result["error"] = e
        finally:
            requests.put(None)

    worker = threading.Thread(target=work, name="joker-fit", daemon=True)
    pending = None  # the KeyboardInterrupt (or other asynchronous exception) to re-raise
    worker.start()
    while True:
        try:
            try:
                item = requests.get(timeout=0.1)
            except queue.Empty:
                if worker.is_alive():
                    continue
                break  # its end marker was lost to an exception here
            if item is None:
                break
            snapshot, answer, reply = item
            try:
                answer[0] = 1 if pending is not None else call_progress(snapshot)
            finally:
                reply.set()
        except BaseException as e:  # Ctrl-C: stop the fit, wait for it, then re-raise
            flag.set()
            if pending is None:
                pending = e
    worker.join()
    if pending is not None:
        if out:
            _lib.joker_model_free(out)
        raise pending
    if "error" in result:
        raise result["error"]
    return finish(result["code"], result["message"])


class Joker:
    """Validated training parameters; :meth:`fit` trains a :class:`Model`.

    ``loss``: krr, huber, svr, l1, lp, l1-svc, l2-svc or klr; ``loss_param``: delta (huber),
    epsilon (svr) or p (lp). ``c`` or ``lambda_`` (c = 1/lambda). ``n_components``: features
    M (random features or Nystrom centres), or None for the exact kernel. ``features``: "rff"
    (random Fourier features) or "nystrom" (a Nystrom map over ``n_components`` centres chosen
    from the training rows by ``centers``: "leverage", "kmeans" or "uniform"); a Nystrom model
    predicts as an exact-kernel model over its centres. ``gamma``: an explicit kernel scale, else
    ``bandwidth`` ("auto", the default: "scale" on the exact kernel and Nystrom maps, "msd" on
    random features; or "median", "msd" or "scale"). ``class_weight``: None, "balanced" or {label: weight}.
    ``block_size``: rows per block (None: 512, or 256 on a cached exact kernel, 128 there for
    hinge, SVR and L1; the library caps it at the number of samples).
    ``time_limit`` in seconds. ``max_memory``: None (the default) refuses a fit whose estimated
    memory exceeds 80% of the memory available when it starts (JokerError
    JOKER_STATUS_MEMORY, saying so), 0 sets no limit, any other value is a limit in bytes.
    ``device``: "auto" (a usable GPU for
    f32 random-feature models, else the CPU, the reason kept in ``Model.device``), "cpu", or
    "cuda" / "cuda:N" / N for a given GPU (fitting fails with JokerError when it cannot be
    used). ``nystrom_rank``: a rank-r Nystrom preconditioner for the block solver's CG (0:
    none). ``tr_model``: the trust region's model curvature with random features, "gram" (the
    block Gram), "kernel" (the exact kernel block, with the exact ratio test) or "auto" (the
    default: the kernel model where it is predicted to be cheaper); the choice made is ``Model.tr_model``. ``full_krr``: "askotch", "skotch" or "pcg" solves exact kernel ridge regression with
    that method instead of DBCD-TR (needs ``loss="krr"`` and ``n_components=None``), with
    ``krr_blocks`` blocks, Nystrom rank ``krr_rank``, stopping at relative residual ``krr_tol``
    or after ``max_iter`` iterations; ``krr_store_preconditioners`` keeps the block
    preconditioners instead of a fresh sketch per step. ``kernel_cache``: bytes the exact kernel
    matrix (or a Nystrom map's features) may take when formed once and kept (default 2 GiB; 0:
    formed block by block). ``working_set``: how each block is chosen, "auto" (the default: "shrinking" where
    the exact kernel is cached, "random" otherwise), "shrinking" (drawn from the coordinates that
    violate their optimality conditions), "greedy" (the largest violations) or "random" (fixed
    blocks). ``auto_exact``: train on the exact kernel instead of ``n_components`` random
    features where its matrix fits ``kernel_cache`` (then ``Model.n_components`` is None), and
    beyond on a Nystrom map of ``n_components`` centres where its features fit it (on the CPU;
    the model predicts as an exact-kernel model over the centres).
    ``stall``: also stop (``Model.stop == "stalled"``) once the relative gap is within
    ``10 * tol`` and the dual objective rose by less than ``tol / 10`` of its size per pass over
    the last three passes (default True; False runs until the gap reaches ``tol``).
    ``multiclass``: how more than two classes are split, "ovr" (one-vs-rest: a decision column
    per class), "ovo" (one-vs-one: a column per pair of classes, trained on the pair's rows,
    votes decide) or "auto" (the default: one-vs-one on the exact kernel, one-vs-rest with
    features); the scheme taken is ``Model.multiclass``. ``solver``: "dbcd" (the default,
    DBCD-TR) or a doubly stochastic gradient solver, "dsg", "udsg" or "cdsg" (random features on
    the CPU; ``n_components`` caps the features opened, ``max_iter`` counts steps, and there is
    no duality gap, so the fit runs its step or time budget), with ``batch_size`` rows and
    ``feature_block`` new features per step and the step size ``step_theta / (t + step_t0)``
    (None: the defaults 256, 64, 1000, 1000; ``docs/dsg.md``). ``direct_krr``: KRR on a
    feature map of at most 4,096 features starts from its exact optimum, solved in the primal
    (default True; the fit then usually ends at its first check with 0 iterations); False runs
    DBCD-TR from zero. ``newton_start``: L2-SVC on such a feature map starts from its optimum,
    found in the primal by a finite Newton method (default True; the fit then usually ends at
    its first check with 0 iterations; the model file's ``training.start`` says how); False
    runs DBCD-TR from zero.
    ``tr_norm``: the norm of the block solves' trust-region steps,
    "euclidean", "diagonal" (Jacobi-preconditioned CG) or "auto" (the default: diagonal for KLR
    and Lp). ``bias``: the value ``B >= 0`` of a constant feature appended to the random
    features, an intercept as LIBLINEAR's ``-B`` (default 0: none; random features by DBCD-TR
    only). ``intercept``: an unregularised intercept ``b`` beside the kernel expansion, the model
    ``f(x) + b`` as LIBSVM's SVR (True), none (False), or None (the default: one for "svr",
    "huber", "l1" and "lp" trained by DBCD-TR, none for "krr", whose constant is the targets'
    mean); the model file's ``training.intercept`` holds the fitted value. ``auto_loss``: for a
    regression, the loss follows the representation the fit takes (``joker train``'s default
    when no loss is named): "svr" (epsilon 0.1, with its intercept) on the exact kernel, "krr"
    on a feature map, where it is one direct solve; ``loss`` then applies to the other solvers
    only; refused for a classification. ``probability``: a classifier with another loss than
    "klr" is calibrated after the fit for ``Model.predict_proba`` (Platt's sigmoid per decision
    column, fitted on decision values from 5 stratified cross-validation folds, as LIBSVM's
    ``-b 1``: about 5 more fits on 4/5 of the rows). Invalid values raise JokerError here.

    ``copy.copy``, ``copy.deepcopy`` and pickling rebuild the parameters from these arguments.
    """

    def __init__(
        self,
        loss="krr",
        *,
        loss_param=0.0,
        kernel="gaussian",
        gamma=None,
        bandwidth="auto",
        c=None,
        lambda_=None,
        n_components=2048,
        precision="f32",
        task=None,
        standardize=True,
        normalize_target=True,
        class_weight=None,
        block_size=None,
        max_iter=10000,
        tol=1e-3,
        time_limit=None,
        check_every=0,
        seed=42,
        max_memory=None,
        device="auto",
        nystrom_rank=0,
        tr_model="auto",
        full_krr=None,
        krr_blocks=10,
        krr_rank=100,
        krr_tol=1e-6,
        krr_store_preconditioners=False,
        kernel_cache=2 << 30,
        features="rff",
        centers="leverage",
        working_set="auto",
        auto_exact=False,
        stall=True,
        multiclass="auto",
        solver="dbcd",
        batch_size=None,
        feature_block=None,
        step_theta=None,
        step_t0=None,
        direct_krr=True,
        tr_norm="auto",
        bias=0.0,
        newton_start=True,
        intercept=None,
        auto_loss=False,
        probability=False,
    ):
        args = dict(locals())
        del args["self"]
        self._h = _P()
        # a private copy: every fit builds its own handle from these (see fit)
        self._args = copy.deepcopy(args)
        self._h = _new_params(**self._args)

    def fit(self, X, y, sample_weight=None, validation=None, progress=None, interrupt=None):
        """Trains on ``X`` (2-d numpy array, float32 or float64, or a scipy.sparse matrix) and
        labels ``y``. ``sample_weight``: one positive weight per row. ``validation``: a pair
        ``(X_val, y_val)`` scored at every check, with the columns of ``X`` (a scipy.sparse
        ``X_val`` may have fewer: the missing ones are zero) and one label per row.
        ``progress``: called on this thread with a :class:`Progress` at every check; return
        False to stop early (stop reason "cancelled"); an exception in it stops the fit and is
        re-raised. ``interrupt``: an :class:`Interrupt` whose ``set()``, from any thread,
        stops the fit within an iteration with the model so far (stop reason "cancelled").

        Ctrl-C in the main thread stops the fit within an iteration and raises
        KeyboardInterrupt (the partial model is freed); fits from other threads run as they
        are, stopped only by ``interrupt``."""
        if not self._h:
            raise JokerValueError(_NULL_POINTER, "this Joker was closed: its parameters were freed")
        if interrupt is None:
            interrupt = Interrupt()
        elif not isinstance(interrupt, Interrupt):
            raise JokerError(_INVALID_ARGUMENT,
                             f"interrupt must be a joker.Interrupt, got {interrupt!r}")
        with _Data(X, y) as train:
            val = _validation_data(validation, train) if validation is not None else None
            try:
                w = None
                if sample_weight is not None:
                    w = np.ascontiguousarray(np.asarray(sample_weight, dtype=np.float64).ravel())
                    if w.shape[0] != train.n_rows:
                        raise JokerError(
                            _SHAPE_MISMATCH,
                            f"X has {train.n_rows} rows but sample_weight has {w.shape[0]} values",
                        )
                # A handle of this fit's own: the flag set on it cannot reach a concurrent fit
                # with these parameters, nor outlive this call.
                h = _new_params(**self._args)
                try:
                    _check(_lib.joker_params_set_interrupt(h, byref(interrupt._value)))

                    def call(cb, out):
                        return _lib.joker_fit(
                            h,
                            train.handle,
                            _ptr(w, c_double),
                            0 if w is None else w.shape[0],
                            val.handle if val is not None else None,
                            cb,
                            None,
                            byref(out),
                        )

                    return _run_fit(call, progress, interrupt, _FIT_NAMES)
                finally:
                    _lib.joker_params_set_interrupt(h, None)
                    _lib.joker_params_free(h)
            finally:
                if val is not None:
                    val.close()

    def search(self, X, y, c_values=(0.1, 1.0, 10.0, 100.0),
               gamma_factors=(0.25, 0.5, 1.0, 2.0, 4.0), folds=3, seed=1):
        """Chooses ``C`` and the kernel width by ``folds``-fold cross-validation (``joker train
        --search``): every value of ``c_values`` with every width ``gamma_factors[k]`` times the
        width these parameters' rule gives (1: that width), scored on the held-out rows
        (accuracy, or R^2), then the winner fitted on all rows. Returns the winner's
        :class:`Model` (``model.lambda_`` is ``1 / C``, ``model.gamma`` the width); its
        :meth:`Model.search` holds every candidate's scores."""
        if not self._h:
            raise JokerValueError(_NULL_POINTER, "this Joker was closed: its parameters were freed")
        cs = np.ascontiguousarray(np.asarray(c_values, dtype=np.float64).ravel())
        gs = np.ascontiguousarray(np.asarray(gamma_factors, dtype=np.float64).ravel())
        folds, seed = _count("folds", folds), _count("seed", seed)
        with _Data(X, y) as train:
            h = _new_params(**self._args)
            try:
                out = _P()
                code = _lib.joker_fit_search(h, train.handle, _ptr(cs, c_double), cs.shape[0],
                                             _ptr(gs, c_double), gs.shape[0], folds, seed,
                                             byref(out))
                if code != 0:
                    if out:
                        _lib.joker_model_free(out)
                    _check(code, _FIT_NAMES)
                return Model(out)
            finally:
                _lib.joker_params_free(h)

    def fit_stream(self, path, format="auto", chunk_bytes=0, validation=None, progress=None,
                   interrupt=None):
        """Trains a doubly stochastic solver (``solver="dsg"``, ``"udsg"`` or ``"cdsg"``) on
        the uncompressed LIBSVM or CSV file at ``path``, read a part of about ``chunk_bytes``
        bytes (0: 64 MiB) at a time, pass after pass: memory holds one part of the rows, never
        the data set. ``format``: "auto", "libsvm" or "csv" (the label last). The batches sweep
        the file in order, so its rows should be in random order. ``validation``, ``progress``
        and ``interrupt`` as for :meth:`fit`."""
        formats = {"auto": 0, "libsvm": 1, "csv": 2}
        if format not in formats:
            raise JokerError(_INVALID_ARGUMENT,
                             f"format must be one of {sorted(formats)}, got {format!r}")
        if not self._h:
            raise JokerValueError(_NULL_POINTER, "this Joker was closed: its parameters were freed")
        if interrupt is None:
            interrupt = Interrupt()
        val = _validation_data(validation) if validation is not None else None
        try:
            h = _new_params(**self._args)
            try:
                _check(_lib.joker_params_set_interrupt(h, byref(interrupt._value)))
                encoded = os.fsencode(path)

                def call(cb, out):
                    return _lib.joker_fit_stream(h, encoded, formats[format], int(chunk_bytes),
                                                 val.handle if val is not None else None,
                                                 cb, None, byref(out))

                return _run_fit(call, progress, interrupt, _FIT_NAMES)
            finally:
                _lib.joker_params_set_interrupt(h, None)
                _lib.joker_params_free(h)
        finally:
            if val is not None:
                val.close()

    def __copy__(self):
        return type(self)(**self._args)

    def __deepcopy__(self, memo):
        return type(self)(**self._args)

    def __getstate__(self):
        return {"args": self._args}

    def __setstate__(self, state):
        self.__init__(**state["args"])

    def close(self):
        if self._h:
            _check(_lib.joker_params_free(self._h))
            self._h = _P()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _load_handle(path):
    h = _P()
    _check(_lib.joker_model_load(os.fsencode(path), byref(h)))
    return h


def _looks_like_model(path):
    """Whether the file at ``path`` holds a joker model file (or is empty), judged by its first
    4,096 bytes as the joker program judges them: a JSON object whose ``format`` is
    ``"joker-model"`` (the field comes first in every model file joker writes)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    text = head.decode("utf-8", errors="replace").lstrip()
    return not text or (text.startswith("{") and '"format"' in text and '"joker-model"' in text)


class Model:
    """A trained model (from :meth:`Joker.fit` or :func:`load`).

    ``copy.copy(model)``, ``copy.deepcopy(model)`` and ``pickle`` copy it through its model
    file: the copy has a handle of its own (closing one leaves the other) and predicts
    identically."""

    def __init__(self, handle):
        self._h = handle

    def _handle(self):
        """The library handle; JokerValueError once :meth:`close` has freed it (the library
        would only see a NULL pointer)."""
        if not self._h:
            raise JokerValueError(
                _NULL_POINTER, "this model was closed (close() or the end of its `with` block "
                "freed it); load it again from its file with joker.load(path)")
        return self._h

    @classmethod
    def load(cls, path):
        """Reads a model file written by :meth:`save` (or the joker program)."""
        return cls(_load_handle(path))

    def to_onnx(self, path=None):
        """The model as ONNX (:mod:`joker.onnx`), written to ``path`` if given; returns the bytes."""
        from .onnx import to_onnx; return to_onnx(self, path)  # noqa: E702

    def search(self):
        """The cross-validation that chose this model's ``C`` and width (:meth:`Joker.search`):
        a dict with ``folds``, ``metric``, ``candidates`` (each with ``c``, ``gamma_factor``,
        ``gamma``, ``scores`` per fold, ``mean``, ``spread``, ``iterations``, ``seconds``) and
        ``best`` (an index into ``candidates``); None for a model fitted otherwise."""
        import json
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "model.json")
            self.save(path)
            with open(path) as f:
                return json.load(f)["training"].get("search")

    def save(self, path, overwrite=False):
        """Writes the model file (JSON) at ``path``, replacing it atomically when it exists.
        An existing file that is not a joker model file (a data set, say) is refused with
        FileExistsError unless ``overwrite=True``; a joker model file (or an empty file) is
        replaced, as the joker program does."""
        h = self._handle()
        if not overwrite and os.path.isfile(path) and not _looks_like_model(path):
            raise FileExistsError(
                f"{os.fspath(path)} exists and is not a joker model file; refusing to replace "
                "it (pass overwrite=True to replace it)")
        _check(_lib.joker_model_save(h, os.fsencode(path)))

    def _to_bytes(self):
        """The model file's bytes (what :meth:`save` writes)."""
        with tempfile.TemporaryDirectory(prefix="joker-") as d:
            path = os.path.join(d, "model.json")
            self.save(path, overwrite=True)
            with open(path, "rb") as f:
                return f.read()

    @staticmethod
    def _handle_from_bytes(data):
        with tempfile.TemporaryDirectory(prefix="joker-") as d:
            path = os.path.join(d, "model.json")
            with open(path, "wb") as f:
                f.write(data)
            return _load_handle(path)

    def __copy__(self):
        return type(self)(self._handle_from_bytes(self._to_bytes()))

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __getstate__(self):
        return {"model_file": self._to_bytes()}

    def __setstate__(self, state):
        self._h = _P()
        self._h = self._handle_from_bytes(state["model_file"])

    def _output(self, kind, X):
        h = self._handle()
        with _Data(X) as d:
            need = c_size_t()
            _check(_lib.joker_model_output_size(h, d.handle, _OUTPUT[kind], byref(need)))
            out = np.empty(need.value, dtype=np.float64)
            fn = getattr(_lib, f"joker_model_{kind}")
            _check(fn(h, d.handle, _ptr(out, c_double), out.shape[0]), _DATA_NAMES)
            return out, d.n_rows

    def predict(self, X):
        """Class labels (classifiers) or values (regression), one per row. ``X`` must have the
        model's ``n_features`` columns (a scipy.sparse ``X`` may have fewer: the missing ones
        are zero)."""
        return self._output("predict", X)[0]

    def decision_function(self, X):
        """Decision values: shape (n,) for one target, (n, n_targets) for one-vs-rest."""
        out, n = self._output("decision_function", X)
        return out if self.n_targets == 1 else out.reshape(n, -1)

    def predict_proba(self, X):
        """Class probabilities, shape (n, n_classes) in the order of ``classes``: KLR models, and
        classifiers trained with ``probability=True`` (JokerError otherwise)."""
        out, n = self._output("predict_proba", X)
        return out.reshape(n, -1)

    def score(self, X, y):
        """Accuracy (classifiers) or R^2 (regression)."""
        h = self._handle()
        with _Data(X, y) as d:
            s = c_double()
            _check(_lib.joker_model_score(h, d.handle, byref(s)), _DATA_NAMES)
            return s.value

    def _get(self, name, ctype):
        v = ctype()
        _check(getattr(_lib, f"joker_model_{name}")(self._handle(), byref(v)))
        return v.value

    n_features = property(lambda self: self._get("n_features", c_size_t))
    n_targets = property(lambda self: self._get("n_targets", c_size_t))
    n_classes = property(lambda self: self._get("n_classes", c_size_t))
    iterations = property(lambda self: self._get("iterations", c_size_t))
    gamma = property(lambda self: self._get("gamma", c_double))
    lambda_ = property(lambda self: self._get("lambda", c_double))
    gap = property(lambda self: self._get("gap", c_double))

    @property
    def n_components(self):
        """Random features M, or None for an exact-kernel model."""
        return self._get("n_components", c_size_t) or None

    @property
    def classes(self):
        """Sorted class labels (an empty array for regression)."""
        out = np.empty(self.n_classes, dtype=np.float64)
        _check(_lib.joker_model_classes(self._handle(), _ptr(out, c_double), out.shape[0]))
        return out

    @property
    def task(self):
        return {1: "classification", 2: "regression"}[self._get("task", c_int32)]

    @property
    def loss(self):
        code = self._get("loss", c_int32)
        return next(k for k, v in LOSSES.items() if v == code)

    @property
    def kernel(self):
        code = self._get("kernel", c_int32)
        return next(k for k, v in KERNELS.items() if v == code)

    @property
    def multiclass(self):
        """How the classes were split: "ovo" (a decision column per pair of classes) or "ovr"
        (a column per class; also for binary classifiers and regression)."""
        code = self._get("multiclass", c_int32)
        return next(k for k, v in MULTICLASS.items() if v == code)

    @property
    def stop_reason(self):
        """Why training stopped: converged, stalled, max_iter, time_limit or cancelled."""
        return self._get("stop_reason", c_char_p).decode()

    @property
    def device(self):
        """Where the model was trained and why there, e.g. 'cpu (auto: no CUDA driver found)'."""
        return self._get("device", c_char_p).decode()

    @property
    def tr_model(self):
        """The trust region's model curvature of the fit and why, e.g. 'gram' or 'kernel'."""
        return self._get("tr_model", c_char_p).decode()

    def close(self):
        """Frees the model now; using it afterwards raises :class:`JokerValueError` ("this model
        was closed"). Closing twice does nothing."""
        if self._h:
            _check(_lib.joker_model_free(self._h))
            self._h = _P()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def load(path):
    """Reads a model file: the same as :meth:`Model.load`."""
    return Model.load(path)
