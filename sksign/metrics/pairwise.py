"""Bit packing and Hamming distances on packed bit codes (XOR + popcount).

Codes are stored 8 bits per byte, most significant bit first, exactly like
:func:`numpy.packbits`. Distances are computed on 64-bit words with numba kernels
(``sksign.metrics._popcount``) in row batches, so memory stays bounded and a
:class:`numpy.memmap` is read batch by batch.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from concurrent.futures import ThreadPoolExecutor
from numbers import Integral

import numpy as np
from joblib import effective_n_jobs
from sklearn.utils import gen_batches
from sklearn.utils._param_validation import Interval, validate_params
from sklearn.utils.validation import check_array

from sksign.metrics._popcount import knn_counts, pairwise_counts

__all__ = [
    "pack_bits",
    "packed_hamming_distances",
    "packed_kneighbors",
    "unpack_bits",
]

# Bytes of input converted to packed words at once when `batch_size` is None.
_BATCH_BYTES = 1 << 26


def _bits_of(x, name="bits"):
    """Boolean array ``x > 0`` of an array of 0/1, +-1 or bool values."""
    x = np.asarray(x)
    if x.dtype.kind in "fc" and np.isnan(x).any():
        raise ValueError(f"{name} contains NaN; expected 0/1, +-1 or bool values.")
    if x.dtype.kind == "f" and np.isinf(x).any():
        raise ValueError(f"{name} contains infinity; expected 0/1, +-1 or bool values.")
    if x.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must hold 0/1, +-1 or bool values; got dtype {x.dtype}."
        )
    return x > 0


@validate_params(
    {"bits": ["array-like"], "axis": [Integral]},
    prefer_skip_nested_validation=True,
)
def pack_bits(bits, axis=-1):
    """Pack 0/1, +-1 or bool values into uint8, 8 bits per byte.

    The bit of a value is ``x > 0`` (so -1 and 0 give 0, +1 gives 1). Bits are
    packed most significant bit first, exactly like ``numpy.packbits(x > 0,
    axis=axis)``; the last byte of a row whose length is not a multiple of 8 is
    padded with zero bits.

    Parameters
    ----------
    bits : array-like
        Values to pack; NaN raises a ValueError.

    axis : int, default=-1
        Axis along which bits are packed.

    Returns
    -------
    packed : ndarray of dtype uint8
        `bits` with ``ceil(n / 8)`` bytes in place of the ``n`` values of `axis`.

    See Also
    --------
    unpack_bits : The inverse operation.

    Examples
    --------
    >>> from sksign.metrics.pairwise import pack_bits
    >>> pack_bits([[1, -1, 1, 1, -1, -1, -1, -1, 1]])
    array([[176, 128]], dtype=uint8)
    """
    return np.packbits(_bits_of(bits), axis=axis)


def _check_packed(X, name):
    """2-D uint8 array of packed codes; anything else raises a TypeError."""
    X = check_array(X, dtype=None, input_name=name, ensure_all_finite=False)
    if X.dtype != np.uint8:
        raise TypeError(
            f"{name} must be bit-packed codes of dtype uint8 (see pack_bits); "
            f"got dtype {X.dtype}."
        )
    return X


def _check_n_bits(n_bits, n_bytes):
    """Number of bits in rows of `n_bytes` bytes; None means ``8 * n_bytes``."""
    if n_bits is None:
        return 8 * n_bytes
    if not 8 * (n_bytes - 1) < n_bits <= 8 * n_bytes:
        raise ValueError(
            f"n_bits={n_bits} does not fit packed rows of {n_bytes} bytes: "
            f"expected {8 * (n_bytes - 1) + 1} <= n_bits <= {8 * n_bytes}."
        )
    return int(n_bits)


def _as_words(packed, n_bits):
    """Copy packed uint8 rows into uint64 words with every padding bit zero.

    Bits past `n_bits` (in the last byte, and the bytes up to the next multiple
    of 8) are cleared, so padding never changes a distance. The bit order inside
    a word does not matter for popcount(a ^ b).
    """
    n_rows = packed.shape[0]
    n_bytes = (n_bits + 7) // 8
    n_words = (n_bits + 63) // 64
    buf = np.zeros((n_rows, 8 * n_words), dtype=np.uint8)
    buf[:, :n_bytes] = packed[:, :n_bytes]
    if n_bits % 8:
        buf[:, n_bytes - 1] &= np.uint8((0xFF << (8 - n_bits % 8)) & 0xFF)
    return buf.view(np.uint64)


def _n_threads(n_jobs):
    return max(1, effective_n_jobs(n_jobs))


def _auto_batch_size(batch_size, row_bytes):
    if batch_size is not None:
        return int(batch_size)
    return max(256, _BATCH_BYTES // max(1, row_bytes))


def _map(func, tasks, n_threads):
    """``[func(*t) for t in tasks]``, on `n_threads` threads (kernels drop the GIL)."""
    if n_threads == 1 or len(tasks) == 1:
        return [func(*t) for t in tasks]
    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        return list(pool.map(lambda t: func(*t), tasks))


def _knn_words(Q, T, n_neighbors, n_threads=1):
    """k nearest rows of `T` for each row of `Q` (uint64 words), ties by index.

    Returns ``(counts, indices)``, both int64 of shape (n_queries, n_neighbors).
    With several threads the queries are split, and when there are too few
    queries to keep every thread busy the codes are split too and the partial
    lists are merged with a stable sort (codes in increasing index order), which
    keeps the tie order of a single pass.
    """
    n_q, n_t = Q.shape[0], T.shape[0]
    n_q_parts = max(1, min(n_threads, n_q // 64))
    n_t_parts = max(1, min(n_threads // n_q_parts, n_t // max(n_neighbors, 1024)))
    q_slices = list(gen_batches(n_q, -(-n_q // n_q_parts)))
    t_slices = list(gen_batches(n_t, -(-n_t // n_t_parts)))
    if len(t_slices) > 1 and any(s.stop - s.start < n_neighbors for s in t_slices):
        t_slices = [slice(0, n_t)]

    def search(qs, ts):
        d = np.empty((qs.stop - qs.start, n_neighbors), dtype=np.int64)
        i = np.empty_like(d)
        knn_counts(Q[qs], T[ts], d, i)
        return d, i + ts.start

    parts = _map(search, [(qs, ts) for qs in q_slices for ts in t_slices], n_threads)
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


def _pairwise_words(A, B, out, n_threads=1):
    """``out[i, j] = popcount(A[i] ^ B[j])`` on uint64 words, rows split on threads."""
    slices = list(gen_batches(A.shape[0], -(-A.shape[0] // n_threads)))
    _map(lambda s: pairwise_counts(A[s], B, out[s]), [(s,) for s in slices], n_threads)
    return out


def _check_pair(A, B, n_bits):
    A = _check_packed(A, "A")
    B = A if B is None else _check_packed(B, "B")
    if A.shape[1] != B.shape[1]:
        raise ValueError(
            "A and B must have the same number of bytes per row; "
            f"got {A.shape[1]} and {B.shape[1]}."
        )
    return A, B, _check_n_bits(n_bits, A.shape[1])


_COMMON_CONSTRAINTS = {
    "n_bits": [Interval(Integral, 1, None, closed="left"), None],
    "normalize": ["boolean"],
    "batch_size": [Interval(Integral, 1, None, closed="left"), None],
    "n_jobs": [Integral, None],
}


@validate_params(
    {
        "packed": ["array-like"],
        "n_bits": [Interval(Integral, 1, None, closed="left"), None],
        "axis": [Integral],
    },
    prefer_skip_nested_validation=True,
)
def unpack_bits(packed, n_bits=None, axis=-1):
    """Unpack uint8 codes into 0/1 bits, the inverse of :func:`pack_bits`.

    Parameters
    ----------
    packed : array-like of dtype uint8
        Packed codes, most significant bit first (as :func:`numpy.packbits`).

    n_bits : int, default=None
        Number of bits to keep along `axis`; padding bits past it are dropped.
        None keeps ``8 * n_bytes``. Must satisfy
        ``8 * (n_bytes - 1) < n_bits <= 8 * n_bytes``.

    axis : int, default=-1
        Axis along which the bytes are unpacked.

    Returns
    -------
    bits : ndarray of dtype uint8
        Zeros and ones, with `n_bits` values along `axis`.

    See Also
    --------
    pack_bits : The inverse operation.

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.metrics.pairwise import unpack_bits
    >>> unpack_bits(np.array([[176, 128]], dtype=np.uint8), n_bits=9)
    array([[1, 0, 1, 1, 0, 0, 0, 0, 1]], dtype=uint8)
    """
    packed = np.asarray(packed)
    if packed.dtype != np.uint8:
        raise TypeError(
            f"packed must be codes of dtype uint8 (see pack_bits); got dtype "
            f"{packed.dtype}."
        )
    n_bits = _check_n_bits(n_bits, packed.shape[axis])
    return np.unpackbits(packed, axis=axis, count=n_bits)


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
    >>> from sksign.metrics.pairwise import pack_bits, packed_hamming_distances
    >>> codes = pack_bits([[1, 1, 0], [1, 0, 1], [0, 0, 0]])
    >>> packed_hamming_distances(codes, n_bits=3)
    array([[0, 2, 2],
           [2, 0, 2],
           [2, 2, 0]], dtype=int32)
    """
    A, B, n_bits = _check_pair(A, B, n_bits)
    n_threads = _n_threads(n_jobs)
    out = np.empty((A.shape[0], B.shape[0]), np.float64 if normalize else np.int32)
    B_words = _as_words(B, n_bits)
    for rows in gen_batches(A.shape[0], _auto_batch_size(batch_size, A.shape[1])):
        _pairwise_words(_as_words(A[rows], n_bits), B_words, out[rows], n_threads)
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

    Notes
    -----
    Ties are broken by the smaller index of `B`: rows are ordered by
    ``(distance, index)``, as a stable sort of each query's distances would
    order them, so results never depend on `batch_size` or `n_jobs`.

    Examples
    --------
    >>> from sksign.metrics.pairwise import pack_bits, packed_kneighbors
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
    B_words = _as_words(B, n_bits)
    n_threads = _n_threads(n_jobs)
    dist = np.empty((A.shape[0], n_neighbors), dtype=np.int64)
    ind = np.empty((A.shape[0], n_neighbors), dtype=np.int64)
    for rows in gen_batches(A.shape[0], _auto_batch_size(batch_size, A.shape[1])):
        dist[rows], ind[rows] = _knn_words(
            _as_words(A[rows], n_bits), B_words, n_neighbors, n_threads
        )
    if normalize:
        return dist / n_bits, ind
    return dist, ind
