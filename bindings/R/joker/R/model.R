# Model files, introspection, freeing, and the print and summary methods.

joker_save <- function(model, file, overwrite = FALSE) {
  ptr <- .joker_handle(model, "model")
  if (!is.character(file) || length(file) != 1 || is.na(file) || !nzchar(file))
    stop("`file` must be a file name (one string)", call. = FALSE)
  if (!is.logical(overwrite) || length(overwrite) != 1 || is.na(overwrite))
    stop("`overwrite` must be TRUE or FALSE", call. = FALSE)
  path <- path.expand(file)
  if (!overwrite && file.exists(path) && !dir.exists(path) && !.joker_looks_like_model(path))
    stop(sprintf("%s exists and is not a joker model file; refusing to replace it (use overwrite = TRUE to replace it)",
                 file), call. = FALSE)
  .joker_call(C_R_joker_save, ptr, file)
  invisible(file)
}

# Whether the file at `path` holds a joker model file (or is empty), judged by its first 4096
# bytes as the joker program judges them: a JSON object whose "format" is "joker-model".
.joker_looks_like_model <- function(path) {
  head <- tryCatch(readBin(path, "raw", 4096L), error = function(e) NULL)
  if (is.null(head)) return(FALSE)
  text <- rawToChar(head[head != as.raw(0L)])
  text <- sub("^[[:space:]]+", "", text, useBytes = TRUE)
  !nzchar(text) ||
    (startsWith(text, "{") && grepl("\"format\"", text, fixed = TRUE, useBytes = TRUE) &&
       grepl("\"joker-model\"", text, fixed = TRUE, useBytes = TRUE))
}

joker_load <- function(file, levels = NULL) {
  if (!is.character(file) || length(file) != 1 || is.na(file) || !nzchar(file))
    stop("`file` must be a file name (one string)", call. = FALSE)
  model <- structure(list(ptr = .joker_call(C_R_joker_load, file), call = NULL, levels = NULL,
                          ordered = FALSE, classes = NULL, labels = NULL, counts = NULL,
                          colnames = NULL, nobs = NA_integer_, params = NULL),
                     class = "joker")
  model$classes <- joker_info(model)$classes
  if (!is.null(levels)) {
    if (is.factor(levels)) levels <- levels(levels)
    if (!is.character(levels) || anyNA(levels) || anyDuplicated(levels))
      stop("`levels` must be distinct strings (or a factor whose levels are used)", call. = FALSE)
    if (length(model$classes) == 0)
      stop("`levels` was given, but the model in `file` is a regression model", call. = FALSE)
    if (length(levels) != length(model$classes))
      stop(sprintf("`levels` has %d labels, but the model has %d classes (%s)", length(levels),
                   length(model$classes), paste(model$classes, collapse = ", ")), call. = FALSE)
    model$levels <- model$labels <- levels
  }
  model
}

joker_free <- function(x) {
  if (!inherits(x, c("joker", "joker_params")))
    stop("`x` must be a joker model or joker_params object", call. = FALSE)
  invisible(.Call(C_R_joker_free, x$ptr))
}

joker_info <- function(model) {
  i <- .joker_call(C_R_joker_info, .joker_handle(model, "model"))
  i$task <- names(.joker_codes$task)[i$task + 1]
  i$loss <- names(.joker_codes$loss)[i$loss + 1]
  i$kernel <- names(.joker_codes$kernel)[i$kernel + 1]
  i$multiclass <- names(.joker_codes$multiclass)[i$multiclass + 1]
  i
}

joker_version <- function() .Call(C_R_joker_version)

# "M = 1024 random features", "exact kernel": the representation in words.
.joker_representation <- function(info, features = NULL) {
  if (info$n_components == 0) return("exact kernel")
  sprintf("%d %s", as.integer(info$n_components),
          if (identical(features, "nystrom")) "Nystrom centres" else "random features")
}

print.joker <- function(x, ...) {
  i <- joker_info(x)
  if (!is.null(x$call)) {
    cat("Call:\n")
    print(x$call)
  }
  cat(sprintf("joker %s model: %s loss, %s kernel (gamma %.4g), %s, %d inputs\n", i$task,
              i$loss, i$kernel, i$gamma, .joker_representation(i, x$params$features),
              as.integer(i$n_features)))
  if (length(x$classes))
    cat(sprintf("classes: %s\n", paste(if (is.null(x$labels)) x$classes else x$labels,
                                       collapse = ", ")))
  invisible(x)
}

summary.joker <- function(object, ...) {
  structure(list(call = object$call, info = joker_info(object), labels = object$labels,
                 counts = object$counts, nobs = object$nobs,
                 formula = if (!is.null(object$terms)) stats::formula(object$terms),
                 features = object$params$features),
            class = "summary.joker")
}

print.summary.joker <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  i <- x$info
  if (!is.null(x$call)) {
    cat("Call:\n")
    print(x$call)
    cat("\n")
  }
  f <- function(v) format(signif(v, digits))
  lines <- c(
    task = i$task,
    loss = i$loss,
    kernel = sprintf("%s, gamma = %s", i$kernel, f(i$gamma)),
    lambda = sprintf("%s (C = %s)", f(i$lambda), f(1 / i$lambda)),
    representation = .joker_representation(i, x$features),
    inputs = as.character(as.integer(i$n_features)),
    `training rows` = if (!is.na(x$nobs)) as.character(x$nobs) else "unknown (loaded from a file)",
    iterations = as.character(as.integer(i$iterations)),
    `duality gap` = f(i$gap),
    stopped = i$stop_reason,
    device = i$device,
    `trust-region model` = i$tr_model)
  cat(sprintf("%-*s %s\n", max(nchar(names(lines))) + 1L, paste0(names(lines), ":"), lines),
      sep = "")
  if (length(i$classes)) {
    cat("\nclasses:\n")
    labels <- if (is.null(x$labels)) format(i$classes, trim = TRUE) else x$labels
    if (!is.null(x$counts)) {
      tab <- as.vector(x$counts[labels])
      names(tab) <- labels
      cat("training rows per class\n")
      print(tab)
    } else {
      cat(paste(labels, collapse = ", "), "\n")
    }
  }
  invisible(x)
}
