"""Numba kernels for Hamming distances and k-NN search on packed 64-bit words.

Every kernel takes codes as C-contiguous ``uint64`` arrays of shape
``(n_codes, n_words)`` whose padding bits are zero (see
:func:`sksign.kernels.packed_to_words`), so the Hamming distance of two rows is
the sum over words of ``popcount(a ^ b)``. The kernels are serial and release the
GIL (``nogil=True``); :mod:`sksign.kernels._words` runs them on several threads.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import functools
from types import MappingProxyType

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from sksign.kernels._klists import (
    block_lists,
    finish_lists,
    start_lists,
    update_lists,
)

__all__ = [
    "knn_counts",
    "pairwise_counts",
    "popcount64",
    "popcount_instructions",
    "target_has",
]

# Layout of `knn_counts`: a block of queries is compared with a tile of codes at a
# time, so every code is loaded once per block (the block stays in L1) and the
# kernel is compute bound rather than bandwidth bound. Short codes (fewer than
# `ROW_MAJOR_MIN_WORDS` words) store the block word-major and vectorise over
# queries; long codes store it row-major and vectorise over words, four queries
# per pass. Both block sizes were measured on AVX-512 (Zen 4) for 256-4096 bits.
SHORT_QUERY_BLOCK = 64
LONG_QUERY_BLOCK = 32
ROW_MAJOR_MIN_WORDS = 32
CODE_TILE = 64


@intrinsic
def popcount64(typingctx, x):
    """Population count of a 64-bit unsigned integer (LLVM ``ctpop``)."""
    if not (isinstance(x, types.Integer) and x.bitwidth == 64):
        return None

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.ctpop.i64")
        return builder.call(fn, [args[0]])

    return types.uint64(x), codegen


def popcount_instructions():
    """The popcount the kernels compile to on this machine, in words.

    numba compiles every kernel for the CPU it runs on (unless
    ``NUMBA_CPU_NAME`` says otherwise), and LLVM lowers ``popcount64`` to
    the best instruction that CPU has: AVX-512's vector popcount
    (``vpopcntq``, 8 words per instruction) where the CPU has VPOPCNTDQ;
    on AVX2, the scalar ``popcnt`` or, in the loops it vectorises, nibble
    look-ups (``vpshufb``); else bit arithmetic.

    Returns
    -------
    path : str
        ``"AVX-512 VPOPCNTDQ (vector popcount)"``,
        ``"AVX2 (popcnt, vpshufb nibble look-ups)"``,
        ``"POPCNT (scalar)"``, or ``"no popcount instruction (bit arithmetic)"``.

    Examples
    --------
    >>> from sksign.kernels import popcount_instructions
    >>> popcount_instructions() in (
    ...     "AVX-512 VPOPCNTDQ (vector popcount)",
    ...     "AVX2 (popcnt, vpshufb nibble look-ups)",
    ...     "POPCNT (scalar)",
    ...     "no popcount instruction (bit arithmetic)",
    ... )
    True
    """
    features = _target_features()
    if features.get("avx512vpopcntdq"):
        return "AVX-512 VPOPCNTDQ (vector popcount)"
    if features.get("avx2"):
        return "AVX2 (popcnt, vpshufb nibble look-ups)"
    if features.get("popcnt"):
        return "POPCNT (scalar)"
    return "no popcount instruction (bit arithmetic)"


def target_has(feature):
    """Whether numba compiles for a CPU with `feature` (an LLVM feature name,
    such as ``"avx2"``): the host's, unless ``NUMBA_CPU_NAME`` /
    ``NUMBA_CPU_FEATURES`` say otherwise (as :func:`popcount_instructions`)."""
    return bool(_target_features().get(feature))


def _target_features():
    from numba.core import config

    return _features(config.CPU_NAME, config.CPU_FEATURES)


@functools.lru_cache
def _features(cpu_name, cpu_features):
    """The CPU features numba's target settings stand for (cached: the host's
    take LLVM a fraction of a millisecond to read)."""
    import llvmlite.binding as llvm

    if cpu_features:  # an explicit target (NUMBA_CPU_FEATURES)
        names = cpu_features.split(",")
        return MappingProxyType({f[1:]: f[0] == "+" for f in names if f[:1] in "+-"})
    if cpu_name and cpu_name != "host":
        return MappingProxyType({})  # a named generic target: assume no extension
    return MappingProxyType(dict(llvm.get_host_cpu_features()))


@njit(cache=True, nogil=True, fastmath=False)
def pairwise_counts(A, B, out):
    """Write ``out[i, j] = popcount(A[i] ^ B[j])`` (summed over words)."""
    n_a, n_words = A.shape
    n_b = B.shape[0]
    for i in range(n_a):
        for j in range(n_b):
            s = 0
            for w in range(n_words):
                s += popcount64(A[i, w] ^ B[j, w])
            out[i, j] = s


@njit(cache=True, nogil=True, fastmath=False)
def _tile_counts_word_major(qt, T, j0, j1, tile):
    """``tile[j - j0, q] = popcount(T[j] ^ query q)``, queries word-major.

    Four words per pass, so each query's running count is loaded and stored once
    per four words rather than once per word.
    """
    n_words, qb = qt.shape
    n_quads = n_words - n_words % 4
    for j in range(j0, j1):
        dist = tile[j - j0]
        for q in range(qb):
            dist[q] = 0
        for w in range(0, n_quads, 4):
            t0 = T[j, w]
            t1 = T[j, w + 1]
            t2 = T[j, w + 2]
            t3 = T[j, w + 3]
            a0 = qt[w]
            a1 = qt[w + 1]
            a2 = qt[w + 2]
            a3 = qt[w + 3]
            for q in range(qb):
                dist[q] += (
                    popcount64(a0[q] ^ t0)
                    + popcount64(a1[q] ^ t1)
                    + popcount64(a2[q] ^ t2)
                    + popcount64(a3[q] ^ t3)
                )
        for w in range(n_quads, n_words):
            t = T[j, w]
            qw = qt[w]
            for q in range(qb):
                dist[q] += popcount64(qw[q] ^ t)


@njit(cache=True, nogil=True, fastmath=False)
def _tile_counts_row_major(qr, T, j0, j1, tile):
    """``tile[j - j0, q] = popcount(T[j] ^ qr[q])``, four queries per pass."""
    qb, n_words = qr.shape
    for j in range(j0, j1):
        dist = tile[j - j0]
        for q in range(0, qb, 4):
            s0 = 0
            s1 = 0
            s2 = 0
            s3 = 0
            for w in range(n_words):
                t = T[j, w]
                s0 += popcount64(qr[q, w] ^ t)
                s1 += popcount64(qr[q + 1, w] ^ t)
                s2 += popcount64(qr[q + 2, w] ^ t)
                s3 += popcount64(qr[q + 3, w] ^ t)
            dist[q] = s0
            dist[q + 1] = s1
            dist[q + 2] = s2
            dist[q + 3] = s3


@njit(cache=True, nogil=True, fastmath=False)
def knn_counts(Q, T, out_d, out_i):
    """k nearest rows of `T` for every row of `Q`, by Hamming count.

    Parameters
    ----------
    Q : ndarray of shape (n_queries, n_words), dtype=uint64
        Query codes.
    T : ndarray of shape (n_codes, n_words), dtype=uint64
        Codes searched, scanned in increasing index order.
    out_d : ndarray of shape (n_queries, k), dtype=int64
        Receives the distances, ascending.
    out_i : ndarray of shape (n_queries, k), dtype=int64
        Receives the row indices of `T`; equal distances are ordered by index.

    Notes
    -----
    A code enters a query's k-list only when its distance is strictly smaller
    than the current k-th one, and is inserted after every entry at a distance
    not larger than its own, so each list stays sorted by ``(distance, index)``:
    ties are broken by the smaller index, as a stable sort would
    (:mod:`sksign.kernels._klists`). A code that improves no query of the
    block costs one vectorised comparison.
    """
    n_q, n_words = Q.shape
    n_t = T.shape[0]
    row_major = n_words >= ROW_MAJOR_MIN_WORDS
    qb = LONG_QUERY_BLOCK if row_major else SHORT_QUERY_BLOCK
    qr = np.zeros((qb, n_words), dtype=np.uint64)
    qt = np.zeros((n_words, qb), dtype=np.uint64)
    tile = np.zeros((CODE_TILE, qb), dtype=np.int64)
    worst = np.empty(qb, dtype=np.int64)
    k = out_d.shape[1]
    ld, li = block_lists(qb, k)
    for q0 in range(0, n_q, qb):
        m = min(qb, n_q - q0)
        for q in range(qb):
            for w in range(n_words):
                x = Q[q0 + q, w] if q < m else np.uint64(0)
                qr[q, w] = x
                qt[w, q] = x
        start_lists(worst, ld, li, m, n_words)
        for j0 in range(0, n_t, CODE_TILE):
            j1 = min(j0 + CODE_TILE, n_t)
            if row_major:
                _tile_counts_row_major(qr, T, j0, j1, tile)
            else:
                _tile_counts_word_major(qt, T, j0, j1, tile)
            update_lists(tile, j0, j0, j1, worst, ld, li, m, k)
        finish_lists(ld, li, out_d, out_i, q0, m)
