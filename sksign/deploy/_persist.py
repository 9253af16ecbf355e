"""save() and load(): a packed estimator to one file and back, without torch."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.deploy._estimators import PackedClassifier, PackedRegressor, _PackedBase
from sksign.deploy._io import read_packed, write_packed
from sksign.deploy._runtime import PackedNet

__all__ = ["load", "save"]


def save(packed, path):
    """Write a packed model to one file (safetensors layout, JSON layer graph).

    Parameters
    ----------
    packed : PackedClassifier, PackedRegressor or PackedNet
        The packed model (see :func:`sksign.deploy.pack`).
    path : str or os.PathLike
        File to write (replaced atomically if it exists).

    Returns
    -------
    path : str or os.PathLike
        `path`, for chaining.

    See Also
    --------
    load : Read the file back.

    Notes
    -----
    The file is a valid safetensors file: the arrays (packed binary weights
    as uint8, real weights and thresholds as float32) under their layer
    names, and the layer graph as JSON in the header's ``__metadata__``
    together with a SHA-256 digest of graph and arrays.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn.datasets import load_digits
    >>> from sksign.estimators import HTAFNetClassifier
    >>> from sksign.deploy import load, pack, save
    >>> X, y = load_digits(return_X_y=True)
    >>> net = HTAFNetClassifier((32,), max_epochs=2, random_state=0).fit(X / 16, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "digits.sksign")
    >>> again = load(save(pack(net), path))
    >>> bool((again.predict(X / 16) == net.predict(X / 16)).all())
    True
    """
    if isinstance(packed, _PackedBase):
        net = getattr(packed, "net_", None) or packed.net
    else:
        net = packed
    if not isinstance(net, PackedNet):
        raise TypeError(
            "save takes a PackedClassifier, PackedRegressor or PackedNet (see "
            f"sksign.deploy.pack); got {type(packed).__name__}."
        )
    write_packed(net, path)
    return path


def load(path, *, n_jobs=None):
    """Read a packed model written by :func:`save`; needs numpy and numba only.

    Nothing in the file is executed: the header is parsed as JSON, every
    field checked (format name, version, layer graph, dtypes, shapes, byte
    ranges, the SHA-256 digest) and the arrays copied into numpy.

    Parameters
    ----------
    path : str or os.PathLike
        File written by :func:`save`.
    n_jobs : int, default=None
        Threads of the estimator's kernels.

    Returns
    -------
    packed : PackedClassifier or PackedRegressor
        The fitted packed estimator.

    Raises
    ------
    ValueError
        When the file is not a packed model, or was changed after it was
        written (the message says what is wrong).

    See Also
    --------
    save : Write a packed model.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn.datasets import load_digits
    >>> from sksign.estimators import HTAFNetClassifier
    >>> from sksign.deploy import load, pack, save
    >>> X, y = load_digits(return_X_y=True)
    >>> net = HTAFNetClassifier((32,), max_epochs=2, random_state=0).fit(X / 16, y)
    >>> path = save(pack(net), os.path.join(tempfile.mkdtemp(), "m.sksign"))
    >>> type(load(path)).__name__
    'PackedClassifier'
    """
    net = read_packed(path)
    cls = (
        PackedClassifier if net.graph["estimator"] == "classifier" else PackedRegressor
    )
    return cls(net, n_jobs=n_jobs).fit()
