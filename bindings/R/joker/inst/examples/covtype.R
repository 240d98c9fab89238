# The R example: an L2-SVC on covtype with factor labels, through the formula interface
# (the 5,000-row sample from $JOKER_DATA_DIR, default ../shared/datasets, or a synthetic set
# when absent), its summary, and a save/load round trip through the library's model file.
# Run with: Rscript "$(Rscript -e 'cat(system.file("examples", "covtype.R", package = "joker"))')"
library(joker)

data_dir <- Sys.getenv("JOKER_DATA_DIR")
if (!nzchar(data_dir)) data_dir <- "../shared/datasets"
train_file <- file.path(data_dir, "covtype_small/covtype.5000.train.csv")
if (file.exists(train_file)) {
  train <- read.csv(train_file, header = FALSE)
  test <- read.csv(file.path(data_dir, "covtype_small/covtype.5000.test.csv"), header = FALSE)
  want_accuracy <- 0.74  # this setting: 0.772; scikit-learn's RBF SVC on the same split: 0.783
} else {
  message("covtype not found under ", data_dir, ": using a synthetic set")
  make <- function(n) {
    x <- matrix(runif(4 * n, -2, 2), n, 4)
    data.frame(y = ifelse(x[, 1]^2 + x[, 2] - 1 > 0, 1, -1), x)
  }
  set.seed(1)
  train <- make(800)
  test <- make(400)
  want_accuracy <- 0.90
}
# [readme-r]
library(joker)
names(train)[1] <- names(test)[1] <- "cover"           # the label is the first column
train$cover <- factor(train$cover)                      # labels "-1", "1"
test$cover <- factor(test$cover)
model <- joker(cover ~ ., data = train, loss = "l2-svc", C = 4, n_components = 1024,
               max_iter = 300, validation = test,
               progress = function(p) cat(sprintf("iter %d: gap %.2e, validation %.4f\n",
                                                  p[["iter"]], p[["gap"]], p[["validation"]])))
summary(model)
accuracy <- mean(predict(model, test) == test$cover)
joker_save(model, "covtype.joker.json")                # the library's model file
back <- joker_load("covtype.joker.json", levels = levels(train$cover))
x_test <- as.matrix(test[, -1])                         # a loaded model takes matrices
stopifnot(all(predict(back, x_test) == predict(model, test)))
err <- tryCatch(predict(back, x_test[, -1]), error = conditionMessage)  # one column short
print(err)  # "JOKER_STATUS_SHAPE_MISMATCH: shape mismatch: `data` has 53 columns, ..."
# [/readme-r]

cat(sprintf("R example: test accuracy %.4f\n", accuracy))
unlink("covtype.joker.json")
