"""Tests of the low-level layer of the Python package (joker.core, over the C ABI):
python -m unittest discover -s bindings/python/tests

Environment: JOKER_LIB (path of libjoker.so; else target/release or target/debug),
JOKER_DATA_DIR (default ../shared/datasets), JOKER_TEST_INSTALLED=1 to test the installed
package (see support.py). Real data when present, synthetic otherwise.
"""
import copy
import ctypes
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
from unittest import mock

import numpy as np

from support import DATA, INSTALLED, PYTHON_DIR, REPO, data_path, joker, load_example, python_child

example = load_example()

try:
    import scipy.sparse as sp
except ImportError:  # pragma: no cover
    sp = None


def read_libsvm(path, n_features, base=1):
    """A small LIBSVM reader: (CSR matrix, labels); `base`: the index of the first column."""
    indptr, indices, values, labels = [0], [], [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            labels.append(float(parts[0]))
            for tok in parts[1:]:
                i, v = tok.split(":")
                indices.append(int(i) - base)
                values.append(float(v))
            indptr.append(len(indices))
    m = sp.csr_matrix((values, indices, indptr), shape=(len(labels), n_features))
    return m, np.array(labels)


def synthetic(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(n, 3))
    return x, np.where(x[:, 0] ** 2 + x[:, 1] - 1 > 0, 1.0, -1.0)


# A fit that runs for a minute unless stopped: 20,000 rows, tol 0, max_iter unbounded.
LONG_FIT = """
import numpy as np
rng = np.random.default_rng(0)
X_long = rng.normal(size=(20000, 8))
y_long = np.sign(X_long[:, 0] + 0.3 * rng.normal(size=20000))
# KLR: its gap never reaches 0, so only the interrupt or the time limit ends the fit (L2-SVC's
# block solves reach its optimum, and the gap 0, in about 1.5 s)
long_fit = joker.Joker("klr", n_components=2048, max_iter=10**9, tol=0.0, time_limit=60)
"""


class TestExampleAndRealData(unittest.TestCase):
    def test_example_covtype(self):
        # the example falls back to a synthetic set without the sample: required under
        # JOKER_REQUIRE_DATA=1
        data_path("covtype_small", "covtype.5000.train.csv")
        with tempfile.TemporaryDirectory() as d:
            cwd = os.getcwd()
            os.chdir(d)
            try:
                clf, acc, want, search = example.main(DATA)
            finally:
                os.chdir(cwd)
        self.assertGreaterEqual(acc, want)
        model = clf.model_  # the estimator's low-level model
        self.assertEqual(model.n_classes, 2)
        self.assertEqual(model.n_components, 1024)
        self.assertEqual((model.loss, model.kernel, model.task), ("l2-svc", "gaussian", "classification"))
        self.assertIn(model.stop_reason, ("converged", "max_iter"))
        self.assertGreater(model.gamma, 0)
        self.assertAlmostEqual(model.lambda_, 0.25)
        self.assertEqual(list(clf.classes_), [-1.0, 1.0])
        self.assertEqual(len(search.cv_results_["params"]), 4)

    @unittest.skipIf(sp is None, "scipy not installed")
    def test_a9a_sparse_csr(self):
        path = data_path("libsvm", "a9a")
        if path is None:
            self.skipTest(f"{os.path.join(DATA, 'libsvm', 'a9a')} not found")
        X, y = read_libsvm(path, 123)
        Xt, yt = read_libsvm(path + ".t", 123)
        model = joker.Joker("l2-svc", c=1.0, n_components=1000, max_iter=200).fit(X, y)
        acc = model.score(Xt, yt)
        print(f"a9a (CSR): test accuracy {acc:.4f}")
        self.assertGreaterEqual(acc, 0.83)  # README: 84.68% with this setting
        # float32 CSR and dense inputs give the same labels on a slice
        sl = Xt[:500]
        np.testing.assert_array_equal(model.predict(sl.astype(np.float32)), model.predict(sl.toarray()))

    def test_regression_cpusmall(self):
        path = data_path("libsvm", "cpusmall_scale")
        if sp is None or path is None:
            x, _ = synthetic(900, 3)
            y = np.sin(2 * x[:, 0]) + 0.5 * x[:, 1]
            X, Xt, y, yt, want = x[:600], x[600:], y[:600], y[600:], 0.95
        else:  # 0-based indices in this re-export
            X, y = read_libsvm(path, 12, base=0)
            Xt, yt = read_libsvm(path + ".t", 12, base=0)
            X, Xt, want = X.toarray(), Xt.toarray(), 0.90
            X, Xt = X.astype(np.float32), Xt.astype(np.float32)
        model = joker.Joker("krr", lambda_=1e-3, n_components=1024, block_size=256, max_iter=300).fit(X, y)
        r2 = model.score(Xt, yt)
        print(f"regression: test R^2 {r2:.4f}")
        self.assertGreater(r2, want)
        self.assertEqual(model.task, "regression")
        self.assertEqual(model.classes.shape, (0,))


class TestApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.X, cls.y = synthetic(600, 1)
        cls.Xt, cls.yt = synthetic(300, 2)

    def test_version_and_capabilities(self):
        self.assertRegex(joker.version(), r"^\d+\.\d+\.\d+")
        # From the device probe: consistent whatever the machine has.
        self.assertEqual(joker.gpu_available(), joker.device_count() > 0)

    def test_device_choice(self):
        cpu = joker.Joker("l2-svc", c=1.0, n_components=64, max_iter=20, device="cpu").fit(self.X, self.y)
        self.assertTrue(cpu.device.startswith("cpu"), cpu.device)
        auto = joker.Joker("l2-svc", c=1.0, n_components=64, max_iter=20).fit(self.X, self.y)
        if not joker.gpu_available():
            self.assertTrue(auto.device.startswith("cpu (auto"), auto.device)
            # an explicit GPU that cannot be used is an error, not a silent CPU fit
            with self.assertRaises(joker.JokerError):
                joker.Joker("l2-svc", n_components=64, max_iter=5, device="cuda:0").fit(self.X, self.y)
        for bad in ["gpu", "cuda:x", -3, 1.5, True]:
            with self.assertRaises(joker.JokerError):
                joker.Joker("l2-svc", device=bad)

    def test_trust_region_model(self):
        # the kernel model reaches the Gram model's solution (same random features, tight tol)
        fit = lambda m: joker.Joker("l2-svc", c=1.0, n_components=64, block_size=64, max_iter=3000,
                                    tol=1e-9, precision="f64", tr_model=m).fit(self.X, self.y)
        gram, kernel = fit("gram"), fit("kernel")
        self.assertEqual(gram.tr_model, "gram")
        self.assertEqual(kernel.tr_model, "kernel")
        diff = np.abs(gram.decision_function(self.Xt) - kernel.decision_function(self.Xt)).max()
        self.assertLess(diff, 1e-3)
        self.assertTrue(fit("auto").tr_model.startswith("gram (auto"))
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "unknown tr_model 'hessian'", joker.Joker,
                              tr_model="hessian")

    def test_search_chooses_c_and_the_width(self):
        # joker train --search from Python: every candidate scored on every fold, the winner
        # refitted; one candidate is the plain fit; a grid without values is refused by name
        est = joker.Joker("l2-svc", n_components=None)
        m = est.search(self.X, self.y, c_values=[0.1, 1.0, 10.0], gamma_factors=[0.5, 1.0, 2.0],
                       folds=4, seed=3)
        rec = m.search()
        self.assertEqual((len(rec["candidates"]), rec["folds"], rec["metric"]), (9, 4, "accuracy"))
        best = rec["candidates"][rec["best"]]
        self.assertTrue(all(len(c["scores"]) == 4 for c in rec["candidates"]))
        self.assertTrue(all(c["mean"] <= best["mean"] for c in rec["candidates"]))
        self.assertAlmostEqual(m.lambda_, 1.0 / best["c"])
        self.assertGreater(m.score(self.Xt, self.yt), 0.9)
        one = est.search(self.X, self.y, c_values=[1.0], gamma_factors=[1.0])
        plain = est.fit(self.X, self.y)
        self.assertEqual(one.gamma, plain.gamma)
        np.testing.assert_array_equal(one.decision_function(self.Xt), plain.decision_function(self.Xt))
        self.assertIsNone(plain.search())
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "search_c", est.search,
                              self.X, self.y, c_values=[])

    def test_nystrom_features(self):
        # with every training row a centre the Nystrom model is the exact-kernel model
        x, y = self.X[:120], self.y[:120]
        fit = lambda **kw: joker.Joker("l2-svc", c=1.0, precision="f64", block_size=32, tol=1e-12,
                                       max_iter=20000, **kw).fit(x, y)
        exact = fit(n_components=None)
        ny = fit(n_components=120, features="nystrom", centers="uniform")
        diff = np.abs(exact.decision_function(self.Xt) - ny.decision_function(self.Xt)).max()
        # to rounding: 1.9e-6 at the default width ("scale"), whose kernel matrix is less well
        # conditioned than the median's (under 1e-6 there)
        self.assertLess(diff, 1e-5)
        for centers in ("kmeans", "leverage"):
            m = joker.Joker("l2-svc", n_components=40, features="nystrom", centers=centers,
                            max_iter=50).fit(self.X, self.y)
            self.assertGreater(m.score(self.Xt, self.yt), 0.8)
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "unknown features 'orf'", joker.Joker,
                              features="orf")
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "unknown centers 'random'", joker.Joker,
                              features="nystrom", centers="random")

    def test_klr_probabilities_weights_and_progress(self):
        seen = []
        model = joker.Joker("klr", c=10.0, n_components=256, block_size=64, max_iter=150, check_every=10).fit(
            self.X, self.y, sample_weight=np.ones(len(self.y)), validation=(self.Xt, self.yt),
            progress=lambda p: seen.append(p))
        proba = model.predict_proba(self.Xt)
        self.assertEqual(proba.shape, (300, 2))
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_array_equal(model.classes[proba.argmax(axis=1)], model.predict(self.Xt))
        self.assertGreater(model.score(self.Xt, self.yt), 0.9)
        self.assertEqual(len(seen), 15)
        self.assertTrue(all(0.5 < p.validation <= 1.0 for p in seen))

    def test_progress_false_stops_and_exceptions_propagate(self):
        calls = []
        # DBCD-TR's checks (the Newton start would converge at the first)
        params = joker.Joker("l2-svc", n_components=64, block_size=50, max_iter=200, check_every=5,
                             newton_start=False)
        m = params.fit(self.X, self.y, progress=lambda p: calls.append(p) or len(calls) < 2)
        self.assertEqual((len(calls), m.stop_reason), (2, "cancelled"))

        def boom(p):
            raise RuntimeError("from the callback")

        with self.assertRaisesRegex(RuntimeError, "from the callback"):
            params.fit(self.X, self.y, progress=boom)

        def ctrl_c(p):
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            params.fit(self.X, self.y, progress=ctrl_c)
        # the fit runs in a worker thread, the progress function on the caller's
        threads = set()
        params.fit(self.X, self.y, progress=lambda p: threads.add(threading.current_thread()))
        self.assertEqual(threads, {threading.current_thread()})

    def test_multiclass_one_vs_rest_and_exact_kernel(self):
        rng = np.random.default_rng(4)
        x = rng.uniform(-2, 2, size=(450, 2))
        y = np.digitize(np.arctan2(x[:, 1], x[:, 0]), [-np.pi / 3, np.pi / 3]).astype(float)
        model = joker.Joker("l2-svc", c=10.0, n_components=None, block_size=64, max_iter=200).fit(x, y)
        self.assertEqual(model.n_components, None)
        self.assertEqual(list(model.classes), [0.0, 1.0, 2.0])
        self.assertEqual(model.decision_function(x).shape, (450, 3))
        self.assertGreater(model.score(x, y), 0.9)

    def test_stall_rule(self):
        # without the rule the fit runs to the tolerance; with it, a fit that stops early says
        # so and stops within ten times the tolerance
        strict = joker.Joker("l2-svc", n_components=256, block_size=64, tol=1e-5, max_iter=20000,
                             stall=False).fit(self.X, self.y)
        self.assertEqual(strict.stop_reason, "converged")
        self.assertLessEqual(strict.gap, 1e-5)
        loose = joker.Joker("l2-svc", n_components=256, block_size=64, tol=1e-5,
                            max_iter=20000).fit(self.X, self.y)
        self.assertIn(loose.stop_reason, ("converged", "stalled"))
        self.assertLessEqual(loose.gap, 1e-4)
        self.assertLessEqual(loose.iterations, strict.iterations)

    def test_direct_krr_trust_region_norm_and_bias(self):
        # KRR on random features starts at its optimum (0 iterations) unless switched off
        y = np.where(self.y > 0, 1.0, -1.0) + 0.1 * self.X[:, 0]
        for direct in (True, False):
            m = joker.Joker("krr", n_components=256, block_size=64, max_iter=5000,
                            direct_krr=direct, device="cpu").fit(self.X, y)
            self.assertEqual(m.iterations == 0, direct, m.iterations)
            self.assertLessEqual(m.gap, 1e-3 if direct else 1e-2)
        # L2-SVC on random features (8 rows a feature or more) starts at its primal optimum by
        # Newton unless switched off
        for newton in (True, False):
            m = joker.Joker("l2-svc", n_components=64, block_size=64, max_iter=5000,
                            newton_start=newton, device="cpu").fit(self.X, self.y)
            self.assertEqual(m.iterations == 0, newton, m.iterations)
            self.assertLessEqual(m.gap, 1e-3 if newton else 1e-2)
        with self.assertRaises(joker.JokerError) as e:
            joker.Joker("klr", tr_norm="cholesky")
        self.assertIn("tr_norm", str(e.exception))
        for norm in ("euclidean", "diagonal", "auto"):
            m = joker.Joker("klr", n_components=256, block_size=64, max_iter=300,
                            tr_norm=norm).fit(self.X, self.y)
            self.assertGreater(m.score(self.Xt, self.yt), 0.85, norm)
        # the bias feature: kept in the model file; refused with the exact kernel and below 0
        for bad in ({"bias": -1.0}, {"bias": 1.0, "n_components": None},
                    {"bias": 1.0, "features": "nystrom"}):
            with self.assertRaises(joker.JokerError) as e:
                joker.Joker("l2-svc", **bad)
            self.assertIn("bias", str(e.exception), bad)
        m = joker.Joker("l2-svc", n_components=256, block_size=64, bias=1.0).fit(self.X, self.y)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.json")
            m.save(path)
            with open(path) as f:
                rep = json.load(f)["representation"]
        self.assertEqual((rep["type"], rep["bias"]), ("random_features", 1.0))
        self.assertGreater(m.score(self.Xt, self.yt), 0.85)

    def test_intercept(self):
        # SVR fits an intercept by default (the model file's training.intercept), KRR none;
        # asked for, it lowers SVR's objective; refused for a classifier
        y = 3.0 + 0.5 * self.X[:, 0] + (self.y > 0)
        with tempfile.TemporaryDirectory() as d:
            def training(**kw):
                m = joker.Joker(n_components=None, device="cpu", **kw).fit(self.X, y)
                path = os.path.join(d, "m.json")
                m.save(path)
                with open(path) as f:
                    return m, json.load(f)["training"]
            svr, t = training(loss="svr")
            self.assertIn("intercept", t)
            flat, t_off = training(loss="svr", intercept=False)
            self.assertNotIn("intercept", t_off)
            self.assertLess(t["primal"], t_off["primal"])
            self.assertNotIn("intercept", training(loss="krr")[1])
            self.assertIn("intercept", training(loss="krr", intercept=True)[1])
        with self.assertRaises(joker.JokerError) as e:
            joker.Joker("l2-svc", intercept=True)
        self.assertIn("intercept", str(e.exception))

    def test_auto_loss(self):
        # the regression's loss follows the representation: SVR with its intercept on the
        # exact kernel (the same model as asking for it), KRR on a feature map
        y = 3.0 + 0.5 * self.X[:, 0] + (self.y > 0)
        with tempfile.TemporaryDirectory() as d:
            def training(**kw):
                m = joker.Joker(device="cpu", **kw).fit(self.X, y)
                path = os.path.join(d, "m.json")
                m.save(path)
                with open(path) as f:
                    return m, json.load(f)["training"]
            auto, t = training(n_components=None, auto_loss=True)
            self.assertEqual(auto.loss, "svr")
            self.assertTrue(t["loss_choice"].startswith("svr (auto: the exact kernel"))
            self.assertIn("intercept", t)
            named, t_named = training(n_components=None, loss="svr", loss_param=0.1)
            self.assertNotIn("loss_choice", t_named)
            np.testing.assert_array_equal(auto.predict(self.Xt), named.predict(self.Xt))
            mapped, t = training(n_components=64, auto_loss=True)
            self.assertEqual(mapped.loss, "krr")
            self.assertTrue(t["loss_choice"].startswith("krr (auto: a feature map"))
        with self.assertRaisesRegex(joker.JokerError, "auto_loss"):
            joker.Joker("l2-svc", auto_loss=True)

    def test_doubly_stochastic_solvers(self):
        # DSG, UDSG and CDSG train random-feature models for a budget of steps (no gap)
        for name in ("dsg", "udsg", "cdsg"):
            m = joker.Joker("l2-svc", solver=name, n_components=256, batch_size=64,
                            feature_block=32, max_iter=600).fit(self.X, self.y)
            self.assertEqual(m.stop_reason, "max_iter", name)
            self.assertGreater(m.score(self.Xt, self.yt), 0.85, name)
        # the same seed gives the same model
        a, b = (joker.Joker("klr", solver="cdsg", n_components=128, max_iter=300, step_theta=500.0,
                            step_t0=100.0).fit(self.X, self.y) for _ in range(2))
        np.testing.assert_array_equal(a.decision_function(self.Xt), b.decision_function(self.Xt))
        with self.assertRaisesRegex(joker.JokerError, "unknown solver 'sgd'"):
            joker.Joker("l2-svc", solver="sgd")
        with self.assertRaisesRegex(joker.JokerError, "set n_components"):
            joker.Joker("l2-svc", solver="dsg", n_components=None)
        with self.assertRaisesRegex(joker.JokerError, "exceeds the cap"):
            joker.Joker("l2-svc", solver="dsg", n_components=16, feature_block=64)
        with self.assertRaisesRegex(joker.JokerError, "`batch_size` must be >= 0"):
            joker.Joker("l2-svc", solver="dsg", batch_size=-1)

    def test_fit_stream_reads_a_file_a_part_at_a_time(self):
        # the training rows streamed from a CSV file: a model as good as the fit in memory
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "train.csv")
            np.savetxt(path, np.column_stack([self.X, self.y]), delimiter=",", fmt="%.7g")
            params = joker.Joker("l2-svc", solver="cdsg", n_components=256, batch_size=64,
                                 feature_block=32, max_iter=600)
            seen = []
            m = params.fit_stream(path, format="csv", chunk_bytes=4096,
                                  validation=(self.Xt, self.yt),
                                  progress=lambda p: seen.append(p.validation))
            self.assertEqual(m.stop_reason, "max_iter")
            self.assertGreater(m.score(self.Xt, self.yt), 0.85)
            self.assertTrue(seen and all(v > 0.5 for v in seen))
            with self.assertRaisesRegex(joker.JokerError, "format must be one of"):
                params.fit_stream(path, format="npz")
            with self.assertRaisesRegex(joker.JokerError, "doubly stochastic"):
                joker.Joker("l2-svc", n_components=64).fit_stream(path)

    def test_working_set_and_automatic_exact_kernel(self):
        # the automatic choice: the exact kernel where its matrix fits the cache, features beyond
        exact = joker.Joker("l2-svc", auto_exact=True).fit(self.X, self.y)
        self.assertIsNone(exact.n_components)
        feats = joker.Joker("l2-svc", auto_exact=True, kernel_cache=1000).fit(self.X, self.y)
        self.assertEqual(feats.n_components, 2048)
        # every working-set rule reaches the same optimum on the cached kernel
        fits = [joker.Joker("l2-svc", n_components=None, precision="f64", block_size=64, tol=1e-11,
                            max_iter=20000, working_set=rule, stall=False).fit(self.X, self.y)
                for rule in ("shrinking", "random", "greedy")]
        ref = fits[0].decision_function(self.X)
        for m in fits[1:]:
            self.assertLess(np.abs(m.decision_function(self.X) - ref).max(), 1e-5)
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "working_set", joker.Joker,
                              working_set="best")

    def test_the_kernel_cache_changes_nothing_but_speed(self):
        # the cached fit draws its blocks from the violating coordinates, the block-by-block fit
        # takes fixed blocks: different iterates to the same optimum, so the decision values
        # agree to what the duality gaps guarantee (|f - f*| <= sqrt(2 (P - D)))
        models = [joker.Joker("l2-svc", n_components=None, precision="f64", block_size=64, tol=1e-11,
                              max_iter=20000, kernel_cache=cache).fit(self.X, self.y)
                  for cache in (2 << 30, 0)]
        a, b = (m.decision_function(self.X) for m in models)
        self.assertLess(np.abs(a - b).max(), 1e-5)
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "kernel_cache", joker.Joker, kernel_cache=-1)

    def test_full_krr_matches_a_dense_solve(self):
        rng = np.random.default_rng(6)
        x = rng.uniform(-2, 2, size=(300, 2))
        y = np.sin(2 * x[:, 0]) + 0.5 * x[:, 1] + 0.05 * rng.standard_normal(300)
        gamma, lam = 0.7, 0.05
        k = np.exp(-gamma * ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
        want = k @ np.linalg.solve(k + lam * np.eye(300), y)
        residuals = []
        for method in ["pcg", "askotch"]:
            est = joker.Joker("krr", n_components=None, gamma=gamma, lambda_=lam, precision="f64",
                              standardize=False, normalize_target=False, full_krr=method,
                              krr_blocks=3, krr_rank=60, krr_tol=1e-9, max_iter=20000, check_every=10,
                              krr_store_preconditioners=method == "askotch")
            model = est.fit(x, y, progress=lambda p: residuals.append(p.rel_residual))
            self.assertEqual(model.stop_reason, "converged", method)
            err = np.linalg.norm(model.decision_function(x) - want) / np.linalg.norm(want)
            print(f"full KRR {method}: relative error {err:.2e} against numpy's dense solve")
            self.assertLess(err, 1e-7, method)
        self.assertTrue(all(r is not None for r in residuals) and residuals[-1] <= 1e-9)
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "exact kernel", joker.Joker, full_krr="pcg")
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "unknown full_krr method 'cg'", joker.Joker,
                              n_components=None, full_krr="cg")
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "below the block size", joker.Joker,
                              block_size=64, nystrom_rank=64)
        nys = joker.Joker("l2-svc", n_components=None, block_size=64, nystrom_rank=16, max_iter=100)
        seen = []
        self.assertGreater(nys.fit(self.X, self.y, progress=lambda p: seen.append(p.rel_residual))
                           .score(self.X, self.y), 0.9)
        self.assertTrue(seen and all(r is None for r in seen))

    def test_save_load_round_trip(self):
        model = joker.Joker("l2-svc", n_components=128, block_size=64, max_iter=50).fit(self.X, self.y)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.json")
            model.save(path)
            back = joker.Model.load(path)
        np.testing.assert_array_equal(back.decision_function(self.Xt), model.decision_function(self.Xt))
        self.assertEqual(back.n_features, 3)

    def test_save_refuses_to_replace_a_file_that_is_not_a_model(self):
        model = joker.Joker("l2-svc", n_components=64, block_size=64, max_iter=50).fit(self.X, self.y)
        other = joker.Joker("l2-svc", n_components=32, block_size=64, max_iter=50).fit(self.X, self.y)
        with tempfile.TemporaryDirectory() as d:
            data = os.path.join(d, "train.csv")
            for content in ("1,0.5,2\n-1,0.25,3\n", '{"format": "other"}', "[1, 2]"):
                with open(data, "w") as f:
                    f.write(content)
                with self.assertRaisesRegex(FileExistsError, "is not a joker model file; refusing to "
                                            "replace it \\(pass overwrite=True"):
                    model.save(data)
                with open(data) as f:
                    self.assertEqual(f.read(), content)  # left as it was
            model.save(data, overwrite=True)
            self.assertEqual(joker.load(data).n_components, 64)
            # a model file is replaced as before, and so is an empty file
            model.save(data)
            other.save(data)
            self.assertEqual(joker.load(data).n_components, 32)
            empty = os.path.join(d, "empty.json")
            open(empty, "w").close()
            model.save(empty)
            self.assertEqual(joker.load(empty).n_components, 64)
            new = os.path.join(d, "new.json")
            model.save(new)
            self.assertTrue(joker.core._looks_like_model(new))
            self.assertFalse(joker.core._looks_like_model(os.path.join(d, "missing.json")))

    def test_a_closed_model_or_joker_says_it_was_closed(self):
        est = joker.Joker("l2-svc", n_components=64, block_size=64, max_iter=50)
        model = est.fit(self.X, self.y)
        with model:
            self.assertEqual(model.n_features, 3)
        with tempfile.TemporaryDirectory() as d:
            for name, call in [("predict", lambda: model.predict(self.Xt)),
                               ("decision_function", lambda: model.decision_function(self.Xt)),
                               ("score", lambda: model.score(self.Xt, self.yt)),
                               ("save", lambda: model.save(os.path.join(d, "m.json"))),
                               ("n_features", lambda: model.n_features),
                               ("classes", lambda: model.classes),
                               ("stop_reason", lambda: model.stop_reason),
                               ("copy", lambda: copy.copy(model))]:
                with self.subTest(name):
                    with self.assertRaisesRegex(ValueError, "this model was closed") as ctx:
                        call()
                    self.assertIsInstance(ctx.exception, joker.JokerError)
                    self.assertNotIn("NULL", ctx.exception.message)
            self.assertFalse(os.path.exists(os.path.join(d, "m.json")))
        est.close()
        with self.assertRaisesRegex(ValueError, "this Joker was closed"):
            est.fit(self.X, self.y)

    def assertJokerError(self, status, needle, fn, *args, **kw):
        with self.assertRaises(joker.JokerError) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.status, status, cm.exception.message)
        self.assertIn(needle, cm.exception.message)
        return cm.exception

    def test_error_paths(self):
        svc = joker.Joker("l2-svc", n_components=64, block_size=50, max_iter=20)
        model = svc.fit(self.X, self.y)
        bad = self.X.copy()
        bad[4, 1] = np.nan
        self.assertJokerError("JOKER_STATUS_NON_FINITE", "non-finite value in features at row 4, column 1",
                              svc.fit, bad, self.y)
        yb = self.y.copy()
        yb[7] = np.inf
        self.assertJokerError("JOKER_STATUS_NON_FINITE", "targets at row 7", svc.fit, self.X, yb)
        self.assertJokerError("JOKER_STATUS_SHAPE_MISMATCH", "X has 600 rows but y has 599 values",
                              svc.fit, self.X, self.y[1:])
        for fn in (model.predict, model.decision_function, lambda X: model.score(X, self.yt)):
            self.assertJokerError("JOKER_STATUS_SHAPE_MISMATCH", "`X` has 2 columns, the model was trained on 3",
                                  fn, self.Xt[:, :2])
            self.assertJokerError("JOKER_STATUS_SHAPE_MISMATCH", "`X` has 4 columns, the model was trained on 3",
                                  fn, np.column_stack([self.Xt, self.Xt[:, 0]]))
        self.assertJokerError("JOKER_STATUS_SHAPE_MISMATCH", "X has 600 rows but sample_weight has 3 values",
                              svc.fit, self.X, self.y, sample_weight=[1.0, 2.0, 3.0])
        self.assertJokerError("JOKER_STATUS_SHAPE_MISMATCH", "2-d array", model.predict, self.Xt[0])
        self.assertJokerError("JOKER_STATUS_EMPTY_DATA", "0 x 3", model.predict, np.zeros((0, 3)))
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "`c`: must be positive", joker.Joker, c=-1.0)
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "invalid parameter `lambda_`", joker.Joker,
                              lambda_=float("nan"))
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "unknown loss 'hinge'", joker.Joker, "hinge")
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "`n_components` must be >= 0, got -5", joker.Joker,
                              n_components=-5)
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "invalid parameter `n_components`", joker.Joker,
                              n_components=0)
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "it cannot do regression", joker.Joker,
                              "klr", task="regression")
        # a block larger than the data is capped at the number of samples
        big_block = joker.Joker("l2-svc", n_components=64, block_size=1000, max_iter=20).fit(self.X, self.y)
        self.assertGreater(big_block.score(self.Xt, self.yt), 0.8)
        self.assertJokerError("JOKER_STATUS_INVALID_LABELS", "look like regression targets",
                              svc.fit, self.X, np.arange(600.0))
        self.assertJokerError("JOKER_STATUS_UNSUPPORTED", "logistic", model.predict_proba, self.Xt)
        with tempfile.TemporaryDirectory() as d:
            self.assertJokerError("JOKER_STATUS_IO", "missing.json", joker.load, os.path.join(d, "missing.json"))
            with open(os.path.join(d, "bad.json"), "w") as f:
                f.write('{"format": "joker-model", "version": 99}')
            self.assertJokerError("JOKER_STATUS_MODEL_FORMAT", "newer joker", joker.load,
                                  os.path.join(d, "bad.json"))
        # a closed model says so before reaching the library
        model.close()
        self.assertJokerError("JOKER_STATUS_NULL_POINTER", "this model was closed", model.predict, self.Xt)
        model.close()  # closing twice is harmless

    def test_messages_name_the_python_arguments(self):
        e = self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "`time_limit`: must be >= 0", joker.Joker,
                                  time_limit=-1.0)
        self.assertNotIn("seconds", e.message)  # the C setter's argument
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "invalid parameter `loss_param` (the huber delta)",
                              joker.Joker, "huber", loss_param=-1.0)
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "invalid parameter `krr_rank`", joker.Joker,
                              n_components=None, full_krr="pcg", krr_rank=0)
        e = self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "invalid parameter `krr_tol`", joker.Joker,
                                  n_components=None, full_krr="pcg", krr_tol=-1.0)
        self.assertNotIn("with tol=", e.message)  # the library names joker_params_set_tol
        for e in (e, self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "`block_size`", joker.Joker,
                                           block_size=0)):
            self.assertNotIn("joker_", e.message)  # "(set with block_size=)", not the C setter
        e = self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "the exact kernel (n_components=None)",
                                  joker.Joker, full_krr="pcg")
        self.assertNotIn(".exact()", e.message)  # the Rust builder's call
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "`class_weight` (a weight)", joker.Joker,
                              "l2-svc", class_weight={1.0: -2.0})
        # C setters and joker_data_from_* in a library message become the Python call
        self.assertEqual(joker.core._python_words("over the limit: raise it with joker_params_set_max_memory"),
                         "over the limit: raise it with max_memory=")
        self.assertEqual(joker.core._python_words("set joker_params_set_class_weights or joker_params_set_exact"),
                         "set class_weight= or n_components=None")
        self.assertEqual(joker.core._python_words("`train` has no labels: pass y to joker_data_from_*", joker.core._FIT_NAMES),
                         "`X` has no labels: pass y to fit(X, y)")
        self.assertEqual(joker.core._python_words("`p`: must be > 1 (set with joker_params_set_loss)", joker.core._LOSS_NAMES),
                         "`loss_param` (the lp exponent p): must be > 1 (set with loss_param=)")
        with mock.patch.object(joker.core._lib, "joker_last_error", return_value=b"use joker_params_set_gamma"):
            e = self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "use gamma=", joker.core._check, 3)
        self.assertEqual(str(e), "JOKER_STATUS_INVALID_ARGUMENT: use gamma=")

    def test_max_memory_none_is_the_library_default(self):
        real = joker.core._lib.joker_params_set_max_memory
        with mock.patch.object(joker.core._lib, "joker_params_set_max_memory", side_effect=real) as setter:
            joker.Joker("l2-svc")  # None: the library's limit (80% of the available memory)
            self.assertEqual(setter.call_count, 0)
            joker.Joker("l2-svc", max_memory=0)  # no limit
            joker.Joker("l2-svc", max_memory=10**9)
            self.assertEqual([c.args[1] for c in setter.call_args_list], [0, 10**9])
        self.assertEqual(joker.Joker("l2-svc", n_components=64, max_iter=5, max_memory=0)
                         .fit(self.X, self.y).n_features, 3)
        self.assertJokerError("JOKER_STATUS_MEMORY", "needs about", joker.Joker("l2-svc", max_memory=1000).fit,
                              self.X, self.y)
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "`max_memory` must be >= 0", joker.Joker,
                              max_memory=-1)
        # The default limit, end to end: 1 GiB of address space left, a fit estimated at 1.5 GB
        # is refused before it starts (with no limit it would be tried).
        child = python_child("""
            import resource
            import numpy as np
            import joker
            with open("/proc/self/status") as f:
                vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize"))
            resource.setrlimit(resource.RLIMIT_AS, (vm + 2**30, vm + 2**30))
            X = np.random.default_rng(0).normal(size=(2000, 3))
            try:
                joker.Joker("l2-svc", n_components=100000, max_iter=1).fit(X, np.sign(X[:, 0]))
            except joker.JokerError as e:
                print(e)
            """)
        out, err = child.communicate(timeout=120)
        self.assertEqual(child.returncode, 0, err[-2000:])
        self.assertIn("JOKER_STATUS_MEMORY", out)
        self.assertIn("80% of the available memory", out)
        self.assertIn("max_memory=", out)  # the library says joker_params_set_max_memory

    def test_defaults_work_on_small_data(self):
        # block_size 512 and n_components 2048 (the defaults) on 100 rows
        model = joker.Joker("l2-svc").fit(self.X[:100], self.y[:100])
        self.assertIn(model.stop_reason, ("converged", "max_iter"))
        self.assertGreater(model.score(self.Xt, self.yt), 0.8)

    def test_validation_must_match_the_training_columns(self):
        svc = joker.Joker("l2-svc", n_components=64, max_iter=20, check_every=5)
        for cols in (self.Xt[:, :2], np.column_stack([self.Xt, self.Xt[:, 0]])):
            self.assertJokerError("JOKER_STATUS_SHAPE_MISMATCH",
                                  f"validation: X_val has {cols.shape[1]} columns, the training X has 3",
                                  svc.fit, self.X, self.y, validation=(cols, self.yt))
        self.assertJokerError("JOKER_STATUS_SHAPE_MISMATCH", "validation: X_val has 300 rows but y_val has 299",
                              svc.fit, self.X, self.y, validation=(self.Xt, self.yt[1:]))
        self.assertJokerError("JOKER_STATUS_INVALID_LABELS", "validation: y_val is None",
                              svc.fit, self.X, self.y, validation=(self.Xt, None))
        self.assertJokerError("JOKER_STATUS_INVALID_ARGUMENT", "a pair (X_val, y_val)",
                              svc.fit, self.X, self.y, validation=(self.Xt,))
        seen = []
        svc.fit(self.X, self.y, validation=(self.Xt, self.yt), progress=lambda p: seen.append(p.validation))
        self.assertTrue(seen and all(0.5 < v <= 1.0 for v in seen))
        if sp is not None:  # CSR may have fewer columns (zeros), as in predict
            narrow = sp.csr_matrix(np.column_stack([self.X[:, :2], np.zeros(600)]))[:, :2]
            full = sp.csr_matrix(np.column_stack([self.X[:, :2], np.zeros(600)]))
            a, b = [], []
            svc.fit(full, self.y, validation=(narrow, self.y), progress=lambda p: a.append(p.validation))
            svc.fit(full, self.y, validation=(full, self.y), progress=lambda p: b.append(p.validation))
            self.assertEqual(a, b)
            self.assertJokerError("JOKER_STATUS_SHAPE_MISMATCH", "X_val has 3 columns, the training X has 2",
                                  svc.fit, narrow, self.y, validation=(full, self.y))

    def test_copies_and_pickles_own_their_handles(self):
        est = joker.Joker("l2-svc", n_components=128, block_size=64, max_iter=50, class_weight={1.0: 2.0})
        model = est.fit(self.X, self.y)
        want = model.decision_function(self.Xt)
        for make in (copy.copy, copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))):
            other = make(model)
            self.assertIsNot(other._h, model._h)
            np.testing.assert_array_equal(other.decision_function(self.Xt), want)
            other.close()  # frees the copy only
            np.testing.assert_array_equal(model.decision_function(self.Xt), want)
            self.assertEqual((other._h.value, model.n_features), (None, 3))
        for make in (copy.copy, copy.deepcopy, lambda j: pickle.loads(pickle.dumps(j))):
            other = make(est)
            self.assertIsNot(other._h, est._h)
            np.testing.assert_array_equal(other.fit(self.X, self.y).decision_function(self.Xt), want)
            other.close()
            np.testing.assert_array_equal(est.fit(self.X, self.y).decision_function(self.Xt), want)
        closed = est.fit(self.X, self.y)
        closed.close()
        self.assertJokerError("JOKER_STATUS_NULL_POINTER", "this model was closed", pickle.dumps, closed)

    def test_freed_and_foreign_handles_through_the_raw_abi(self):
        lib = joker.core._lib
        h = ctypes.c_void_p()
        self.assertEqual(lib.joker_params_new(ctypes.byref(h)), 0)
        self.assertEqual(lib.joker_params_free(h), 0)
        self.assertEqual(lib.joker_params_free(h), 2)  # JOKER_STATUS_INVALID_HANDLE
        self.assertIn("already freed", lib.joker_last_error().decode())
        self.assertEqual(lib.joker_params_set_c(h, 1.0), 2)
        fake = (ctypes.c_uint64 * 8)()
        self.assertEqual(lib.joker_model_free(ctypes.cast(fake, ctypes.c_void_p)), 2)
        self.assertIn("never created by joker", lib.joker_last_error().decode())
        self.assertEqual(lib.joker_status_name(2), b"JOKER_STATUS_INVALID_HANDLE")

    def test_float32_input_and_f64_precision(self):
        m32 = joker.Joker("l2-svc", n_components=128, block_size=64, max_iter=60, precision="f64").fit(
            self.X.astype(np.float32), self.y)
        self.assertGreater(m32.score(self.Xt.astype(np.float32), self.yt), 0.9)


class TestInterruptAndLoading(unittest.TestCase):
    def test_ctrl_c_stops_a_fit_within_a_second(self):
        child = python_child("import joker\n" + LONG_FIT + textwrap.dedent("""
            import signal
            signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignoring it
            print("fitting", flush=True)
            try:
                long_fit.fit(X_long, y_long)
            except KeyboardInterrupt:
                print("KeyboardInterrupt", flush=True)
                sys.exit(0)
            print("the fit ended", flush=True)
            """))
        try:
            self.assertEqual(child.stdout.readline().strip(), "fitting")
            time.sleep(1.5)
            child.send_signal(signal.SIGINT)
            sent = time.monotonic()
            out, err = child.communicate(timeout=20)
            elapsed = time.monotonic() - sent
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            self.fail("Ctrl-C did not stop the fit within 20 s")
        print(f"Ctrl-C: the fit stopped and the process exited {elapsed:.2f} s after SIGINT")
        self.assertEqual((child.returncode, out.strip()), (0, "KeyboardInterrupt"), err)
        self.assertLess(elapsed, 2.0)

    def test_interrupt_from_another_thread(self):
        ns = {"joker": joker}
        exec(LONG_FIT, ns)
        flag = joker.Interrupt()
        timer = threading.Timer(0.5, flag.set)
        start = time.monotonic()
        timer.start()
        model = ns["long_fit"].fit(ns["X_long"], ns["y_long"], interrupt=flag)
        elapsed = time.monotonic() - start
        self.assertEqual(model.stop_reason, "cancelled")
        self.assertLess(elapsed, 5.0)
        self.assertGreater(model.score(ns["X_long"][:2000], ns["y_long"][:2000]), 0.8)  # the model so far
        # a set flag stops the next fit at once; clear() re-arms it
        X, y = synthetic(300, 1)
        est = joker.Joker("l2-svc", n_components=64, block_size=50, max_iter=100)
        self.assertEqual(est.fit(X, y, interrupt=flag).stop_reason, "cancelled")
        flag.clear()
        self.assertIn(est.fit(X, y, interrupt=flag).stop_reason, ("converged", "max_iter"))
        with self.assertRaises(joker.JokerError):
            est.fit(X, y, interrupt=ctypes.c_int32(1))

    def test_fit_from_another_thread(self):
        X, y = synthetic(600, 1)
        est = joker.Joker("l2-svc", n_components=64, block_size=50, max_iter=40, check_every=10)
        ns = {"joker": joker}
        exec(LONG_FIT, ns)
        flag = joker.Interrupt()
        out = {}

        def run():
            try:
                seen = set()
                out["model"] = est.fit(X, y, progress=lambda p: seen.add(threading.current_thread()))
                out["threads"] = seen
                out["long"] = ns["long_fit"].fit(ns["X_long"], ns["y_long"], interrupt=flag)
            except BaseException as e:  # pragma: no cover
                out["error"] = e

        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(1.0)
        flag.set()
        worker.join(30)
        self.assertFalse(worker.is_alive())
        self.assertNotIn("error", out)
        self.assertEqual(out["threads"], {worker})
        self.assertGreater(out["model"].score(X, y), 0.8)
        self.assertEqual(out["long"].stop_reason, "cancelled")

    def test_import_error_says_where_the_library_was_looked_for(self):
        child = python_child("import joker", JOKER_LIB="/nonexistent/libjoker.so")
        out, err = child.communicate(timeout=60)
        self.assertNotEqual(child.returncode, 0)
        self.assertIn("ImportError: cannot load libjoker", err)
        needles = ["/nonexistent/libjoker.so", "$JOKER_LIB", "the library installed with the package",
                   "libjoker.so.0", "pip install ./bindings/python", "cargo build --release",
                   "JOKER_LIB=/path/to/libjoker.so", "install the library"]
        # an installed package does not look in cargo's target directories
        needles += (["not searched (an installed package"] if INSTALLED else
                    ["$CARGO_TARGET_DIR", "target/release"])
        for needle in needles:
            self.assertIn(needle, err)
        print(err.strip().splitlines()[-1][:200])

    @unittest.skipUnless(INSTALLED, "tests the source tree (JOKER_TEST_INSTALLED=1 tests the installed package)")
    def test_the_installed_package_loads_its_own_library(self):
        # no JOKER_LIB: the library installed inside the package, whatever the environment says
        child = python_child("import joker, joker.core; print(joker.__file__); print(joker.core._lib_path)",
                             JOKER_LIB="", CARGO_TARGET_DIR="/nonexistent")
        out, err = child.communicate(timeout=60)
        self.assertEqual(child.returncode, 0, err)
        module, lib = out.split()
        self.assertEqual(os.path.dirname(lib), os.path.dirname(module))
        self.assertFalse(module.startswith(PYTHON_DIR))


JULIA_SRC = ("bindings", "julia", "Joker", "src", "LibJoker.jl")
JULIA_TESTS = ("bindings", "julia", "Joker", "test", "runtests.jl")


class TestBuildBackend(unittest.TestCase):
    """The package's build backend (build_backend/joker_backend.py) with a stand-in for cargo."""

    def build(self, fake_cargo_body):
        with tempfile.TemporaryDirectory() as d:
            library = os.path.join(d, "libjoker.so")
            open(library, "wb").close()
            cargo = os.path.join(d, "cargo")
            with open(cargo, "w") as f:
                f.write(f"#!{sys.executable}\nimport json, sys\nLIBRARY = {library!r}\n"
                        + textwrap.dedent(fake_cargo_body))
            os.chmod(cargo, 0o755)
            code = ("import sys; sys.path.insert(0, sys.argv[1]); import joker_backend; "
                    "print(joker_backend._cargo_build())")
            run = subprocess.run([sys.executable, "-c", code, os.path.join(PYTHON_DIR, "build_backend")],
                                 env=dict(os.environ, CARGO=cargo), capture_output=True, text=True)
            return run, library

    def test_it_says_up_front_that_cargo_builds_the_library_and_streams_cargo(self):
        run, library = self.build("""
            sys.stderr.write("   Compiling joker v0 (fake)\\n")
            print(json.dumps({"reason": "compiler-artifact", "filenames": [LIBRARY],
                              "target": {"name": "joker", "crate_types": ["lib", "cdylib"]}}))
        """)
        if "No module named 'tomli'" in run.stderr:
            self.skipTest("the backend needs tomli on Python < 3.11")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.strip(), library)
        err = run.stderr
        up_front = err.find("joker build: building the Rust library libjoker with cargo")
        self.assertGreaterEqual(up_front, 0, err)
        self.assertIn("takes a few minutes", err)
        self.assertLess(up_front, err.find("Compiling joker v0 (fake)"), err)  # before cargo's lines

    def test_a_failed_cargo_is_an_error(self):
        run, _ = self.build("sys.exit(101)\n")
        if "No module named 'tomli'" in run.stderr:
            self.skipTest("the backend needs tomli on Python < 3.11")
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("failed with exit status 101", run.stderr)

    def pack(self, strip_body, setting=None, **extra_env):
        """Runs the backend's _library_bytes on a 1000-byte stand-in library with a stand-in
        for strip (``strip_body``: Python run with the library's path in sys.argv[-1]);
        ``setting``: the config setting ``strip``. Returns (process, bytes packed)."""
        with tempfile.TemporaryDirectory() as d:
            library = os.path.join(d, "libjoker.so")
            with open(library, "wb") as f:
                f.write(b"x" * 1000)
            strip = os.path.join(d, "strip")
            with open(strip, "w") as f:
                f.write(f"#!{sys.executable}\nimport sys\n" + textwrap.dedent(strip_body))
            os.chmod(strip, 0o755)
            out = os.path.join(d, "packed")
            code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
                    "import joker_backend; "
                    "settings = None if sys.argv[4] == '-' else {'strip': sys.argv[4]}; "
                    "data = joker_backend._library_bytes(Path(sys.argv[2]), settings); "
                    "f = open(sys.argv[3], 'wb'); f.write(data); f.close()")
            env = {k: v for k, v in os.environ.items() if k != "JOKER_WHEEL_STRIP"}
            env.update(STRIP=strip, **extra_env)
            run = subprocess.run([sys.executable, "-c", code, os.path.join(PYTHON_DIR, "build_backend"),
                                  library, out, "-" if setting is None else setting],
                                 env=env, capture_output=True, text=True)
            packed = None
            if os.path.exists(out):
                with open(out, "rb") as f:
                    packed = f.read()
            if "No module named 'tomli'" in run.stderr:
                self.skipTest("the backend needs tomli on Python < 3.11")
            return run, packed

    TRUNCATE = """
        assert sys.argv[1] == "--strip-debug", sys.argv
        open(sys.argv[-1], "r+b").truncate(10)
    """

    def test_the_wheel_packs_a_stripped_copy_of_the_library(self):
        run, packed = self.pack(self.TRUNCATE)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(packed, b"x" * 10)
        self.assertIn("stripped of debug information", run.stderr)

    def test_strip_0_packs_the_library_as_built(self):
        for run, packed in (self.pack(self.TRUNCATE, setting="0"),
                            self.pack(self.TRUNCATE, JOKER_WHEEL_STRIP="0")):
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(packed, b"x" * 1000)

    def test_a_failed_strip_warns_or_fails_when_required(self):
        run, packed = self.pack("sys.exit(3)\n")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(packed, b"x" * 1000)
        self.assertIn("WARNING", run.stderr)
        run, packed = self.pack("sys.exit(3)\n", JOKER_WHEEL_STRIP="1")
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("cannot strip", run.stderr)
        self.assertIn("exit status 3", run.stderr)
        run, _ = self.pack(self.TRUNCATE, setting="maybe")
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("expected 0, 1 or auto", run.stderr)

    def test_the_sdist_holds_what_cargo_needs_and_finds_its_crate(self):
        import re
        import tarfile

        backend_dir = os.path.join(PYTHON_DIR, "build_backend")
        with tempfile.TemporaryDirectory() as d:
            run = subprocess.run([sys.executable, "-c",
                                  "import sys; sys.path.insert(0, sys.argv[1]); import joker_backend; "
                                  "print(joker_backend.build_sdist(sys.argv[2]))", backend_dir, d],
                                 capture_output=True, text=True)
            if "No module named 'tomli'" in run.stderr:
                self.skipTest("the backend needs tomli on Python < 3.11")
            self.assertEqual(run.returncode, 0, run.stderr)
            name = run.stdout.strip()
            self.assertEqual(name, f"joker-{joker.version()}.tar.gz")
            with tarfile.open(os.path.join(d, name)) as tar:
                names = set(tar.getnames())
                tar.extractall(d, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(d)
            top = f"joker-{joker.version()}"
            crate = os.path.join(d, top, "rust")
            for needed in ["PKG-INFO", "pyproject.toml", "build_backend/joker_backend.py", "joker/core.py",
                           "joker/estimators.py", "rust/Cargo.toml", "rust/Cargo.lock", "rust/build.rs",
                           "rust/cbindgen.toml", "rust/src/lib.rs", "rust/src/ffi/mod.rs", "rust/include/joker.h"]:
                self.assertTrue(f"{top}/{needed}" in names, f"{needed} is not in the sdist")
            # every file the crate's sources embed (the PTX and fat binaries) is in it
            embedded = 0
            for dirpath, _, files in os.walk(os.path.join(REPO, "src")):
                for f in files:
                    if not f.endswith(".rs"):
                        continue
                    with open(os.path.join(dirpath, f)) as src:
                        text = src.read()
                    for rel in re.findall(r'include_(?:str|bytes)!\("([^"]+)"\)|fatbin!\("([^"]+)"\)', text):
                        rel = next(r for r in rel if r)
                        path = os.path.normpath(os.path.join(dirpath, rel))
                        inside = os.path.relpath(path, REPO)
                        self.assertTrue(f"{top}/rust/{inside}" in names, f"{f} embeds {rel}: not in the sdist")
                        embedded += 1
            self.assertGreaterEqual(embedded, 6)  # three PTX files and three fat binaries
            # the crate's sources as they are in the repository
            for rel in ["Cargo.toml", "Cargo.lock", "src/lib.rs", "cuda/rff.ptx"]:
                with open(os.path.join(REPO, rel), "rb") as a, open(os.path.join(crate, rel), "rb") as b:
                    self.assertEqual(a.read(), b.read(), rel)
            # cargo refuses a manifest whose [[example]] or [[bench]] has no file, even for --lib
            with open(os.path.join(REPO, "Cargo.toml")) as f:
                named = re.findall(r'^\[\[(example|bench)\]\]\s*\nname = "([^"]+)"', f.read(), re.M)
            self.assertGreater(len(named), 0)
            target_files = {f"{top}/rust/{'examples' if kind == 'example' else 'benches'}/{n}.rs"
                            for kind, n in named}
            for path in sorted(target_files):
                self.assertTrue(path in names, f"{path} (named in Cargo.toml) is not in the sdist")
            # nothing else of the repository's tests, benchmarks, examples, documents or builds
            extra = sorted(n for n in names - target_files
                           if any(n.startswith(f"{top}/rust/{x}/")
                                  for x in ("tests", "benches", "examples", "docs", "target", "bindings")))
            self.assertEqual(extra, [])
            # the backend of the unpacked sdist builds the crate beside it
            found = subprocess.run([sys.executable, "-c",
                                    "import sys; sys.path.insert(0, sys.argv[1]); import joker_backend; "
                                    "print(joker_backend._crate_dir())",
                                    os.path.join(d, top, "build_backend")],
                                   env={k: v for k, v in os.environ.items() if k != "JOKER_CRATE_DIR"},
                                   capture_output=True, text=True)
            self.assertEqual(found.returncode, 0, found.stderr)
            self.assertEqual(os.path.realpath(found.stdout.strip()), os.path.realpath(crate))


class TestBindingsAgainstTheHeader(unittest.TestCase):
    """Static checks: the wrappers name only functions that the header declares, and the
    untested Julia package takes the same arguments as the Python low-level layer."""

    ROOT = REPO

    def read(self, *path):
        with open(os.path.join(self.ROOT, *path)) as f:
            return f.read()

    def test_every_called_function_is_declared(self):
        import re

        header = set(re.findall(r"\b(joker_\w+)\(", self.read("include", "joker.h")))
        self.assertGreater(len(header), 50)
        # the R package's C interface, or the older shim's
        r_source = next(p for p in [("bindings", "R", "joker", "src", "joker.c"), ("bindings", "R", "src", "joker_r.c")]
                        if os.path.exists(os.path.join(self.ROOT, *p)))
        for path in [("bindings", "python", "joker", "core.py"), JULIA_SRC, JULIA_TESTS, r_source,
                     ("bindings", "cpp", "joker.hpp")]:
            used = set(re.findall(r"\b(joker_(?:params|data|model|fit|version|abi|last|status|gpu|device)\w*)",
                                  self.read(*path)))
            unknown = sorted(u for u in used if u not in header and not u.endswith("_"))
            self.assertEqual(unknown, [], f"{'/'.join(path)} names functions missing from joker.h")

    def test_julia_mirrors_the_python_arguments(self):
        import inspect
        import re

        jl = self.read(*JULIA_SRC)
        sig = re.search(r"function Joker\(loss=\"krr\"; (.*?)\)\n", jl, re.S).group(1)
        julia_kw = [a.split("=")[0].strip() for a in sig.replace("\n", " ").split(",")]
        python_kw = [p for p in inspect.signature(joker.Joker.__init__).parameters if p not in ("self", "loss")]
        self.assertEqual(julia_kw, python_kw)
        for name in ["fit", "predict", "decision_function", "predict_proba", "score", "save", "load",
                     "version", "gpu_available", "device_count", "n_features", "n_classes", "classes",
                     "n_components", "stop_reason", "device",
                     "sample_weight=nothing, validation=nothing, progress=nothing, interrupt=nothing",
                     "Interrupt", "joker_params_set_interrupt"]:
            self.assertTrue(name in jl, f"LibJoker.jl lacks {name}")
        # the library is found as the Python module finds it in a source checkout, at load time
        for place in ['ENV["JOKER_LIB"]', 'ENV["CARGO_TARGET_DIR"]', '"libjoker.so.0"', "function __init__()",
                      '("release", "debug")']:
            self.assertIn(place, jl)
        # max_memory=nothing leaves the library's default limit: the setter is called only when given
        self.assertNotIn("something(max_memory", jl)
        self.assertIn("max_memory === nothing ||", jl)

    def test_julia_package_layout(self):
        import re
        import uuid

        project = self.read("bindings", "julia", "Joker", "Project.toml")
        self.assertIn('name = "LibJoker"', project)  # the module of src/LibJoker.jl
        self.assertIn("module LibJoker\n", self.read(*JULIA_SRC))
        uuid.UUID(re.search(r'^uuid = "(.*)"$', project, re.M).group(1))
        version = re.search(r'^version = "(.*)"$', project, re.M).group(1)
        self.assertEqual(version, joker.version())
        for dep in ("Libdl", "Test", "Random"):
            self.assertIn(f"{dep} = ", project)
        self.assertIn("using LibJoker", self.read(*JULIA_TESTS))


if __name__ == "__main__":
    unittest.main()
