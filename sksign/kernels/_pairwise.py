"""Hamming distances and k-NN search on packed bit codes (XOR + popcount).

Packed uint8 rows are converted to 64-bit words in row batches, so memory stays
bounded and a :class:`numpy.memmap` is read batch by batch.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils import gen_batches

from sksign._compat import Interval, validate_params
from sksign.kernels._packing import check_n_bits, check_packed, packed_to_words
from sksign.kernels._words import words_hamming_distances, words_kneighbors

__all__ = [
    "auto_batch_size",
    "packed_hamming_distances",
    "packed_kneighbors",
]

# Bytes of input converted to packed words at once when `batch_size` is None.
_BATCH_BYTES = 1 << 26


def auto_batch_size(batch_size, row_bytes):
    """Rows handled at a time: `batch_size`, or about 64 MiB of input when None.

    Parameters
    ----------
    batch_size : int or None
        Rows per batch; None picks ``max(256, 2**26 // row_bytes)``.

    row_bytes : int
        Bytes per input row (0 counts as 1).

    Returns
    -------
    batch_size : int
        A positive number of rows.

    Examples
    --------
    >>> from sksign.kernels import auto_batch_size
    >>> auto_batch_size(100, 8), auto_batch_size(None, 1 << 20)
    (100, 256)
    """
    if batch_size is not None:
        return int(batch_size)
    return max(256, _BATCH_BYTES // max(1, row_bytes))


def _check_pair(A, B, n_bits):
    A = check_packed(A, "A")
    B = A if B is None else check_packed(B, "B")
    if A.shape[1] != B.shape[1]:
        raise ValueError(
            "A and B must have the same number of bytes per row; "
            f"got {A.shape[1]} and {B.shape[1]}."
        )
    return A, B, check_n_bits(n_bits, A.shape[1])


_COMMON_CONSTRAINTS = {
    "n_bits": [Interval(Integral, 1, None, closed="left"), None],
    "normalize": ["boolean"],
    "batch_size": [Interval(Integral, 1, None, closed="left"), None],
    "n_jobs": [Integral, None],
}


@validate_params(
    {"A": ["array-like"], "B": ["array-like", None], **_COMMON_CONSTRAINTS},
    prefer_skip_nested_validation=True,
)
def packed_hamming_distances(
    A, B=None, *, n_bits=None, normalize=False, batch_size=None, n_jobs=None
):
    """Hamming distances between the rows of two packed bit-code arrays.

    Computed as XOR + popcount on 64-bit words, for any number of bits: padding
    bits (past `n_bits`) are masked out and never change a distance.

    Parameters
    ----------
    A : array-like of shape (n_samples_A, n_bytes), dtype uint8
        Packed codes (see :func:`pack_bits`); other dtypes raise a TypeError.

    B : array-like of shape (n_samples_B, n_bytes), dtype uint8, default=None
        Packed codes; None means `A`.

    n_bits : int, default=None
        Number of bits per row; None means ``8 * n_bytes``.

    normalize : bool, default=False
        If True, return the fraction of differing bits (``count / n_bits``, the
        value of ``scipy.spatial.distance.hamming``) as float64; else the count
        as int32.

    batch_size : int, default=None
        Rows of `A` converted to words at a time; None picks a size that keeps
        each batch around 64 MiB. Results do not depend on it.

    n_jobs : int, default=None
        Number of threads; None means 1 unless in a
        :func:`joblib.parallel_config` context, -1 means all processors.

    Returns
    -------
    distances : ndarray of shape (n_samples_A, n_samples_B)
        int32 counts, or float64 fractions when `normalize` is True.

    See Also
    --------
    packed_kneighbors : The k nearest rows without the full matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.kernels import pack_bits, packed_hamming_distances
    >>> codes = pack_bits([[1, 1, 0], [1, 0, 1], [0, 0, 0]])
    >>> packed_hamming_distances(codes, n_bits=3)
    array([[0, 2, 2],
           [2, 0, 2],
           [2, 2, 0]], dtype=int32)
    """
    A, B, n_bits = _check_pair(A, B, n_bits)
    out = np.empty((A.shape[0], B.shape[0]), np.float64 if normalize else np.int32)
    B_words = packed_to_words(B, n_bits)
    for rows in gen_batches(A.shape[0], auto_batch_size(batch_size, A.shape[1])):
        words_hamming_distances(
            packed_to_words(A[rows], n_bits), B_words, out=out[rows], n_jobs=n_jobs
        )
        if normalize:
            out[rows] /= n_bits
    return out


@validate_params(
    {
        "A": ["array-like"],
        "B": ["array-like"],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        **_COMMON_CONSTRAINTS,
    },
    prefer_skip_nested_validation=True,
)
def packed_kneighbors(
    A, B, n_neighbors, *, n_bits=None, normalize=False, batch_size=None, n_jobs=None
):
    """The `n_neighbors` nearest rows of `B` for every row of `A`, in Hamming space.

    A brute-force search with a popcount kernel that keeps a sorted k-list per
    query, so no ``n_samples_A x n_samples_B`` matrix is ever built. A row of `A`
    that also appears in `B` is returned as its own neighbour (at distance 0): to
    leave it out, as for a leave-one-out purity, ask for ``n_neighbors + 1`` and
    drop it.

    Parameters
    ----------
    A : array-like of shape (n_queries, n_bytes), dtype uint8
        Packed query codes (see :func:`pack_bits`).

    B : array-like of shape (n_samples_B, n_bytes), dtype uint8
        Packed codes searched.

    n_neighbors : int
        Number of neighbours per query; at most ``n_samples_B``.

    n_bits : int, default=None
        Number of bits per row; None means ``8 * n_bytes``. Padding bits past it
        are ignored.

    normalize : bool, default=False
        If True, distances are fractions of differing bits (float64), else
        counts (int64).

    batch_size : int, default=None
        Rows of `A` handled at a time; None picks a size that keeps each batch
        around 64 MiB. Results do not depend on it.

    n_jobs : int, default=None
        Number of threads; None means 1 unless in a
        :func:`joblib.parallel_config` context, -1 means all processors.

    Returns
    -------
    distances : ndarray of shape (n_queries, n_neighbors)
        Distances, ascending along each row.

    indices : ndarray of shape (n_queries, n_neighbors), dtype int64
        Row indices into `B`.

    See Also
    --------
    packed_hamming_distances : The full distance matrix.
    words_kneighbors : The same search on codes already converted to words.

    Notes
    -----
    Ties are broken by the smaller index of `B`: rows are ordered by
    ``(distance, index)``, as a stable sort of each query's distances would
    order them, so results never depend on `batch_size` or `n_jobs`.

    Examples
    --------
    >>> from sksign.kernels import pack_bits, packed_kneighbors
    >>> codes = pack_bits([[1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 1, 1], [1, 1, 0, 0]])
    >>> dist, ind = packed_kneighbors(codes[:1], codes, 3, n_bits=4)
    >>> dist, ind
    (array([[0, 0, 1]]), array([[0, 3, 1]]))
    """
    A, B, n_bits = _check_pair(A, B, n_bits)
    if n_neighbors > B.shape[0]:
        raise ValueError(
            "Expected n_neighbors <= n_samples_fit, but "
            f"n_neighbors = {n_neighbors}, n_samples_fit = {B.shape[0]}, "
            f"n_samples = {A.shape[0]}"
        )
    B_words = packed_to_words(B, n_bits)
    dist = np.empty((A.shape[0], n_neighbors), dtype=np.int64)
    ind = np.empty((A.shape[0], n_neighbors), dtype=np.int64)
    for rows in gen_batches(A.shape[0], auto_batch_size(batch_size, A.shape[1])):
        dist[rows], ind[rows] = words_kneighbors(
            packed_to_words(A[rows], n_bits), B_words, n_neighbors, n_jobs=n_jobs
        )
    if normalize:
        return dist / n_bits, ind
    return dist, ind
