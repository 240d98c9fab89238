# Tests of the joker package (base R only; run by R CMD check, or Rscript tests/test-joker.R
# with the package installed). Real data from $JOKER_DATA_DIR when it holds covtype_small,
# synthetic data otherwise. Stops at the first failure.
library(joker)

ok <- function(cond, what) {
  if (!isTRUE(cond)) stop("FAIL: ", what, call. = FALSE)
  cat("  ok:", what, "\n")
}
expect_error <- function(expr, pattern, what) {
  msg <- tryCatch({ expr; "no error" }, error = conditionMessage)
  if (!grepl(pattern, msg, fixed = TRUE))
    stop(sprintf("FAIL: %s: got \"%s\", wanted \"%s\"", what, msg, pattern), call. = FALSE)
  cat(sprintf("  ok: %-34s -> %s\n", what, msg))
}
rel_err <- function(a, b) sqrt(sum((a - b)^2) / sum(b^2))

v <- joker_version()
cat("joker", v$version, "ABI", v$abi_version, "gpu_available:", v$gpu_available,
    "devices:", v$device_count, "\n")
ok(v$abi_version == v$header_abi_version, "library and header ABI versions agree")
ok(v$gpu_available == (v$device_count > 0), "GPU availability and device count agree")

tmp <- tempfile("joker-r-")
dir.create(tmp)
old <- setwd(tmp)

cat("example (covtype, formula interface, factor labels):\n")
example <- system.file("examples", "covtype.R", package = "joker")
ok(nzchar(example), "the example is installed")
source(example)
ok(accuracy >= want_accuracy, sprintf("example accuracy %.4f >= %.2f", accuracy, want_accuracy))
info <- joker_info(model)
ok(info$n_features == ncol(train) - 1 && info$n_classes == 2 && info$n_components == 1024 &&
     info$loss == "l2-svc" && info$task == "classification", "introspection")
ok(is.factor(predict(model, test)) && identical(levels(predict(model, test)), c("-1", "1")),
   "predict() gives a factor with the levels of y")
ok(abs(joker_score(model, test, test$cover) - accuracy) < 1e-12, "score = accuracy")
ok(identical(predict(back, x_test, type = "decision"), unname(predict(model, test, type = "decision"))) ||
     isTRUE(all.equal(unname(predict(back, x_test, type = "decision")),
                      unname(predict(model, test, type = "decision")), tolerance = 0)),
   "save/load: identical decision values")
ok(identical(colnames(predict(model, test, type = "decision")), "1"),
   "binary decision column is named by the positive class")
x <- as.matrix(train[, -1]); y <- as.numeric(as.character(train$cover))

# The matrix and formula interfaces fit the same model.
mx <- joker(x, y, loss = "l2-svc", n_components = 128, max_iter = 50)
mf <- joker(cover ~ ., data = train, loss = "l2-svc", n_components = 128, max_iter = 50)
dx <- predict(mx, x_test, type = "decision")
df <- predict(mf, test, type = "decision")
ok(rel_err(df, dx) < 1e-6, sprintf("formula and matrix interfaces agree (%.1e)", rel_err(df, dx)))
ok(is.numeric(predict(mx, x_test)) && all(predict(mx, x_test) %in% c(-1, 1)),
   "numeric labels stay numeric")

cat("KLR probabilities (f64):\n")
klr <- joker(cover ~ ., data = train, loss = "klr", C = 4, n_components = 256, max_iter = 100,
             precision = "f64")
p <- predict(klr, test, type = "prob")
ok(all(dim(p) == c(nrow(test), 2)) && identical(colnames(p), c("-1", "1")) &&
     max(abs(rowSums(p) - 1)) < 1e-12, "probabilities: n x 2, named by level, sum to 1")
lab <- predict(klr, test)
ok(all((p[, "1"] > 0.5) == (lab == "1")), "probabilities agree with labels")
expect_error(predict(model, test, type = "prob"), "JOKER_STATUS_UNSUPPORTED",
             "probabilities from an SVM")
svc_p <- joker(cover ~ ., data = train, loss = "l1-svc", C = 1, probability = TRUE)
ps <- predict(svc_p, test, type = "prob")
ok(isTRUE(joker_info(svc_p)$probabilities) && !isTRUE(joker_info(model)$probabilities) &&
     max(abs(rowSums(ps) - 1)) < 1e-12 && all(ps >= 0 & ps <= 1),
   "SVM probabilities by Platt scaling (probability = TRUE): distributions")
dv <- predict(svc_p, test, type = "decision")
ok(all(diff(ps[order(dv), 2]) >= 0), "calibrated probabilities increase with the decision value")
expect_error(predict(model, test, type = "class"), "'arg' should be one of",
             "unknown predict type")

cat("multiclass (iris) with the formula interface:\n")
iris_fit <- joker(Species ~ ., data = iris, loss = "klr", C = 10, n_components = 256,
                  max_iter = 200, subset = -(1:10))
pr <- predict(iris_fit, iris)
ok(is.factor(pr) && identical(levels(pr), levels(iris$Species)) && mean(pr == iris$Species) > 0.9,
   sprintf("iris: factor predictions, accuracy %.3f", mean(pr == iris$Species)))
pp <- predict(iris_fit, iris, type = "prob")
dd <- predict(iris_fit, iris, type = "decision")
ok(identical(colnames(pp), levels(iris$Species)) && identical(colnames(dd), levels(iris$Species)),
   "prob and decision columns are the levels")
ok(all(levels(iris$Species)[max.col(pp, ties.method = "first")] == as.character(pr)),
   "the most probable class is the predicted one")
ok(identical(names(pr), rownames(iris)), "predictions carry the row names of newdata")
ovo <- joker(Species ~ ., data = iris, loss = "l2-svc", C = 10, n_components = NULL,
             multiclass = "ovo")
po <- predict(ovo, iris)
dv <- predict(ovo, iris, type = "decision")
lv <- levels(iris$Species)
ok(joker_info(ovo)$multiclass == "ovo" && joker_info(iris_fit)$multiclass == "ovr",
   "joker_info() reports the multi-class scheme")
ok(identical(colnames(dv), c(paste(lv[1], lv[2], sep = "/"), paste(lv[1], lv[3], sep = "/"),
                             paste(lv[2], lv[3], sep = "/"))),
   "one-vs-one decision columns name their pairs")
# the votes of the pair columns (positive: the second class of the pair) give the prediction
votes <- cbind(dv[, 1] < 0, dv[, 1] >= 0, 0) + cbind(dv[, 2] < 0, 0, dv[, 2] >= 0) +
  cbind(0, dv[, 3] < 0, dv[, 3] >= 0)
ok(all(apply(votes, 1, max) < 2 | lv[max.col(votes, ties.method = "first")] == as.character(po)),
   "one-vs-one predictions are the votes of the pair columns")
ok(mean(po == iris$Species) > 0.95, sprintf("one-vs-one iris accuracy %.3f", mean(po == iris$Species)))
expect_error(joker_params(multiclass = "all"), "unknown multiclass", "unknown multi-class scheme")
xi <- as.matrix(iris[, 1:4])
for (s in c("dsg", "udsg", "cdsg")) {
  ds <- joker(xi, iris$Species, loss = "l2-svc", solver = s, n_components = 256,
              batch_size = 32, feature_block = 32, max_iter = 600)
  acc <- mean(predict(ds, xi) == iris$Species)
  ok(joker_info(ds)$stop_reason == "max_iter" && acc > 0.85,
     sprintf("doubly stochastic solver %s: training accuracy %.3f", s, acc))
}
expect_error(joker_params(solver = "sgd"), "unknown solver", "unknown solver")
expect_error(joker_params(solver = "dsg", n_components = NULL), "set n_components", "DSG with the exact kernel")
expect_error(joker_params(solver = "dsg", batch_size = -1), "must be >= 0", "negative batch")
s <- summary(iris_fit)
out <- capture.output(print(s))
ok(inherits(s, "summary.joker") && s$nobs == 140 && identical(as.vector(s$counts), c(40L, 50L, 50L)) &&
     any(grepl("^loss: +klr", out)) && any(grepl("virginica", out)),
   "summary: training rows, class counts, loss")
ok(any(grepl("joker classification model: klr loss", capture.output(print(iris_fit)))),
   "print() names the task and loss")
nd <- iris[1:4, ]
nd$Petal.Width[2] <- NA
pn <- predict(iris_fit, nd)
ok(is.na(pn[2]) && !anyNA(pn[-2]), "a row with NA predicts NA")
ok(all(is.na(predict(iris_fit, nd, type = "prob")[2, ])), "... also for probabilities")

# Factor predictors, character labels, unused levels and formula weights.
set.seed(11)
n <- 300
d <- data.frame(a = rnorm(n), g = factor(sample(c("u", "v", "w"), n, TRUE)), b = runif(n))
d$label <- ifelse(d$a + (d$g == "w") * 1.5 - 0.5 + 0.2 * rnorm(n) > 0, "yes", "no")
d$w <- runif(n, 0.5, 2)
fg <- joker(label ~ a + g + b, data = d, loss = "l2-svc", n_components = 256, max_iter = 100,
            sample_weight = w)
pg <- predict(fg, d)
ok(identical(levels(pg), c("no", "yes")) && mean(pg == d$label) > 0.85,
   sprintf("character labels with a factor predictor: accuracy %.3f", mean(pg == d$label)))
xm <- model.matrix(~ a + g + b - 1, d)
fm <- joker(xm, factor(d$label), loss = "l2-svc", n_components = 256, max_iter = 100,
            sample_weight = d$w)
ok(rel_err(predict(fg, d, type = "decision"), predict(fm, xm, type = "decision")) < 1e-6,
   "formula weights and factor coding match the matrix form")
fc <- joker(label ~ a + g + b, data = d, loss = "l2-svc", n_components = 256, max_iter = 100,
            class_weight = c(yes = 20, no = 1))
ok(mean(predict(fc, d) == "yes") > mean(predict(fg, d) == "yes"),
   "class weights named by level favour that level")
expect_error(joker(label ~ a, data = d, class_weight = c(maybe = 2)),
             "`class_weight` must be named by levels of `y` (no, yes)", "class weight of an unknown level")
fw <- joker(label ~ a + g + b, data = d, loss = "l2-svc", n_components = 256, max_iter = 100)
ok(rel_err(predict(fw, d, type = "decision"), predict(fg, d, type = "decision")) > 1e-4,
   "sample weights change the fit")
expect_error(predict(fg, data.frame(a = 1, g = "z", b = 0)), "factor g has new level",
             "unseen predictor level")
d$f <- factor(d$label, levels = c("no", "maybe", "yes"))
fu <- joker(f ~ a + g + b, data = d, loss = "l2-svc", n_components = 64, max_iter = 50)
ok(identical(levels(predict(fu, d)), c("no", "yes")), "unused response levels are dropped")

cat("exact-kernel KRR against solve():\n")
# f = K (K + lambda I)^-1 y with K = exp(-gamma |x - x'|^2), from a dense solve in R;
# relative tolerance 1e-7 (f64, residual 1e-10).
set.seed(2)
xr <- matrix(runif(1200, -2, 2), 600, 2)
yr <- sin(2 * xr[, 1]) + 0.5 * xr[, 2] + 0.05 * rnorm(600)
xk <- xr[1:200, ]
kk <- exp(-0.7 * as.matrix(dist(xk))^2)
want <- kk %*% solve(kk + 0.05 * diag(200), yr[1:200])
res <- c()
full <- joker(xk, yr[1:200], n_components = NULL, gamma = 0.7, lambda = 0.05,
              precision = "f64", standardize = FALSE, normalize_target = FALSE,
              full_krr = "pcg", krr_rank = 60, krr_tol = 1e-10, check_every = 5,
              progress = function(p) { res <<- c(res, p[["residual"]]); TRUE })
err <- rel_err(predict(full, xk), want)
ok(err < 1e-7 && tail(res, 1) <= 1e-10 && joker_info(full)$stop_reason == "converged",
   sprintf("full KRR (PCG) matches a dense solve: relative error %.1e", err))
xn <- matrix(runif(40, -2, 2), 20, 2)  # and at new points: k(xn, X) (K + lambda I)^-1 y
kn <- exp(-0.7 * outer(rowSums(xn^2), rowSums(xk^2), "+") + 1.4 * xn %*% t(xk))
wantn <- kn %*% solve(kk + 0.05 * diag(200), yr[1:200])
errn <- rel_err(predict(full, xn), wantn)
ok(errn < 1e-7, sprintf("... and at new points: relative error %.1e", errn))

cat("regression:\n")
krr <- joker(xr[1:400, ], yr[1:400], loss = "krr", lambda = 1e-3, n_components = 512,
             block_size = 100, max_iter = 200)
r2 <- joker_score(krr, xr[401:600, ], yr[401:600])
ok(r2 > 0.95, sprintf("KRR R^2 %.4f > 0.95", r2))
ok(joker_info(krr)$task == "regression" && length(joker_info(krr)$classes) == 0 &&
     is.null(colnames(predict(krr, xr[1:3, ], type = "decision"))), "regression info")
dr <- data.frame(t = yr, u = xr[, 1], v = xr[, 2])
kf <- joker(t ~ u + v, data = dr[1:400, ], lambda = 1e-3, n_components = 512, block_size = 100,
            max_iter = 200)
ok(rel_err(predict(kf, dr[401:600, ]), predict(krr, xr[401:600, ])) < 1e-6,
   "regression through the formula interface")
ok(rel_err(predict(krr, xr[401:600, ]), yr[401:600]) < 0.3, "regression predictions are close")

cat("progress:\n")
calls <- 0
# Huber: KRR on features would start at its exact optimum and converge at the first check
stopped <- joker(xr[1:400, ], yr[1:400], loss = "huber", loss_param = 1, n_components = 64,
                 block_size = 50, check_every = 2,
                 progress = function(p) { calls <<- calls + 1; calls < 3 })
ok(calls == 3 && joker_info(stopped)$stop_reason == "cancelled", "progress returning FALSE stops")
expect_error(joker(xr[1:400, ], yr[1:400], n_components = 64, block_size = 50,
                   progress = function(p) stop("boom")),
             "the progress function raised an error", "error in the progress function")

cat("parameters:\n")
expect_error(joker_params(full_krr = "pcg"), "the exact kernel (n_components = NULL)",
             "full KRR needs the exact kernel")
msg <- tryCatch(joker_params(block_size = 0), error = conditionMessage)
ok(grepl("JOKER_STATUS_INVALID_ARGUMENT", msg, fixed = TRUE) && !grepl("joker_params_set", msg),
   sprintf("messages name R arguments, not C setters: %s", msg))
expect_error(joker_params(block_size = 64, nystrom_rank = 64), "below the block size",
             "Nystrom rank not below the block size")
prm <- joker_params(loss = "l2-svc", n_components = 64, max_iter = 50)
ok(inherits(prm, "joker_params") && any(grepl("l2-svc", capture.output(print(prm)))),
   "joker_params() prints its arguments")
fp <- joker(x, y, params = prm)
ok(joker_info(fp)$loss == "l2-svc" && joker_info(fp)$n_components == 64, "params = joker_params()")
fpf <- joker(cover ~ ., data = train, params = prm)
ok(joker_info(fpf)$task == "classification", "params with a factor response")
joker_free(prm)
ok(is.null(formals(joker_params)$max_memory), "max_memory defaults to NULL")
yt <- as.numeric(as.character(test$cover))
expect_error(joker(x_test, yt, loss = "l2-svc", n_components = 64, max_memory = 1000),
             "JOKER_STATUS_MEMORY", "max_memory = 1000 bytes refuses the fit")
unlimited <- joker(x_test, yt, loss = "l2-svc", n_components = 64, max_iter = 5, max_memory = 0)
ok(joker_info(unlimited)$n_features == ncol(x_test), "max_memory = 0: no limit")
joker_free(unlimited)

# Defaults on small data: block_size 512 and n_components 2048 on 100 rows (the library caps
# the block at the number of samples).
small <- joker(x[1:100, ], y[1:100], loss = "l2-svc")
ok(joker_info(small)$stop_reason %in% c("converged", "max_iter") &&
     mean(predict(small, x[1:100, ]) == y[1:100]) > 0.7, "l2-svc with the defaults on 100 rows")
joker_free(small)

kernel_model <- joker(x_test, yt, loss = "l2-svc", n_components = 64, max_iter = 20,
                      tr_model = "kernel")
ok(joker_info(kernel_model)$tr_model == "kernel", "tr_model = \"kernel\" is used and reported")
nystrom <- joker(x_test, yt, loss = "l2-svc", n_components = 64, max_iter = 50,
                 features = "nystrom", centers = "kmeans")
ok(mean(predict(nystrom, x_test) == yt) > 0.6, "a Nystrom map fits and predicts")
sub <- seq_len(min(1000, nrow(x_test)))
auto <- joker(x_test[sub, ], yt[sub], loss = "l2-svc", auto_exact = TRUE,
              working_set = "shrinking", max_iter = 200)
ok(joker_info(auto)$n_components == 0, "auto_exact takes the exact kernel where it fits the cache")
yr_test <- ifelse(yt == yt[1], 1, -1) + 0.1 * x_test[, 1]
for (direct in c(TRUE, FALSE)) {
  dk <- joker(x_test, yr_test, n_components = 64, max_iter = 2000, direct_krr = direct)
  ok((joker_info(dk)$iterations == 0) == direct,
     sprintf("direct_krr = %s: %d iterations", direct, joker_info(dk)$iterations))
  joker_free(dk)
}
for (newton in c(TRUE, FALSE)) {
  nt <- joker(x_test, yt, loss = "l2-svc", n_components = 64, max_iter = 2000,
              newton_start = newton)
  ok((joker_info(nt)$iterations == 0) == newton,
     sprintf("newton_start = %s: %d iterations", newton, joker_info(nt)$iterations))
  joker_free(nt)
}
diag_fit <- joker(x_test, yt, loss = "klr", n_components = 64, max_iter = 50, tr_norm = "diagonal")
ok(mean(predict(diag_fit, x_test) == yt) > 0.6, "tr_norm = \"diagonal\" fits")
expect_error(joker_params(tr_norm = "cholesky"), "tr_norm", "unknown trust-region norm")
with_bias <- joker(x_test, yt, loss = "l2-svc", n_components = 64, max_iter = 50, bias = 1)
ok(mean(predict(with_bias, x_test) == yt) > 0.6, "a bias feature fits")
expect_error(joker_params(bias = 1, n_components = NULL), "bias", "a bias with the exact kernel")
yr_off <- 3 + yr_test
svr_b <- joker(x_test, yr_off, loss = "svr", n_components = 64, max_iter = 2000)
krr_b <- joker(x_test, yr_off, n_components = 64, max_iter = 2000, intercept = TRUE)
ok(all(is.finite(predict(svr_b, x_test))) && all(is.finite(predict(krr_b, x_test))),
   "fits with an intercept (SVR's by default, KRR's asked for)")
expect_error(joker_params(loss = "l2-svc", intercept = TRUE), "intercept", "an intercept for a classifier")
expect_error(joker_params(intercept = NA), "intercept", "an intercept neither TRUE, FALSE nor NULL")
svr_auto <- joker(x_test, yr_off, n_components = NULL, auto_loss = TRUE)
krr_auto <- joker(x_test, yr_off, n_components = 64, auto_loss = TRUE)
ok(joker_info(svr_auto)$loss == "svr" && joker_info(krr_auto)$loss == "krr",
   "the automatic loss: SVR on the exact kernel, KRR on a feature map")
joker_free(svr_auto)
joker_free(krr_auto)
expect_error(joker_params(loss = "l2-svc", auto_loss = TRUE), "auto_loss", "the automatic loss for a classifier")
expect_error(joker_params(bias = -1), "bias", "a negative bias")
on_cpu <- joker(x_test, yt, loss = "l2-svc", n_components = 64, max_iter = 20, device = "cpu")
ok(startsWith(joker_info(on_cpu)$device, "cpu"), "device = \"cpu\" trains on the CPU")
if (!v$gpu_available) {
  auto <- joker(x_test, yt, loss = "l2-svc", n_components = 64, max_iter = 20)
  ok(startsWith(joker_info(auto)$device, "cpu (auto"),
     sprintf("auto without a GPU: %s", joker_info(auto)$device))
  expect_error(joker(x_test, yt, loss = "l2-svc", n_components = 64, max_iter = 5,
                     device = "cuda:0"), "JOKER_STATUS_DEVICE", "cuda:0 without a GPU")
}

cat("save and load:\n")
f <- file.path(tmp, "iris.json")
ok(identical(joker_save(iris_fit, f), f) && file.exists(f), "joker_save() writes the file")
back_iris <- joker_load(f, levels = levels(iris$Species))
xi <- model.matrix(~ . - 1, iris[, 1:4])
ok(identical(unname(predict(back_iris, xi, type = "decision")),
             unname(predict(iris_fit, iris, type = "decision"))),
   "round trip: identical decision values")
ok(identical(unname(predict(back_iris, xi)), unname(pr)), "round trip: identical factor labels")
ok(is.numeric(predict(joker_load(f), xi)), "without levels the labels are the stored numbers")
ok(all.equal(joker_info(back_iris)[c("gamma", "lambda", "n_components", "classes")],
             joker_info(iris_fit)[c("gamma", "lambda", "n_components", "classes")]),
   "round trip: same introspection")
ok(any(grepl("unknown", capture.output(summary(back_iris)))), "summary of a loaded model")
expect_error(joker_load(f, levels = c("a", "b")), "`levels` has 2 labels, but the model has 3 classes",
             "levels of the wrong length")
fk <- file.path(tmp, "krr.json")
joker_save(krr, fk)
expect_error(joker_load(fk, levels = c("a", "b")), "regression model", "levels for a regression model")
ok(identical(predict(joker_load(fk), xr[1:50, ]), predict(krr, xr[1:50, ])),
   "round trip of a regression model")
rds <- file.path(tmp, "model.rds")
saveRDS(iris_fit, rds)
expect_error(predict(readRDS(rds), iris), "restored by readRDS() or load()",
             "a model from readRDS() has no handle")
expect_error(joker_load(file.path(tmp, "missing.json")), "JOKER_STATUS_IO", "missing model file")
writeLines("{\"format\": \"something else\"}", file.path(tmp, "bad.json"))
expect_error(joker_load(file.path(tmp, "bad.json")), "JOKER_STATUS_MODEL_FORMAT: model file",
             "not a model file")
expect_error(joker_save(iris_fit, c("a", "b")), "`file` must be a file name", "two file names")
expect_error(joker_save(iris_fit, file.path(tmp, "bad.json")), "is not a joker model file; refusing",
             "save refuses a file that is not a model")
data_file <- file.path(tmp, "data.csv")
writeLines(c("1,2,3", "4,5,6"), data_file)
expect_error(joker_save(iris_fit, data_file), "use overwrite = TRUE", "save refuses a data file")
ok(identical(readLines(data_file), c("1,2,3", "4,5,6")), "the refused file is left as it was")
joker_save(iris_fit, data_file, overwrite = TRUE)
ok(identical(joker_info(joker_load(data_file))$classes, joker_info(iris_fit)$classes),
   "overwrite = TRUE replaces it")
joker_save(krr, f)
ok(length(joker_info(joker_load(f))$classes) == 0, "a model file is replaced without overwrite")
empty <- file.path(tmp, "empty.json")
file.create(empty)
joker_save(krr, empty)
ok(file.size(empty) > 0, "an empty file is replaced without overwrite")
expect_error(joker_save(krr, f, overwrite = NA), "`overwrite` must be TRUE or FALSE", "overwrite = NA")

cat("error paths:\n")
bad <- x
bad[3, 2] <- NaN
expect_error(joker(bad, y, loss = "l2-svc", n_components = 64),
             "`x` has a missing value (NA) at row 3, column 2", "NaN in x")
bad[3, 2] <- Inf
expect_error(joker(bad, y, loss = "l2-svc", n_components = 64),
             "`x` has an infinite value at row 3, column 2", "Inf in x")
xinf <- x_test[1:2, ]
xinf[2, 3] <- -Inf
expect_error(predict(mx, xinf), "`newdata` has an infinite value at row 2, column 3", "Inf in newdata")
expect_error(joker(x, y[-1], loss = "l2-svc"),
             sprintf("`y` has %d values, but there are %d rows", nrow(x) - 1, nrow(x)), "y too short")
expect_error(joker(x, replace(y, 5, NA)), "`y` has missing values (NA at 5)", "NA in y")
expect_error(joker(x), "`y` is missing", "no y")
expect_error(joker(train, y), "non-numeric columns (cover)", "factor column in a matrix x")
expect_error(joker(list(1, 2), 1:2), "`x` must be a numeric matrix or data frame", "a list as x")
expect_error(joker(x, factor(rep("a", nrow(x)))), "single class (a)", "one class")
expect_error(joker(x, factor(y), task = "regression"), "task is not \"classification\"",
             "factor y for regression")
expect_error(joker(x, y, n_component = 64), "unknown argument n_component", "misspelt parameter")
expect_error(joker(x, y, 64), "parameters must be named", "unnamed parameter")
expect_error(joker(x, y, params = prm, C = 2), "not both", "params and arguments")
expect_error(joker(x, y, params = list()), "`params` must come from joker_params()", "bad params")
expect_error(joker(x, y, sample_weight = 1:3),
             sprintf("`sample_weight` must be %d finite numbers", nrow(x)), "sample_weight of the wrong length")
expect_error(joker(x, y, progress = 1), "`progress` must be a function", "progress not a function")
expect_error(joker(~ a + b, data = d), "`formula` has no response", "formula without response")
expect_error(joker(x, y, loss = "l2-svc", validation = list(x = x_test[, -1], y = yt)),
             sprintf("`validation`: x has %d columns, the training x has %d", ncol(x) - 1, ncol(x)),
             "validation one column short")
expect_error(joker(x, y, loss = "l2-svc", validation = list(x = x_test, y = yt[-1])),
             sprintf("`validation y` has %d values, but there are %d rows", nrow(x_test) - 1,
                     nrow(x_test)), "validation y too short")
expect_error(joker(x, y, validation = x_test), "`validation` must be list(x = , y = )",
             "validation as a matrix")
vt <- test
vt$cover <- factor(ifelse(vt$cover == "1", "one", "other"))
expect_error(joker(cover ~ ., data = train, validation = vt), "labels that `y` does not have: ",
             "validation labels unknown to y")
expect_error(predict(back, x_test[, -1]),
             sprintf("JOKER_STATUS_SHAPE_MISMATCH: shape mismatch: `data` has %d columns, the model was trained on %d",
                     ncol(x_test) - 1, ncol(x_test)), "predict with the wrong width")
expect_error(predict(model, x_test), "must be a data frame", "a matrix for a formula model")
expect_error(predict(model), "`newdata` is missing", "predict without newdata")
expect_error(predict(mx, "a"), "`newdata` must be a numeric matrix", "character newdata")
expect_error(joker_score(model, test, factor(rep("2", nrow(test)))),
             "`y` has labels the model does not know: 2", "score with unknown labels")
expect_error(joker_params(C = -1), "JOKER_STATUS_INVALID_ARGUMENT: `c`: must be positive", "C < 0")
expect_error(joker_params(C = NA), "`C` must be a single number", "C = NA")
expect_error(joker_params(C = 1:2), "`C` must be a single number", "C of length 2")
expect_error(joker_params(C = 1, lambda = 1), "give `C` or `lambda`, not both", "C and lambda")
expect_error(joker_params(standardize = "yes"), "`standardize` must be TRUE or FALSE",
             "standardize not a flag")
expect_error(joker_params(loss = "hinge"), "JOKER_STATUS_INVALID_ARGUMENT: unknown loss \"hinge\"",
             "unknown loss")
expect_error(joker_params(n_components = 0),
             "JOKER_STATUS_INVALID_ARGUMENT: invalid parameter `n_components`", "M = 0")
expect_error(joker_params(device = "gpu"), "JOKER_STATUS_INVALID_ARGUMENT: device", "unknown device")
expect_error(joker_params(device = -3), "JOKER_STATUS_INVALID_ARGUMENT: device", "negative device")
expect_error(joker_params(tr_model = "hessian"), "tr_model", "unknown trust-region model")
expect_error(joker_params(features = "orf"), "features", "unknown feature map")
expect_error(joker_params(working_set = "best"), "working_set", "unknown working-set rule")
expect_error(joker_params(features = "nystrom", centers = "random"), "centers", "unknown centre rule")
expect_error(joker_params(class_weight = c(a = 1)), "`class_weight` must be", "bad class weights")
expect_error(joker_info(list()), "`model` must be a joker model", "joker_info() of a list")
joker_free(klr)
expect_error(predict(klr, test), "it was freed with joker_free()", "freed model")
expect_error(joker_free(klr), "", "freeing twice is harmless")
expect_error(joker_free(1), "`x` must be a joker model or joker_params object", "freeing a number")

setwd(old)
unlink(tmp, recursive = TRUE)
invisible(gc())
cat("R tests passed\n")
