# Tests of the R binding: Rscript bindings/R/tests/test_joker.R
# Environment: JOKER_R_SHIM (the built shim), JOKER_DATA_DIR (default ../shared/datasets).
# Runs the example (real data when present: accuracy, save/load), then the other losses and
# the error paths with their messages. Exits non-zero on the first failure.
here <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]))
Sys.setenv(JOKER_R = file.path(here, "..", "joker.R"))
source(file.path(here, "..", "joker.R"))

ok <- function(cond, what) {
  if (!isTRUE(cond)) stop("FAIL: ", what, call. = FALSE)
  cat("  ok:", what, "\n")
}
expect_error <- function(expr, pattern, what) {
  msg <- tryCatch({ expr; "no error" }, error = conditionMessage)
  if (!grepl(pattern, msg, fixed = TRUE))
    stop(sprintf("FAIL: %s: got \"%s\", wanted \"%s\"", what, msg, pattern), call. = FALSE)
  cat(sprintf("  ok: %-32s -> %s\n", what, msg))
}

v <- joker_version()
cat("joker", v$version, "gpu_available:", v$gpu_available, "devices:", v$device_count, "\n")
ok(v$gpu_available == (v$device_count > 0), "GPU availability and device count agree")

tmp <- tempfile("joker-r-")
dir.create(tmp)
old <- setwd(tmp)
source(file.path(here, "..", "example.R"))
setwd(old)
ok(accuracy >= want_accuracy, sprintf("example accuracy %.4f >= %.2f", accuracy, want_accuracy))
info <- joker_info(model)
ok(info$n_features == ncol(x) && info$n_classes == 2 && info$n_components == 1024 &&
     info$loss == "l2-svc" && info$task == "classification", "introspection")
ok(identical(info$classes, sort(unique(y))), "classes")
ok(abs(joker_score(model, x_test, y_test) - accuracy) < 1e-12, "score = accuracy")

# KLR probabilities on the same data, f64 working precision
klr <- joker_fit(x, y, loss = "klr", C = 4, n_components = 256, max_iter = 100,
                 precision = "f64")
p <- predict(klr, x_test, type = "prob")
ok(all(dim(p) == c(nrow(x_test), 2)) && max(abs(rowSums(p) - 1)) < 1e-12, "probabilities sum to 1")
lab <- predict(klr, x_test)
ok(all((p[, 2] > 0.5) == (lab == joker_info(klr)$classes[2])), "probabilities agree with labels")

# regression (KRR) on a smooth synthetic target
set.seed(2)
xr <- matrix(runif(1200, -2, 2), 600, 2)
yr <- sin(2 * xr[, 1]) + 0.5 * xr[, 2]
krr <- joker_fit(xr[1:400, ], yr[1:400], loss = "krr", lambda = 1e-3, n_components = 512,
                 block_size = 100, max_iter = 200)
r2 <- joker_score(krr, xr[401:600, ], yr[401:600])
ok(r2 > 0.95, sprintf("KRR R^2 %.4f > 0.95", r2))
ok(joker_info(krr)$task == "regression" && length(joker_info(krr)$classes) == 0, "regression info")

# progress: returning FALSE stops the fit; an error in the function stops it too
calls <- 0
stopped <- joker_fit(xr[1:400, ], yr[1:400], n_components = 64, block_size = 50, check_every = 2,
                     progress = function(p) { calls <<- calls + 1; calls < 3 })
ok(calls == 3 && joker_info(stopped)$stop_reason == "cancelled", "progress returning FALSE stops")
expect_error(joker_fit(xr[1:400, ], yr[1:400], n_components = 64, block_size = 50,
                       progress = function(p) stop("boom")),
             "the progress function raised an error", "error in the progress function")

# full KRR by Nystrom-PCG: f = K (K + lambda I)^-1 y from a dense solve in R
xk <- xr[1:200, ]
kk <- exp(-0.7 * as.matrix(dist(xk))^2)
want <- kk %*% solve(kk + 0.05 * diag(200), yr[1:200])
res <- c()
full <- joker_fit(xk, yr[1:200], n_components = NULL, gamma = 0.7, lambda = 0.05,
                  precision = "f64", standardize = FALSE, normalize_target = FALSE,
                  full_krr = "pcg", krr_rank = 60, krr_tol = 1e-10, check_every = 5,
                  progress = function(p) { res <<- c(res, p[["residual"]]); TRUE })
err <- sqrt(sum((predict(full, xk) - want)^2) / sum(want^2))
ok(err < 1e-7 && tail(res, 1) <= 1e-10 && joker_info(full)$stop_reason == "converged",
   sprintf("full KRR (PCG) matches a dense solve: relative error %.1e", err))
expect_error(joker_params(full_krr = "pcg"), "the exact kernel (n_components = NULL)",
             "full KRR needs the exact kernel")
msg <- tryCatch(joker_params(block_size = 0), error = conditionMessage)
ok(grepl("JOKER_STATUS_INVALID_ARGUMENT", msg, fixed = TRUE) && !grepl("joker_params_set", msg),
   sprintf("messages name R arguments, not C setters: %s", msg))
expect_error(joker_params(block_size = 64, nystrom_rank = 64), "below the block size",
             "Nystrom rank not below the block size")

# defaults on small data: block_size 512 and n_components 2048 on 100 rows (the library caps
# the block at the number of samples)
small <- joker_fit(x[1:100, ], y[1:100], loss = "l2-svc")
ok(joker_info(small)$stop_reason %in% c("converged", "max_iter") &&
     mean(predict(small, x[1:100, ]) == y[1:100]) > 0.7, "l2-svc with the defaults on 100 rows")
joker_free(small)

# max_memory: NULL (the default) is the library's limit, 0 none, else bytes
ok(is.null(formals(joker_params)$max_memory), "max_memory defaults to NULL")
expect_error(joker_fit(x_test, y_test, loss = "l2-svc", n_components = 64, max_memory = 1000),
             "JOKER_STATUS_MEMORY", "max_memory = 1000 bytes refuses the fit")
unlimited <- joker_fit(x_test, y_test, loss = "l2-svc", n_components = 64, max_iter = 5, max_memory = 0)
ok(joker_info(unlimited)$n_features == ncol(x_test), "max_memory = 0: no limit")
joker_free(unlimited)

# Ctrl-C: a child R process that interrupts itself 1.5 s into a fit that would run for a minute
child <- file.path(tmp, "ctrl_c.R")
writeLines(c(
  sprintf("source(%s)", deparse(file.path(here, "..", "joker.R"))),
  "set.seed(3)",
  "xl <- matrix(rnorm(20000 * 8), 20000, 8)",
  "yl <- ifelse(xl[, 1] + 0.3 * rnorm(20000) > 0, 1, -1)",
  "system(sprintf('(sleep 1.5; kill -INT %d)', Sys.getpid()), wait = FALSE)",
  "t0 <- Sys.time()",
  "r <- tryCatch({ joker_fit(xl, yl, loss = 'l2-svc', n_components = 2048, max_iter = 1e9,",
  "                          tol = 0, time_limit = 20); 'the fit ended' },",
  "              interrupt = function(e) 'interrupted')",
  "cat(r, as.numeric(difftime(Sys.time(), t0, units = 'secs')), '\\n')"), child)
out <- system2(file.path(R.home("bin"), "Rscript"), child, stdout = TRUE, stderr = TRUE,
               env = sprintf("JOKER_R_SHIM=%s", Sys.getenv("JOKER_R_SHIM")))
res <- strsplit(trimws(tail(out, 1)), " ")[[1]]
ok(length(res) == 2 && res[1] == "interrupted" && as.numeric(res[2]) < 3.5,  # 1.5 s + < 2 s
   sprintf("Ctrl-C stops a fit within a second (child: %s)", paste(out, collapse = " | ")))

cat("error paths:\n")
bad <- x
bad[3, 2] <- NaN
expect_error(joker_fit(bad, y, loss = "l2-svc", n_components = 64),
             "JOKER_STATUS_NON_FINITE: non-finite value in features at row 2, column 1", "NaN")
expect_error(joker_fit(x, y[-1], loss = "l2-svc"), "JOKER_STATUS_SHAPE_MISMATCH", "y too short")
expect_error(joker_fit(x, y, loss = "l2-svc", validation = list(x = x_test[, -1], y = y_test)),
             sprintf("JOKER_STATUS_SHAPE_MISMATCH: validation: x has %d columns, the training x has %d",
                     ncol(x) - 1, ncol(x)), "validation one column short")
expect_error(joker_fit(x, y, loss = "l2-svc", validation = list(x = x_test, y = y_test[-1])),
             sprintf("JOKER_STATUS_SHAPE_MISMATCH: validation: x has %d rows but y has %d values",
                     nrow(x_test), nrow(x_test) - 1), "validation y too short")
expect_error(predict(model, x_test[, -1]),
             sprintf("JOKER_STATUS_SHAPE_MISMATCH: shape mismatch: `data` has %d columns, the model was trained on %d",
                     ncol(x_test) - 1, ncol(x_test)),
             "predict with the wrong width")
expect_error(joker_params(C = -1), "JOKER_STATUS_INVALID_ARGUMENT: `c`: must be positive",
             "C < 0")
expect_error(joker_params(loss = "hinge"), "JOKER_STATUS_INVALID_ARGUMENT: unknown loss 'hinge'",
             "unknown loss")
expect_error(joker_params(n_components = 0),
             "JOKER_STATUS_INVALID_ARGUMENT: invalid parameter `n_components`", "M = 0")
expect_error(predict(model, x_test, type = "prob"), "JOKER_STATUS_UNSUPPORTED",
             "probabilities from an SVM")
expect_error(joker_params(device = "gpu"), "JOKER_STATUS_INVALID_ARGUMENT: device", "unknown device")
expect_error(joker_params(device = -3), "JOKER_STATUS_INVALID_ARGUMENT: device", "negative device")
kernel_model <- joker_fit(x_test, y_test, loss = "l2-svc", n_components = 64, max_iter = 20,
                          tr_model = "kernel")
ok(joker_info(kernel_model)$tr_model == "kernel", "tr_model = \"kernel\" is used and reported")
joker_free(kernel_model)
expect_error(joker_params(tr_model = "hessian"), "tr_model", "unknown trust-region model")
nystrom <- joker_fit(x_test, y_test, loss = "l2-svc", n_components = 64, max_iter = 50,
                     features = "nystrom", centers = "kmeans")
ok(mean(predict(nystrom, x_test) == y_test) > 0.6, "a Nystrom map fits and predicts")
joker_free(nystrom)
expect_error(joker_params(features = "orf"), "features", "unknown feature map")
auto <- joker_fit(x_test, y_test, loss = "l2-svc", auto_exact = TRUE, working_set = "shrinking",
                  max_iter = 200)
ok(joker_info(auto)$n_components == 0, "auto_exact takes the exact kernel where it fits the cache")
joker_free(auto)
expect_error(joker_params(working_set = "best"), "working_set", "unknown working-set rule")
expect_error(joker_params(features = "nystrom", centers = "random"), "centers", "unknown centre rule")
on_cpu <- joker_fit(x_test, y_test, loss = "l2-svc", n_components = 64, max_iter = 20, device = "cpu")
ok(startsWith(joker_info(on_cpu)$device, "cpu"), "device = \"cpu\" trains on the CPU")
joker_free(on_cpu)
if (!v$gpu_available) {
  auto <- joker_fit(x_test, y_test, loss = "l2-svc", n_components = 64, max_iter = 20)
  ok(startsWith(joker_info(auto)$device, "cpu (auto"),
     sprintf("auto without a GPU: %s", joker_info(auto)$device))
  joker_free(auto)
  expect_error(joker_fit(x_test, y_test, loss = "l2-svc", n_components = 64, max_iter = 5,
                         device = "cuda:0"), "JOKER_STATUS_DEVICE", "cuda:0 without a GPU")
}
expect_error(joker_load(file.path(tmp, "missing.json")), "JOKER_STATUS_IO", "missing model file")
writeLines("{\"format\": \"something else\"}", file.path(tmp, "bad.json"))
expect_error(joker_load(file.path(tmp, "bad.json")), "JOKER_STATUS_MODEL_FORMAT: model file",
             "not a model file")
joker_free(klr)
expect_error(predict(klr, x_test), "JOKER_STATUS_NULL_POINTER: `model` is NULL",
             "freed model (NULL handle)")
expect_error(joker_free(klr), "", "freeing twice is harmless")
unlink(tmp, recursive = TRUE)
invisible(gc())
cat("R tests passed\n")
