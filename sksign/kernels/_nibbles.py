"""AVX2 XOR + popcount on nibble-split words: the k-NN tile kernel without ``vpopcntq``.

AVX2 has no vector popcount: LLVM lowers a vectorised ``ctpop`` to two byte
look-ups (``vpshufb``) on the low and high nibbles, a shift and two masks to
split them, and a ``vpsadbw`` with a 64-bit add per vector of four words. Two
identities remove most of that work:

- the nibbles of ``a ^ b`` are the XORs of the nibbles of `a` and `b`, so codes
  split once into a low-nibble word (``w & 0x0f0f...``) and a high-nibble word
  (``(w >> 4) & 0x0f0f...``) need no shift and no mask in the inner loop;
- the byte counts of up to :data:`MAX_CHUNK_WORDS` words fit in a byte, so they
  are summed with byte adds and reduced by one ``vpsadbw`` per chunk.

That leaves two XORs, two look-ups and two byte adds per vector of four words:
the k-NN search runs about 1.5x faster than with the vectorised ``ctpop`` on an
AVX2 machine (AMD Zen 3, ``benchmarks/bench_knn.py``). The intrinsic says this
in LLVM IR with the x86 AVX2 intrinsics, so it compiles only where the CPU has
AVX2: :func:`nibble_kernels` says whether to use it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from sksign.kernels._ir_loops import counted_loop, llvm_function, load_vector, splat
from sksign.kernels._klists import (
    block_lists,
    enter_code,
    finish_lists,
    start_lists,
)
from sksign.kernels._popcount import popcount_instructions

__all__ = [
    "GROUP_QUERIES",
    "MAX_CHUNK_WORDS",
    "knn_counts_nibbles",
    "nibble_counts",
    "nibble_kernels",
    "pairwise_counts_nibbles",
]

#: Words whose byte counts are summed in bytes before one ``vpsadbw``: each
#: word adds at most 8 to a byte (4 + 4 from its two nibbles), 31 x 8 < 256.
MAX_CHUNK_WORDS = 31

#: Queries (64-bit lanes) one :func:`nibble_counts` compares with a code:
#: four vectors of four, so the code's two broadcast words serve 16 queries.
GROUP_QUERIES = 16

_LANES = 4  # 64-bit words per 256-bit vector
_LOW = 0x0F0F0F0F0F0F0F0F
_NIBBLE_COUNTS = [bin(v).count("1") for v in range(16)] * 2  # per 128-bit lane


def nibble_kernels():
    """Whether the nibble kernels run here: AVX2 without a vector popcount.

    Where the CPU has AVX-512 VPOPCNTDQ the generic kernels compile to its
    vector popcount (eight words an instruction, no look-ups); without AVX2
    the intrinsic cannot compile. Follows
    :func:`popcount_instructions` (and so ``NUMBA_CPU_NAME`` /
    ``NUMBA_CPU_FEATURES``).
    """
    return popcount_instructions().startswith("AVX2")


@intrinsic(prefer_literal=True)
def nibble_counts(
    typingctx, tile, row, q_low, q_high, q0, t_low, t_high, w0, n, add, worst
):
    """Counts of one code against 16 queries over words ``w0 .. w0 + n - 1``.

    ``tile[row, q0 + i] (+)= sum_w popcount(q[w, q0 + i] ^ t[row, w])`` for
    ``i < 16``: added when `add` (a literal) is True, else stored. `q_low` /
    `q_high` are the nibble-split queries, word-major (shape ``(n_words,
    n_queries)``, ``q0 + 16 <= n_queries``); `t_low` / `t_high` the
    nibble-split codes, row-major (shape ``(n_codes, n_words)``); `tile` is
    int64 of shape ``(n_codes, n_queries)``; all C-contiguous. A literal `n`
    unrolls the words. ``0 < n <= MAX_CHUNK_WORDS`` and indices in range (not
    checked). Needs AVX2.

    Returns the bit mask of the lanes whose count (after the add) is below
    ``worst[q0 + i]`` (bit `i`; `worst` int64), compared in registers.
    """
    arrays = (tile, q_low, q_high, t_low, t_high, worst)
    if not (
        isinstance(add, types.BooleanLiteral)
        and all(isinstance(a, types.Array) for a in arrays)
        and tile.dtype == worst.dtype == types.int64
        and all(a.dtype == types.uint64 for a in arrays[1:-1])
    ):
        return None
    unrolled = n.literal_value if isinstance(n, types.IntegerLiteral) else None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        bytes32 = ir.VectorType(ir.IntType(8), 32)
        words4 = ir.VectorType(i64, _LANES)
        groups = range(GROUP_QUERIES // _LANES)
        arr = {
            pos: context.make_array(sig.args[pos])(context, builder, args[pos]).data
            for pos in (0, 2, 3, 5, 6, 10)
        }
        row, q0, w0, n = (
            context.cast(builder, args[pos], sig.args[pos], types.int64)
            for pos in (1, 4, 7, 8)
        )
        shapes = (sig.args[2], args[2]), (sig.args[5], args[5])
        n_queries, n_words = (  # the row strides, in words
            builder.extract_value(context.make_array(t)(context, builder, a).shape, 1)
            for t, a in shapes
        )
        pshufb = llvm_function(
            builder, "llvm.x86.avx2.pshuf.b", bytes32, [bytes32, bytes32]
        )
        psadbw = llvm_function(
            builder, "llvm.x86.avx2.psad.bw", words4, [bytes32, bytes32]
        )
        table = ir.Constant(bytes32, _NIBBLE_COUNTS)
        zero = ir.Constant(bytes32, [0] * 32)
        t_row = builder.mul(row, n_words)

        def vector_at(ptr, index, offset):
            at = builder.add(index, ir.Constant(i64, offset))
            return load_vector(builder, ptr, at, words4, align=8)

        def broadcast(ptr, index):
            word = builder.load(builder.gep(ptr, [index]), align=8)
            return builder.bitcast(splat(builder, word, words4), bytes32)

        def add_word(w, sums):
            """The byte counts of word `w` added to the 4 vectors of sums."""
            q_row = builder.add(builder.mul(w, n_queries), q0)
            t_at = builder.add(t_row, w)
            halves = (2, broadcast(arr[5], t_at)), (3, broadcast(arr[6], t_at))
            out = []
            for g, s in zip(groups, sums, strict=True):
                for pos, t in halves:
                    q = vector_at(arr[pos], q_row, _LANES * g)
                    x = builder.xor(builder.bitcast(q, bytes32), t)
                    s = builder.add(s, builder.call(pshufb, [table, x]))
                out.append(s)
            return out

        sums = [zero for _ in groups]
        if unrolled is not None:
            for step in range(unrolled):
                sums = add_word(builder.add(w0, ir.Constant(i64, step)), sums)
        else:
            sums = counted_loop(
                builder,
                n,
                sums,
                lambda k, values: add_word(builder.add(w0, k), values),
                "nibbles",
            )
        d_row = builder.add(builder.mul(row, n_queries), q0)
        below = []
        for g, s in zip(groups, sums, strict=True):
            at = builder.add(d_row, ir.Constant(i64, _LANES * g))
            p = builder.bitcast(builder.gep(arr[0], [at]), words4.as_pointer())
            counts = builder.call(psadbw, [s, zero])
            if add.literal_value:
                counts = builder.add(builder.load(p, align=8), counts)
            builder.store(counts, p, align=8)
            kth = vector_at(arr[10], q0, _LANES * g)
            below.append(builder.icmp_signed("<", counts, kth))
        mask = ir.Constant(i64, 0)
        for g, lanes in enumerate(below):
            bits = builder.zext(builder.bitcast(lanes, ir.IntType(_LANES)), i64)
            mask = builder.or_(mask, builder.shl(bits, ir.Constant(i64, _LANES * g)))
        return mask

    sig = types.uint64(tile, row, q_low, q_high, q0, t_low, t_high, w0, n, add, worst)
    return sig, codegen


@njit(cache=True, nogil=True)
def knn_counts_nibbles(Q, T, out_d, out_i):
    """:func:`~sksign.kernels._popcount.knn_counts` with the AVX2 nibble kernel.

    Same arguments, same results (codes enter the k-lists by the same
    :func:`~sksign.kernels._klists.enter_code`). A block of up to 64 queries
    (fewer for codes over 16 words, so the block's nibbles stay in L1) is
    split into nibbles once and stored word-major; each code is split as it
    is reached and compared with the block 16 queries at a time, the counts
    compared with the k-th ones in registers. Needs AVX2 (see
    :func:`nibble_kernels`).
    """
    n_q, n_words = Q.shape
    qb, q_low, q_high, t_low, t_high, dist = _buffers(n_words)
    worst = np.empty(qb, dtype=np.int64)
    k = out_d.shape[1]
    ld, li = block_lists(qb, k)
    for q0 in range(0, n_q, qb):
        m = min(qb, n_q - q0)
        _split_block(Q, q0, m, q_low, q_high)
        start_lists(worst, ld, li, m, n_words)
        for j in range(T.shape[0]):
            _split_row(T, j, t_low, t_high)
            for g in range(0, m, GROUP_QUERIES):
                hits = _all_words(dist, q_low, q_high, g, t_low, t_high, worst)
                if hits:
                    enter_code(dist[0], hits, g, j, worst, ld, li, k)
        finish_lists(ld, li, out_d, out_i, q0, m)


@njit(inline="always")
def _buffers(n_words):
    """``(qb, q_low, q_high, t_low, t_high, dist)``: a block of `qb` queries
    (up to 64, fewer past 16 words so that its nibbles stay in L1), their
    nibbles word-major, one code's nibbles and its counts."""
    qb = GROUP_QUERIES * max(1, min(4, 64 // max(n_words, 1)))
    q_low = np.zeros((n_words, qb), dtype=np.uint64)
    q_high = np.zeros((n_words, qb), dtype=np.uint64)
    t_low = np.empty((1, n_words), dtype=np.uint64)
    t_high = np.empty((1, n_words), dtype=np.uint64)
    dist = np.zeros((1, qb), dtype=np.int64)
    return qb, q_low, q_high, t_low, t_high, dist


@njit(inline="always")
def _split_block(Q, q0, m, q_low, q_high):
    """Rows ``q0 .. q0 + m - 1`` of `Q` into low and high nibbles, word-major
    (``q_low[w, q]``); the columns past `m` zero."""
    mask, four = np.uint64(_LOW), np.uint64(4)
    for q in range(q_low.shape[1]):
        for w in range(Q.shape[1]):
            x = Q[q0 + q, w] if q < m else np.uint64(0)
            q_low[w, q] = x & mask
            q_high[w, q] = (x >> four) & mask


@njit(inline="always")
def _split_row(T, j, t_low, t_high):
    """Row `j` of `T` into low and high nibbles (``t_low[0, w]``)."""
    mask, four = np.uint64(_LOW), np.uint64(4)
    for w in range(T.shape[1]):
        x = T[j, w]
        t_low[0, w] = x & mask
        t_high[0, w] = (x >> four) & mask


@njit(inline="always")
def _all_words(dist, q_low, q_high, q0, t_low, t_high, worst):
    """:func:`nibble_counts` over all the words, in chunks of
    :data:`MAX_CHUNK_WORDS` (256-bit codes: the 4 words unrolled); the mask
    of the last.

    Counts only grow: once a chunk leaves no count below its query's k-th,
    the code enters none of the 16 queries' lists, and the rest of its words
    are skipped (mask 0). The chunks end in that compare anyway, so the
    check costs a branch; codes of more than one chunk (over 1,984 bits)
    gain from it. On clustered codes most codes are far from all 16 queries
    and stop after the first chunk (4,096 bits: 31 of 64 words).
    """
    n_words = t_low.shape[1]
    if n_words == 4:
        return nibble_counts(
            dist, 0, q_low, q_high, q0, t_low, t_high, 0, 4, False, worst
        )
    n = min(MAX_CHUNK_WORDS, n_words)
    hits = nibble_counts(dist, 0, q_low, q_high, q0, t_low, t_high, 0, n, False, worst)
    w0 = MAX_CHUNK_WORDS
    while hits and w0 < n_words:  # a single exit: LLVM keeps the loop tight
        n = min(MAX_CHUNK_WORDS, n_words - w0)
        hits = nibble_counts(
            dist, 0, q_low, q_high, q0, t_low, t_high, w0, n, True, worst
        )
        w0 += MAX_CHUNK_WORDS
    return hits


@njit(cache=True, nogil=True)
def pairwise_counts_nibbles(A, B, out):
    """:func:`~sksign.kernels._popcount.pairwise_counts` with the AVX2 nibble kernel.

    ``out[i, j] = popcount(A[i] ^ B[j])`` summed over words, the same counts.
    The rows of `B` play the queries of :func:`knn_counts_nibbles` (a block
    split into nibbles once, word-major), each row of `A` the code compared
    with them 16 at a time, so a row of `out` is written in runs. Needs AVX2
    (see :func:`nibble_kernels`).
    """
    n_b, n_words = B.shape
    if n_words == 0:
        out[:, :] = 0
        return
    qb, q_low, q_high, t_low, t_high, dist = _buffers(n_words)
    # every count is below this one: no code stops before its last word
    above = np.full(qb, 64 * n_words + 1, dtype=np.int64)
    for b0 in range(0, n_b, qb):
        m = min(qb, n_b - b0)
        _split_block(B, b0, m, q_low, q_high)
        for i in range(A.shape[0]):
            _split_row(A, i, t_low, t_high)
            for g in range(0, m, GROUP_QUERIES):
                _all_words(dist, q_low, q_high, g, t_low, t_high, above)
            for q in range(m):
                out[i, b0 + q] = dist[0, q]
