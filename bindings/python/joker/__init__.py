"""joker: large-scale kernel machines, from Python.

A thin ctypes layer over the C ABI of ``libjoker.so`` (see ``include/joker.h``), with numpy
arrays in and out. The library is found through ``$JOKER_LIB`` (the path of the ``.so``), or
else in ``target/release`` / ``target/debug`` of the repository (or ``$CARGO_TARGET_DIR``), or
else on the system's library path.

    import joker
    model = joker.Joker("l2-svc", c=4.0, n_components=1024).fit(X, y)
    labels = model.predict(X_test)
    model.save("model.json")
    back = joker.load("model.json")

Every error raises :class:`JokerError`, whose ``status`` names the C status
(``"JOKER_STATUS_SHAPE_MISMATCH"``, ...) and whose message is the library's. Inputs are copied
by the library; outputs are new numpy arrays. Models free their memory when garbage collected,
or at once with ``close()`` (or a ``with`` block).

The Julia module ``bindings/julia/LibJoker.jl`` mirrors this file function for function.
"""

import ctypes
import os
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

__all__ = ["Joker", "Model", "JokerError", "load", "version", "gpu_available", "device_count"]

# ---------------------------------------------------------------------------------------------
# the library


def _find_library():
    env = os.environ.get("JOKER_LIB")
    if env:
        return env
    root = Path(__file__).resolve().parents[3]
    targets = [Path(os.environ["CARGO_TARGET_DIR"])] if os.environ.get("CARGO_TARGET_DIR") else []
    targets.append(root / "target")
    for t in targets:
        for profile in ("release", "debug"):
            p = t / profile / "libjoker.so"
            if p.exists():
                return str(p)
    return "libjoker.so.0"


_lib = ctypes.CDLL(_find_library())


class JokerError(Exception):
    """An error reported by libjoker (or found by this wrapper before calling it).

    ``status`` is the C status name, ``code`` its value, ``message`` the library's text."""

    def __init__(self, code, message):
        self.code = code
        self.status = _lib.joker_status_name(code).decode()
        self.message = message
        super().__init__(f"{self.status}: {message}")


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
    f = getattr(_lib, name)
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
_sig("joker_params_set_full_krr", _P, c_int32, c_size_t, c_size_t, c_size_t, c_double, c_int32)
_sig("joker_data_from_dense_f64", _dp, c_size_t, c_size_t, _dp, POINTER(_P))
_sig("joker_data_from_dense_f32", _fp, c_size_t, c_size_t, _dp, POINTER(_P))
_sig("joker_data_from_csr_f64", c_size_t, c_size_t, _sp, POINTER(c_uint32), _dp, _dp, POINTER(_P))
_sig("joker_data_from_csr_f32", c_size_t, c_size_t, _sp, POINTER(c_uint32), _fp, _dp, POINTER(_P))
_sig("joker_data_free", _P)
_sig("joker_fit", _P, _P, _dp, c_size_t, _P, _PROGRESS_FN, c_void_p, POINTER(_P))
_sig("joker_model_free", _P)
_sig("joker_model_save", _P, c_char_p)
_sig("joker_model_load", c_char_p, POINTER(_P))
for _name in ("n_features", "n_targets", "n_classes", "n_components", "iterations"):
    _sig(f"joker_model_{_name}", _P, _sp)
for _name in ("task", "loss", "kernel"):
    _sig(f"joker_model_{_name}", _P, POINTER(c_int32))
for _name in ("gamma", "lambda", "gap"):
    _sig(f"joker_model_{_name}", _P, _dp)
_sig("joker_model_classes", _P, _dp, c_size_t)
_sig("joker_model_stop_reason", _P, POINTER(c_char_p))
_sig("joker_model_device", _P, POINTER(c_char_p))
_sig("joker_model_output_size", _P, _P, c_int32, _sp)
for _name in ("predict", "decision_function", "predict_proba"):
    _sig(f"joker_model_{_name}", _P, _P, _dp, c_size_t)
_sig("joker_model_score", _P, _P, _dp)

LOSSES = {"krr": 0, "huber": 1, "svr": 2, "l1": 3, "lp": 4, "l1-svc": 5, "l2-svc": 6, "klr": 7}
KERNELS = {"gaussian": 0, "laplacian": 1, "matern12": 2, "matern32": 3, "matern52": 4}
BANDWIDTHS = {"median": 0, "msd": 1}
PRECISIONS = {"f32": 0, "f64": 1}
TASKS = {None: 0, "classification": 1, "regression": 2}
KRR_METHODS = {None: 0, "askotch": 1, "skotch": 2, "pcg": 3}
_OUTPUT = {"predict": 0, "decision_function": 1, "predict_proba": 2}
_SHAPE_MISMATCH, _INVALID_ARGUMENT = 5, 3


def _check(code):
    if code != 0:
        raise JokerError(code, _lib.joker_last_error().decode(errors="replace"))


def _count(name, v):
    """A non-negative integer argument (ctypes would silently wrap a negative size_t)."""
    v = int(v)
    if v < 0:
        raise JokerError(_INVALID_ARGUMENT, f"`{name}` must be >= 0, got {v}")
    return v


def _device_code(device):
    """The C ABI's code for a device choice: -1 auto, -2 cpu, N >= 0 for cuda:N."""
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool) and device >= 0:
        return int(device)
    if isinstance(device, str):
        d = device.strip().lower()
        if d in ("auto", "cpu", "cuda"):
            return {"auto": -1, "cpu": -2, "cuda": 0}[d]
        if d.startswith("cuda:") and d[5:].isdigit():
            return int(d[5:])
    raise JokerError(_INVALID_ARGUMENT, f"device {device!r}: use 'auto', 'cpu', 'cuda', 'cuda:N' or N >= 0")


def _ptr(a, ctype):
    return a.ctypes.data_as(POINTER(ctype)) if a is not None else None


def version():
    """The library version, for example "0.1.0"."""
    return _lib.joker_version().decode()


def gpu_available():
    """Whether a GPU can be used (from the library's device probe; the CUDA path has not been run
    on a GPU yet)."""
    return bool(_lib.joker_gpu_available())


def device_count():
    """The number of usable CUDA devices (0 without a driver or a device)."""
    return int(_lib.joker_device_count())


# ---------------------------------------------------------------------------------------------
# data


class _Data:
    """A JokerData handle holding a copy of X (and y)."""

    def __init__(self, X, y=None):
        self.handle = _P()
        n_rows = X.shape[0] if hasattr(X, "shape") else len(X)
        yy = None
        if y is not None:
            yy = np.ascontiguousarray(np.asarray(y, dtype=np.float64).ravel())
            if yy.shape[0] != n_rows:
                raise JokerError(
                    _SHAPE_MISMATCH, f"X has {n_rows} rows but y has {yy.shape[0]} values"
                )
        if hasattr(X, "tocsr"):  # scipy.sparse
            csr = X.tocsr(copy=True)
            try:
                csr.check_format(full_check=True)  # before scipy itself touches bad indices
            except ValueError as e:
                raise JokerError(_SHAPE_MISMATCH, f"invalid sparse matrix: {e}") from None
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
        else:
            a = np.asarray(X)
            if a.ndim != 2:
                raise JokerError(
                    _SHAPE_MISMATCH, f"X must be a 2-d array (rows x features), got {a.ndim}-d"
                )
            if a.dtype == np.float32:
                a = np.ascontiguousarray(a)
                fn, ct = _lib.joker_data_from_dense_f32, c_float
            else:
                a = np.ascontiguousarray(a, dtype=np.float64)
                fn, ct = _lib.joker_data_from_dense_f64, c_double
            _check(fn(_ptr(a, ct), a.shape[0], a.shape[1], _ptr(yy, c_double), byref(self.handle)))
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


class Joker:
    """Validated training parameters; :meth:`fit` trains a :class:`Model`.

    ``loss``: krr, huber, svr, l1, lp, l1-svc, l2-svc or klr; ``loss_param``: delta (huber),
    epsilon (svr) or p (lp). ``c`` or ``lambda_`` (c = 1/lambda). ``n_components``: random
    features M, or None for the exact kernel. ``gamma``: an explicit kernel scale, else
    ``bandwidth`` ("median" or "msd"). ``class_weight``: None, "balanced" or {label: weight}.
    ``time_limit`` in seconds, ``max_memory`` in bytes. ``device``: "auto" (a usable GPU for
    f32 random-feature models, else the CPU, the reason kept in ``Model.device``), "cpu", or
    "cuda" / "cuda:N" / N for a given GPU (fitting fails with JokerError when it cannot be
    used). ``nystrom_rank``: a rank-r Nystrom preconditioner for the block solver's CG (0:
    none). ``full_krr``: "askotch", "skotch" or "pcg" solves exact kernel ridge regression with
    that method instead of DBCD-TR (needs ``loss="krr"`` and ``n_components=None``), with
    ``krr_blocks`` blocks, Nystrom rank ``krr_rank``, stopping at relative residual ``krr_tol``
    or after ``max_iter`` iterations; ``krr_store_preconditioners`` keeps the block
    preconditioners instead of a fresh sketch per step. Invalid values raise JokerError here.
    """

    def __init__(
        self,
        loss="krr",
        *,
        loss_param=0.0,
        kernel="gaussian",
        gamma=None,
        bandwidth="median",
        c=None,
        lambda_=None,
        n_components=2048,
        precision="f32",
        task=None,
        standardize=True,
        normalize_target=True,
        class_weight=None,
        block_size=512,
        max_iter=10000,
        tol=1e-3,
        time_limit=None,
        check_every=0,
        seed=42,
        max_memory=None,
        device="auto",
        nystrom_rank=0,
        full_krr=None,
        krr_blocks=10,
        krr_rank=100,
        krr_tol=1e-6,
        krr_store_preconditioners=False,
    ):
        self._h = _P()
        _check(_lib.joker_params_new(byref(self._h)))
        h = self._h

        def pick(table, key, what):
            if key not in table:
                raise JokerError(
                    _INVALID_ARGUMENT, f"unknown {what} {key!r}; one of {sorted(map(str, table))}"
                )
            return table[key]

        _check(_lib.joker_params_set_loss(h, pick(LOSSES, loss, "loss"), float(loss_param)))
        _check(_lib.joker_params_set_kernel(h, pick(KERNELS, kernel, "kernel")))
        if gamma is not None:
            _check(_lib.joker_params_set_gamma(h, float(gamma)))
        else:
            _check(_lib.joker_params_set_bandwidth(h, pick(BANDWIDTHS, bandwidth, "bandwidth")))
        if c is not None and lambda_ is not None:
            raise JokerError(_INVALID_ARGUMENT, "give c or lambda_, not both")
        if c is not None:
            _check(_lib.joker_params_set_c(h, float(c)))
        if lambda_ is not None:
            _check(_lib.joker_params_set_lambda(h, float(lambda_)))
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
                )
            )
        _check(_lib.joker_params_set_block_size(h, _count("block_size", block_size)))
        _check(_lib.joker_params_set_max_iter(h, _count("max_iter", max_iter)))
        _check(_lib.joker_params_set_tol(h, float(tol)))
        _check(_lib.joker_params_set_time_limit(h, float(time_limit or 0.0)))
        _check(_lib.joker_params_set_check_every(h, _count("check_every", check_every)))
        _check(_lib.joker_params_set_seed(h, _count("seed", seed)))
        _check(_lib.joker_params_set_max_memory(h, _count("max_memory", max_memory or 0)))
        _check(_lib.joker_params_set_device(h, _device_code(device)))
        _check(_lib.joker_params_set_nystrom_rank(h, _count("nystrom_rank", nystrom_rank)))
        _check(
            _lib.joker_params_set_full_krr(
                h,
                pick(KRR_METHODS, full_krr, "full_krr method"),
                _count("krr_blocks", krr_blocks),
                _count("krr_rank", krr_rank),
                _count("max_iter", max_iter),
                float(krr_tol),
                int(bool(krr_store_preconditioners)),
            )
        )

    def fit(self, X, y, sample_weight=None, validation=None, progress=None):
        """Trains on ``X`` (2-d numpy array, float32 or float64, or a scipy.sparse matrix) and
        labels ``y``. ``sample_weight``: one positive weight per row. ``validation``: a pair
        ``(X_val, y_val)`` scored at every check. ``progress``: called with a
        :class:`Progress` at every check; return False to stop early."""
        with _Data(X, y) as train:
            val = _Data(*validation) if validation is not None else None
            try:
                w = None
                if sample_weight is not None:
                    w = np.ascontiguousarray(np.asarray(sample_weight, dtype=np.float64).ravel())
                errors = []

                def on_progress(p, _user):
                    try:
                        return 0 if progress(Progress(p.contents)) is not False else 1
                    except BaseException as e:  # never let an exception into C: stop instead
                        errors.append(e)
                        return 1

                cb = _PROGRESS_FN(on_progress) if progress is not None else _PROGRESS_FN()
                out = _P()
                _check(
                    _lib.joker_fit(
                        self._h,
                        train.handle,
                        _ptr(w, c_double),
                        0 if w is None else w.shape[0],
                        val.handle if val is not None else None,
                        cb,
                        None,
                        byref(out),
                    )
                )
                model = Model(out)
                if errors:
                    model.close()
                    raise errors[0]
                return model
            finally:
                if val is not None:
                    val.close()

    def close(self):
        if self._h:
            _check(_lib.joker_params_free(self._h))
            self._h = _P()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Model:
    """A trained model (from :meth:`Joker.fit` or :func:`load`)."""

    def __init__(self, handle):
        self._h = handle

    @classmethod
    def load(cls, path):
        """Reads a model file written by :meth:`save` (or the joker program)."""
        h = _P()
        _check(_lib.joker_model_load(os.fsencode(path), byref(h)))
        return cls(h)

    def save(self, path):
        """Writes the model file (JSON)."""
        _check(_lib.joker_model_save(self._h, os.fsencode(path)))

    def _output(self, kind, X):
        with _Data(X) as d:
            need = c_size_t()
            _check(_lib.joker_model_output_size(self._h, d.handle, _OUTPUT[kind], byref(need)))
            out = np.empty(need.value, dtype=np.float64)
            fn = getattr(_lib, f"joker_model_{kind}")
            _check(fn(self._h, d.handle, _ptr(out, c_double), out.shape[0]))
            return out, d.n_rows

    def predict(self, X):
        """Class labels (classifiers) or values (regression), one per row."""
        return self._output("predict", X)[0]

    def decision_function(self, X):
        """Decision values: shape (n,) for one target, (n, n_targets) for one-vs-rest."""
        out, n = self._output("decision_function", X)
        return out if self.n_targets == 1 else out.reshape(n, -1)

    def predict_proba(self, X):
        """Class probabilities, shape (n, n_classes) in the order of ``classes`` (KLR only)."""
        out, n = self._output("predict_proba", X)
        return out.reshape(n, -1)

    def score(self, X, y):
        """Accuracy (classifiers) or R^2 (regression)."""
        with _Data(X, y) as d:
            s = c_double()
            _check(_lib.joker_model_score(self._h, d.handle, byref(s)))
            return s.value

    def _get(self, name, ctype):
        v = ctype()
        _check(getattr(_lib, f"joker_model_{name}")(self._h, byref(v)))
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
        _check(_lib.joker_model_classes(self._h, _ptr(out, c_double), out.shape[0]))
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
    def stop_reason(self):
        """Why training stopped: converged, max_iter, time_limit or cancelled."""
        return self._get("stop_reason", c_char_p).decode()

    @property
    def device(self):
        """Where the model was trained and why there, e.g. 'cpu (auto: no CUDA driver found)'."""
        return self._get("device", c_char_p).decode()

    def close(self):
        """Frees the model now (later calls raise JokerError: a NULL handle)."""
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
