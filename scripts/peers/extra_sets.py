#!/usr/bin/env python3
"""Public data sets that ship inside installed packages, written as label-first CSV files (no
header) with a seeded 70/30 train/test split, for scripts/peers/judge.py's judging half.

Sources, nothing fetched at run time:
- scikit-learn's bundled sets (sklearn.datasets.load_*: digits, breast_cancer, wine, iris,
  diabetes unscaled, linnerud);
- R's `datasets` package (Debian r-base), read through `Rscript` when it is on the PATH
  (quakes, infert, ChickWeight, mtcars, airquality, warpbreaks, faithful, Titanic, CO2, attenu,
  swiss, esoph); without R those are skipped and said so.

Representations vary on purpose: raw pixel intensities 0..16 (digits), unscaled measurements of
very different ranges (breast_cancer, wine, diabetes unscaled, quakes), counts (Titanic
expanded to one row per person, esoph, warpbreaks), one-hot factors (infert, ChickWeight, CO2,
Titanic, warpbreaks, esoph), a single feature (faithful); 2 to 10 classes; 20 to 2,201 rows.
Rows with a missing value are dropped. Factors are one-hot encoded (every level a 0/1 column);
ordered factors too. Classes are written as 0..K-1 in sorted order of the original labels.

The split: rows permuted by numpy.random.default_rng(SEED) (SEED = 0 unless --seed), the first
round(0.3 n) of the permutation are the test rows, the rest training rows.

usage: /tmp/jvenv/bin/python scripts/peers/extra_sets.py [--out target/extra-sets] [--seed 0]
Writes OUT/NAME.train.csv, OUT/NAME.test.csv and OUT/index.json (name, task, rows, source,
features), which judge.py reads (--extra OUT, judging half only).
"""
import json, os, shutil, subprocess, sys
import numpy as np

ARGS = sys.argv[1:]
OUT = ARGS[ARGS.index("--out") + 1] if "--out" in ARGS else "target/extra-sets"
SEED = int(ARGS[ARGS.index("--seed") + 1]) if "--seed" in ARGS else 0


def sklearn_sets():
    from sklearn import datasets as ds
    out = []
    b = ds.load_digits()
    out.append(("sk-digits", "cls", b.data, b.target, "scikit-learn load_digits: 8x8 pixel "
                "intensities 0..16, 10 classes"))
    b = ds.load_breast_cancer()
    out.append(("sk-breast-cancer", "cls", b.data, b.target, "scikit-learn load_breast_cancer: "
                "30 unscaled measurements (0.001 to 4,000), 2 classes"))
    b = ds.load_wine()
    out.append(("sk-wine", "cls", b.data, b.target, "scikit-learn load_wine: 13 unscaled "
                "measurements, 3 classes"))
    b = ds.load_iris()
    out.append(("sk-iris", "cls", b.data, b.target, "scikit-learn load_iris: 4 measurements, "
                "3 classes"))
    b = ds.load_diabetes(scaled=False)
    out.append(("sk-diabetes", "reg", b.data, b.target, "scikit-learn load_diabetes(scaled="
                "False): age, sex (1/2), bmi, bp, six serum values; target disease progression"))
    b = ds.load_linnerud()
    out.append(("sk-linnerud", "reg", b.data, b.target[:, 0], "scikit-learn load_linnerud: "
                "three exercise counts; target weight (first physiological column); 20 rows"))
    return out


# R: name, target column, task, columns to drop, description
R_SETS = [
    ("quakes", "mag", "reg", [], "R datasets::quakes: lat, long, depth, stations; target magnitude"),
    ("infert", "case", "cls", ["stratum", "pooled.stratum"], "R datasets::infert: education "
     "(one-hot), age, parity, induced, spontaneous (counts); class case/control"),
    ("ChickWeight", "weight", "reg", ["Chick"], "R datasets::ChickWeight: Time, Diet (one-hot); "
     "target weight"),
    ("mtcars", "mpg", "reg", [], "R datasets::mtcars: 10 car characteristics; target mpg"),
    ("airquality", "Ozone", "reg", [], "R datasets::airquality (complete rows): Solar.R, Wind, "
     "Temp, Month, Day; target ozone"),
    ("warpbreaks", "breaks", "reg", [], "R datasets::warpbreaks: wool, tension (one-hot); "
     "target the count of breaks"),
    ("faithful", "waiting", "reg", [], "R datasets::faithful: eruption length (one feature); "
     "target waiting time"),
    ("Titanic", "Survived", "cls", [], "R datasets::Titanic expanded to one row per person "
     "(2,201): class, sex, age (one-hot); class survived"),
    ("CO2", "uptake", "reg", ["Plant"], "R datasets::CO2: Type, Treatment (one-hot), conc; "
     "target uptake"),
    ("attenu", "accel", "reg", ["station", "event"], "R datasets::attenu (complete rows): "
     "magnitude, distance; target peak acceleration"),
    ("swiss", "Fertility", "reg", [], "R datasets::swiss: five socio-economic percentages; "
     "target fertility"),
    ("esoph", "ncases", "reg", [], "R datasets::esoph: age, alcohol, tobacco groups (one-hot), "
     "ncontrols (a count); target the count of cases"),
]

R_PROGRAM = r"""
args <- commandArgs(trailingOnly = TRUE)
out <- args[1]
for (n in args[-1]) {
  d <- get(n, envir = as.environment("package:datasets"))
  if (n == "Titanic") {
    d <- as.data.frame(d)
    d <- d[rep(seq_len(nrow(d)), d$Freq), c("Class", "Sex", "Age", "Survived")]
  }
  d <- as.data.frame(d)
  for (c in names(d)) if (is.factor(d[[c]])) d[[c]] <- paste0(c, "=", as.character(d[[c]]))
  write.csv(d, file.path(out, paste0(n, ".csv")), row.names = FALSE)
}
"""


def r_sets():
    if not shutil.which("Rscript"):
        print("Rscript not found: the R datasets are skipped", file=sys.stderr)
        return []
    import pandas as pd
    tmp = os.path.join(OUT, "r-raw")
    os.makedirs(tmp, exist_ok=True)
    subprocess.run(["Rscript", "-e", R_PROGRAM, tmp] + [s[0] for s in R_SETS], check=True)
    out = []
    for name, target, task, drop, what in R_SETS:
        df = pd.read_csv(os.path.join(tmp, f"{name}.csv")).drop(columns=drop).dropna()
        y = df.pop(target)
        cats = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
        x = pd.get_dummies(df, columns=cats, dtype=float).to_numpy(dtype=float)
        if task == "cls":
            y = np.unique(y.to_numpy(), return_inverse=True)[1]
        else:
            y = y.to_numpy(dtype=float)
        out.append((f"r-{name.lower()}", task, x, y, what))
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    index = []
    for name, task, x, y, what in sklearn_sets() + r_sets():
        x, y = np.asarray(x, dtype=float), np.asarray(y)
        n = len(y)
        perm = np.random.default_rng(SEED).permutation(n)
        n_test = int(round(0.3 * n))
        test, train = perm[:n_test], perm[n_test:]
        fmt = "%d" if task == "cls" else "%.17g"
        for part, rows in (("train", train), ("test", test)):
            with open(f"{OUT}/{name}.{part}.csv", "w") as f:
                for i in rows:
                    f.write((fmt % y[i]) + "," + ",".join(f"{v:.17g}" for v in x[i]) + "\n")
        index.append({"name": name, "task": task, "n_train": len(train), "n_test": len(test),
                      "d": x.shape[1], "classes": int(len(np.unique(y))) if task == "cls" else None,
                      "source": what, "seed": SEED})
        print(f"{name}: {task}, {len(train)} + {len(test)} rows x {x.shape[1]}", file=sys.stderr)
    json.dump(index, open(f"{OUT}/index.json", "w"), indent=1)


if __name__ == "__main__":
    main()
