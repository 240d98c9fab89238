"""joker: large-scale kernel machines, with scikit-learn estimators.

The estimators (:mod:`joker.estimators`) follow scikit-learn's API::

    import joker
    clf = joker.KernelSVC(C=4.0, n_components=1024).fit(X, y)
    labels = clf.predict(X_test)

They are built on the low-level layer :mod:`joker.core`, a ctypes binding of the C library
``libjoker`` (installed inside this package by ``pip install ./bindings/python``; the
environment variable ``JOKER_LIB`` names another ``libjoker.so``, for development), whose
classes are exported here too: :class:`Joker` (training parameters), :class:`Model` (a trained
model: predict, save, load), :class:`Interrupt`, :class:`JokerError` (and
:class:`JokerValueError`, also a ``ValueError``). The low-level layer needs
numpy only; the estimators import scikit-learn when first used (both are dependencies of the
package).
"""

from .core import (  # noqa: F401
    BANDWIDTHS,
    CENTERS,
    FEATURE_MAPS,
    KERNELS,
    KRR_METHODS,
    LOSSES,
    PRECISIONS,
    TASKS,
    TR_MODELS,
    WORKING_SETS,
    Interrupt,
    Joker,
    JokerError,
    JokerValueError,
    Model,
    Progress,
    device_count,
    gpu_available,
    load,
    version,
)
# The estimators, imported on first use: the low-level layer needs numpy only, and importing
# scikit-learn takes a while.
_ESTIMATORS = ("KernelHuberRegressor", "KernelLogisticRegression", "KernelLogisticRegressionCV",
               "KernelLpRegressor", "KernelRidge", "KernelRidgeCV", "KernelSVC", "KernelSVCCV",
               "KernelSVR")


def __getattr__(name):
    if name in _ESTIMATORS:
        from . import estimators

        return getattr(estimators, name)
    raise AttributeError(f"module 'joker' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_ESTIMATORS))


__version__ = version()

__all__ = ["KernelSVC", "KernelSVCCV", "KernelLogisticRegression", "KernelRidge", "KernelRidgeCV",
           "KernelSVR", "KernelLogisticRegressionCV",
           "KernelHuberRegressor", "KernelLpRegressor", "JokerValueError", "Joker", "Model",
           "Progress", "Interrupt", "JokerError", "load", "version", "gpu_available",
           "device_count"]
