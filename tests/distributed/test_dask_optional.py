"""dask stays optional: NumPy calls never load it; without it, errors name the extra."""

import subprocess
import sys

import pytest

from sksign.distributed import is_dask_array, require_dask


def test_numpy_calls_do_not_import_dask():
    """Check fitting and predicting on NumPy codes loads no dask module."""
    code = (
        "import sys, numpy as np\n"
        "from sksign.estimators import SignKNNClassifier\n"
        "X = np.random.default_rng(0).integers(0, 2, (30, 9))\n"
        "clf = SignKNNClassifier(3).fit(X, np.arange(30) % 2)\n"
        "clf.predict(X); clf.kneighbors(X); clf.radius_neighbors(X, 0.3)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('dask', 'distributed')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_missing_dask_raises_import_error_naming_the_extra(monkeypatch):
    """Check require_dask names ``pip install "sksign[dask]"`` when dask is absent."""
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.array", None)
    with pytest.raises(ImportError, match=r'pip install "sksign\[dask\]"'):
        require_dask()


def test_is_dask_array_without_dask_loaded(monkeypatch):
    """Check the detection needs no dask import and rejects other arrays."""
    import numpy as np

    monkeypatch.delitem(sys.modules, "dask.array", raising=False)
    assert not is_dask_array(np.zeros((2, 2)))
    assert not is_dask_array([[0, 1]])
