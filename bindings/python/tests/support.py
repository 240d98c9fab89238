"""What the tests share: which joker they import, the example, the data, a child Python.

By default the tests import the package from the source tree (``bindings/python/joker``),
which loads the library named by ``$JOKER_LIB`` or found in the cargo target directory. With
``JOKER_TEST_INSTALLED=1`` (``check-package.sh``) they import the installed package instead,
and check that it is not the source tree and that it loads the library installed with it.
``JOKER_DATA_DIR`` (default: ``../shared/datasets`` beside the repository) holds the real data
sets; tests that need them fall back to synthetic data, or are skipped, when it is absent,
unless ``JOKER_REQUIRE_DATA=1`` (as CI sets): a missing file is then a failure.
"""

import importlib.util
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)  # bindings/python
REPO = os.path.dirname(os.path.dirname(PYTHON_DIR))
INSTALLED = os.environ.get("JOKER_TEST_INSTALLED") == "1"

if not INSTALLED and PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

import joker  # noqa: E402

if INSTALLED and os.path.dirname(os.path.dirname(os.path.abspath(joker.__file__))) == PYTHON_DIR:
    raise RuntimeError(f"JOKER_TEST_INSTALLED=1 but joker was imported from the source tree "
                       f"({joker.__file__}): run the tests from outside bindings/python")

DATA = os.environ.get("JOKER_DATA_DIR", os.path.join(REPO, "..", "shared", "datasets"))
REQUIRE_DATA = os.environ.get("JOKER_REQUIRE_DATA") == "1"


def data_path(*parts):
    """The file ``parts`` under DATA, or None when it is absent (the test then falls back to
    synthetic data or skips); under ``JOKER_REQUIRE_DATA=1`` an absent file fails the test."""
    path = os.path.join(DATA, *parts)
    if os.path.exists(path):
        return path
    if REQUIRE_DATA:
        raise AssertionError(f"{path} not found and JOKER_REQUIRE_DATA=1 (set JOKER_DATA_DIR)")
    return None


def load_example():
    """The module bindings/python/example.py (not on sys.path when testing the installed
    package)."""
    spec = importlib.util.spec_from_file_location("example", os.path.join(PYTHON_DIR, "example.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def python_child(code, **env):
    """Runs ``code`` in a new Python that imports the joker under test: a Popen with text
    pipes for stdout and stderr."""
    prelude = "import sys\n" + ("" if INSTALLED else f"sys.path.insert(0, {PYTHON_DIR!r})\n")
    return subprocess.Popen([sys.executable, "-c", prelude + textwrap.dedent(code)],
                            env=dict(os.environ, **env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
