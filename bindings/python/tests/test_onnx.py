"""ONNX export (joker.onnx, Model.to_onnx): onnxruntime's outputs against joker's predictions
for random-feature, exact-kernel and Nystrom models, classifiers (two classes, one-vs-rest,
one-vs-one) and regressions, in f32 and f64.

Needs onnx and onnxruntime: skipped without them, except under JOKER_REQUIRE_BINDINGS=1 (as
CI sets), where their absence fails every test here.

Tolerances (decision values): an f64 model is computed in float64 by the graph, whose outputs
are float32, so they agree to float32 rounding: relative 1e-6 (measured at most 6e-8). An f32
model computes its features (or kernel values) in float32 in joker; the graph computes the
same in float32 (random features) or float64 (kernels), so values near zero can differ
relatively by up to 7e-4 (measured): the tolerance is 1e-5 of the model's largest absolute
decision value (measured at most 5e-7 over 60 f32 models of every kernel). Class labels must
be equal; regression values as decision values.
"""
import os
import tempfile
import unittest

import numpy as np

from support import joker, python_child

try:
    import onnx
    import onnxruntime
except ImportError as e:  # pragma: no cover
    onnx = onnxruntime = None
    MISSING = str(e)

REQUIRE = os.environ.get("JOKER_REQUIRE_BINDINGS") == "1"


def data():
    rng = np.random.default_rng(7)
    X = (rng.normal(size=(240, 5)) * 2 + 1).astype(np.float32)
    Xt = (rng.normal(size=(150, 5)) * 2 + 1).astype(np.float32)
    binary = np.where(X[:, 0] + X[:, 1] ** 2 > 2, 4.0, -3.0)
    three = np.digitize(X[:, 0] + 0.5 * X[:, 2], [0.0, 2.0]) * 2.0 + 1.0
    value = np.sin(X[:, 0]) + X[:, 1] + 100.0
    return X, Xt, {"binary": binary, "three": three, "value": value}


class TestOnnx(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.X, cls.Xt, cls.y = data()

    def setUp(self):
        if onnx is None:
            if REQUIRE:
                self.fail(f"onnx and onnxruntime are required (JOKER_REQUIRE_BINDINGS=1): {MISSING}")
            self.skipTest(f"onnx and onnxruntime are not installed: {MISSING}")

    def run_onnx(self, model_bytes, X):
        sess = onnxruntime.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
        self.assertEqual([i.name for i in sess.get_inputs()], ["X"])
        self.assertEqual([o.name for o in sess.get_outputs()], ["decision", "label"])
        return sess.run(None, {"X": X})

    def check(self, loss, target, **kw):
        model = joker.Joker(loss, max_iter=40, **kw).fit(self.X, self.y[target])
        decision, label = self.run_onnx(model.to_onnx(), self.Xt)
        want = np.asarray(model.decision_function(self.Xt), dtype=np.float64).reshape(len(self.Xt), -1)
        want_label = np.asarray(model.predict(self.Xt), dtype=np.float64)
        self.assertEqual(decision.dtype, np.float32)
        self.assertEqual(decision.shape, want.shape)
        self.assertEqual(label.shape, (len(self.Xt),))
        err = np.max(np.abs(decision - want)) / np.max(np.abs(want))
        if kw.get("precision") == "f64":
            np.testing.assert_allclose(decision, want, rtol=1e-6, atol=1e-12 * np.max(np.abs(want)))
        else:
            np.testing.assert_allclose(decision, want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)))
        if target == "value":
            np.testing.assert_allclose(label, want_label, rtol=1e-6)
        else:
            np.testing.assert_array_equal(label, want_label.astype(np.float32))
            self.assertGreater(len(np.unique(want_label)), 1)  # labels of more than one class
        print(f"{loss} {target} {kw}: max |onnx - joker| / max |f| = {err:.1e}")
        return model

    # random features
    def test_rff_binary_f32_with_a_bias_feature(self):
        self.check("l2-svc", "binary", n_components=200, bias=1.0)

    def test_rff_one_vs_rest_f64_laplacian(self):
        self.check("l2-svc", "three", n_components=200, kernel="laplacian", precision="f64",
                   multiclass="ovr")

    def test_rff_one_vs_one_f32(self):
        self.check("l1-svc", "three", n_components=200, multiclass="ovo")

    def test_rff_regression_f32_matern52(self):
        self.check("krr", "value", n_components=200, kernel="matern52")

    def test_rff_regression_f64_matern32(self):
        self.check("krr", "value", n_components=200, kernel="matern32", precision="f64")

    # exact kernels
    def test_exact_binary_f64_laplacian(self):
        self.check("l1-svc", "binary", n_components=None, kernel="laplacian", precision="f64")

    def test_exact_one_vs_one_f32(self):
        self.check("l1-svc", "three", n_components=None, multiclass="ovo")

    def test_exact_one_vs_rest_f32_matern12(self):
        self.check("l2-svc", "three", n_components=None, kernel="matern12", multiclass="ovr")

    def test_exact_regression_f64_matern32(self):
        self.check("krr", "value", n_components=None, kernel="matern32", precision="f64")

    # Nystrom
    def test_nystrom_binary_f32(self):
        self.check("l2-svc", "binary", n_components=40, features="nystrom")

    def test_nystrom_one_vs_rest_f64(self):
        self.check("l2-svc", "three", n_components=40, features="nystrom", precision="f64",
                   multiclass="ovr")

    def test_nystrom_regression_f32_matern52(self):
        self.check("krr", "value", n_components=40, features="nystrom", kernel="matern52")

    def test_graph_metadata_and_file(self):
        model = joker.Joker("l2-svc", n_components=40, features="nystrom").fit(self.X, self.y["binary"])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.onnx")
            data = model.to_onnx(path)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data)
            proto = onnx.load(path)
        onnx.checker.check_model(proto)
        self.assertEqual(proto.opset_import[0].version, 17)
        props = {p.key: p.value for p in proto.metadata_props}
        self.assertEqual(props["joker.representation"], "Nystrom (exact kernel over its centres)")
        self.assertEqual(props["joker.precision"], "f32")

    def test_the_command_exports_a_saved_model(self):
        model = joker.Joker("krr", n_components=64).fit(self.X, self.y["value"])
        with tempfile.TemporaryDirectory() as d:
            src, out = os.path.join(d, "m.json"), os.path.join(d, "m.onnx")
            model.save(src)
            child = python_child(f"""
                import runpy
                sys.argv = ["joker.onnx", {src!r}, {out!r}]
                try:
                    runpy.run_module("joker.onnx", run_name="__main__")
                except SystemExit as e:
                    sys.exit(e.code)
            """)
            stdout, stderr = child.communicate(timeout=120)
            self.assertEqual(child.returncode, 0, stderr)
            self.assertIn("bytes", stdout)
            with open(out, "rb") as f:
                decision, _ = self.run_onnx(f.read(), self.Xt)
        want = np.asarray(model.decision_function(self.Xt)).reshape(decision.shape)
        np.testing.assert_allclose(decision, want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)))

    def test_a_model_without_random_features_has_no_map_in_the_library(self):
        from joker import core
        from joker.onnx import _random_features
        model = joker.Joker("krr", n_components=None).fit(self.X[:50], self.y["value"][:50])
        with self.assertRaises(core.JokerError) as ctx:
            _random_features(model, 3, 5)
        self.assertIn("no random-feature map", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
