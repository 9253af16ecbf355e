"""The top-level package: public names on first use, a light import."""

import subprocess
import sys

import pytest

import sksign


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("HTAFNetClassifier", "estimators"),
        ("HTAFNetRegressor", "estimators"),
        ("ICBMClassifier", "estimators"),
        ("SignKNNClassifier", "estimators"),
        ("SignCodeTransformer", "transformers"),
        ("intervention_score", "metrics"),
        ("gate_dominance", "metrics"),
    ],
)
def test_public_names_are_the_subpackages_objects(name, home):
    """Check sksign.<name> is the object its subpackage exports."""
    sub = getattr(sksign, home)
    assert getattr(sksign, name) is getattr(sub, name)
    assert name in sksign.__all__
    assert name in dir(sksign)
    assert name in sub.__all__


def test_unknown_names_and_light_import():
    """Check a clear AttributeError, and that ``import sksign`` loads no torch."""
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sksign.nope  # noqa: B018
    code = "import sys, sksign; assert 'torch' not in sys.modules, 'torch loaded'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sksign.__version__


def test_the_sign_knn_estimators_load_without_torch():
    """Check a search service (the k-NN on codes, fit and predict) never
    loads torch or skorch, and that the estimators' lazy names are complete."""
    code = (
        "import sys, numpy as np\n"
        "from sksign import SignKNNClassifier, SignKNNRegressor\n"
        "X = np.random.RandomState(0).randint(0, 2, (40, 70)).astype(np.uint8)\n"
        "y = np.arange(40) % 3\n"
        "SignKNNClassifier(n_neighbors=3).fit(X, y).predict(X)\n"
        "SignKNNRegressor(n_neighbors=3).fit(X, y * 1.0).predict(X)\n"
        "loaded = {'torch', 'skorch'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    from sksign import estimators

    for name in estimators.__all__:
        assert getattr(estimators, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        estimators.nope  # noqa: B018
