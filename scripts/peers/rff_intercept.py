#!/usr/bin/env python3
"""What an intercept is worth to a random-feature L2-SVC: scikit-learn's RBFSampler features
and LinearSVC (LIBLINEAR's dual coordinate descent, squared hinge, C = 1) with and without
fit_intercept, at M = 1024 and 2048, on z-scored features with gamma = 1 / median of the
squared distances of 2,000 training rows. docs/solver.md ("A bias feature") quotes it.

    .venv-bench/bin/python scripts/peers/rff_intercept.py ijcnn1 a9a w8a

Data from $JOKER_DATA_DIR/libsvm or ../shared/datasets/libsvm (NAME and NAME.t).
"""
import os
import sys
import time

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.kernel_approximation import RBFSampler
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

DATA = os.path.join(os.environ.get("JOKER_DATA_DIR", "../shared/datasets"), "libsvm")


def main(names):
    for name in names:
        path = os.path.join(DATA, name)
        xtr, ytr = load_svmlight_file(path)
        xte, yte = load_svmlight_file(path + ".t", n_features=xtr.shape[1])
        scaler = StandardScaler().fit(xtr.toarray())
        xtr, xte = scaler.transform(xtr.toarray()), scaler.transform(xte.toarray())
        rows = xtr[np.random.default_rng(0).choice(len(xtr), 2000, replace=False)]
        d2 = ((rows[:, None, :] - rows[None, :, :]) ** 2).sum(-1)
        gamma = 1.0 / np.median(d2[np.triu_indices(len(rows), 1)])
        for m in (1024, 2048):
            rbf = RBFSampler(gamma=gamma, n_components=m, random_state=1).fit(xtr)
            ztr, zte = rbf.transform(xtr), rbf.transform(xte)
            for intercept in (False, True):
                t = time.time()
                svc = LinearSVC(C=1.0, loss="squared_hinge", dual=True,
                                fit_intercept=intercept, max_iter=5000).fit(ztr, ytr)
                print(f"{name} M {m} intercept {intercept}: "
                      f"{100 * svc.score(zte, yte):.2f}% in {time.time() - t:.1f} s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
