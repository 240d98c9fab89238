#!/usr/bin/env python3
"""`joker train --search` against scikit-learn's GridSearchCV(SVC()) over the same grid and
folds: C in {0.1, 1, 10, 100} and gamma in {0.25, 0.5, 1, 2, 4} times scikit-learn's "scale"
width of the z-scored training rows (the width joker's default takes on the exact kernel),
3 folds, then the winner refitted on all rows and scored on the test file.

usage: python scripts/peers/search.py NAME [NAME ...]   (LIBSVM pairs NAME, NAME.t of
$JOKER_DATA_DIR/libsvm; from the repository root after cargo build --release). Prints one line
per set and system: the winner, its mean held-out accuracy, the test accuracy and the seconds
of the whole search (refit included); joker's runs on all cores, LIBSVM on one."""
import os, subprocess, sys, time, json
import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

DATA = os.environ.get("JOKER_DATA_DIR", "../shared/datasets")
J = os.path.abspath("target/release/joker")
C = [0.1, 1.0, 10.0, 100.0]
F = [0.25, 0.5, 1.0, 2.0, 4.0]

for name in sys.argv[1:]:
    tr, te = f"{DATA}/libsvm/{name}", f"{DATA}/libsvm/{name}.t"
    t = time.time()
    out = subprocess.run([J, "train", "--search", "-q", tr, "/tmp/search-model.json"],
                         capture_output=True, text=True, check=True)
    secs = time.time() - t
    pred = subprocess.run([J, "predict", te, "/tmp/search-model.json", "/dev/null"],
                          capture_output=True, text=True, check=True).stderr
    rec = json.load(open("/tmp/search-model.json"))["training"]["search"]
    best = rec["candidates"][rec["best"]]
    acc = pred.split("Accuracy = ")[1].split("%")[0]
    print(f"{name} joker   C {best['c']:g} width x{best['gamma_factor']:g}: cv {best['mean']:.4f}"
          f" +- {best['spread']:.4f}, test {float(acc):.2f}%, {secs:.2f} s")
    X, y = load_svmlight_file(tr)
    Xt, yt = load_svmlight_file(te, n_features=X.shape[1])
    sc = StandardScaler().fit(X.toarray())
    Xs, Xts = sc.transform(X.toarray()), sc.transform(Xt.toarray())
    g = 1.0 / (Xs.shape[1] * Xs.var())
    t = time.time()
    gs = GridSearchCV(SVC(), {"C": C, "gamma": [f * g for f in F]},
                      cv=KFold(3, shuffle=True, random_state=1)).fit(Xs, y)
    secs = time.time() - t
    i = gs.best_index_
    print(f"{name} sklearn C {gs.best_params_['C']:g} width x{gs.best_params_['gamma'] / g:g}:"
          f" cv {gs.cv_results_['mean_test_score'][i]:.4f} +- {gs.cv_results_['std_test_score'][i]:.4f},"
          f" test {100 * gs.score(Xts, yt):.2f}%, {secs:.2f} s")
