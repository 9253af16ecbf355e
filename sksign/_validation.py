"""Input checks shared by the library's layers.

:func:`check_net_X` is how every part of sksign turns user input into the rows
a fitted sksign net takes: the nets themselves, the scorers and the
transformers call it, so they agree on dtype, shape and error messages.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import validate_data
from torch.utils.data import Dataset

from sksign._shapes import check_sample_shape, same_sample_shape, split_sample_shape

__all__ = ["check_net_X"]


def check_net_X(net, X, *, reset: bool = False):
    """Validate `X` for the sksign net `net` and return rows of its dtype.

    Images (N, C, H, W) or (N, H, W) are flattened to rows; torch Datasets
    (skorch passes its validation split to the scoring callbacks) pass through
    unchanged. With ``reset=True`` (fit) the feature count, the column names
    and the image shape are recorded on `net`; otherwise X must match them.
    The rows are float32, or float64 for a net with ``dtype="float64"``.

    Parameters
    ----------
    net : HTAFNetClassifier, HTAFNetRegressor or ICBMClassifier
        The net the rows are for.
    X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
        The input.
    reset : bool, default=False
        Record the shape of X (fit) rather than check it (predict).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), or Dataset
        C-contiguous rows of the net's dtype (float32 by default).

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.estimators import HTAFNetClassifier
    >>> from sksign._validation import check_net_X
    >>> X, y = np.random.RandomState(0).rand(8, 1, 2, 2), [0, 1] * 4
    >>> net = HTAFNetClassifier((4,), max_epochs=2, random_state=0).fit(X, y)
    >>> rows = check_net_X(net, X)
    >>> rows.shape, rows.dtype
    ((8, 4), dtype('float32'))
    """
    if isinstance(X, Dataset):
        return X
    X, shape = split_sample_shape(X)
    if reset and shape is not None and net.input_shape is not None:
        if not same_sample_shape(shape, net.input_shape, one_channel=True):
            raise ValueError(
                f"X has images of shape {shape}, but input_shape="
                f"{tuple(net.input_shape)} was given; leave input_shape=None "
                "for image input or make them agree."
            )
    dtype = np.dtype(getattr(net, "dtype", "float32"))
    X = validate_data(net, X, reset=reset, dtype=dtype)
    if reset:
        net._image_shape = shape
    else:
        check_sample_shape(
            shape,
            getattr(net, "input_shape_", None),
            type(net).__name__,
            what="images",
            one_channel=True,
        )
    return np.ascontiguousarray(X, dtype=dtype)
