"""The k-lists of a block of queries: what every k-NN search kernel keeps.

A search kernel compares a block of queries with the codes in increasing
index order and keeps, per query, the `k` smallest ``(count, index)`` seen so
far, sorted, with the k-th count in ``worst[q]`` (the lanes past the block's
queries hold -1, which accepts no code). A code enters a list only when its
count is strictly below the k-th, after every entry of a count not larger
than its own, so ties stay ordered by index, as a stable sort would leave
them. The kernels (:mod:`sksign.kernels._popcount`,
:mod:`sksign.kernels._nibbles`, :mod:`sksign.kernels._sliced_nibbles`,
:mod:`sksign.kernels._vector_search`) differ in how they count; they keep
their lists with these functions alone.

The lists live in arrays of the block (:func:`block_lists`), copied to the
caller's output when the block is done (:func:`finish_lists`). Lists of up
to :data:`LIST_LANES` entries take one vector of int64 each, filled past `k`
with counts no code reaches, and a code enters one by a vector compare and
two shuffles (:func:`insert_in_vector`), no branch on its place: on 10,000
codes of 256 bits against 500 queries (k = 5, AVX-512), the entries had
taken a quarter of the search with a scalar insertion into the output rows.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from sksign.kernels._ir_loops import splat

__all__ = [
    "LIST_LANES",
    "block_lists",
    "enter_code",
    "finish_lists",
    "insert_in_vector",
    "lanes_below",
    "list_width",
    "start_lists",
    "trailing_zeros",
    "update_lists",
]

#: Entries of a k-list held in one vector (:func:`insert_in_vector`); longer
#: lists are kept by a scalar insertion.
LIST_LANES = 8

#: Lanes of a tile compared with the k-th counts at once (:func:`lanes_below`).
_CHECK_LANES = 16


@intrinsic(prefer_literal=True)
def lanes_below(typingctx, a, i, b, j, n):
    """Bit mask of ``a.flat[i + l] < b.flat[j + l]`` over lanes ``l < n``.

    One vector compare of the `n` lanes (a literal, at most 64) and a move
    of its sign bits to an integer: bit `l` of the result is set where lane
    `l` of `a` is below that of `b`. int64 C-contiguous arrays, indices in
    range (not checked).
    """
    if not (
        isinstance(n, types.IntegerLiteral)
        and 0 < n.literal_value <= 64
        and all(isinstance(x, types.Array) and x.dtype == types.int64 for x in (a, b))
    ):
        return None
    lanes = n.literal_value

    def codegen(context, builder, sig, args):
        vector = ir.VectorType(ir.IntType(64), lanes).as_pointer()
        values = []
        for arr, at, pos in ((args[0], args[1], 0), (args[2], args[3], 2)):
            data = context.make_array(sig.args[pos])(context, builder, arr).data
            index = context.cast(builder, at, sig.args[pos + 1], types.int64)
            p = builder.bitcast(builder.gep(data, [index]), vector)
            values.append(builder.load(p, align=8))
        below = builder.icmp_signed("<", values[0], values[1])
        mask = builder.bitcast(below, ir.IntType(lanes))
        return builder.zext(mask, ir.IntType(64))

    return types.uint64(a, i, b, j, n), codegen


@intrinsic
def trailing_zeros(typingctx, x):
    """Number of trailing zero bits of a 64-bit unsigned integer (LLVM
    ``cttz``; 64 for zero)."""
    if not (isinstance(x, types.Integer) and x.bitwidth == 64):
        return None

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [i64, ir.IntType(1)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.cttz.i64")
        return builder.call(fn, [args[0], ir.Constant(ir.IntType(1), 0)])

    return types.int64(x), codegen


@intrinsic
def insert_in_vector(typingctx, ld, li, row, d, j):
    """Insert ``(d, j)`` in the sorted list of row `row` of `ld` and `li`.

    `ld` (counts) and `li` (indices) are int64 C-contiguous arrays of shape
    ``(n, LIST_LANES)``, each row sorted by count. The entry goes after the
    lanes of counts not above `d`; the lanes from there move up one and the
    last drops out. Loaded, compared and shuffled as one vector each, stored
    back whole: no branch on the place. Indices in range (not checked).
    """
    if not (
        all(
            isinstance(a, types.Array) and a.ndim == 2 and a.dtype == types.int64
            for a in (ld, li)
        )
        and all(isinstance(x, types.Integer) for x in (row, d, j))
    ):
        return None

    def codegen(context, builder, sig, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        vec = ir.VectorType(i64, LIST_LANES)
        row_, d_, j_ = (
            context.cast(builder, args[pos], sig.args[pos], types.int64)
            for pos in (2, 3, 4)
        )
        at = builder.mul(row_, ir.Constant(i64, LIST_LANES))
        pointers = [
            builder.bitcast(
                builder.gep(
                    context.make_array(sig.args[pos])(context, builder, args[pos]).data,
                    [at],
                ),
                vec.as_pointer(),
            )
            for pos in (0, 1)
        ]
        counts, indices = (builder.load(p, align=8) for p in pointers)
        d_lanes, j_lanes = splat(builder, d_, vec), splat(builder, j_, vec)
        above = builder.icmp_signed(">", counts, d_lanes)
        # lane l takes lane l - 1 where lane l - 1 is above d; lane 0 never
        up = [0, *range(LIST_LANES - 1)]
        up_index = ir.Constant(ir.VectorType(i32, LIST_LANES), up)
        no = ir.Constant(ir.VectorType(ir.IntType(1), LIST_LANES), [0] * LIST_LANES)
        moved = builder.shuffle_vector(
            above,
            no,
            ir.Constant(ir.VectorType(i32, LIST_LANES), [LIST_LANES, *up[1:]]),
        )
        new = [
            builder.select(
                moved,
                builder.shuffle_vector(old, old, up_index),
                builder.select(above, fresh, old),
            )
            for old, fresh in ((counts, d_lanes), (indices, j_lanes))
        ]
        for value, p in zip(new, pointers, strict=True):
            builder.store(value, p, align=8)
        return context.get_dummy_value()

    return types.none(ld, li, row, d, j), codegen


@njit(inline="always")
def list_width(k):
    """Entries a k-list takes: one vector of :data:`LIST_LANES` for `k` up
    to that, else `k`."""
    return LIST_LANES if k <= LIST_LANES else k


@njit(inline="always")
def block_lists(qb, k):
    """Empty ``(counts, indices)`` arrays for the k-lists of `qb` queries,
    :func:`list_width` wide."""
    width = list_width(k)
    return np.empty((qb, width), np.int64), np.empty((qb, width), np.int64)


@njit(inline="always")
def start_lists(worst, ld, li, m, n_words):
    """Empty the k-lists for a block of `m` queries.

    Every entry gets a count larger than any (``64 n_words + 1``) and index
    -1; ``worst[q]`` is that count for the block's `m` queries and -1 in the
    lanes past them, which never accept a code.
    """
    big = n_words * 64 + 1
    for q in range(worst.shape[0]):
        worst[q] = big if q < m else -1
    for q in range(ld.shape[0]):
        for r in range(ld.shape[1]):
            ld[q, r] = big
            li[q, r] = -1


@njit(inline="always")
def finish_lists(ld, li, out_d, out_i, q0, m):
    """The k-lists of a block of `m` queries into rows ``q0 ..`` of the
    outputs (their `k` columns)."""
    for q in range(m):
        for r in range(out_d.shape[1]):
            out_d[q0 + q, r] = ld[q, r]
            out_i[q0 + q, r] = li[q, r]


@njit(inline="always")
def update_lists(tile, t0, j0, j1, worst, ld, li, m, k):
    """Enter codes ``j0 .. j1 - 1`` in the k-lists of the block's `m` queries.

    ``tile[j - t0, q]`` is the count of code `j` against query `q` of the
    block. The tile's width is a multiple of 16: each code is compared with
    16 k-th counts at once, and only the queries it improves are visited.
    """
    qb = worst.shape[0]
    for j in range(j0, j1):
        at = (j - t0) * qb
        for g in range(0, m, _CHECK_LANES):
            hits = lanes_below(tile, at + g, worst, g, _CHECK_LANES)
            if hits:
                enter_code(tile[j - t0], hits, g, j, worst, ld, li, k)


@njit(inline="always")
def enter_code(dist, hits, g, j, worst, ld, li, k):
    """Enter code `j` in the k-lists of the block's queries ``g + l`` for the
    set bits `l` of `hits` (those it improves), at counts ``dist[g + l]``."""
    in_vector = ld.shape[1] == LIST_LANES
    while hits:
        q = g + trailing_zeros(hits)
        hits &= hits - np.uint64(1)
        d = dist[q]
        if in_vector:
            insert_in_vector(ld, li, q, d, j)
        else:
            r = k - 1
            while r > 0 and ld[q, r - 1] > d:
                ld[q, r] = ld[q, r - 1]
                li[q, r] = li[q, r - 1]
                r -= 1
            ld[q, r] = d
            li[q, r] = j
        worst[q] = ld[q, k - 1]
