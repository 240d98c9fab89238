# Ctrl-C during a fit: a child R process interrupts itself 1.5 s into a fit that would run for
# 20 s. The fit must stop within an iteration (R_interrupts_pending is the library's flag) and
# R must raise its interrupt condition, with no model returned.
library(joker)

child <- tempfile("ctrl-c-", fileext = ".R")
writeLines(c(
  sprintf(".libPaths(%s)", paste(deparse(.libPaths()), collapse = "")),
  "library(joker)",
  "set.seed(3)",
  "xl <- matrix(rnorm(20000 * 8), 20000, 8)",
  "yl <- ifelse(xl[, 1] + 0.3 * rnorm(20000) > 0, 1, -1)",
  "system(sprintf('(sleep 1.5; kill -INT %d)', Sys.getpid()), wait = FALSE)",
  "t0 <- Sys.time()",
  "r <- tryCatch({ joker(xl, yl, loss = 'l2-svc', n_components = 2048, max_iter = 1e9,",
  "                      tol = 0, time_limit = 20, newton_start = FALSE); 'the fit ended' },",
  "              interrupt = function(e) 'interrupted')",
  "cat(r, as.numeric(difftime(Sys.time(), t0, units = 'secs')), '\\n')"), child)
out <- system2(file.path(R.home("bin"), "Rscript"), child, stdout = TRUE, stderr = TRUE)
res <- strsplit(trimws(tail(out, 1)), " ")[[1]]
cat("child:", out, sep = "\n  ")
stopifnot(length(res) == 2, res[1] == "interrupted", as.numeric(res[2]) < 3.5)  # 1.5 s + < 2 s
unlink(child)
cat("Ctrl-C stops a fit within a second: ok\n")
