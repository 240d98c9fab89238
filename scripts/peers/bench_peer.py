#!/usr/bin/env python3
"""One peer job of joker's end-to-end benchmark (examples/bench): fit, predict, score.

usage: bench_peer.py JOB_JSON

The job names a system and the prepared split written by the benchmark (`<data>.xtr.npy`,
`.ytr.npy`, `.xte.npy`, `.yte.npy`: features already z-scored with training statistics,
regression targets z-scored too) and the shared hyper-parameters (gamma of
exp(-gamma ||x - x'||^2), C or lambda, M, seed). Prints one JSON line:
{"metric": accuracy or RMSE (z units), "fit_s", "predict_s", "peak_rss_mb"}; a system that is
not installed prints {"skip": reason}. Times cover the fit and the prediction calls only
(data loading excluded, as for joker); peak RSS is the whole process's (VmHWM).

Problems, matched to joker's where they can be:
- rff-linearsvc / rff-ridge: scikit-learn RBFSampler(M) features, then LinearSVC(squared
  hinge, C, no intercept) or Ridge(alpha=lambda, no intercept): joker's L2-SVC / KRR problem
  on a different draw of random features.
- nystroem-*: the same with Nystroem(M) features.
- rff-logreg / nystroem-logreg: those features, then LogisticRegression(C, no intercept, lbfgs):
  joker's KLR problem (C times the summed logistic loss plus half the squared norm).
- liblinear-joker-features: LIBLINEAR's dual coordinate descent (-s 1: L2-regularised
  squared hinge) on joker's own random features psi(x) = sqrt(2/M) cos(W x + b), with W and b
  written by the benchmark: the identical problem to joker's L2-SVC.
- sklearn-svc / sklearnex-svc / thundersvm-svc: exact RBF SVC (hinge loss), same gamma and C.
- sklearn-svr / thundersvm-svr: exact RBF SVR (C, epsilon in z units).
- sklearn-krr: exact KernelRidge(alpha=lambda), dense solve.
"""
import json
import sys
import time

import numpy as np

from memory import peak_rss_mb  # scripts/peers/memory.py (the script's own folder)


def load(prefix):
    return (np.load(prefix + ".xtr.npy"), np.load(prefix + ".ytr.npy"),
            np.load(prefix + ".xte.npy"), np.load(prefix + ".yte.npy"))


def joker_features(x, w, b):
    """psi(x) = sqrt(2/M) cos(x W^T + b), in f64 (what joker computes in f32)."""
    z = x.astype(np.float64) @ w.T
    z += b
    np.cos(z, out=z)
    z *= np.sqrt(2.0 / w.shape[0])
    return z


def make_model(job):
    """The estimator (or a pipeline) for the job; None when the system is missing."""
    s, task = job["system"], job["task"]
    gamma, seed = job["gamma"], job.get("seed", 0)
    c = job.get("c", 1.0)
    lam = job.get("lambda", 1.0 / c)
    m = job.get("m", 0)
    clf = task == "classification"
    if s in ("sklearn-svc", "sklearn-svr"):
        from sklearn.svm import SVC, SVR
        return (SVC(C=c, gamma=gamma, cache_size=1000) if clf
                else SVR(C=c, gamma=gamma, epsilon=job.get("epsilon", 0.1), cache_size=1000))
    if s == "sklearnex-svc":
        from sklearnex.svm import SVC
        return SVC(C=c, gamma=gamma)
    if s in ("thundersvm-svc", "thundersvm-svr"):
        from thundersvm import SVC, SVR
        return (SVC(C=c, gamma=gamma, kernel="rbf") if clf
                else SVR(C=c, gamma=gamma, kernel="rbf", epsilon=job.get("epsilon", 0.1)))
    if s == "sklearn-krr":
        from sklearn.kernel_ridge import KernelRidge
        return KernelRidge(alpha=lam, kernel="rbf", gamma=gamma)
    if s.startswith(("rff-", "nystroem-")):
        from sklearn.kernel_approximation import Nystroem, RBFSampler
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline
        from sklearn.linear_model import LogisticRegression
        from sklearn.svm import LinearSVC
        feat = (RBFSampler(gamma=gamma, n_components=m, random_state=seed) if s.startswith("rff-")
                else Nystroem(gamma=gamma, n_components=m, random_state=seed))
        if s.endswith("-logreg"):
            head = LogisticRegression(C=c, fit_intercept=False, max_iter=job.get("max_iter", 1000))
        elif clf:
            head = LinearSVC(C=c, loss="squared_hinge", dual=True, fit_intercept=False,
                             max_iter=job.get("max_iter", 1000), random_state=seed)
        else:
            head = Ridge(alpha=lam, fit_intercept=False)
        return make_pipeline(feat, head)
    raise ValueError(f"unknown system {s}")


def run_liblinear(job, xtr, ytr, xte):
    from liblinear import liblinearutil as ll
    tag = f"{job['m']}s{job['seed']}"
    w, b = np.load(job["data"] + f".w{tag}.npy"), np.load(job["data"] + f".b{tag}.npy")
    from scipy.sparse import csr_matrix
    # LIBLINEAR's Python interface converts a scipy CSR matrix in C, a dense array row by row
    # in Python (minutes here): hand it CSR. Prediction is the linear decision sign(psi w),
    # computed with numpy (LIBLINEAR's own predict goes through the same slow conversion).
    t0 = time.perf_counter()
    ftr = joker_features(xtr, w, b)
    ftr = csr_matrix(ftr)
    model = ll.train(ytr, ftr, f"-s 1 -c {job['c']} -B -1 -q")
    del ftr
    t1 = time.perf_counter()
    coef = np.asarray(model.get_decfun()[0])
    scores = joker_features(xte, w, b) @ coef
    # get_decfun is oriented to the model's first label
    first = model.get_labels()[0]
    labels = np.where(scores > 0, first, -first)
    t2 = time.perf_counter()
    return labels.astype(np.float64), t1 - t0, t2 - t1


def main():
    job = json.loads(sys.argv[1])
    try:
        if job["system"] == "liblinear-joker-features":
            import liblinear  # noqa: F401
        model = None if job["system"] == "liblinear-joker-features" else make_model(job)
    except ImportError as e:
        print(json.dumps({"skip": f"not installed: {e}"}))
        return
    xtr, ytr, xte, yte = load(job["data"])
    if model is None:
        pred, fit_s, predict_s = run_liblinear(job, xtr, ytr, xte)
    else:
        t0 = time.perf_counter()
        model.fit(xtr, ytr)
        t1 = time.perf_counter()
        pred = np.asarray(model.predict(xte), dtype=np.float64)
        t2 = time.perf_counter()
        fit_s, predict_s = t1 - t0, t2 - t1
    if job["task"] == "classification":
        metric = float(np.mean(pred == yte))
    else:
        metric = float(np.sqrt(np.mean((pred - yte) ** 2)))
    rss = peak_rss_mb()
    print(json.dumps({"metric": metric, "fit_s": fit_s, "predict_s": predict_s,
                      "peak_rss_mb": rss}))


if __name__ == "__main__":
    main()
