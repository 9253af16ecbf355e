"""Hamming search on uint64 words, split over threads.

The popcount kernels (:mod:`sksign.kernels._popcount`; on AVX2 the nibble
kernels of :mod:`sksign.kernels._sliced_nibbles` and
:mod:`sksign.kernels._nibbles`, on AVX-512 VPOPCNTDQ the register blocks of
:mod:`sksign.kernels._vector_search`: see :func:`hamming_kernels`)
are serial and release the GIL; the functions here split their work over a
few threads and merge the parts so that results never depend on the number of
threads or on the kernel.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral

import numpy as np
from joblib import effective_n_jobs

from sksign._compat import Interval, validate_params
from sksign._threads import run_in_threads
from sksign._utils import row_batches
from sksign.kernels._nibbles import nibble_kernels
from sksign.kernels._popcount import knn_counts, pairwise_counts
from sksign.kernels._sliced_nibbles import knn_counts_sliced, pairwise_counts_sliced
from sksign.kernels._vector_counts import vector_kernels
from sksign.kernels._vector_search import knn_counts_vectors, pairwise_counts_vectors

__all__ = [
    "effective_n_threads",
    "hamming_kernels",
    "search_words",
    "words_hamming_distances",
    "words_kneighbors",
]


#: Bytes of int32 counts :func:`words_hamming_distances` makes at a time for
#: an `out` the register blocks do not store into (float, or not
#: C-contiguous).
_BUFFER_BYTES = 1 << 22


def effective_n_threads(n_jobs):
    """Number of threads that `n_jobs` stands for (at least 1).

    Parameters
    ----------
    n_jobs : int or None
        None means 1 unless in a :func:`joblib.parallel_config` context, -1
        means all processors (as :func:`joblib.effective_n_jobs`); 0 raises a
        ValueError.

    Returns
    -------
    n_threads : int
        A positive number of threads.

    Examples
    --------
    >>> from sksign.kernels import effective_n_threads
    >>> effective_n_threads(None), effective_n_threads(3)
    (1, 3)
    """
    return max(1, effective_n_jobs(n_jobs))


def hamming_kernels():
    """``(name, knn, pairwise)``: the search and distance kernels for this CPU.

    The register blocks of :mod:`sksign.kernels._vector_search` where it has
    AVX-512 VPOPCNTDQ, the nibble kernels of
    :mod:`sksign.kernels._sliced_nibbles` on AVX2 (those of
    :mod:`sksign.kernels._nibbles` past 1,024 bits), else the generic
    kernels (LLVM's ``ctpop``). All give the same counts and the same neighbours.
    """
    if vector_kernels():
        name = "AVX-512 register blocks (vpopcntq)"
        return name, knn_counts_vectors, pairwise_counts_vectors
    if nibble_kernels():
        name = "AVX2 nibble look-ups (vpshufb)"
        return name, knn_counts_sliced, pairwise_counts_sliced
    return "generic (LLVM ctpop)", knn_counts, pairwise_counts


def _check_words(Q, T, names=("Q", "T")):
    """C-contiguous 2-D uint64 `Q` and `T` with the same number of words."""
    for name, W in zip(names, (Q, T)):
        if not isinstance(W, np.ndarray) or W.dtype != np.uint64:
            raise TypeError(
                f"{name} must be a numpy array of dtype uint64 (see "
                f"packed_to_words); got {getattr(W, 'dtype', type(W).__name__)}."
            )
        if W.ndim != 2:
            raise ValueError(
                f"{name} must be 2-D (n_codes, n_words); got {W.ndim} dimension(s)."
            )
    if Q.shape[1] != T.shape[1]:
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same number of words per "
            "row; "
            f"got {Q.shape[1]} and {T.shape[1]}."
        )
    return np.ascontiguousarray(Q), np.ascontiguousarray(T)


@validate_params(
    {
        "Q": ["array-like"],
        "T": ["array-like"],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Integral, None],
    },
    prefer_skip_nested_validation=True,
)
def words_kneighbors(Q, T, n_neighbors, *, n_jobs=None):
    """The `n_neighbors` nearest rows of `T` for each row of `Q`, as bit counts.

    The search behind :func:`packed_kneighbors`, on codes already converted to
    words (the form a fitted estimator keeps).

    Parameters
    ----------
    Q : ndarray of shape (n_queries, n_words), dtype uint64
        Query codes with zero padding bits (see :func:`packed_to_words`).

    T : ndarray of shape (n_codes, n_words), dtype uint64
        Codes searched.

    n_neighbors : int
        Number of neighbours per query; at most ``n_codes``.

    n_jobs : int, default=None
        Number of threads; None means 1 unless in a
        :func:`joblib.parallel_config` context, -1 means all processors.

    Returns
    -------
    counts : ndarray of shape (n_queries, n_neighbors), dtype int64
        Numbers of differing bits, ascending along each row.

    indices : ndarray of shape (n_queries, n_neighbors), dtype int64
        Row indices into `T`; equal counts are ordered by index.

    See Also
    --------
    packed_kneighbors : The same search on packed uint8 codes.

    Notes
    -----
    With several threads the queries are split, and when there are too few
    queries to keep every thread busy the codes are split too and the partial
    lists are merged with a stable sort (codes in increasing index order), which
    keeps the tie order of a single pass.

    Examples
    --------
    >>> from sksign.kernels import pack_bits, packed_to_words, words_kneighbors
    >>> W = packed_to_words(pack_bits([[1, 1, 0], [0, 0, 0], [1, 1, 1]]), 3)
    >>> words_kneighbors(W[:1], W, 2)
    (array([[0, 1]]), array([[0, 2]]))
    """
    Q, T = _check_words(Q, T)
    return search_words(Q, T, n_neighbors, effective_n_threads(n_jobs))


def search_words(Q, T, n_neighbors, n_threads):
    """:func:`words_kneighbors` on checked words, without its parameter checks.

    `Q` and `T` C-contiguous uint64 arrays of the same number of words (as
    ``_check_words`` leaves them), `n_neighbors` a positive int and
    `n_threads` a positive number of threads: what sksign's own callers
    (the estimators, once their input is validated) hand it, so that a
    query call does not pay scikit-learn's parameter validation again (tens
    of microseconds a call). `n_neighbors` over the number of codes still
    raises the ValueError.
    """
    n_q, n_t = Q.shape[0], T.shape[0]
    if n_neighbors > n_t:
        raise ValueError(
            "Expected n_neighbors <= n_codes, but "
            f"n_neighbors = {n_neighbors}, n_codes = {n_t}."
        )
    n_q_parts = max(1, min(n_threads, n_q // 64))
    n_t_parts = max(1, min(n_threads // n_q_parts, n_t // max(n_neighbors, 1024)))
    q_slices = row_batches(n_q, -(-n_q // n_q_parts))
    t_slices = row_batches(n_t, -(-n_t // n_t_parts))
    if len(t_slices) > 1 and any(s.stop - s.start < n_neighbors for s in t_slices):
        t_slices = [slice(0, n_t)]

    _, kernel, _ = hamming_kernels()

    def search(qs, ts):
        d = np.empty((qs.stop - qs.start, n_neighbors), dtype=np.int64)
        i = np.empty_like(d)
        kernel(Q[qs], T[ts], d, i)
        return d, i + ts.start

    parts = run_in_threads(
        search, [(qs, ts) for qs in q_slices for ts in t_slices], n_threads
    )
    if len(t_slices) == 1:
        return np.concatenate([p[0] for p in parts]), np.concatenate(
            [p[1] for p in parts]
        )
    n_t_parts = len(t_slices)
    dist, ind = [], []
    for a in range(len(q_slices)):
        row = parts[a * n_t_parts : (a + 1) * n_t_parts]
        d = np.concatenate([p[0] for p in row], axis=1)
        i = np.concatenate([p[1] for p in row], axis=1)
        order = np.argsort(d, axis=1, kind="stable")[:, :n_neighbors]
        dist.append(np.take_along_axis(d, order, axis=1))
        ind.append(np.take_along_axis(i, order, axis=1))
    return np.concatenate(dist), np.concatenate(ind)


@validate_params(
    {
        "A": ["array-like"],
        "B": ["array-like"],
        "out": [np.ndarray, None],
        "n_jobs": [Integral, None],
    },
    prefer_skip_nested_validation=True,
)
def words_hamming_distances(A, B, *, out=None, n_jobs=None):
    """Numbers of differing bits between the rows of two word arrays.

    The kernel behind :func:`packed_hamming_distances`, on codes already
    converted to words; ``out[i, j] = popcount(A[i] ^ B[j])`` summed over words.

    Parameters
    ----------
    A : ndarray of shape (n_samples_A, n_words), dtype uint64
        Codes with zero padding bits (see :func:`packed_to_words`).

    B : ndarray of shape (n_samples_B, n_words), dtype uint64
        Codes with zero padding bits.

    out : ndarray of shape (n_samples_A, n_samples_B), default=None
        Array the counts are written to (any integer or float dtype); None
        allocates an int32 array.

    n_jobs : int, default=None
        Number of threads; None means 1 unless in a
        :func:`joblib.parallel_config` context, -1 means all processors.

    Returns
    -------
    out : ndarray of shape (n_samples_A, n_samples_B)
        The counts (`out` itself when given).

    See Also
    --------
    packed_hamming_distances : The same distances on packed uint8 codes.

    Examples
    --------
    >>> from sksign.kernels import (
    ...     pack_bits, packed_to_words, words_hamming_distances)
    >>> W = packed_to_words(pack_bits([[1, 1, 0], [0, 0, 0]]), 3)
    >>> words_hamming_distances(W, W)
    array([[0, 2],
           [2, 0]], dtype=int32)
    """
    A, B = _check_words(A, B, names=("A", "B"))
    shape = (A.shape[0], B.shape[0])
    if out is None:
        out = np.empty(shape, dtype=np.int32)
    elif out.shape != shape:
        raise ValueError(f"out must have shape {shape}; got {out.shape}.")
    n_threads = effective_n_threads(n_jobs)
    slices = row_batches(A.shape[0], -(-A.shape[0] // n_threads))
    _, _, kernel = hamming_kernels()
    # the register blocks store C-contiguous int32 or int64 rows from the
    # registers; other outputs take their counts from a buffer of about 4 MiB
    direct = kernel is not pairwise_counts_vectors or (
        out.flags.c_contiguous and out.dtype in (np.int32, np.int64)
    )

    def counts(rows):
        if direct:
            kernel(A[rows], B, out[rows])
            return
        step = max(4, _BUFFER_BYTES // (4 * max(1, B.shape[0])))
        # one buffer a thread, its pages touched once
        buffer = np.empty((min(step, rows.stop - rows.start), B.shape[0]), np.int32)
        for part in row_batches(rows.stop - rows.start, step):
            at = slice(rows.start + part.start, rows.start + part.stop)
            counts_at = buffer[: at.stop - at.start]
            kernel(A[at], B, counts_at)
            out[at] = counts_at

    run_in_threads(counts, [(s,) for s in slices], n_threads)
    return out
