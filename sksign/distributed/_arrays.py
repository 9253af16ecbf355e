"""Dask arrays in and out: detection, the optional import, checks, block maps.

Nothing here imports dask at module level: :func:`is_dask_array` only looks
at the modules already loaded, so a NumPy call never pays for dask, and
:func:`require_dask` imports it on first use with an error that names the
extra to install.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
import threading
import uuid

import numpy as np

__all__ = [
    "assemble",
    "check_dask_rows",
    "is_dask_array",
    "map_method",
    "require_dask",
    "ship_once",
]

_EXTRA = 'pip install "sksign[dask]"'


def is_dask_array(X):
    """Whether `X` is a :class:`dask.array.Array`, without importing dask.

    A Dask array can only exist once :mod:`dask.array` is imported, so the
    check costs one dictionary lookup when it is not.

    Parameters
    ----------
    X : object
        Anything passed as data.

    Returns
    -------
    is_dask : bool
        True for a Dask array (chunked lazy array), False otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.distributed import is_dask_array
    >>> is_dask_array(np.zeros((2, 3)))
    False
    """
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(X, module.Array)


def require_dask():
    """Import :mod:`dask` and :mod:`dask.array`, or say which extra is missing.

    Returns
    -------
    dask : module
        The :mod:`dask` package, with :mod:`dask.array` loaded (as
        ``dask.array``).

    Raises
    ------
    ImportError
        When dask (or its array module and NumPy pieces) is not installed;
        the message names ``pip install "sksign[dask]"``.

    Examples
    --------
    >>> from sksign.distributed import require_dask
    >>> dask = require_dask()
    >>> dask.array.ones(3, chunks=2).sum().compute()
    np.float64(3.0)
    """
    try:
        import dask
        import dask.array
    except ImportError as exc:
        raise ImportError(
            "Dask arrays need the optional packages dask and distributed; "
            f"install them with `{_EXTRA}`."
        ) from exc
    return dask


def check_dask_rows(X, *, name="X", n_features=None, packed=False, owner=None):
    """Check the metadata of a Dask array of codes; nothing is computed.

    Every check reads only the shape, chunks and dtype, so a bad array fails
    before any task is scheduled. Returns `X` chunked by rows only (one
    chunk across the columns).
    """
    require_dask()
    owner = owner or "the estimator"
    if X.ndim != 2:
        raise ValueError(
            f"Expected a 2D Dask array of codes for {name}, got {X.ndim} "
            f"dimension(s) (shape {X.shape})."
        )
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError(
            f"{name} has chunks of unknown size; call {name}.compute_chunk_sizes() "
            "first (the row offsets of every chunk are needed up front)."
        )
    if X.shape[0] == 0:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={X.shape}) while a minimum "
            "of 1 is required."
        )
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but {owner} is expecting "
            f"{n_features} features as input."
        )
    if X.shape[1] == 0:
        raise ValueError(
            f"Found array with 0 feature(s) (shape={X.shape}) while a minimum "
            "of 1 is required."
        )
    if packed is True and X.dtype != np.uint8:
        raise TypeError(
            f"With packed=True, {name} must hold bit-packed codes of dtype uint8 "
            f"(see sksign.metrics.pairwise.pack_bits); got dtype {X.dtype}."
        )
    if packed is False and X.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must hold 0/1, +-1 or bool values; got dtype {X.dtype}."
        )
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    return X


def ship_once(obj):
    """`obj` as one graph key, so the tasks that use it refer to it.

    Embedded in each task, an object is serialised once per task; as its own
    key, the scheduler sends it once to each worker that runs a task needing
    it.
    """
    dask = require_dask()
    name = f"{type(obj).__name__.lower()}-{uuid.uuid4().hex}"
    return dask.delayed(obj, name=name, pure=False)


def assemble(parts, n_rows, dtype, trailing=()):
    """One Dask array from per-block Delayed results stacked by rows."""
    dask = require_dask()
    da = dask.array
    meta = np.empty((0, *trailing), dtype=dtype)
    blocks = [
        da.from_delayed(part, shape=(n, *trailing), dtype=dtype, meta=meta)
        for part, n in zip(parts, n_rows)
    ]
    return blocks[0] if len(blocks) == 1 else da.concatenate(blocks, axis=0)


class Serial:
    """An object whose method calls take turns within a process.

    A worker keeps one copy of each shipped object and may run several tasks
    on it at once (threads); an object with state during a call (a net with
    recording hooks) must not. The lock is made anew in each process.
    """

    def __init__(self, obj):
        self.obj = obj
        self.lock = threading.Lock()

    def __getstate__(self):
        return {"obj": self.obj}

    def __setstate__(self, state):
        self.obj = state["obj"]
        self.lock = threading.Lock()


def _call_method(obj, method, block, kwargs, empty):
    if block.shape[0] == 0:  # an empty chunk (NumPy methods want rows)
        return empty
    if isinstance(obj, Serial):
        with obj.lock:
            return getattr(obj.obj, method)(block, **kwargs)
    return getattr(obj, method)(block, **kwargs)


def map_method(obj, method, X, outputs, kwargs=None, *, serial=False):
    """``getattr(obj, method)(block, **kwargs)`` on every row block of `X`.

    `obj` is shipped once (see :func:`ship_once`); with `serial`, calls on it
    take turns within a worker (see :class:`Serial`). `outputs` gives the
    ``(dtype, trailing_shape)`` of each array the method returns: one entry
    for a method returning an array, several for one returning a tuple.
    Returns a lazy Dask array, or a tuple of them.
    """
    dask = require_dask()
    target = ship_once(Serial(obj) if serial else obj)
    kwargs = {} if kwargs is None else kwargs
    nout = len(outputs) if len(outputs) > 1 else None
    call = dask.delayed(_call_method, pure=True, nout=nout)
    empty = tuple(np.empty((0, *trailing), dtype=dtype) for dtype, trailing in outputs)
    empty = empty if nout else empty[0]
    results = [
        call(target, method, block, kwargs, empty) for block in X.to_delayed().ravel()
    ]
    if nout is None:
        dtype, trailing = outputs[0]
        return assemble(results, X.chunks[0], dtype, trailing)
    return tuple(
        assemble([r[j] for r in results], X.chunks[0], dtype, trailing)
        for j, (dtype, trailing) in enumerate(outputs)
    )
