"""The Python example: scikit-learn estimators of joker on covtype (5,000-row sample from
../shared/datasets, or a synthetic set when absent): an L2-SVC, its pickle, and a grid search
over C and gamma of kernel logistic regression. Run by tests/test_joker.py; alone (with the
package installed, `pip install ./bindings/python`): python bindings/python/example.py
"""
import os

import numpy as np


def load_data(data_dir):
    """(train, test, wanted accuracy): label in the first column."""
    path = os.path.join(data_dir, "covtype_small", "covtype.5000.{}.csv")
    if os.path.exists(path.format("train")):
        # this setting: 0.768; scikit-learn's RBF SVC on the same split: 0.783
        return np.loadtxt(path.format("train"), delimiter=","), np.loadtxt(
            path.format("test"), delimiter=","), 0.74
    print(f"covtype not found under {data_dir}: using a synthetic set")
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, size=(1200, 4))
    y = np.where(x[:, 0] ** 2 + x[:, 1] - 1 > 0, 1.0, -1.0)
    data = np.column_stack([y, x])
    return data[:800], data[800:], 0.90


def main(data_dir=os.environ.get("JOKER_DATA_DIR", "../shared/datasets")):
    """Runs the example; returns (the fitted KernelSVC, its test accuracy, the accuracy wanted,
    the grid search)."""
    train, test, want = load_data(data_dir)
    # [readme-python]
    import pickle

    import joker
    from sklearn.model_selection import GridSearchCV

    X, y = train[:, 1:], train[:, 0]  # label in the first column
    X_test, y_test = test[:, 1:], test[:, 0]
    clf = joker.KernelSVC(C=4.0, n_components=1024, max_iter=300, random_state=0).fit(X, y)
    accuracy = clf.score(X_test, y_test)
    back = pickle.loads(pickle.dumps(clf))  # the pickle holds the model file's bytes
    assert (back.decision_function(X_test) == clf.decision_function(X_test)).all()

    search = GridSearchCV(joker.KernelLogisticRegression(n_components=256, random_state=0),
                          {"C": [1.0, 4.0], "gamma": ["median", 0.02]}, cv=3)
    search.fit(X[:1000], y[:1000])
    print(search.best_params_, search.score(X_test, y_test), search.predict_proba(X_test[:1]))
    try:
        clf.predict(X_test[:, 1:])  # one column short
    except ValueError as e:
        print(e)  # X has 53 features, but KernelSVC is expecting 54 features as input.
    # [/readme-python]
    print(f"Python example: test accuracy {accuracy:.4f}")
    return clf, accuracy, want, search


if __name__ == "__main__":
    main()
