#!/usr/bin/env python3
"""Calibrated SVM probabilities: `joker train --proba` (Platt scaling on 5-fold decision
values) against scikit-learn's SVC(probability=True) (LIBSVM's -b 1, also 5 folds) at equal C
and gamma on the same z-scored rows (joker's standardiser, read from its model file, applied to
the rows scikit-learn sees; gamma is the width joker's default chose).

usage: python scripts/peers/proba.py OUT.json NAME [NAME ...]   (LIBSVM pairs NAME, NAME.t of
$JOKER_DATA_DIR/libsvm; from the repository root after cargo build --release). Writes every
run into OUT.json (commit, date, CPU, threads) and prints per set and system: the test
log-loss, the accuracy of the argmax of the probabilities, the largest |row sum - 1|, the
fraction of test rows whose probability ranking agrees with the decision values (binary: the
Spearman correlation of P(positive) and the decision value), and the fit's seconds. joker
runs on all cores, LIBSVM on one."""
import json, os, platform, subprocess, sys, time
import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import log_loss
from sklearn.svm import SVC

DATA = os.environ.get("JOKER_DATA_DIR", "../shared/datasets")
J = os.path.abspath("target/release/joker")
C = float(os.environ.get("PROBA_C", "1"))


def spearman(a, b):
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def summary(p, dv, y, classes, secs):
    out = {"log_loss": float(log_loss(y, p, labels=classes)),
           "accuracy_argmax": float(np.mean(classes[np.argmax(p, 1)] == y)),
           "max_row_sum_error": float(np.max(np.abs(p.sum(1) - 1))),
           "fit_seconds": secs}
    if len(classes) == 2:
        out["spearman_p_decision"] = spearman(p[:, 1], dv.ravel())
    return out


def machine():
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "src"], capture_output=True, text=True).stdout.strip()
    return {"commit": commit, "src_modified_at_run_time": bool(dirty),
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "cpu": cpu[0] if cpu else platform.processor(), "logical_cpus": os.cpu_count(),
            "threads": {"joker": "all logical CPUs (rayon)", "sklearn SVC": "1 (LIBSVM)"},
            "C": C, "command": " ".join(sys.argv)}


def main():
    out_path, names = sys.argv[1], sys.argv[2:]
    record = {"machine": machine(), "sets": {}}
    for name in names:
        tr, te = f"{DATA}/libsvm/{name}", f"{DATA}/libsvm/{name}.t"
        model = f"/tmp/proba-{name}.json"
        t = time.time()
        subprocess.run([J, "train", "--proba", "-q", "-c", str(C), tr, model], check=True,
                       capture_output=True)
        jsecs = time.time() - t
        m = json.load(open(model))
        for kind, path in (("proba", "/tmp/proba-p.txt"), ("decision", "/tmp/proba-d.txt")):
            subprocess.run([J, "predict", f"--{kind}", "-q", te, model, path], check=True,
                           capture_output=True)
        jp, jd = np.loadtxt("/tmp/proba-p.txt", ndmin=2), np.loadtxt("/tmp/proba-d.txt", ndmin=2)
        X, y = load_svmlight_file(tr)
        Xt, yt = load_svmlight_file(te, n_features=X.shape[1])
        d = m["n_features"]
        st = m["standardizer"]
        center, scale = np.array(st["center"]), np.array(st["scale"])

        def z(A):
            A = A.toarray()
            if A.shape[1] < d:
                A = np.hstack([A, np.zeros((A.shape[0], d - A.shape[1]))])
            return (A[:, :d] - center) / scale
        classes = np.array(m["classes"])
        gamma = m["kernel"]["gamma"]
        entry = {"n_train": int(X.shape[0]), "n_test": int(Xt.shape[0]), "classes": len(classes),
                 "gamma": gamma, "joker": summary(jp, jd, yt, classes, jsecs)}
        t = time.time()
        svc = SVC(C=C, gamma=gamma, probability=True, random_state=0).fit(z(X), y)
        ssecs = time.time() - t
        Zt = z(Xt)
        entry["sklearn"] = summary(svc.predict_proba(Zt), svc.decision_function(Zt), yt,
                                   svc.classes_, ssecs)
        entry["log_loss_ratio_joker_over_sklearn"] = entry["joker"]["log_loss"] / entry["sklearn"]["log_loss"]
        record["sets"][name] = entry
        for sysname in ("joker", "sklearn"):
            print(name, sysname, json.dumps(entry[sysname]), flush=True)
        print(name, "log-loss ratio", round(entry["log_loss_ratio_joker_over_sklearn"], 4), flush=True)
        json.dump(record, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
