"""AVX2 Hamming counts by look-up tables of a code's nibbles on sliced queries.

:mod:`sksign.kernels._nibbles` compares a code with 16 queries a word at a
time: an XOR, a byte look-up (``vpshufb``) and a byte add per vector of 32
nibbles. Here the queries are sliced instead: a block of 96 or 128 queries
stores, for each nibble position of a code, that nibble of every query in a
byte (:func:`slice_queries`). The code's nibble `v` at that position picks one of
16 constant tables, ``popcount(v ^ i)`` for ``i < 16``
(:data:`NIBBLE_XOR_COUNTS`), broadcast to both halves of a vector, and one
``vpshufb`` of the queries' bytes through it gives 32 queries' counts at
that position: no XOR, two vector operations (the look-up and the add) per
32 nibbles where the word kernel takes three, and one table load for the
three or four vectors of the block.

Each byte of the counts takes at most 4 a position, so the byte sums run
over at most :data:`BYTE_RUN` code bytes (62 positions) before they widen
to 16-bit sums in registers. The counts are compared with the queries' k-th
counts (int16) in registers; the queries are grouped by their nearest pivot
first, and a code that can enter no list after half its bytes is left, as
the AVX-512 register blocks do (:mod:`sksign.kernels._vector_search`).

A block's sliced queries take 16 bytes a query and word: up to
:data:`MAX_SLICED_WORDS` words they fit in a core's L1 (32 KB on AMD Zen
3, 48 KB on recent Intel cores) beside the rest; longer codes go to the
word kernel, which was as fast or faster there.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import literal_unroll, njit, types
from numba.extending import intrinsic

from sksign.kernels._ir_loops import counted_loop, llvm_function
from sksign.kernels._klists import (
    block_lists,
    enter_code,
    finish_lists,
    start_lists,
)
from sksign.kernels._nibbles import knn_counts_nibbles, pairwise_counts_nibbles
from sksign.kernels._vector_search import (
    CODE_TILE_BYTES,
    grouped_queries,
    rows_in_order,
)

__all__ = [
    "BLOCK_QUERIES",
    "BYTE_RUN",
    "MAX_SLICED_WORDS",
    "NIBBLE_XOR_COUNTS",
    "PAIRWISE_MIN_ROWS",
    "SPAN_BYTES",
    "WIDE_BLOCK_QUERIES",
    "block_queries",
    "code_counts",
    "code_offsets",
    "knn_counts_sliced",
    "pairwise_counts_sliced",
    "slice_queries",
    "sliced_counts",
]

#: Code bytes (two nibble positions each, at most 8 added to a byte) summed
#: in bytes before they widen to 16 bits: 31 x 8 = 248 < 256.
BYTE_RUN = 31

#: Words of the longest codes :func:`knn_counts_sliced` compares itself: a
#: block of 96 sliced queries then takes 24 KB. Codes of 24 words ran as
#: fast on the word kernel, longer ones faster (one thread of an Intel
#: Xeon, AVX2 paths forced, 2,000 queries against 10,000 codes).
MAX_SLICED_WORDS = 16

#: Rows of `A` from which :func:`pairwise_counts_sliced` slices `B`: slicing
#: 10,000 codes of 1,024 bits costs about what the word kernel takes for 25
#: rows against them, and the two crossed at 128 to 200 rows of 64 to 1,024
#: bits (one thread of an Intel Xeon, AVX2 paths forced). Past them, 2,000
#: rows against 10,000 codes into int32: 36-38 -> 32 ms at 256 bits, 41 ->
#: 31 ms at 512, 60-62 -> 54 ms at 1,024, writing the 80 MB of counts
#: taking much of it.
PAIRWISE_MIN_ROWS = 256

#: Queries in a block of codes up to 8 words (four vectors of 32; 16 KB of
#: sliced queries at 512 bits) and in one of longer codes (three vectors;
#: 24 KB at 1,024 bits, which leaves room in a 32 KB L1): see
#: :func:`block_queries`.
BLOCK_QUERIES = 128
WIDE_BLOCK_QUERIES = 96

#: Bytes of sliced blocks :func:`knn_counts_sliced` keeps at once, compared
#: with each tile of codes in turn: 32 blocks of 1,024-bit queries, which
#: stay in L2 beside a tile (:data:`CODE_TILE_BYTES`). Streaming 60,000
#: codes of 1,024 bits from memory for each block had made two threads
#: barely faster than one (0.17 against 0.19 s for 2,000 queries).
SPAN_BYTES = 2**20

#: ``NIBBLE_XOR_COUNTS[16 v + i] = popcount(v ^ i)``: the table of nibble `v`.
NIBBLE_XOR_COUNTS = np.array(
    [bin(v ^ i).count("1") for v in range(16) for i in range(16)], dtype=np.uint8
)

_VECTOR = 32  # queries (bytes) per 256-bit vector
_HIGH = 0xF0F0F0F0F0F0F0F0


@intrinsic(prefer_literal=True)
def sliced_counts(typingctx, tile, qs, tables, offsets, b0, n, add, worst, vectors):
    """Counts of one code's bytes ``b0 .. b0 + n - 1`` against a block of
    ``32 * vectors`` sliced queries.

    ``tile[q] (+)= sum popcount(nibble of the code ^ nibble of query q)``
    over the nibbles of those bytes, for ``q < 32 * vectors``: added when
    `add` (a literal) is True, else stored. `qs` is :func:`slice_queries`'s
    uint8 array, shape ``(16 n_words, qb)``; `tables` is
    :data:`NIBBLE_XOR_COUNTS`; `offsets` the code's :func:`code_offsets`,
    uint64 of shape ``(2, n_words)``; `tile` and `worst` int16 of length
    at least ``32 * vectors``; all C-contiguous. `vectors` (1 to 4) is a
    literal; a literal `n` unrolls the bytes. Indices in range and counts
    below 2**15 (not checked). Needs AVX2.

    Returns two masks: bit `l` of the first is set where query `l`'s count
    (after the add) is below ``worst[l]``, of the second, query ``64 + l``'s.
    """
    arrays = (tile, qs, tables, offsets, worst)
    if not (
        isinstance(add, types.BooleanLiteral)
        and isinstance(vectors, types.IntegerLiteral)
        and 1 <= vectors.literal_value <= 4
        and all(isinstance(a, types.Array) for a in arrays)
        and tile.dtype == worst.dtype == types.int16
        and qs.dtype == tables.dtype == types.uint8
        and offsets.dtype == types.uint64
    ):
        return None
    n_vectors = vectors.literal_value
    unrolled = n.literal_value if isinstance(n, types.IntegerLiteral) else None
    ret = types.UniTuple(types.uint64, 2)

    def codegen(context, builder, sig, args):
        i8, i16, i64 = ir.IntType(8), ir.IntType(16), ir.IntType(64)
        bytes32 = ir.VectorType(i8, _VECTOR)
        bytes16 = ir.VectorType(i8, 16)
        shorts32 = ir.VectorType(i16, _VECTOR)
        structs = {
            pos: context.make_array(sig.args[pos])(context, builder, args[pos])
            for pos in (0, 1, 2, 3, 7)
        }
        data = {pos: s.data for pos, s in structs.items()}
        data[3] = builder.bitcast(data[3], i8.as_pointer())
        b0_, n_ = (
            context.cast(builder, args[pos], sig.args[pos], types.int64)
            for pos in (4, 5)
        )
        qb = builder.extract_value(structs[1].shape, 1)  # bytes a position
        n_words = builder.extract_value(structs[3].shape, 1)
        high_offsets = builder.gep(data[3], [builder.mul(n_words, ir.Constant(i64, 8))])
        pshufb = llvm_function(
            builder, "llvm.x86.avx2.pshuf.b", bytes32, [bytes32, bytes32]
        )
        both_halves = ir.Constant(
            ir.VectorType(ir.IntType(32), _VECTOR), list(range(16)) * 2
        )

        def position(p, offsets_of, b, sums):
            """`sums` plus the counts at nibble position `p`, whose table's
            offset is byte `b` of `offsets_of`."""
            offset = builder.zext(builder.load(builder.gep(offsets_of, [b])), i64)
            ptr = builder.bitcast(builder.gep(data[2], [offset]), bytes16.as_pointer())
            half = builder.load(ptr, align=1)
            table = builder.shuffle_vector(half, half, both_halves)
            row = builder.gep(data[1], [builder.mul(p, qb)])
            out = []
            for v, s in enumerate(sums):
                at = builder.gep(row, [ir.Constant(i64, _VECTOR * v)])
                q = builder.load(builder.bitcast(at, bytes32.as_pointer()), align=1)
                out.append(builder.add(s, builder.call(pshufb, [table, q])))
            return out

        def code_byte(b, sums):
            """`sums` plus the counts of the code's byte `b` (two positions)."""
            p = builder.shl(b, ir.Constant(i64, 1))
            sums = position(p, data[3], b, sums)
            return position(builder.add(p, ir.Constant(i64, 1)), high_offsets, b, sums)

        zero = ir.Constant(bytes32, [0] * _VECTOR)

        def widen(byte_sums, wide):
            return [
                builder.add(w, builder.zext(s, shorts32))
                for s, w in zip(byte_sums, wide, strict=True)
            ]

        wide = [ir.Constant(shorts32, [0] * _VECTOR) for _ in range(n_vectors)]
        if unrolled is not None:
            runs = -(-unrolled // BYTE_RUN)
            size = -(-unrolled // runs)
            for start in range(0, unrolled, size):
                sums = [zero] * n_vectors
                for step in range(start, min(unrolled, start + size)):
                    sums = code_byte(builder.add(b0_, ir.Constant(i64, step)), sums)
                wide = widen(sums, wide)
        else:
            # runs of even length: ceil(n / BYTE_RUN) runs of ceil(n / runs)
            n_runs = builder.sdiv(
                builder.add(n_, ir.Constant(i64, BYTE_RUN - 1)),
                ir.Constant(i64, BYTE_RUN),
            )
            one = ir.Constant(i64, 1)
            run = builder.sdiv(builder.sub(builder.add(n_, n_runs), one), n_runs)

            def one_run(r, wide_now):
                start = builder.mul(r, run)
                left = builder.sub(n_, start)
                size = builder.select(builder.icmp_signed("<", left, run), left, run)
                first = builder.add(b0_, start)
                sums = counted_loop(
                    builder,
                    size,
                    [zero] * n_vectors,
                    lambda k, s: code_byte(builder.add(first, k), s),
                    "sliced_bytes",
                )
                return widen(sums, wide_now)

            wide = counted_loop(builder, n_runs, wide, one_run, "sliced_runs")
        masks = [ir.Constant(i64, 0), ir.Constant(i64, 0)]
        for v, w in enumerate(wide):
            at = ir.Constant(i64, _VECTOR * v)
            p = builder.bitcast(builder.gep(data[0], [at]), shorts32.as_pointer())
            if add.literal_value:
                w = builder.add(builder.load(p, align=2), w)
            builder.store(w, p, align=2)
            kth_p = builder.bitcast(builder.gep(data[7], [at]), shorts32.as_pointer())
            below = builder.icmp_signed("<", w, builder.load(kth_p, align=2))
            bits = builder.zext(builder.bitcast(below, ir.IntType(_VECTOR)), i64)
            half = v // 2
            shifted = builder.shl(bits, ir.Constant(i64, _VECTOR * (v % 2)))
            masks[half] = builder.or_(masks[half], shifted)
        return context.make_tuple(builder, sig.return_type, masks)

    sig = ret(tile, qs, tables, offsets, b0, n, add, worst, vectors)
    return sig, codegen


@njit(inline="always")
def code_offsets(T, j, offsets):
    """The table offsets of code `j`'s nibbles, a word at a time: byte `b`
    of ``offsets[0]`` and of ``offsets[1]`` (uint64 of shape ``(2,
    n_words)``) holds 16 times the low and the high nibble of the code's
    byte `b`."""
    high = np.uint64(_HIGH)
    for w in range(T.shape[1]):
        x = T[j, w]
        offsets[0, w] = (x << np.uint64(4)) & high
        offsets[1, w] = x & high


@njit(inline="always")
def _check_bytes(n_bytes):
    """Code bytes between two compares with the k-th counts: half a code's
    from 256 bits (on codes around 100 centres, most codes are far from
    every query of a grouped block by then), all of a shorter one's."""
    return n_bytes if n_bytes < 32 else n_bytes // 2


@njit(inline="always")
def slice_queries(Q, q0, m, qs):
    """Rows ``q0 .. q0 + m - 1`` of `Q` sliced into `qs`: ``qs[2 b + h, q]``
    is nibble `h` (0 low, 1 high) of byte `b` of query ``q0 + q`` (bytes
    little-endian within a word); the columns past `m` zero."""
    for w in range(Q.shape[1]):
        for b in range(8):
            p = 16 * w + 2 * b
            for q in range(qs.shape[1]):
                x = (Q[q0 + q, w] >> np.uint64(8 * b)) if q < m else np.uint64(0)
                qs[p, q] = np.uint8(x & np.uint64(0x0F))
                qs[p + 1, q] = np.uint8((x >> np.uint64(4)) & np.uint64(0x0F))


@njit(inline="always")
def block_queries(n_words):
    """Queries in a block of codes of `n_words` words: :data:`BLOCK_QUERIES`
    up to 8 words, :data:`WIDE_BLOCK_QUERIES` beyond. On an Intel Xeon (48
    KB of L1) four vectors ran 5-10% faster than three at 256 and 1,024 bits
    (``check_targets.py --parts knn``, AVX2 forced); three keep a 1,024-bit
    block in a 32 KB L1 (AMD Zen 3) beside the rest."""
    return BLOCK_QUERIES if n_words <= 8 else WIDE_BLOCK_QUERIES


@njit(inline="always")
def code_counts(tile, qs, tables, offsets, b0, n, add, worst):
    """:func:`sliced_counts` on the whole block `qs` (96 or 128 queries: its
    vectors and `add` made literal; the 16 bytes of a 256-bit code's half
    unrolled)."""
    lo = hi = np.uint64(0)
    for v in literal_unroll((4, 3)):
        if 32 * v == qs.shape[1]:
            if n == 16:
                if add:
                    lo, hi = sliced_counts(
                        tile, qs, tables, offsets, b0, 16, True, worst, v
                    )
                else:
                    lo, hi = sliced_counts(
                        tile, qs, tables, offsets, b0, 16, False, worst, v
                    )
            elif add:
                lo, hi = sliced_counts(tile, qs, tables, offsets, b0, n, True, worst, v)
            else:
                lo, hi = sliced_counts(
                    tile, qs, tables, offsets, b0, n, False, worst, v
                )
    return lo, hi


@njit(cache=True, nogil=True)
def knn_counts_sliced(Q, T, out_d, out_i):
    """:func:`~sksign.kernels._popcount.knn_counts` on :func:`sliced_counts`.

    Same arguments, same results (codes enter the k-lists by the same
    :func:`~sksign.kernels._klists.enter_code`). Blocks of
    :func:`block_queries` queries are sliced once each; every code is
    compared with a whole block, half its bytes at a time (from 256 bits),
    and left once it can enter none of the block's lists. From 256 bits
    and two blocks of queries, the queries are first grouped by their
    nearest pivot (:func:`~sksign.kernels._vector_search.grouped_queries`)
    so that a block's queries share their far codes. Neither changes a result: each
    query's list depends on its own counts alone. Codes of more than
    :data:`MAX_SLICED_WORDS` words go to
    :func:`~sksign.kernels._nibbles.knn_counts_nibbles`. Needs AVX2.
    """
    n_q, n_words = Q.shape
    if n_words > MAX_SLICED_WORDS:
        knn_counts_nibbles(Q, T, out_d, out_i)
    elif n_words >= 4 and n_q >= 2 * block_queries(n_words):
        order = grouped_queries(Q)
        d, i = np.empty_like(out_d), np.empty_like(out_i)
        _sliced_blocks(Q[order], T, d, i)
        rows_in_order(order, d, i, out_d, out_i)
    else:
        _sliced_blocks(Q, T, out_d, out_i)


@njit(cache=True, nogil=True)
def _sliced_blocks(Q, T, out_d, out_i):
    """:func:`knn_counts_sliced` on the queries in their order.

    Up to :data:`SPAN_BYTES` of sliced blocks are kept at once (a span);
    each tile of codes (:data:`CODE_TILE_BYTES`) is compared with every
    block of the span before the next, so the codes come from L2 rather
    than memory. Every query still meets the codes in increasing index
    order.
    """
    n_q, n_words = Q.shape
    n_t = T.shape[0]
    n_bytes = 8 * n_words
    qb = block_queries(n_words)
    n_blocks = -(-n_q // qb)
    span = max(1, min(n_blocks, SPAN_BYTES // (16 * n_words * qb)))
    step = max(1, CODE_TILE_BYTES // n_bytes)
    qs = np.zeros((span, 16 * n_words, qb), dtype=np.uint8)
    worst = np.empty((span, qb), dtype=np.int16)
    k = out_d.shape[1]
    ld, li = block_lists(span * qb, k)
    ld = ld.reshape((span, qb, ld.shape[1]))
    li = li.reshape((span, qb, li.shape[1]))
    tables = NIBBLE_XOR_COUNTS
    tile = np.zeros(qb, dtype=np.int16)
    offsets = np.empty((2, n_words), dtype=np.uint64)
    check = _check_bytes(n_bytes)
    for b0 in range(0, n_blocks, span):
        b1 = min(n_blocks, b0 + span)
        for b in range(b0, b1):
            m = min(qb, n_q - b * qb)
            slice_queries(Q, b * qb, m, qs[b - b0])
            start_lists(worst[b - b0], ld[b - b0], li[b - b0], m, n_words)
        for t0 in range(0, n_t, step):
            t1 = min(n_t, t0 + step)
            for s in range(b1 - b0):
                _enter_tile(
                    T,
                    t0,
                    t1,
                    qs[s],
                    tables,
                    offsets,
                    tile,
                    check,
                    worst[s],
                    ld[s],
                    li[s],
                    k,
                )
        for b in range(b0, b1):
            m = min(qb, n_q - b * qb)
            finish_lists(ld[b - b0], li[b - b0], out_d, out_i, b * qb, m)


@njit(inline="always")
def _enter_tile(T, t0, t1, qs, tables, offsets, tile, check, worst, ld, li, k):
    """Enter codes ``t0 .. t1 - 1`` in the k-lists of a sliced block
    (`qs`), each compared `check` bytes at a time and left once it can
    enter none of them."""
    n_bytes = 8 * T.shape[1]
    for j in range(t0, t1):
        code_offsets(T, j, offsets)
        lo, hi = code_counts(tile, qs, tables, offsets, 0, check, False, worst)
        b0 = check
        while (lo | hi) and b0 < n_bytes:
            n = min(check, n_bytes - b0)
            lo, hi = code_counts(tile, qs, tables, offsets, b0, n, True, worst)
            b0 += n
        if lo:
            enter_code(tile, lo, 0, j, worst, ld, li, k)
        if hi:
            enter_code(tile, hi, 64, j, worst, ld, li, k)


@njit(cache=True, nogil=True)
def pairwise_counts_sliced(A, B, out):
    """:func:`~sksign.kernels._popcount.pairwise_counts` on :func:`code_counts`.

    ``out[i, j] = popcount(A[i] ^ B[j])`` summed over words, the same
    counts. The rows of `B` play the queries of :func:`knn_counts_sliced`
    (a block sliced once), each row of `A` the code compared with the whole
    block, its counts copied to a run of its row of `out`. Codes of more
    than :data:`MAX_SLICED_WORDS` words, and fewer rows of `A` than
    :data:`PAIRWISE_MIN_ROWS`, go to
    :func:`~sksign.kernels._nibbles.pairwise_counts_nibbles`. Needs AVX2.
    """
    n_b, n_words = B.shape
    if n_words == 0:
        out[:, :] = 0
        return
    if n_words > MAX_SLICED_WORDS or A.shape[0] < PAIRWISE_MIN_ROWS:
        pairwise_counts_nibbles(A, B, out)
        return
    n_bytes = 8 * n_words
    qb = block_queries(n_words)
    qs = np.zeros((16 * n_words, qb), dtype=np.uint8)
    tables = NIBBLE_XOR_COUNTS
    tile = np.zeros(qb, dtype=np.int16)
    never = np.full(qb, -1, dtype=np.int16)  # no count is below: masks unused
    offsets = np.empty((2, n_words), dtype=np.uint64)
    for b0 in range(0, n_b, qb):
        m = min(qb, n_b - b0)
        slice_queries(B, b0, m, qs)
        for i in range(A.shape[0]):
            code_offsets(A, i, offsets)
            code_counts(tile, qs, tables, offsets, 0, n_bytes, False, never)
            for q in range(m):
                out[i, b0 + q] = tile[q]
