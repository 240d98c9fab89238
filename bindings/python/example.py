"""The Python example: an L2-SVC on covtype (5,000-row sample from ../shared/datasets, or a
synthetic set when absent). Run by tests/test_joker.py; alone: python bindings/python/example.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


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
    train, test, want = load_data(data_dir)
    # [readme-python]
    import joker

    X, y = train[:, 1:], train[:, 0]  # label in the first column
    X_test, y_test = test[:, 1:], test[:, 0]
    model = joker.Joker("l2-svc", c=4.0, n_components=1024, max_iter=300).fit(
        X, y, validation=(X_test, y_test),
        progress=lambda p: print(f"iter {p.iter}: gap {p.gap:.2e}, validation {p.validation:.4f}"))
    accuracy = np.mean(model.predict(X_test) == y_test)
    model.save("covtype.joker.json")
    back = joker.load("covtype.joker.json")
    assert (back.decision_function(X_test) == model.decision_function(X_test)).all()
    try:
        model.predict(X_test[:, 1:])  # one column short
    except joker.JokerError as e:
        print(e.status, e.message)  # JOKER_STATUS_SHAPE_MISMATCH shape mismatch: `X` has 53 ...
    # [/readme-python]
    print(f"Python example: test accuracy {accuracy:.4f}")
    os.remove("covtype.joker.json")
    return model, accuracy, want


if __name__ == "__main__":
    main()
