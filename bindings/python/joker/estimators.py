"""scikit-learn estimators over joker's kernel machines.

Every estimator trains one of joker's losses with the low-level layer (:class:`joker.Joker`,
:class:`joker.Model`) and keeps the trained model in ``model_``. Each is named after the
scikit-learn estimator of the same model, with "Kernel" in front:

- :class:`KernelSVC`: the L2-SVC (``loss="squared_hinge"``, joker's "l2-svc") or the L1-SVC
  (``loss="hinge"``, "l1-svc"), the losses of scikit-learn's ``LinearSVC``;
- :class:`KernelLogisticRegression`: kernel logistic regression ("klr"), with
  ``predict_proba``;
- :class:`KernelRidge`: kernel ridge regression ("krr"), with ``alpha`` as in
  ``sklearn.kernel_ridge.KernelRidge``;
- :class:`KernelSVCCV`, :class:`KernelLogisticRegressionCV` and :class:`KernelRidgeCV`: ``C``
  (or ``alpha``) and the kernel width
  chosen by joker's own cross-validated search, then refitted on all rows;
- :class:`KernelSVR`: support vector regression ("svr"), ``C`` and ``epsilon`` as in ``SVR``;
- :class:`KernelHuberRegressor`: Huber regression ("huber", threshold ``delta``);
- :class:`KernelLpRegressor`: Lp regression, ``p=1`` the L1 regression ("l1", the
  conditional median, as ``QuantileRegressor`` at 0.5) and ``p > 1`` joker's "lp".

The parameters shared by all of them keep scikit-learn's names where scikit-learn has one
(``C``, ``kernel``, ``gamma``, ``n_components``, ``class_weight``, ``max_iter``, ``tol``,
``random_state``, ``verbose``) and otherwise the low-level layer's names and meanings
(``precision``, ``block_size``, ``device``, ...: see :class:`joker.Joker`).

Inputs are validated with ``sklearn.utils.validation``: dense arrays, pandas DataFrames (their
column names become ``feature_names_in_``) and scipy.sparse matrices (used as CSR). Errors in
the inputs or the parameters raise ``ValueError`` (:class:`JokerValueError` when the library
found them, also a :class:`joker.JokerError`); the parameters are checked at ``fit`` as
scikit-learn checks its own (``_parameter_constraints``: ``InvalidParameterError``), before the
library is called, so that no fraction is truncated, no string taken for a number and no size
wrapped by ctypes. A fit that stops at ``max_iter`` or ``time_limit`` before reaching ``tol``
warns with ``sklearn.exceptions.ConvergenceWarning``. Fitting prints nothing unless
``verbose > 0``.
Fitted estimators pickle with their model file's bytes (see :class:`joker.Model`).
"""

import contextlib
import numbers
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, check_random_state

from . import core

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _sklearn_validate_data
except ImportError:  # scikit-learn 1.5: the estimator's method
    _sklearn_validate_data = None

__all__ = ["KernelSVC", "KernelSVCCV", "KernelRidgeCV", "KernelLogisticRegressionCV", "KernelLogisticRegression", "KernelRidge", "KernelSVR",
           "KernelHuberRegressor", "KernelLpRegressor", "JokerValueError"]

# scikit-learn's kernel name for the Gaussian kernel, beside joker's own names.
_KERNELS = {"rbf": "gaussian", **{k: k for k in core.KERNELS}}
# The data-driven kernel scales gamma may name (joker's bandwidth rules).
_BANDWIDTHS = tuple(core.BANDWIDTHS)
# Statuses that mean the caller's input or parameters are wrong.
_INPUT_STATUSES = {"JOKER_STATUS_INVALID_ARGUMENT", "JOKER_STATUS_SHAPE_MISMATCH",
                   "JOKER_STATUS_NON_FINITE", "JOKER_STATUS_EMPTY_DATA",
                   "JOKER_STATUS_INVALID_LABELS"}
# Features (or Nystrom centres) where n_components="auto" does not take the exact kernel: the
# command line's default -m.
_AUTO_COMPONENTS = 2048
_SEED_BOUND = 2**31 - 1  # seeds drawn for random_state=None or a RandomState


# The checks of scikit-learn >= 1.6 that integer sample weights give the fit on repeated rows
# to rtol 1e-7: an iterative fit agrees with it to its tolerance only.
_ITERATIVE_WEIGHT_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": "weights equal repeated rows only to the "
    "solver's tolerance (the iterative fit stops at tol, not at the optimum)",
    "check_sample_weight_equivalence_on_sparse_data": "as on dense data",
}

# Why KernelSVC(probability=True) fails scikit-learn's check that zero weights equal removed
# rows (scikit-learn declares the same for its SVC).
_ZERO_WEIGHT_FOLDS = ("zero sample_weight is not equivalent to removing samples: the "
                      "calibration's cross-validation folds follow the rows' order")

# Why it fails the check that the most probable class is the predicted one on every row: the
# sigmoids are fitted on cross-validated decision values, so near the boundary a row's most
# probable class may differ from its vote (as with scikit-learn's SVC(probability=True) and
# LIBSVM's -b 1; measured on dna: 8 of the 1,186 test rows differ).
_PROBA_ARGMAX = ("predict_proba's argmax may differ from predict near the boundary: the "
                 "sigmoids are fitted on cross-validated decision values")

# A joker.JokerError about the input or the parameters, raised by the estimators; it is also a
# ValueError, as scikit-learn expects of bad input (defined in joker.core).
JokerValueError = core.JokerValueError

# Parameter constraints (scikit-learn's _parameter_constraints, checked at fit): sizes are
# whole numbers that fit the library's size_t, so that ctypes never wraps them.
_POSITIVE = Interval(Real, 0, None, closed="neither")
_NON_NEGATIVE = Interval(Real, 0, None, closed="left")


def _size(low):
    return Interval(Integral, low, core.SIZE_MAX, closed="both")


_COMMON_CONSTRAINTS = {
    "kernel": [StrOptions(set(_KERNELS))],
    "gamma": [_POSITIVE, StrOptions(set(_BANDWIDTHS))],
    "n_components": [_size(1), None, StrOptions({"auto"})],
    "features": [StrOptions(set(core.FEATURE_MAPS))],
    "centers": [StrOptions(set(core.CENTERS))],
    "precision": [StrOptions(set(core.PRECISIONS))],
    "standardize": ["boolean"],
    "tol": [_NON_NEGATIVE],
    "max_iter": [_size(1)],
    "block_size": [_size(1), None],
    "time_limit": [_NON_NEGATIVE, None],
    "check_every": [_size(0)],
    "max_memory": [_size(0), None],
    # "auto", "cpu", "cuda", "cuda:N" (checked by joker.core) or an ordinal
    "device": [str, Interval(Integral, 0, core._DEVICE_MAX, closed="both")],
    "nystrom_rank": [_size(0)],
    "tr_model": [StrOptions(set(core.TR_MODELS))],
    "kernel_cache": [_size(0)],
    "working_set": [StrOptions(set(core.WORKING_SETS))],
    "auto_exact": ["boolean", None],
    "stall": ["boolean"],
    "tr_norm": [StrOptions(set(core.TR_NORMS))],
    "bias": [_NON_NEGATIVE],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
}
_CLASSIFIER_CONSTRAINTS = {
    "C": [_POSITIVE],
    "class_weight": [dict, StrOptions({"balanced"}), None],
    "multiclass": [StrOptions(set(core.MULTICLASS))],
    "decision_function_shape": [StrOptions({"ovr", "ovo"})],
}
_REGRESSOR_CONSTRAINTS = {"normalize_target": ["boolean"]}
# The stop reasons of a fit that ended before its tolerance was met.
_UNCONVERGED = {"max_iter": "max_iter={max_iter}",
                "time_limit": "time_limit={time_limit} s"}


@contextlib.contextmanager
def _input_errors():
    """Re-raises the library's errors about the input or the parameters as JokerValueError."""
    try:
        yield
    except core.JokerError as e:
        if e.status not in _INPUT_STATUSES or isinstance(e, ValueError):
            raise
        raise JokerValueError(e.code, e.message) from e


def _validate_data(estimator, *args, **kwargs):
    if _sklearn_validate_data is not None:
        return _sklearn_validate_data(estimator, *args, **kwargs)
    return estimator._validate_data(*args, **kwargs)


# Inputs: float64 or float32 (kept, as the library takes both), dense or CSR.
_INPUT = dict(accept_sparse="csr", dtype=[np.float64, np.float32])


def _check_X(estimator, X):
    """X for predicting: validated, with the features seen in fit."""
    return _validate_data(estimator, X, reset=False, **_INPUT)


def _check_X_y(estimator, X, y, classifier):
    """X and y for fitting: validated, at least two rows; sets n_features_in_ and
    feature_names_in_."""
    return _validate_data(estimator, X, y, reset=True, ensure_min_samples=2,
                          y_numeric=not classifier, **_INPUT)


def _check_sample_weight(sample_weight, n_samples):
    """sample_weight as a float64 vector of n_samples finite values >= 0 (a number: that weight
    for every sample)."""
    if isinstance(sample_weight, numbers.Real):
        sample_weight = np.full(n_samples, float(sample_weight))
    sw = check_array(sample_weight, ensure_2d=False, dtype=np.float64, input_name="sample_weight")
    if sw.shape != (n_samples,):
        raise ValueError(f"sample_weight has shape {sw.shape}; it must be ({n_samples},), one "
                         "weight per sample")
    if (sw < 0).any():
        raise ValueError(f"sample_weight has negative values (the first at sample "
                         f"{int(np.argmax(sw < 0))}); weights must be >= 0")
    return sw


class _JokerEstimator(BaseEstimator):
    """What the estimators share: turning their parameters into a :class:`joker.Joker`, the fit
    and the fitted attributes. Subclasses set ``_task`` and define ``_loss()`` (the joker loss
    and its parameter) and ``_regularization()`` (``{"c": C}`` or ``{"lambda_": alpha}``)."""

    _task = None
    # The parameters passed to joker.Joker under the same name and meaning.
    _SAME = ("n_components", "features", "centers", "precision", "standardize", "block_size",
             "max_iter", "tol", "time_limit", "check_every", "max_memory", "device",
             "nystrom_rank", "tr_model", "kernel_cache", "working_set", "auto_exact", "stall",
             "tr_norm", "bias", "direct_krr", "newton_start", "probability",
             "multiclass", "normalize_target", "class_weight", "full_krr", "krr_blocks", "krr_rank",
             "krr_tol",
             "krr_store_preconditioners")

    def _loss(self):
        raise NotImplementedError

    def _regularization(self):
        return {"c": float(self.C)}

    def _joker_args(self, class_index=None):
        """The keyword arguments of joker.Joker for these parameters; ``class_index`` maps the
        labels of ``class_weight`` to the encoded labels of the fit."""
        params = self.get_params(deep=False)
        args = {k: params[k] for k in self._SAME if k in params}
        # "auto", as `joker train` with nothing set: the exact kernel where its matrix fits
        # the kernel cache, else the default number of features; a number: those features
        if args.get("n_components") == "auto":
            args["n_components"] = _AUTO_COMPONENTS
            if args.get("auto_exact") is None:
                args["auto_exact"] = True
        elif "auto_exact" in args and args["auto_exact"] is None:
            args["auto_exact"] = False
        kernel = self.kernel
        if not isinstance(kernel, str) or kernel not in _KERNELS:
            raise ValueError(f"kernel={kernel!r}: use one of {sorted(_KERNELS)}")
        args["kernel"] = _KERNELS[kernel]
        gamma = self.gamma
        if isinstance(gamma, str):
            if gamma not in _BANDWIDTHS:
                raise ValueError(f"gamma={gamma!r}: give a number > 0 or one of {list(_BANDWIDTHS)}")
            args["bandwidth"] = gamma
        elif isinstance(gamma, bool) or not np.isscalar(gamma) or not gamma > 0:
            raise ValueError(f"gamma={gamma!r}: give a number > 0 or one of {list(_BANDWIDTHS)}")
        else:
            args["gamma"] = float(gamma)
        rs = self.random_state
        if isinstance(rs, (int, np.integer)) and not isinstance(rs, bool):
            if rs < 0:
                raise ValueError(f"random_state={rs}: a seed must be >= 0")
            args["seed"] = int(rs)
        else:  # None or a RandomState: a seed drawn from it (None: numpy's global one)
            args["seed"] = int(check_random_state(rs).randint(_SEED_BOUND))
        cw = args.get("class_weight")
        if isinstance(cw, dict):
            unknown = [k for k in cw if k not in class_index]
            if unknown:
                raise ValueError(f"class_weight has labels that are not classes of y: {unknown}; "
                                 f"the classes are {list(class_index)}")
            args["class_weight"] = {float(class_index[k]): float(w) for k, w in cw.items()}
        elif cw is not None and cw != "balanced":
            raise ValueError(f"class_weight={cw!r}: use None, 'balanced' or a dict {{label: weight}}")
        loss, loss_param = self._loss()
        args.update(self._regularization(), loss_param=loss_param, task=self._task)
        return loss, args

    def _fit(self, X, y, sample_weight, *, classifier):
        """Validates the input, fits and sets the fitted attributes; returns self (the
        parameters are checked by the fit methods' _fit_context)."""
        X, y = _check_X_y(self, X, y, classifier)
        if sample_weight is not None:
            sw = _check_sample_weight(sample_weight, X.shape[0])
            keep = sw > 0  # the library takes positive weights: a zero weight drops the row
            if not keep.any():
                raise ValueError("every sample_weight is zero: nothing to fit")
            if not keep.all():
                X, y, sw = X[keep], y[keep], sw[keep]
            sample_weight = sw
        classes = class_index = None
        if classifier:
            check_classification_targets(y)
            classes, y = np.unique(y, return_inverse=True)
            if len(classes) < 2:
                raise ValueError(
                    f"{type(self).__name__} needs samples of at least 2 classes in the data "
                    f"(with a positive sample_weight), but the data holds only one class: "
                    f"{classes[0]!r}")
            class_index = {c: i for i, c in enumerate(classes.tolist())}
        loss, args = self._joker_args(class_index)
        y = np.asarray(y, dtype=np.float64)  # classes as 0 .. K-1: label 1 is positive for two
        progress = self._print_progress if self.verbose else None
        with _input_errors():
            params = core.Joker(loss, **args)
            try:
                model = self._train(params, X, y, sample_weight, progress)
            finally:
                params.close()
        # the fitted attributes, once the fit succeeded
        if classifier:
            self.classes_ = classes
        self.model_ = model
        # KRR on features that starts at its exact optimum (a direct solve) runs no DBCD-TR
        # iteration; the solve counts as one, as scikit-learn asks of iterative estimators
        self.n_iter_ = max(model.iterations, 1)
        stop = model.stop_reason
        if stop in _UNCONVERGED:
            limit = _UNCONVERGED[stop].format(max_iter=self.max_iter, time_limit=self.time_limit)
            warnings.warn(
                f"{type(self).__name__} did not converge: the fit stopped at {limit} after "
                f"{model.iterations} iterations, with the relative duality gap "
                f"{model.gap:.3g} above tol={self.tol}; increase {stop} or tol "
                f"(model_.stop_reason is {stop!r})", ConvergenceWarning, stacklevel=4)
        if self.verbose:
            print(f"{type(self).__name__}: {self.model_.stop_reason} after {self.n_iter_} "
                  f"iterations, gap {self.model_.gap:.3e}, {self.model_.device}")
        return self

    def _train(self, params, X, y, sample_weight, progress):
        """The library's fit of the validated input (the CV estimators search instead)."""
        return params.fit(X, y, sample_weight=sample_weight, progress=progress)

    def _print_progress(self, p):
        print(f"{type(self).__name__}: iter {p.iter}, epoch {p.epoch:.2f}, gap {p.gap:.3e}, "
              f"{p.seconds:.2f} s")

    def __sklearn_tags__(self):
        # scikit-learn >= 1.6 asks: scipy.sparse input is taken (as CSR). scikit-learn 1.5 has
        # no such tag and never calls this.
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _expected_failed_checks(self):
        """The scikit-learn estimator checks these parameters fail, with why: pass them as
        ``check_estimator(est, expected_failed_checks=est._expected_failed_checks())`` (as
        scikit-learn declares the checks its own SVC fails). Weights mean repetition in every
        data-driven step (standardisation, target scaling, the width), but an iterative fit
        equals the fit on repeated rows only to its tolerance, not to rtol 1e-7; KernelRidge on
        the exact kernel of up to 2,048 rows is solved directly and passes them."""
        return dict(_ITERATIVE_WEIGHT_CHECKS)

    def _model_output(self, method, X):
        check_is_fitted(self)
        X = _check_X(self, X)
        with _input_errors():
            return getattr(self.model_, method)(X)


def _votes(pairs, k):
    """One-vs-one pair columns as one column per class: votes plus the class's summed
    decision values mapped into (-1/3, 1/3), so that the votes decide and the sums break ties
    (the library's rule, and scikit-learn's ``SVC`` output)."""
    votes = np.zeros((pairs.shape[0], k))
    lean = np.zeros((pairs.shape[0], k))
    p = 0
    for a in range(k):
        for b in range(a + 1, k):
            f = pairs[:, p]
            votes[:, b] += f >= 0
            votes[:, a] += f < 0
            lean[:, b] += f
            lean[:, a] -= f
            p += 1
    return votes + lean / (3 * (np.abs(lean) + 1))


class _JokerClassifier(ClassifierMixin, _JokerEstimator):
    """A classifier: labels of any type; more than two classes one-vs-rest or one-vs-one."""

    _task = "classification"
    _parameter_constraints: dict = {**_COMMON_CONSTRAINTS, **_CLASSIFIER_CONSTRAINTS}

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fits the classifier.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; float32 stays float32, scipy.sparse is used as CSR.
        y : array-like of shape (n_samples,)
            Class labels (numbers or strings), at least two classes.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a row of weight 0 is left out of the fit.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight, classifier=True)

    def decision_function(self, X):
        """Decision values: positive for ``classes_[1]`` with two classes, else one column per
        class. A one-vs-one model (``model_.multiclass == "ovo"``) gives, as scikit-learn's
        ``SVC`` does, each class's votes plus its pairs' summed decision values squashed into
        (-1/3, 1/3), so that the largest column is the predicted class; with
        ``decision_function_shape="ovo"``, the pair columns themselves, ``(0, 1), (0, 2), ...,
        (1, 2), ...``, each positive for the pair's second class.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples, with the columns of the training data.

        Returns
        -------
        scores : ndarray of shape (n_samples,), (n_samples, n_classes) or (n_samples, n_pairs)
            The decision values.
        """
        d = self._model_output("decision_function", X)
        shape = getattr(self, "decision_function_shape", "ovr")
        if shape not in ("ovr", "ovo"):
            raise ValueError(f"decision_function_shape={shape!r}: use 'ovr' or 'ovo'")
        if d.ndim == 2 and self.model_.multiclass == "ovo" and shape == "ovr":
            return _votes(d, len(self.classes_))
        return d

    def predict(self, X):
        """Predicted class labels: the class of the largest decision value (one-vs-rest), or
        the one with the most votes (one-vs-one; ties go to the larger summed decision values).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples, with the columns of the training data.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Labels taken from ``classes_``.
        """
        # the library's labels are the class indices the fit was given (checked fitted first)
        index = self._model_output("predict", X).astype(np.intp)
        return self.classes_[index]


class _JokerRegressor(RegressorMixin, _JokerEstimator):
    """A regressor of one target."""

    _task = "regression"
    _parameter_constraints: dict = {**_COMMON_CONSTRAINTS, **_REGRESSOR_CONSTRAINTS}

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fits the regressor.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; float32 stays float32, scipy.sparse is used as CSR.
        y : array-like of shape (n_samples,)
            Target values.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a row of weight 0 is left out of the fit.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight, classifier=False)

    def predict(self, X):
        """Predicted values.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples, with the columns of the training data.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            The predictions.
        """
        return self._model_output("predict", X)


_COMMON_DOC = """
    kernel : {"rbf", "gaussian", "laplacian", "matern12", "matern32", "matern52"}, default="rbf"
        The kernel; "rbf" (scikit-learn's name) is the Gaussian ``exp(-gamma ||x - z||^2)``.
    gamma : float or {"auto", "median", "msd", "scale"}, default="auto"
        The kernel scale, or the rule that picks it from the training data: the median
        heuristic, 1 / mean squared distance, or scikit-learn's "scale" (``1 / (d Var X)``);
        "auto", as ``joker train``, is "scale" on the exact kernel and Nystrom maps and "msd"
        on random features.
        With ``standardize=True`` it applies to the standardised features.
    n_components : int, None or "auto", default="auto"
        "auto": the exact kernel where its matrix fits ``kernel_cache``, beyond it a Nystrom
        map of 2,048 centres where its features fit it, else 2,048 random features (what
        ``joker train`` does when nothing is set). A number: that many random features (or
        Nystrom centres, see ``features``). None: the exact kernel.
    features : {"rff", "nystrom"}, default="rff"
        Random Fourier features or a Nystrom map over ``n_components`` centres chosen by
        ``centers`` ("leverage", "kmeans" or "uniform").
    centers : {"leverage", "kmeans", "uniform"}, default="leverage"
        How Nystrom centres are chosen.
    precision : {"f32", "f64"}, default="f32"
        Working precision of the solver.
    standardize : bool, default=True
        Standardise the features with the training statistics (kept in the model).
    tol : float, default=1e-3
        Stop at this relative duality gap.
    max_iter : int, default=10000
        The most solver iterations (block updates).
    block_size : int or None, default=None
        Rows per block of the solver (None: 512, or 256 on a cached exact kernel, 128 there
        for hinge, SVR and L1).
    time_limit : float or None, default=None
        Stop after this many seconds (None: no limit).
    check_every : int, default=0
        Iterations between convergence checks (0: the library's choice).
    max_memory : int or None, default=None
        None refuses a fit estimated to need over 80% of the available memory; 0 sets no
        limit; any other value is a limit in bytes.
    device : str or int, default="auto"
        "auto", "cpu", "cuda", "cuda:N" or N (see :class:`joker.Joker`).
    nystrom_rank : int, default=0
        Rank of a Nystrom preconditioner for the block solver (0: none).
    tr_model : {"auto", "gram", "kernel"}, default="auto"
        The trust region's model curvature with random features.
    kernel_cache : int, default=2 GiB
        Bytes the exact kernel matrix (or a Nystrom map's features) may take when formed
        once and kept.
    working_set : {"auto", "random", "shrinking", "greedy"}, default="auto"
        How the solver picks each block.
    auto_exact : bool or None, default=None
        Train on the exact kernel where its matrix fits ``kernel_cache``; beyond, on a
        Nystrom map of ``n_components`` centres where its features fit it (on the CPU), else
        on ``n_components`` random features. None: on for ``n_components="auto"``, off for a
        number of features.
    stall : bool, default=True
        Also stop when the gap is within ``10 * tol`` and no longer improving.
    tr_norm : {"auto", "euclidean", "diagonal"}, default="auto"
        The norm of the block solves' trust-region steps: "diagonal" (Jacobi-preconditioned
        CG) for the losses whose curvature varies along the box (KLR, Lp), "euclidean"
        otherwise under "auto".
    bias : float, default=0.0
        Value ``B >= 0`` of a constant feature appended to the random features, as LIBLINEAR's
        ``-B``: the decision function gets an intercept (0: none). Random features by the
        default solver only.
    random_state : int, RandomState instance or None, default=None
        Seed of the random features, centres and blocks: an int >= 0 is the seed itself (the
        same fit every time), None or a RandomState draws one at each fit.
    verbose : int, default=0
        Above 0, print the solver's progress at every check and a summary; 0 prints nothing."""

_FITTED_DOC = """
    Attributes
    ----------
    model_ : joker.Model
        The trained model (low-level layer): ``stop_reason``, ``gap``, ``gamma``, ``device``...
    n_features_in_ : int
        Number of features seen in fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names, when X was a DataFrame with string column names.
    n_iter_ : int
        Solver iterations run (at least 1: a KRR fit started at its exact optimum, which runs
        none, counts its direct solve as one)."""


class KernelSVC(_JokerClassifier):
    __doc__ = f"""Kernel support vector classifier: the L2-SVC (squared hinge) or L1-SVC (hinge).

    Trained by joker's dual block coordinate descent on random features or the exact kernel.

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularization strength (joker's ``c = 1 / lambda``).
    loss : {{"squared_hinge", "hinge"}}, default="squared_hinge"
        The L2-SVC's squared hinge (joker's "l2-svc") or the L1-SVC's hinge ("l1-svc"), as in
        scikit-learn's ``LinearSVC``.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, ``{{label: weight}}``, or "balanced" (inversely proportional
        to the class frequencies).
    multiclass : {{"auto", "ovr", "ovo"}}, default="auto"
        More than two classes: one-vs-rest (a decision column per class), one-vs-one (a
        column per pair of classes, trained on the pair's rows; votes decide, as in
        scikit-learn's ``SVC``), or "auto": one-vs-one on the exact kernel, one-vs-rest with
        features; the scheme taken is ``model_.multiclass``.
    decision_function_shape : {{"ovr", "ovo"}}, default="ovr"
        The columns of ``decision_function`` for a one-vs-one model: one per class (votes
        and summed decision values, as scikit-learn's ``SVC``) or one per pair.
    newton_start : bool, default=True
        The squared hinge with a feature map of at most 4,096 features: start from its optimum,
        found in the primal by a finite Newton method (the fit then usually ends at its first
        check); False runs the block coordinate descent from zero.
    probability : bool, default=False
        Calibrate class probabilities for ``predict_proba``: after the fit, Platt's sigmoid per
        decision column is fitted on decision values from 5 stratified cross-validation folds,
        as scikit-learn's ``SVC(probability=True)`` (LIBSVM's ``-b 1``); the fit costs about
        5 more fits on 4/5 of the rows. One-vs-one pairs are coupled as LIBSVM couples them.{_COMMON_DOC}
{_FITTED_DOC}
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    """

    _LOSSES = {"squared_hinge": "l2-svc", "hinge": "l1-svc"}
    _parameter_constraints: dict = {
        **_JokerClassifier._parameter_constraints,
        "loss": [StrOptions(set(_LOSSES))],
        "newton_start": ["boolean"],
        "probability": ["boolean"],
    }

    def __init__(self, C=1.0, *, loss="squared_hinge", kernel="rbf", gamma="auto",
                 n_components="auto", class_weight=None, features="rff", centers="leverage",
                 precision="f32", standardize=True, tol=1e-3, max_iter=10000, block_size=None,
                 time_limit=None, check_every=0, max_memory=None, device="auto", nystrom_rank=0,
                 tr_model="auto", kernel_cache=2 << 30, working_set="auto", auto_exact=None,
                 stall=True, tr_norm="auto", bias=0.0, multiclass="auto",
                 decision_function_shape="ovr", newton_start=True, probability=False,
                 random_state=None, verbose=0):
        self.C = C
        self.loss = loss
        self.kernel = kernel
        self.gamma = gamma
        self.n_components = n_components
        self.class_weight = class_weight
        self.features = features
        self.centers = centers
        self.precision = precision
        self.standardize = standardize
        self.tol = tol
        self.max_iter = max_iter
        self.block_size = block_size
        self.time_limit = time_limit
        self.check_every = check_every
        self.max_memory = max_memory
        self.device = device
        self.nystrom_rank = nystrom_rank
        self.tr_model = tr_model
        self.kernel_cache = kernel_cache
        self.working_set = working_set
        self.auto_exact = auto_exact
        self.stall = stall
        self.tr_norm = tr_norm
        self.bias = bias
        self.multiclass = multiclass
        self.decision_function_shape = decision_function_shape
        self.newton_start = newton_start
        self.probability = probability
        self.random_state = random_state
        self.verbose = verbose

    def _loss(self):
        if self.loss not in self._LOSSES:
            raise ValueError(f"loss={self.loss!r}: use one of {list(self._LOSSES)}")
        return self._LOSSES[self.loss], 0.0

    def _more_tags(self):
        # scikit-learn 1.5 reads the checks to skip here (newer versions take
        # expected_failed_checks instead: see _expected_failed_checks)
        if self.probability:
            return {"_xfail_checks": {"check_sample_weights_invariance": _ZERO_WEIGHT_FOLDS,
                                      "check_classifiers_train": _PROBA_ARGMAX}}
        return {}

    def __sklearn_tags__(self):
        # defined beside _more_tags, as scikit-learn >= 1.6 asks of a class that has both
        return super().__sklearn_tags__()

    def _expected_failed_checks(self):
        checks = super()._expected_failed_checks()
        if self.probability:
            # the folds that calibrate the probabilities are drawn over the rows in their
            # order, so rows with zero weight, dropped, reorder the others
            checks.update(check_sample_weights_invariance=_ZERO_WEIGHT_FOLDS,
                          check_classifiers_train=_PROBA_ARGMAX)
        return checks

    def _check_proba(self):
        if not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    @available_if(_check_proba)
    def predict_proba(self, X):
        """Class probabilities, calibrated by Platt scaling (``probability=True``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples, with the columns of the training data.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities in the order of ``classes_``; each row sums to 1. Their argmax may
            differ from ``predict`` on a few rows near the boundary (as with scikit-learn's
            ``SVC``), since the sigmoids were fitted on cross-validated decision values.
        """
        return self._model_output("predict_proba", X)

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """Logarithms of the calibrated class probabilities.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples, with the columns of the training data.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            ``log(predict_proba(X))``.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


class KernelLogisticRegression(_JokerClassifier):
    __doc__ = f"""Kernel logistic regression (joker's "klr"), with class probabilities.

    With more than two classes, ``predict_proba`` normalises the one-vs-rest probabilities, or
    couples the one-vs-one pairs' probabilities (Price et al., 1995).

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularization strength (joker's ``c = 1 / lambda``).
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, ``{{label: weight}}``, or "balanced" (inversely proportional
        to the class frequencies).
    multiclass : {{"auto", "ovr", "ovo"}}, default="auto"
        More than two classes: one-vs-rest (a decision column per class), one-vs-one (a
        column per pair of classes, trained on the pair's rows; votes decide, as in
        scikit-learn's ``SVC``), or "auto": one-vs-one on the exact kernel, one-vs-rest with
        features; the scheme taken is ``model_.multiclass``.
    decision_function_shape : {{"ovr", "ovo"}}, default="ovr"
        The columns of ``decision_function`` for a one-vs-one model: one per class (votes
        and summed decision values, as scikit-learn's ``SVC``) or one per pair.{_COMMON_DOC}
{_FITTED_DOC}
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    """

    def __init__(self, C=1.0, *, kernel="rbf", gamma="auto", n_components="auto",
                 class_weight=None, features="rff", centers="leverage", precision="f32",
                 standardize=True, tol=1e-3, max_iter=10000, block_size=None, time_limit=None,
                 check_every=0, max_memory=None, device="auto", nystrom_rank=0, tr_model="auto",
                 kernel_cache=2 << 30, working_set="auto", auto_exact=None, stall=True,
                 tr_norm="auto", bias=0.0,
                 multiclass="auto", decision_function_shape="ovr", random_state=None,
                 verbose=0):
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.n_components = n_components
        self.class_weight = class_weight
        self.features = features
        self.centers = centers
        self.precision = precision
        self.standardize = standardize
        self.tol = tol
        self.max_iter = max_iter
        self.block_size = block_size
        self.time_limit = time_limit
        self.check_every = check_every
        self.max_memory = max_memory
        self.device = device
        self.nystrom_rank = nystrom_rank
        self.tr_model = tr_model
        self.kernel_cache = kernel_cache
        self.working_set = working_set
        self.auto_exact = auto_exact
        self.stall = stall
        self.tr_norm = tr_norm
        self.bias = bias
        self.multiclass = multiclass
        self.decision_function_shape = decision_function_shape
        self.random_state = random_state
        self.verbose = verbose

    def _loss(self):
        return "klr", 0.0

    def predict_proba(self, X):
        """Class probabilities.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples, with the columns of the training data.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities in the order of ``classes_``; each row sums to 1.
        """
        return self._model_output("predict_proba", X)

    def predict_log_proba(self, X):
        """Logarithms of the class probabilities.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples, with the columns of the training data.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            ``log(predict_proba(X))``.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


_REGRESSION_DOC = """
    normalize_target : bool, default=True
        Standardise the target with its training mean and deviation (predictions are in the
        original units); the loss's threshold then applies to the standardised target."""


class KernelRidge(_JokerRegressor):
    __doc__ = f"""Kernel ridge regression (joker's "krr"): squared error, ``(K + alpha I) a = y``.

    With the exact kernel (``n_components=None``), ``standardize=False`` and
    ``normalize_target=False`` it is the model of scikit-learn's ``KernelRidge`` with the same
    ``alpha``, ``kernel="rbf"`` and ``gamma``. ``full_krr`` solves it with ASkotch, Skotch or
    Nystrom-preconditioned CG instead of joker's block coordinate descent.

    Parameters
    ----------
    alpha : float, default=1.0
        Regularization strength, ``1 / C`` (joker's ``lambda``), as in scikit-learn's
        ``KernelRidge``.{_REGRESSION_DOC}
    full_krr : {{None, "askotch", "skotch", "pcg"}}, default=None
        A solver for exact kernel ridge regression (needs ``n_components=None``), with
        ``krr_blocks`` blocks, a Nystrom preconditioner of rank ``krr_rank``, stopping at
        relative residual ``krr_tol`` or after ``max_iter`` iterations;
        ``krr_store_preconditioners`` keeps the block preconditioners.
    krr_blocks, krr_rank, krr_tol, krr_store_preconditioners
        See ``full_krr``.
    direct_krr : bool, default=True
        With a feature map of at most 4,096 features, start from the exact optimum, solved in
        the primal (one pass and a Cholesky factor; the fit then usually ends at its first
        check); False runs the block coordinate descent from zero.{_COMMON_DOC}
{_FITTED_DOC}
    """

    def __init__(self, alpha=1.0, *, kernel="rbf", gamma="auto", n_components="auto",
                 normalize_target=True, full_krr=None, krr_blocks=10, krr_rank=100, krr_tol=1e-6,
                 krr_store_preconditioners=False, features="rff", centers="leverage",
                 precision="f32", standardize=True, tol=1e-3, max_iter=10000, block_size=None,
                 time_limit=None, check_every=0, max_memory=None, device="auto", nystrom_rank=0,
                 tr_model="auto", kernel_cache=2 << 30, working_set="auto", auto_exact=None,
                 stall=True, tr_norm="auto", bias=0.0, direct_krr=True, random_state=None,
                 verbose=0):
        self.alpha = alpha
        self.kernel = kernel
        self.gamma = gamma
        self.n_components = n_components
        self.normalize_target = normalize_target
        self.full_krr = full_krr
        self.krr_blocks = krr_blocks
        self.krr_rank = krr_rank
        self.krr_tol = krr_tol
        self.krr_store_preconditioners = krr_store_preconditioners
        self.features = features
        self.centers = centers
        self.precision = precision
        self.standardize = standardize
        self.tol = tol
        self.max_iter = max_iter
        self.block_size = block_size
        self.time_limit = time_limit
        self.check_every = check_every
        self.max_memory = max_memory
        self.device = device
        self.nystrom_rank = nystrom_rank
        self.tr_model = tr_model
        self.kernel_cache = kernel_cache
        self.working_set = working_set
        self.auto_exact = auto_exact
        self.stall = stall
        self.tr_norm = tr_norm
        self.bias = bias
        self.direct_krr = direct_krr
        self.random_state = random_state
        self.verbose = verbose

    _parameter_constraints: dict = {
        **_JokerRegressor._parameter_constraints,
        "alpha": [_POSITIVE],
        "full_krr": [StrOptions({"askotch", "skotch", "pcg"}), None],
        "krr_blocks": [_size(1)],
        "krr_rank": [_size(1)],
        "krr_tol": [_POSITIVE],
        "krr_store_preconditioners": ["boolean"],
        "direct_krr": ["boolean"],
    }

    def _loss(self):
        return "krr", 0.0

    def _expected_failed_checks(self):
        # solved directly (the exact kernel up to 2,048 rows, a feature map up to 4,096
        # features), the fit is the optimum, and weights equal repeated rows to rounding
        return {} if self.full_krr is None else super()._expected_failed_checks()

    def _regularization(self):
        return {"lambda_": float(self.alpha)}


class KernelSVR(_JokerRegressor):
    __doc__ = f"""Kernel support vector regression (joker's "svr"): ``max(0, |y - u| - epsilon)``.

    The model has an unregularised intercept beside the kernel expansion, as scikit-learn's
    ``SVR`` (joker's default for this loss).

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularization strength (joker's ``c = 1 / lambda``).
    epsilon : float, default=0.1
        Width of the insensitive tube, >= 0 (of the standardised target with
        ``normalize_target=True``).{_REGRESSION_DOC}{_COMMON_DOC}
{_FITTED_DOC}
    """

    def __init__(self, C=1.0, *, epsilon=0.1, kernel="rbf", gamma="auto", n_components="auto",
                 normalize_target=True, features="rff", centers="leverage", precision="f32",
                 standardize=True, tol=1e-3, max_iter=10000, block_size=None, time_limit=None,
                 check_every=0, max_memory=None, device="auto", nystrom_rank=0, tr_model="auto",
                 kernel_cache=2 << 30, working_set="auto", auto_exact=None, stall=True,
                 tr_norm="auto", bias=0.0,
                 random_state=None, verbose=0):
        self.C = C
        self.epsilon = epsilon
        self.kernel = kernel
        self.gamma = gamma
        self.n_components = n_components
        self.normalize_target = normalize_target
        self.features = features
        self.centers = centers
        self.precision = precision
        self.standardize = standardize
        self.tol = tol
        self.max_iter = max_iter
        self.block_size = block_size
        self.time_limit = time_limit
        self.check_every = check_every
        self.max_memory = max_memory
        self.device = device
        self.nystrom_rank = nystrom_rank
        self.tr_model = tr_model
        self.kernel_cache = kernel_cache
        self.working_set = working_set
        self.auto_exact = auto_exact
        self.stall = stall
        self.tr_norm = tr_norm
        self.bias = bias
        self.random_state = random_state
        self.verbose = verbose

    _parameter_constraints: dict = {**_JokerRegressor._parameter_constraints, "C": [_POSITIVE],
                                    "epsilon": [_NON_NEGATIVE]}

    def _loss(self):
        return "svr", float(self.epsilon)


class KernelHuberRegressor(_JokerRegressor):
    __doc__ = f"""Kernel Huber regression (joker's "huber"): squared error for residuals up to
    ``delta``, absolute error beyond, so that outliers weigh less than in kernel ridge. The
    model has an unregularised intercept beside the kernel expansion (joker's default for this
    loss).

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularization strength (joker's ``c = 1 / lambda``).
    delta : float, default=1.0
        The residual (of the standardised target with ``normalize_target=True``) where the
        loss turns from squared to absolute, > 0. Unlike the ``epsilon`` of scikit-learn's
        ``HuberRegressor`` it is not relative to a scale fitted with the model.{_REGRESSION_DOC}{_COMMON_DOC}
{_FITTED_DOC}
    """

    def __init__(self, C=1.0, *, delta=1.0, kernel="rbf", gamma="auto", n_components="auto",
                 normalize_target=True, features="rff", centers="leverage", precision="f32",
                 standardize=True, tol=1e-3, max_iter=10000, block_size=None, time_limit=None,
                 check_every=0, max_memory=None, device="auto", nystrom_rank=0, tr_model="auto",
                 kernel_cache=2 << 30, working_set="auto", auto_exact=None, stall=True,
                 tr_norm="auto", bias=0.0,
                 random_state=None, verbose=0):
        self.C = C
        self.delta = delta
        self.kernel = kernel
        self.gamma = gamma
        self.n_components = n_components
        self.normalize_target = normalize_target
        self.features = features
        self.centers = centers
        self.precision = precision
        self.standardize = standardize
        self.tol = tol
        self.max_iter = max_iter
        self.block_size = block_size
        self.time_limit = time_limit
        self.check_every = check_every
        self.max_memory = max_memory
        self.device = device
        self.nystrom_rank = nystrom_rank
        self.tr_model = tr_model
        self.kernel_cache = kernel_cache
        self.working_set = working_set
        self.auto_exact = auto_exact
        self.stall = stall
        self.tr_norm = tr_norm
        self.bias = bias
        self.random_state = random_state
        self.verbose = verbose

    _parameter_constraints: dict = {**_JokerRegressor._parameter_constraints, "C": [_POSITIVE],
                                    "delta": [_POSITIVE]}

    def _loss(self):
        return "huber", float(self.delta)


class KernelLpRegressor(_JokerRegressor):
    __doc__ = f"""Kernel Lp regression: the loss ``|y - u|^p / p``; ``p=1`` is least absolute
    deviations (joker's "l1", the conditional median), ``p > 1`` joker's "lp". The model has an
    unregularised intercept beside the kernel expansion (joker's default for these losses).

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularization strength (joker's ``c = 1 / lambda``).
    p : float, default=1.0
        The exponent, >= 1: 1 for L1 regression, between 1 and 2 for a loss between absolute
        and squared error.{_REGRESSION_DOC}{_COMMON_DOC}
{_FITTED_DOC}
    """

    def __init__(self, C=1.0, *, p=1.0, kernel="rbf", gamma="auto", n_components="auto",
                 normalize_target=True, features="rff", centers="leverage", precision="f32",
                 standardize=True, tol=1e-3, max_iter=10000, block_size=None, time_limit=None,
                 check_every=0, max_memory=None, device="auto", nystrom_rank=0, tr_model="auto",
                 kernel_cache=2 << 30, working_set="auto", auto_exact=None, stall=True,
                 tr_norm="auto", bias=0.0,
                 random_state=None, verbose=0):
        self.C = C
        self.p = p
        self.kernel = kernel
        self.gamma = gamma
        self.n_components = n_components
        self.normalize_target = normalize_target
        self.features = features
        self.centers = centers
        self.precision = precision
        self.standardize = standardize
        self.tol = tol
        self.max_iter = max_iter
        self.block_size = block_size
        self.time_limit = time_limit
        self.check_every = check_every
        self.max_memory = max_memory
        self.device = device
        self.nystrom_rank = nystrom_rank
        self.tr_model = tr_model
        self.kernel_cache = kernel_cache
        self.working_set = working_set
        self.auto_exact = auto_exact
        self.stall = stall
        self.tr_norm = tr_norm
        self.bias = bias
        self.random_state = random_state
        self.verbose = verbose

    _parameter_constraints: dict = {**_JokerRegressor._parameter_constraints, "C": [_POSITIVE],
                                    "p": [Interval(Real, 1, None, closed="left")]}

    def _loss(self):
        p = float(self.p)
        if not p >= 1:
            raise ValueError(f"p={self.p!r}: the exponent must be >= 1 (1: L1 regression)")
        return ("l1", 0.0) if p == 1 else ("lp", p)


def _search(est, params, X, y, values, name):
    """joker's search over ``values`` of ``name`` ("C", or "alpha" = 1 / C) x
    ``est.gamma_factors`` by ``est.cv``-fold cross-validation; sets ``cv_results_``,
    ``best_index_``, ``best_params_`` and ``best_score_`` as GridSearchCV does and returns the
    refitted model and the winner's parameters."""
    rs = est.random_state
    seed = int(rs) if isinstance(rs, (int, np.integer)) and not isinstance(rs, bool) else 0
    values = np.asarray(values, dtype=np.float64).ravel()
    cs = values if name == "C" else 1.0 / values

    def to_param(c):
        return c if name == "C" else 1.0 / c
    factors = np.asarray(est.gamma_factors, dtype=np.float64).ravel()
    folds = min(int(est.cv), X.shape[0])
    model = params.search(X, y, c_values=cs, gamma_factors=factors, folds=folds, seed=seed)
    rec = model.search()
    cands = rec["candidates"]
    means = np.array([c["mean"] for c in cands])
    order = np.argsort(-means, kind="stable")
    ranks = np.empty(len(cands), dtype=np.int32)
    ranks[order] = np.arange(1, len(cands) + 1)
    est.cv_results_ = {
        "params": [{name: to_param(c["c"]), "gamma": c["gamma"]} for c in cands],
        "mean_test_score": means,
        "std_test_score": np.array([c["spread"] for c in cands]),
        "rank_test_score": ranks,
        **{f"split{k}_test_score": np.array([c["scores"][k] for c in cands])
           for k in range(rec["folds"])},
    }
    est.best_index_ = rec["best"]
    best = cands[est.best_index_]
    est.best_params_ = {name: to_param(best["c"]), "gamma": best["gamma"]}
    est.best_score_ = best["mean"]
    return model, est.best_params_


class _SearchCV:
    """What the CV estimators share: the grid ``_GRID`` of the searched parameter ``_SEARCHED``
    ("C", or "alpha" = 1 / C) searched by :func:`_search` in place of the library's fit, the
    winner kept as ``C_`` or ``alpha_``."""

    _GRID, _SEARCHED = "Cs", "C"

    def _regularization(self):
        # replaced by each candidate's
        return {"c": 1.0} if self._SEARCHED == "C" else {"lambda_": 1.0}

    def _train(self, params, X, y, sample_weight, progress):
        model, best = _search(self, params, X, y, getattr(self, self._GRID), self._SEARCHED)
        setattr(self, f"{self._SEARCHED}_", best[self._SEARCHED])
        return model


class KernelSVCCV(_SearchCV, KernelSVC):
    __doc__ = f"""A kernel SVM whose ``C`` and kernel width are chosen by cross-validation, as
    ``joker train --search`` (joker's own search: each fold's fits start from the previous
    ``C``'s duals on the exact kernel), then refitted on all rows.

    Parameters
    ----------
    Cs : sequence of float, default=(0.1, 1.0, 10.0, 100.0)
        The values of ``C`` tried.
    gamma_factors : sequence of float, default=(0.25, 0.5, 1.0, 2.0, 4.0)
        The widths tried, as factors of the width ``gamma`` gives (1: that width).
    cv : int, default=3
        Cross-validation folds (the rows shuffled by ``random_state``, 0 when None).

    The other parameters are those of :class:`KernelSVC` (its ``C`` is the search's).

    Attributes
    ----------
    best_params_ : dict
        ``{{"C": C, "gamma": gamma}}`` of the winner, refitted on all rows as ``model_``.
    best_score_ : float
        The winner's mean held-out accuracy.
    best_index_ : int
        The winner's index in ``cv_results_``.
    cv_results_ : dict
        As scikit-learn's ``GridSearchCV``: ``params``, ``mean_test_score``,
        ``std_test_score``, ``split<k>_test_score`` and ``rank_test_score``.
    C_ : float
        The winner's ``C``.
    """

    _parameter_constraints: dict = {
        **KernelSVC._parameter_constraints,
        "Cs": ["array-like"],
        "gamma_factors": ["array-like"],
        "cv": [Interval(Integral, 2, None, closed="left")],
    }
    _parameter_constraints.pop("C")

    def __init__(self, Cs=(0.1, 1.0, 10.0, 100.0), *, gamma_factors=(0.25, 0.5, 1.0, 2.0, 4.0),
                 cv=3, loss="squared_hinge", kernel="rbf", gamma="auto", n_components="auto",
                 class_weight=None, features="rff", centers="leverage", precision="f32",
                 standardize=True, tol=1e-3, max_iter=10000, block_size=None, time_limit=None,
                 check_every=0, max_memory=None, device="auto", nystrom_rank=0, tr_model="auto",
                 kernel_cache=2 << 30, working_set="auto", auto_exact=None, stall=True,
                 tr_norm="auto", bias=0.0, multiclass="auto", decision_function_shape="ovr",
                 newton_start=True, probability=False, random_state=None, verbose=0):
        super().__init__(
            1.0, loss=loss, kernel=kernel, gamma=gamma, n_components=n_components,
            class_weight=class_weight, features=features, centers=centers, precision=precision,
            standardize=standardize, tol=tol, max_iter=max_iter, block_size=block_size,
            time_limit=time_limit, check_every=check_every, max_memory=max_memory,
            device=device, nystrom_rank=nystrom_rank, tr_model=tr_model,
            kernel_cache=kernel_cache, working_set=working_set, auto_exact=auto_exact,
            stall=stall, tr_norm=tr_norm, bias=bias, multiclass=multiclass,
            decision_function_shape=decision_function_shape, newton_start=newton_start,
            probability=probability, random_state=random_state, verbose=verbose)
        del self.C  # not a parameter here: the search chooses it
        self.Cs = Cs
        self.gamma_factors = gamma_factors
        self.cv = cv

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Searches ``Cs`` x ``gamma_factors`` by ``cv``-fold cross-validation and fits the
        winner on all rows.

        Parameters
        ----------
        X : {{array-like, sparse matrix}} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Class labels, at least two classes.

        Returns
        -------
        self : KernelSVCCV
        """
        return self._fit(X, y, None, classifier=True)



class KernelRidgeCV(_SearchCV, KernelRidge):
    _GRID, _SEARCHED = "alphas", "alpha"

    __doc__ = f"""Kernel ridge regression whose ``alpha`` and kernel width are chosen by
    cross-validation (R^2 on the held-out folds), as ``joker train --search`` does for a
    regression, then refitted on all rows.

    Parameters
    ----------
    alphas : sequence of float, default=(0.01, 0.1, 1.0, 10.0)
        The values of ``alpha`` tried (joker's ``lambda``; ``C = 1 / alpha``).
    gamma_factors : sequence of float, default=(0.25, 0.5, 1.0, 2.0, 4.0)
        The widths tried, as factors of the width ``gamma`` gives (1: that width).
    cv : int, default=3
        Cross-validation folds (the rows shuffled by ``random_state``, 0 when None).

    The other parameters are those of :class:`KernelRidge` (its ``alpha`` is the search's).

    Attributes
    ----------
    best_params_ : dict
        ``{{"alpha": alpha, "gamma": gamma}}`` of the winner, refitted on all rows as
        ``model_``.
    best_score_ : float
        The winner's mean held-out R^2.
    best_index_ : int
        The winner's index in ``cv_results_``.
    cv_results_ : dict
        As scikit-learn's ``GridSearchCV``: ``params``, ``mean_test_score``,
        ``std_test_score``, ``split<k>_test_score`` and ``rank_test_score``.
    alpha_ : float
        The winner's ``alpha``.
    """

    _parameter_constraints: dict = {
        **KernelRidge._parameter_constraints,
        "alphas": ["array-like"],
        "gamma_factors": ["array-like"],
        "cv": [Interval(Integral, 2, None, closed="left")],
    }
    for _name in ("alpha", "full_krr", "krr_blocks", "krr_rank", "krr_tol",
                  "krr_store_preconditioners"):
        _parameter_constraints.pop(_name)
    del _name

    def __init__(self, alphas=(0.01, 0.1, 1.0, 10.0), *, gamma_factors=(0.25, 0.5, 1.0, 2.0, 4.0),
                 cv=3, kernel="rbf", gamma="auto", n_components="auto", normalize_target=True,
                 features="rff", centers="leverage", precision="f32", standardize=True, tol=1e-3,
                 max_iter=10000, block_size=None, time_limit=None, check_every=0,
                 max_memory=None, device="auto", nystrom_rank=0, tr_model="auto",
                 kernel_cache=2 << 30, working_set="auto", auto_exact=None, stall=True,
                 tr_norm="auto", bias=0.0, direct_krr=True, random_state=None, verbose=0):
        super().__init__(
            1.0, kernel=kernel, gamma=gamma, n_components=n_components,
            normalize_target=normalize_target, features=features, centers=centers,
            precision=precision, standardize=standardize, tol=tol, max_iter=max_iter,
            block_size=block_size, time_limit=time_limit, check_every=check_every,
            max_memory=max_memory, device=device, nystrom_rank=nystrom_rank, tr_model=tr_model,
            kernel_cache=kernel_cache, working_set=working_set, auto_exact=auto_exact,
            stall=stall, tr_norm=tr_norm, bias=bias, direct_krr=direct_krr,
            random_state=random_state, verbose=verbose)
        # not parameters here: the search chooses alpha, and full KRR does not search
        del self.alpha, self.full_krr, self.krr_blocks, self.krr_rank, self.krr_tol
        del self.krr_store_preconditioners
        self.alphas = alphas
        self.gamma_factors = gamma_factors
        self.cv = cv

    def _expected_failed_checks(self):
        return {}  # fit takes no sample_weight: the weight checks do not apply

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Searches ``alphas`` x ``gamma_factors`` by ``cv``-fold cross-validation and fits the
        winner on all rows.

        Parameters
        ----------
        X : {{array-like, sparse matrix}} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Targets.

        Returns
        -------
        self : KernelRidgeCV
        """
        return self._fit(X, y, None, classifier=False)



class KernelLogisticRegressionCV(_SearchCV, KernelLogisticRegression):
    __doc__ = f"""Kernel logistic regression whose ``C`` and kernel width are chosen by
    cross-validation (held-out accuracy), as ``joker train --search`` does, then refitted on all
    rows; ``predict_proba`` gives the refitted model's probabilities.

    Parameters
    ----------
    Cs : sequence of float, default=(0.1, 1.0, 10.0, 100.0)
        The values of ``C`` tried.
    gamma_factors : sequence of float, default=(0.25, 0.5, 1.0, 2.0, 4.0)
        The widths tried, as factors of the width ``gamma`` gives (1: that width).
    cv : int, default=3
        Cross-validation folds (the rows shuffled by ``random_state``, 0 when None).

    The other parameters are those of :class:`KernelLogisticRegression` (its ``C`` is the
    search's).

    Attributes
    ----------
    best_params_ : dict
        ``{{"C": C, "gamma": gamma}}`` of the winner, refitted on all rows as ``model_``.
    best_score_ : float
        The winner's mean held-out accuracy.
    best_index_ : int
        The winner's index in ``cv_results_``.
    cv_results_ : dict
        As scikit-learn's ``GridSearchCV``: ``params``, ``mean_test_score``,
        ``std_test_score``, ``split<k>_test_score`` and ``rank_test_score``.
    C_ : float
        The winner's ``C``.
    """

    _parameter_constraints: dict = {
        **KernelLogisticRegression._parameter_constraints,
        "Cs": ["array-like"],
        "gamma_factors": ["array-like"],
        "cv": [Interval(Integral, 2, None, closed="left")],
    }
    _parameter_constraints.pop("C")

    def __init__(self, Cs=(0.1, 1.0, 10.0, 100.0), *, gamma_factors=(0.25, 0.5, 1.0, 2.0, 4.0),
                 cv=3, kernel="rbf", gamma="auto", n_components="auto", class_weight=None,
                 features="rff", centers="leverage", precision="f32", standardize=True, tol=1e-3,
                 max_iter=10000, block_size=None, time_limit=None, check_every=0,
                 max_memory=None, device="auto", nystrom_rank=0, tr_model="auto",
                 kernel_cache=2 << 30, working_set="auto", auto_exact=None, stall=True,
                 tr_norm="auto", bias=0.0, multiclass="auto", decision_function_shape="ovr",
                 random_state=None, verbose=0):
        super().__init__(
            1.0, kernel=kernel, gamma=gamma, n_components=n_components,
            class_weight=class_weight, features=features, centers=centers, precision=precision,
            standardize=standardize, tol=tol, max_iter=max_iter, block_size=block_size,
            time_limit=time_limit, check_every=check_every, max_memory=max_memory,
            device=device, nystrom_rank=nystrom_rank, tr_model=tr_model,
            kernel_cache=kernel_cache, working_set=working_set, auto_exact=auto_exact,
            stall=stall, tr_norm=tr_norm, bias=bias, multiclass=multiclass,
            decision_function_shape=decision_function_shape, random_state=random_state,
            verbose=verbose)
        del self.C  # not a parameter here: the search chooses it
        self.Cs = Cs
        self.gamma_factors = gamma_factors
        self.cv = cv

    def _expected_failed_checks(self):
        return {}  # fit takes no sample_weight: the weight checks do not apply

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Searches ``Cs`` x ``gamma_factors`` by ``cv``-fold cross-validation and fits the
        winner on all rows.

        Parameters
        ----------
        X : {{array-like, sparse matrix}} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Class labels, at least two classes.

        Returns
        -------
        self : KernelLogisticRegressionCV
        """
        return self._fit(X, y, None, classifier=True)

