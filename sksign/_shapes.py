"""Samples with more than one axis: their rows, their shape and its check.

An array of samples with more than one axis (images (N, C, H, W) or (N, H, W),
token arrays) is read as rows: the first axis counts the samples, the other
axes are the shape of one sample, and each sample is flattened into one row.
An estimator records that shape at fit and refuses samples of another shape
afterwards, with the one message :func:`check_sample_shape` writes.

NumPy and the standard library only: the torch nets, the transformers and the
packed runtime (:mod:`sksign.deploy`, which loads no torch) all use it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "check_sample_shape",
    "image_shape",
    "same_sample_shape",
    "split_sample_shape",
]


def split_sample_shape(X):
    """``(rows, sample_shape)``: samples with more than one axis as flat rows.

    An ndarray, list or tuple with more than two axes becomes a 2-D array of
    one row per sample (a view where NumPy can make one), and its sample shape
    ``X.shape[1:]``. Anything else (rows, DataFrames, sparse matrices,
    iterators, ragged lists) comes back unchanged, with None.

    Parameters
    ----------
    X : object
        The input.

    Returns
    -------
    rows : ndarray of shape (n_samples, n_features), or `X` unchanged
        The flat rows.
    sample_shape : tuple of int or None
        The shape of one sample; None when `X` holds rows (or is not an
        array).

    Examples
    --------
    >>> import numpy as np
    >>> from sksign._shapes import split_sample_shape
    >>> rows, shape = split_sample_shape(np.zeros((5, 1, 2, 3)))
    >>> rows.shape, shape
    ((5, 6), (1, 2, 3))
    >>> split_sample_shape([[0.0, 1.0]])
    ([[0.0, 1.0]], None)
    """
    if isinstance(X, np.ndarray):
        arr = X
    elif isinstance(X, list | tuple):
        try:
            arr = np.asarray(X)
        except ValueError:  # ragged: left to the caller's validation
            return X, None
    else:
        return X, None
    if arr.ndim <= 2:
        return X, None
    shape = tuple(int(s) for s in arr.shape[1:])
    # the explicit width keeps zero samples a (0, width) array
    return arr.reshape(arr.shape[0], math.prod(shape)), shape


def image_shape(shape):
    """``(C, H, W)`` of an image shape: a 2-D ``(H, W)`` gets one channel.

    Parameters
    ----------
    shape : sequence of int or None
        A sample shape.

    Returns
    -------
    tuple of int or None
        `shape` as a tuple, with a leading 1 when it has two axes; None
        stays None.

    Examples
    --------
    >>> from sksign._shapes import image_shape
    >>> image_shape((8, 8)), image_shape([3, 4, 4]), image_shape(None)
    ((1, 8, 8), (3, 4, 4), None)
    """
    if shape is None:
        return None
    shape = tuple(shape)
    return (1, *shape) if len(shape) == 2 else shape


def same_sample_shape(shape, other, *, one_channel=False):
    """Whether samples of `shape` and of `other` are alike.

    Parameters
    ----------
    shape, other : sequence of int
        Two sample shapes.
    one_channel : bool, default=False
        Read a 2-D ``(H, W)`` shape as the one-channel image ``(1, H, W)``
        (the nets take both).

    Returns
    -------
    bool

    Examples
    --------
    >>> from sksign._shapes import same_sample_shape
    >>> same_sample_shape((8, 8), (1, 8, 8)), same_sample_shape(
    ...     (8, 8), (1, 8, 8), one_channel=True
    ... )
    (False, True)
    """
    if one_channel:
        return image_shape(shape) == image_shape(other)
    return tuple(shape) == tuple(other)


def check_sample_shape(
    shape, fitted_shape, owner, *, what="samples", one_channel=False
):
    """Raise a ValueError unless samples of `shape` are those seen at fit.

    Nothing is checked when either shape is None: rows were given, or the
    estimator was fitted on rows (its feature count is checked elsewhere).

    Parameters
    ----------
    shape : tuple of int or None
        Shape of the samples given (from :func:`split_sample_shape`).
    fitted_shape : sequence of int or None
        Shape of the samples recorded at fit.
    owner : str
        Name of the estimator, for the message.
    what : str, default="samples"
        What the samples are called in the message ("images" for the nets).
    one_channel : bool, default=False
        Read a 2-D ``(H, W)`` shape as the one-channel image ``(1, H, W)``.

    Raises
    ------
    ValueError
        Naming the shape given and the shape seen at fit.

    Examples
    --------
    >>> from sksign._shapes import check_sample_shape
    >>> check_sample_shape((1, 8, 8), (8, 8), "Net", one_channel=True)
    >>> check_sample_shape((4, 16), (8, 8), "Net")
    Traceback (most recent call last):
    ...
    ValueError: X has samples of shape (4, 16), but Net was fitted on samples of shape (8, 8).
    """  # noqa: E501
    if shape is None or fitted_shape is None:
        return
    if same_sample_shape(shape, fitted_shape, one_channel=one_channel):
        return
    raise ValueError(
        f"X has {what} of shape {tuple(shape)}, but {owner} was fitted on "
        f"{what} of shape {tuple(fitted_shape)}."
    )
