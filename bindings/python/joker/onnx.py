"""ONNX export of a joker model: ``Model.to_onnx(path=None)``, or from the shell
``python -m joker.onnx MODEL.json OUT.onnx``.

The graph (opset 17, built with ``onnx.helper``) takes ``X``, float32 ``n x d``, and gives
``decision`` (float32 ``n x T``: the model's decision values, in target units for regression)
and ``label`` (float32 ``n``: the predicted class label, or the regression value). It computes
what joker's prediction computes (docs/model-format.md), in float64 inside:

- ``(x - center) / scale``, rounded to float32 for an f32 model as joker rounds it;
- random features: ``scale cos(x W^T + b)`` with ``W``, ``b`` and ``scale`` from the library
  (``joker_model_random_features``: they are regenerated from the seed, not stored), rounded
  to the model's precision as joker uses them, then the constant bias feature if any; an f32
  model's features are computed in float32, as joker computes them, an f64 model's in
  float64 (with a polynomial cosine: onnxruntime has no float64 ``Cos``);
- exact kernels and Nystrom models (stored as exact models over their centres): the kernel
  between ``x`` and the support rows (Gaussian and Matern from squared Euclidean distances,
  the Laplacian from L1 distances over an ``n x s x d`` broadcast), times ``alpha``;
- the target scaler, then labels: the sign for two classes (``>= 0``: the second), the last
  largest column for one-vs-rest (joker's tie rule), votes for one-vs-one with ties to the
  class whose columns lean furthest its way, then the lower class.

The outputs are float32, so an f64 model's decision values agree with joker's to float32
rounding (relative 6e-8); an f32 model's differ by float32 rounding inside the features or
kernel, measured below 1e-6 of the model's largest decision value (tests/test_onnx.py). ``onnx`` is needed to export (``pip install onnx``), not to
use the rest of the package.
"""

import json
import math
import os
import sys
import tempfile

import numpy as np

__all__ = ["to_onnx", "main"]

OPSET = 17


def _model_file(model):
    """The model's file as a dict (what Model.save writes)."""
    with tempfile.TemporaryDirectory(prefix="joker-onnx-") as d:
        path = os.path.join(d, "model.json")
        model.save(path, overwrite=True)
        with open(path) as f:
            return json.load(f)


def _random_features(model, m, d):
    """(W row-major m x d, b, scale) of a random-feature model, from the library."""
    from ctypes import POINTER, byref, c_double, c_int32, c_size_t, c_void_p

    from . import core

    f = core._lib.joker_model_random_features
    f.argtypes = [c_void_p, POINTER(c_double), c_size_t, POINTER(c_double), c_size_t,
                  POINTER(c_double)]
    f.restype = c_int32
    w = np.zeros(m * d, dtype=np.float64)
    b = np.zeros(m, dtype=np.float64)
    scale = c_double()
    core._check(f(model._handle(), w.ctypes.data_as(POINTER(c_double)), w.size,
                  b.ctypes.data_as(POINTER(c_double)), b.size, byref(scale)))
    return w.reshape(m, d), b, scale.value


class _Graph:
    """Nodes and constants of the graph being built, with fresh names."""

    def __init__(self):
        from onnx import helper
        self.helper = helper
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, hint):
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, value, hint="c", dtype=np.float64):
        from onnx import numpy_helper
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type, inputs, hint=None, **attrs):
        out = self.name(hint or op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, list(inputs), [out], **attrs))
        return out


def _cos64(g, v):
    """``cos`` of a float64 value (onnxruntime's Cos has no float64 kernel): reduced to
    ``[-pi, pi]`` by ``2 pi round(v / 2 pi)``, then the Taylor series to ``t^32`` (its
    remainder is below 1e-19 on that interval) by Horner's rule in ``t^2``."""
    two_pi = 2.0 * np.pi
    turns = g.op("Round", [g.op("Div", [v, g.const(two_pi)])])
    t = g.op("Sub", [v, g.op("Mul", [turns, g.const(two_pi)])])
    u = g.op("Mul", [t, t])
    coef = [(-1.0) ** k / math.factorial(2 * k) for k in range(17)]
    acc = g.const(coef[-1])
    for c in reversed(coef[:-1]):
        acc = g.op("Add", [g.op("Mul", [acc, u]), g.const(c)])
    return acc


def _kernel_of_distances(g, kind, gamma, z, support):
    """``n x s`` kernel values between the rows of ``z`` (a graph value) and ``support``."""
    family = kind["family"]
    if family == "laplacian":
        diff = g.op("Sub", [g.op("Unsqueeze", [z, g.const([1], dtype=np.int64)]),
                            g.const(support[None, :, :], "support")])
        l1 = g.op("ReduceSum", [g.op("Abs", [diff]), g.const([2], dtype=np.int64)], keepdims=0)
        return g.op("Exp", [g.op("Mul", [l1, g.const(-gamma)])], "kernel")
    # squared Euclidean distances ||z||^2 + ||s||^2 - 2 z s^T, clipped at 0
    zz = g.op("ReduceSumSquare", [z], axes=[1], keepdims=1)
    cross = g.op("MatMul", [z, g.const(support.T * -2.0, "support_t")])
    d2 = g.op("Add", [g.op("Add", [cross, zz]), g.const((support ** 2).sum(axis=1)[None, :])])
    d2 = g.op("Max", [d2, g.const(0.0)])
    if family == "gaussian":
        return g.op("Exp", [g.op("Mul", [d2, g.const(-gamma)])], "kernel")
    if family != "matern":
        raise ValueError(f"unknown kernel family {family!r}")
    r = g.op("Mul", [g.op("Sqrt", [d2]), g.const(gamma)])
    nu = str(kind["nu"])
    if nu == "0.5":
        return g.op("Exp", [g.op("Neg", [r])], "kernel")
    c = {"1.5": np.sqrt(3.0), "2.5": np.sqrt(5.0)}[nu]
    cr = g.op("Mul", [r, g.const(c)])
    poly = g.op("Add", [g.const(1.0), cr])
    if nu == "2.5":
        poly = g.op("Add", [poly, g.op("Mul", [g.op("Mul", [r, r]), g.const(5.0 / 3.0)])])
    return g.op("Mul", [poly, g.op("Exp", [g.op("Neg", [cr])])], "kernel")


def _labels(g, spec, dec):
    """The float64 ``n`` labels from the float64 ``n x T`` decision values ``dec``."""
    t = spec["n_targets"]
    classes = spec.get("classes")
    if spec["task"] != "classification" or not classes:
        return g.op("Reshape", [dec, g.const([-1], dtype=np.int64)], "value")
    classes = np.asarray(classes, dtype=np.float64)
    if t == 1:
        col = g.op("Reshape", [dec, g.const([-1], dtype=np.int64)])
        pos = g.op("GreaterOrEqual", [col, g.const(0.0)])
        return g.op("Where", [pos, g.const(classes[1]), g.const(classes[0])], "label")
    k = len(classes)
    if spec.get("multiclass") == "ovo":
        pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]
        first = np.zeros((len(pairs), k))
        second = np.zeros((len(pairs), k))
        for p, (a, b) in enumerate(pairs):
            first[p, a] = second[p, b] = 1.0
        pos = g.op("Cast", [g.op("GreaterOrEqual", [dec, g.const(0.0)])], to=11)  # DOUBLE
        neg = g.op("Sub", [g.const(1.0), pos])
        votes = g.op("Add", [g.op("MatMul", [pos, g.const(second)]),
                             g.op("MatMul", [neg, g.const(first)])], "votes")
        lean = g.op("MatMul", [dec, g.const(second - first)], "lean")
        top = g.op("ReduceMax", [votes], axes=[1], keepdims=1)
        tied = g.op("Equal", [votes, top])
        masked = g.op("Where", [tied, lean, g.const(-np.inf)])
        index = g.op("ArgMax", [masked], axis=1, keepdims=0)  # the first: the lower class
    else:
        # joker takes the last of equal largest columns
        index = g.op("ArgMax", [dec], axis=1, keepdims=0, select_last_index=1)
    return g.op("Gather", [g.const(classes, "classes"), index], "label")


def build(model):
    """The ONNX ``ModelProto`` of a :class:`joker.Model` (see the module's documentation)."""
    try:
        import onnx
        from onnx import TensorProto
    except ImportError:
        raise ImportError("exporting to ONNX needs the onnx package: pip install onnx") from None
    spec = _model_file(model)
    d, t = spec["n_features"], spec["n_targets"]
    f32 = spec["precision"] == "f32"
    g = _Graph()
    h = g.helper

    x = g.op("Cast", ["X"], "x64", to=TensorProto.DOUBLE)
    st = spec["standardizer"]
    z = g.op("Div", [g.op("Sub", [x, g.const(st["center"], "center")]), g.const(st["scale"], "scale")],
             "standardized")
    if f32:  # joker rounds the standardised rows to the model's precision
        z = g.op("Cast", [g.op("Cast", [z], to=TensorProto.FLOAT)], "standardized", to=TensorProto.DOUBLE)

    rep = spec["representation"]
    if rep["type"] == "random_features":
        m = rep["n_components"]
        w, b, scale = _random_features(model, m, d)
        mp = m + (1 if rep.get("bias", 0) else 0)
        theta = np.asarray(rep["theta"], dtype=np.float64).reshape(t, mp).T  # M' x T
        if f32:
            # the features in float32, as joker computes them for an f32 model (closer to
            # joker's values than float64 from the same W and b: tests/test_onnx.py)
            z32 = g.op("Cast", [z], to=TensorProto.FLOAT)
            f = np.float32
            proj = g.op("Add", [g.op("MatMul", [z32, g.const(w.T, "w_t", f)]), g.const(b, "b", f)])
            psi = g.op("Mul", [g.op("Cos", [proj]), g.const(scale, dtype=f)])
            psi = g.op("Cast", [psi], "psi", to=TensorProto.DOUBLE)
        else:
            proj = g.op("Add", [g.op("MatMul", [z, g.const(w.T, "w_t")]), g.const(b, "b")])
            psi = g.op("Mul", [_cos64(g, proj), g.const(scale)], "psi")
        raw = g.op("MatMul", [psi, g.const(theta[:m], "theta")])
        if mp > m:  # the constant feature B and its weight
            raw = g.op("Add", [raw, g.const(rep["bias"] * theta[m][None, :], "bias_term")])
    elif rep["type"] == "exact":
        ns = rep["n_support"]
        alpha = np.asarray(rep["alpha"], dtype=np.float64).reshape(t, ns).T  # ns x T
        if ns == 0:
            raw = g.op("Mul", [g.op("ReduceSum", [x, g.const([1], dtype=np.int64)], keepdims=1),
                               g.const(np.zeros((1, t)))])
        else:
            support = np.asarray(rep["support"], dtype=np.float64).reshape(ns, d)
            if f32:
                support = support.astype(np.float32).astype(np.float64)
            kern = _kernel_of_distances(g, spec["kernel"]["kind"], spec["kernel"]["gamma"], z, support)
            raw = g.op("MatMul", [kern, g.const(alpha, "alpha")])
    else:
        raise ValueError(f"unknown representation {rep['type']!r}")
    ts = spec["target_scaler"]
    dec = g.op("Add", [g.op("Mul", [raw, g.const(ts["scale"])]), g.const(ts["mean"])], "decision64")
    label = _labels(g, spec, dec)
    g.nodes.append(h.make_node("Cast", [dec], ["decision"], to=TensorProto.FLOAT))
    g.nodes.append(h.make_node("Cast", [label], ["label"], to=TensorProto.FLOAT))
    graph = h.make_graph(
        g.nodes, "joker",
        [h.make_tensor_value_info("X", TensorProto.FLOAT, ["n", d])],
        [h.make_tensor_value_info("decision", TensorProto.FLOAT, ["n", t]),
         h.make_tensor_value_info("label", TensorProto.FLOAT, ["n"])],
        g.inits)
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)],
                         producer_name="joker", producer_version=spec.get("joker_version", ""))
    proto.ir_version = 8  # opset 17's IR version, for runtimes older than the onnx package
    kinds = {"random_features": "random features", "exact": "exact kernel"}
    what = kinds[rep["type"]]
    if rep["type"] == "exact" and spec.get("training", {}).get("feature_map"):
        what = "Nystrom (exact kernel over its centres)"
    h.set_model_props(proto, {"joker.representation": what, "joker.task": spec["task"],
                              "joker.precision": spec["precision"]})
    onnx.checker.check_model(proto)
    return proto


def to_onnx(model, path=None):
    """The model as ONNX: written to ``path`` when given, and returned as bytes."""
    data = build(model).SerializeToString()
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


def main(argv=None):
    """``python -m joker.onnx MODEL.json OUT.onnx``: exports a saved model."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] in ("-h", "--help"):
        print("usage: python -m joker.onnx MODEL.json OUT.onnx", file=sys.stderr)
        return 2
    from .core import load
    with load(argv[0]) as model:
        data = to_onnx(model, argv[1])
    print(f"{argv[1]}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
