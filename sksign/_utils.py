"""Private helpers shared by the estimators."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "is_batch_iterator",
    "reject_batch_iterator",
    "restore_state_on_error",
    "row_batches",
    "stream_batches",
]


@contextmanager
def restore_state_on_error(estimator) -> Iterator[None]:
    """Put ``estimator.__dict__`` back as it was if the block raises.

    Validation in ``fit`` sets ``n_features_in_`` and friends before it can
    fail; a failed call must leave a fitted estimator exactly as it was.
    """
    state = dict(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(state)
        raise


def is_batch_iterator(X) -> bool:
    """Whether `X` is an iterator of row batches rather than one array-like.

    An iterator (a generator, ``iter(list_of_arrays)``, ``map(...)``) is
    consumed once, batch by batch; arrays, lists, DataFrames and memmaps are
    array-likes (iterable, but not iterators).
    """
    return isinstance(X, Iterator)


def stream_batches(method, batches):
    """Generator of ``method(batch)`` for each batch of an iterator, lazily.

    Memory stays that of one batch and its result, whatever the number of
    batches; an error in a batch is raised when that batch is reached.
    """
    for batch in batches:
        yield method(batch)


def reject_batch_iterator(X, method: str, streaming: str) -> None:
    """Raise a TypeError naming `method` when `X` is an iterator of batches.

    `streaming` names the methods of the same estimator that do take one.
    """
    if is_batch_iterator(X):
        raise TypeError(
            f"{method} needs all rows at once (an array-like); got an iterator "
            f"({type(X).__name__}). Iterators of row batches are taken by "
            f"{streaming}, which return a generator of per-batch results."
        )


def row_batches(n: int, batch_size: int) -> list[slice]:
    """``slice`` objects of `batch_size` rows (the last one shorter) over
    ``range(n)``, as :func:`sklearn.utils.gen_batches` gives them.

    For the query paths, which call it a few times per call: scikit-learn's
    function validates its parameters on every call (tens of microseconds);
    `n` and `batch_size` come from sksign's own arithmetic here (a
    `batch_size` below 1 counts as 1; no rows give no slices).
    """
    step = max(1, batch_size)
    return [slice(start, min(start + step, n)) for start in range(0, n, step)]
