"""The Hamming k-NN search and distance matrix on the register blocks.

Both run :func:`~sksign.kernels._vector_counts.xor_count_block`, four codes
against 32 queries (or rows of `A` against 32 codes of `B`) with the running
counts in registers; :func:`~sksign.kernels._words.hamming_kernels` chooses
them where the CPU has AVX-512 VPOPCNTDQ. The k-lists are kept by
:mod:`sksign.kernels._klists`, as in every search kernel.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from numba import literal_unroll, njit

from sksign.kernels._klists import (
    block_lists,
    finish_lists,
    start_lists,
    trailing_zeros,
    update_lists,
)
from sksign.kernels._popcount import pairwise_counts
from sksign.kernels._vector_counts import LANES, PRUNE_WORDS, xor_count_block

__all__ = [
    "CODE_TILE_BYTES",
    "GROUP_PIVOTS",
    "PAIRWISE_MIN_ROWS",
    "PAIRWISE_TILE_BYTES",
    "QUERY_BLOCK",
    "SPAN_BLOCKS",
    "grouped_queries",
    "knn_counts_vectors",
    "pairwise_counts_vectors",
    "rows_in_order",
]

#: Queries compared at once by :func:`knn_counts_vectors` and
#: :func:`pairwise_counts_vectors`: four vectors, against four codes per
#: register block (16 running counts; measured on AVX-512 VPOPCNTDQ, 256-4096
#: bits, against 64 queries by two codes: 4-10% faster).
QUERY_BLOCK = 32


#: Bytes of codes :func:`knn_counts_vectors` compares with every query block
#: of a span before it moves on (a tile that stays in L2 beside the span's
#: queries: 512 KB of each at 4,096 bits), and the query blocks of a span.
#: Codes that fit in one tile are read once per query block; more, once per
#: span. 60,000 codes of 4,096 bits against 2,000 queries, one thread of an
#: Intel Xeon (2 MB of L2): 0.70 s streaming the 30 MB of codes for each
#: block of 32 queries (65% of the popcount peak), 0.52-0.54 s by tiles of
#: 256-512 KB, 0.49 s by 1 MB tiles (which would not leave the queries room
#: in a 1 MB L2).
CODE_TILE_BYTES = 2**19
SPAN_BLOCKS = 32

#: Pivots by which :func:`knn_counts_vectors` groups its queries.
GROUP_PIVOTS = 64

#: Bytes of `B`'s codes :func:`pairwise_counts_vectors` lays out word-major
#: and counts every row of `A` against before the next ones: a tile that
#: stays in L2.
PAIRWISE_TILE_BYTES = 2**18

#: Rows of `A` from which :func:`pairwise_counts_vectors` lays out `B` at
#: any width: laying it out word-major costs about what counting 10 rows
#: against it costs the generic kernel (fewer rows at narrower codes: see
#: :func:`pairwise_counts_vectors`).
PAIRWISE_MIN_ROWS = 10


@njit(inline="always")
def _block_word_major(Q, q0, m, qt):
    """Rows ``q0 .. q0 + m - 1`` of `Q` into `qt` word-major (``qt[w, q]``);
    the columns past `m` zero."""
    for w in range(Q.shape[1]):
        for q in range(qt.shape[1]):
            qt[w, q] = Q[q0 + q, w] if q < m else np.uint64(0)


@njit(inline="always")
def _scan_codes(T, j0, j1, qt, tile, worst, ld, li, m, k):
    """Enter codes ``j0 .. j1 - 1`` in the k-lists of a block of queries
    (`qt` word-major, `m` of them), four codes per register block, their
    counts compared with the k-th in registers."""
    for j in range(j0, j1, 4):
        if j + 4 <= j1:
            hits = xor_count_block(tile, 0, 0, T, j, qt, 0, 4, 4, worst)
        else:
            hits = np.uint64(0)
            for r in range(j1 - j):
                hits |= xor_count_block(tile, r, 0, T, j + r, qt, 0, 1, 4, worst) << r
        while hits:
            r = trailing_zeros(hits)
            hits &= hits - np.uint64(1)
            update_lists(tile, j, j + r, j + r + 1, worst, ld, li, m, k)


@njit(cache=True, nogil=True)
def grouped_queries(Q):
    """An order of the rows of `Q` that puts near queries side by side:
    grouped by the nearest of :data:`GROUP_PIVOTS` queries taken at even
    steps (ties to the first), in their order within a group."""
    n_q, n_words = Q.shape
    n_pivots = min(GROUP_PIVOTS, n_q // QUERY_BLOCK)
    stride = n_q // n_pivots
    pivots = np.empty((n_pivots, n_words), dtype=np.uint64)
    for p in range(n_pivots):
        pivots[p] = Q[p * stride]
    counts = np.empty((n_q, n_pivots), dtype=np.int32)
    pairwise_counts_vectors(Q, pivots, counts)
    nearest = np.empty(n_q, dtype=np.int64)
    for q in range(n_q):
        nearest[q] = np.argmin(counts[q])
    return np.argsort(nearest, kind="mergesort")


@njit(inline="always")
def rows_in_order(order, d, i, out_d, out_i):
    """The lists of a search on ``Q[order]`` (`d`, `i`) into the rows of
    the caller's queries."""
    for q in range(order.shape[0]):
        out_d[order[q]] = d[q]
        out_i[order[q]] = i[q]


@njit(cache=True, nogil=True)
def knn_counts_vectors(Q, T, out_d, out_i):
    """:func:`~sksign.kernels._popcount.knn_counts` on :func:`xor_count_block`.

    Same arguments, same results (the k-lists are kept by the same
    :func:`~sksign.kernels._klists.update_lists`). Blocks of
    :data:`QUERY_BLOCK` queries are stored word-major once, up to
    :data:`SPAN_BLOCKS` of them at a time; each tile of codes
    (:data:`CODE_TILE_BYTES`) is counted against every block of the span,
    four codes per register block, before the next tile, so the codes come
    from L2 rather than memory. Every query still meets the codes in
    increasing index order.

    A register block stops once none of its codes can enter a k-list
    (:func:`xor_count_block` with `worst`): with codes longer than
    :data:`PRUNE_WORDS` words, the queries are first grouped by their
    nearest pivot (:func:`grouped_queries`), so that a block's queries
    share their far codes. Neither changes a result: each query's list
    depends on its own counts alone.
    """
    n_q, n_words = Q.shape
    if n_words > PRUNE_WORDS and n_q >= 2 * QUERY_BLOCK:
        order = grouped_queries(Q)
        d, i = np.empty_like(out_d), np.empty_like(out_i)
        _knn_blocks(Q[order], T, d, i)
        rows_in_order(order, d, i, out_d, out_i)
    else:
        _knn_blocks(Q, T, out_d, out_i)


@njit(cache=True, nogil=True)
def _knn_blocks(Q, T, out_d, out_i):
    """:func:`knn_counts_vectors` on the queries in their order."""
    n_q, n_words = Q.shape
    n_t = T.shape[0]
    qb = QUERY_BLOCK
    k = out_d.shape[1]
    n_blocks = -(-n_q // qb)
    span = max(1, min(SPAN_BLOCKS, n_blocks))
    step = max(4, CODE_TILE_BYTES // (32 * max(1, n_words)) * 4)  # codes, 4 | step
    qt = np.zeros((span, n_words, qb), dtype=np.uint64)
    worst = np.empty((span, qb), dtype=np.int64)
    ld, li = block_lists(span * qb, k)  # the lists of the span's blocks
    ld = ld.reshape((span, qb, ld.shape[1]))
    li = li.reshape((span, qb, li.shape[1]))
    tile = np.zeros((4, qb), dtype=np.int64)
    for b0 in range(0, n_blocks, span):
        b1 = min(n_blocks, b0 + span)
        for b in range(b0, b1):
            q0 = b * qb
            m = min(qb, n_q - q0)
            _block_word_major(Q, q0, m, qt[b - b0])
            start_lists(worst[b - b0], ld[b - b0], li[b - b0], m, n_words)
        for t0 in range(0, n_t, step):
            t1 = min(n_t, t0 + step)
            for b in range(b0, b1):
                m = min(qb, n_q - b * qb)
                s = b - b0
                _scan_codes(T, t0, t1, qt[s], tile, worst[s], ld[s], li[s], m, k)
        for b in range(b0, b1):
            q0 = b * qb
            finish_lists(ld[b - b0], li[b - b0], out_d, out_i, q0, min(qb, n_q - q0))


@njit(inline="always")
def _rows_against_tile(A, i, rows, qt, b0, b1, n_b, out, part):
    """``out[i + r, j]`` for ``r < rows`` (4 or 1) and the codes `j` of
    `B`'s blocks ``b0 .. b1 - 1`` (`qt`: the tile of them, word-major); a
    block cut by the end of `B` goes through `part`, counted on as few
    vectors of 8 codes as hold its codes."""
    qb = QUERY_BLOCK
    for b in range(b0, b1):
        j0 = b * qb
        src = qt[b - b0]
        if j0 + qb <= n_b:
            if rows == 4:
                xor_count_block(out, i, j0, A, i, src, 0, 4, 4, None)
            else:
                xor_count_block(out, i, j0, A, i, src, 0, 1, 4, None)
            continue
        m = n_b - j0
        needed = 1 if m <= LANES else 2 if m <= 2 * LANES else 4
        for vectors in literal_unroll((1, 2, 4)):
            if vectors == needed:
                if rows == 4:
                    xor_count_block(part, 0, 0, A, i, src, 0, 4, vectors, None)
                else:
                    xor_count_block(part, 0, 0, A, i, src, 0, 1, vectors, None)
        for r in range(rows):
            for q in range(m):
                out[i + r, j0 + q] = part[r, q]


@njit(cache=True, nogil=True)
def pairwise_counts_vectors(A, B, out):
    """:func:`~sksign.kernels._popcount.pairwise_counts` on
    :func:`xor_count_block`: the same counts, into a C-contiguous int32 or
    int64 `out`.

    The rows of `B` are laid out word-major in blocks of
    :data:`QUERY_BLOCK`, a tile of :data:`PAIRWISE_TILE_BYTES` at a time;
    every row of `A` is counted against the tile, four rows a register
    block, and the counts stored from the registers into `out`'s rows, each
    row's part of the tile in one run. 2,000 x 10,000 codes into int32, one
    thread, AMD EPYC (Zen 4, AVX-512 VPOPCNTDQ): 256 bits 5.7 ms, 1,024
    bits 18.0 ms, 4,096 bits 71 ms, against 27.5, 44.9 and 136 ms for the
    generic kernel (and 27.6, 55.4 and 94 ms for blocks of `B` against all
    of `A` in turn, whose counts went to 2,000 rows at once through an
    int64 tile).

    Laying `B` out costs about as much as counting a few rows of `A`
    against it, so fewer rows than ``min(PAIRWISE_MIN_ROWS, n_words // 2 +
    1)`` go to the generic kernel (100,000 codes, one thread, same machine:
    generic / blocks 1.58 / 1.52 ms for 8 rows of 12 words, 1.88 / 2.08 ms
    for 8 rows of 16 words, 10.8 / 11.5 ms for 8 rows of 64 words; 0.14 /
    0.35 ms for one row of 4 words, 0.55 / 0.40 ms for four). So does a `B`
    of fewer than 16 codes, which would fill a fraction of a block (200,000
    rows of 16 words against 8 codes: 3.7 / 7.0 ms; against 16 codes of 1,
    4, 16 and 64 words, 20,000 rows: blocks 1.4x, 1.4x, 0.97x and 0.96x the
    generic kernel's speed).
    """
    n_b, n_words = B.shape
    n_a = A.shape[0]
    if n_a < min(PAIRWISE_MIN_ROWS, n_words // 2 + 1) or n_b < QUERY_BLOCK // 2:
        pairwise_counts(A, B, out)
        return
    qb = QUERY_BLOCK
    n_blocks = -(-n_b // qb)
    per_tile = max(1, PAIRWISE_TILE_BYTES // (8 * qb * max(1, n_words)))
    qt = np.zeros((min(per_tile, n_blocks), n_words, qb), dtype=np.uint64)
    part = np.zeros((4, qb), dtype=out.dtype)
    for b0 in range(0, n_blocks, per_tile):
        b1 = min(n_blocks, b0 + per_tile)
        for b in range(b0, b1):
            _block_word_major(B, b * qb, min(qb, n_b - b * qb), qt[b - b0])
        i = 0
        while i + 4 <= n_a:
            _rows_against_tile(A, i, 4, qt, b0, b1, n_b, out, part)
            i += 4
        while i < n_a:
            _rows_against_tile(A, i, 1, qt, b0, b1, n_b, out, part)
            i += 1
