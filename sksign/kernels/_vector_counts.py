"""XOR + popcount on blocks of registers: the vector-popcount kernels.

Where the CPU has AVX-512 VPOPCNTDQ, one ``vpopcntq`` counts the bits of
eight words, so the XOR, the popcount and the add of a count each cost one
instruction per eight comparisons, and what bounds a kernel is whatever else
it does per vector: loading and storing running counts, reloading operands.
:func:`xor_count_block` says in LLVM IR the block that does nothing else:
``rows`` words broadcast against ``vectors`` vectors of eight words, the
``rows x vectors`` running counts held in registers over all the words of a
code, stored once at the end. It is the inner block of both the Hamming
k-NN search (codes against a block of queries) and the packed nets' sign x
sign layer (input rows against a block of output columns), the two
:func:`vector_kernels` choose where the CPU has the vector popcount.
:func:`xor_affine_block` is the same block with the sign layer's affine
map applied to the counts in registers: the layer stores its outputs, never
its counts.

The IR is generic (``llvm.ctpop.v8i64``), so the kernels compile and give the
same counts on any CPU; without VPOPCNTDQ, LLVM lowers the popcount to
nibble look-ups and the AVX2 kernels of :mod:`sksign.kernels._nibbles` are
faster.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import literal_unroll, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from sksign.kernels._ir_loops import counted_loop, splat
from sksign.kernels._klists import (
    block_lists,
    finish_lists,
    start_lists,
    trailing_zeros,
    update_lists,
)
from sksign.kernels._popcount import pairwise_counts, popcount_instructions

__all__ = [
    "CODE_TILE_BYTES",
    "GROUP_PIVOTS",
    "LANES",
    "PAIRWISE_MIN_ROWS",
    "PAIRWISE_TILE_BYTES",
    "PRUNE_WORDS",
    "QUERY_BLOCK",
    "SPAN_BLOCKS",
    "fma_exact",
    "knn_counts_vectors",
    "pairwise_counts_vectors",
    "vector_kernels",
    "xor_affine_block",
    "xor_count_block",
]

#: 64-bit words per vector (one ``vpopcntq`` on a 512-bit register).
LANES = 8

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

#: Words between the checks of :func:`xor_count_block` with `worst` for a
#: block whose codes can no longer enter a k-list (the minimum over its rows
#: and one compare per vector of columns: about 20 instructions, against
#: 384 for the 8 words of a 4 x 4 block).
PRUNE_WORDS = 8

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


def vector_kernels():
    """Whether the vector-popcount kernels run here: AVX-512 VPOPCNTDQ.

    Follows :func:`~sksign.kernels.popcount_instructions` (and so
    ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``).
    """
    return popcount_instructions().startswith("AVX-512")


def _literal_block(rows, vectors):
    """Whether `rows` and `vectors` are positive integer literals."""
    return all(
        isinstance(n, types.IntegerLiteral) and n.literal_value > 0
        for n in (rows, vectors)
    )


def _vector_at(builder, ptr, index, vector_type):
    """A pointer to the vector of `vector_type` at element `index` of `ptr`."""
    return builder.bitcast(builder.gep(ptr, [index]), vector_type.as_pointer())


def _word_adder(builder, x, x_row, wt, w_col, n_rows, n_vectors):
    """``add_word(w, sums)``: emit the counts of word `w` of the rows of `x`
    from `x_row` against the ``8 n_vectors`` columns of `wt` from `w_col`
    (array structs, C order) added to `sums` (``n_rows * n_vectors``
    ``<8 x i64>``, row-major); returns the new sums."""
    i64 = ir.IntType(64)
    vec = ir.VectorType(i64, LANES)
    ctpop = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vec, [vec]), "llvm.ctpop.v8i64"
    )
    n_words = builder.extract_value(x.shape, 1)
    w_stride = builder.extract_value(wt.shape, 1)

    def add_word(w, sums):
        """The counts of word `w` added to the running counts."""
        w_at = builder.add(builder.mul(w, w_stride), w_col)
        columns = [
            builder.load(
                _vector_at(
                    builder,
                    wt.data,
                    builder.add(w_at, ir.Constant(i64, LANES * v)),
                    vec,
                ),
                align=8,
            )
            for v in range(n_vectors)
        ]
        new = []
        for r in range(n_rows):
            x_at = builder.add(
                builder.mul(builder.add(x_row, ir.Constant(i64, r)), n_words), w
            )
            word = builder.load(builder.gep(x.data, [x_at]), align=8)
            broadcast = splat(builder, word, vec)
            for v in range(n_vectors):
                bits = builder.call(ctpop, [builder.xor(broadcast, columns[v])])
                new.append(builder.add(sums[r * n_vectors + v], bits))
        return new

    return add_word


def _zero_counts(n_rows, n_vectors):
    return [ir.Constant(ir.VectorType(ir.IntType(64), LANES), [0] * LANES)] * (
        n_rows * n_vectors
    )


def _running_counts(context, builder, x, x_row, wt, w_col, n_rows, n_vectors):
    """Emit the loop over the words of the rows of `x` from `x_row` against
    the ``8 n_vectors`` columns of `wt` from `w_col` (array structs, C order);
    return the ``n_rows * n_vectors`` counts, row-major, as ``<8 x i64>``."""
    add_word = _word_adder(builder, x, x_row, wt, w_col, n_rows, n_vectors)
    n_words = builder.extract_value(x.shape, 1)
    initial = _zero_counts(n_rows, n_vectors)
    return counted_loop(builder, n_words, initial, add_word, "xor_count")


def _any_below(builder, sums, kth, n_rows, n_vectors):
    """An i1: whether some lane of `sums` (row-major) is below the lane of
    `kth` (one vector per column vector) it is compared with."""
    below = None
    for v in range(n_vectors):
        low = sums[v]
        for r in range(1, n_rows):
            other = sums[r * n_vectors + v]
            low = builder.select(builder.icmp_signed("<", other, low), other, low)
        lanes = builder.icmp_signed("<", low, kth[v])
        below = lanes if below is None else builder.or_(below, lanes)
    bits = builder.bitcast(below, ir.IntType(LANES))
    return builder.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(LANES), 0))


def _pruned_counts(builder, x, x_row, wt, w_col, n_rows, n_vectors, kth, on_done):
    """:func:`_running_counts` that stops early once no count can enter.

    Every :data:`PRUNE_WORDS` words short of the last, the running counts
    are compared with `kth`; where none is below its lane, the loop stops.
    Past the last word, ``on_done(sums)`` emits what follows the counts and
    returns an i64. Returns that i64, or 0 where the loop stopped early.
    """
    i64 = ir.IntType(64)
    add_word = _word_adder(builder, x, x_row, wt, w_col, n_rows, n_vectors)
    n_words = builder.extract_value(x.shape, 1)
    chunk = ir.Constant(i64, PRUNE_WORDS)
    n_checks = builder.sdiv(builder.sub(n_words, ir.Constant(i64, 1)), chunk)
    entry = builder.block
    head = builder.append_basic_block("prune_head")
    body = builder.append_basic_block("prune_body")
    tail = builder.append_basic_block("prune_tail")
    stopped = builder.append_basic_block("prune_stopped")
    end = builder.append_basic_block("prune_end")
    builder.branch(head)

    builder.position_at_end(head)
    k = builder.phi(i64)
    k.add_incoming(ir.Constant(i64, 0), entry)
    sums = []
    for zero in _zero_counts(n_rows, n_vectors):
        sums.append(builder.phi(zero.type))
        sums[-1].add_incoming(zero, entry)
    builder.cbranch(builder.icmp_signed("<", k, n_checks), body, tail)

    builder.position_at_end(body)
    base = builder.mul(k, chunk)
    new = counted_loop(
        builder,
        chunk,
        sums,
        lambda w, values: add_word(builder.add(base, w), values),
        "prune_chunk",
    )
    alive = _any_below(builder, new, kth, n_rows, n_vectors)
    k.add_incoming(builder.add(k, ir.Constant(i64, 1)), builder.block)
    for phi, value in zip(sums, new, strict=True):
        phi.add_incoming(value, builder.block)
    builder.cbranch(alive, head, stopped)

    builder.position_at_end(tail)
    base = builder.mul(k, chunk)
    finals = counted_loop(
        builder,
        builder.sub(n_words, base),
        sums,
        lambda w, values: add_word(builder.add(base, w), values),
        "prune_rest",
    )
    result = on_done(finals)
    done = builder.block
    builder.branch(end)

    builder.position_at_end(stopped)
    builder.branch(end)

    builder.position_at_end(end)
    out = builder.phi(i64)
    out.add_incoming(result, done)
    out.add_incoming(ir.Constant(i64, 0), stopped)
    return out


@intrinsic(prefer_literal=True)
def xor_count_block(
    typingctx, counts, c_row, c_col, x, x_row, wt, w_col, rows, vectors, worst
):
    """Counts of `rows` rows of `x` against ``8 vectors`` columns of `wt`.

    ``counts[c_row + r, c_col + 8 v + l] = sum_w popcount(x[x_row + r, w] ^
    wt[w, w_col + 8 v + l])`` for ``r < rows``, ``v < vectors``, ``l < 8``,
    over all ``x.shape[1]`` words (``wt.shape[0]`` must match). `x` and `wt`
    are uint64, `counts` int64 or int32 (the counts stored from the
    registers as they are, or truncated: a count below 2**31 is exact), all
    C-contiguous; `rows` and `vectors` literals (the running counts, ``rows
    * vectors`` vectors, stay in registers: keep it at most 16 or so on a
    machine with 32 vector registers). Indices in range (not checked).

    With `worst` (int64, at least ``8 vectors`` long, or None), returns the
    bit mask of the rows that have a count below ``worst[8 v + l]`` in some
    column, compared in registers (bit `r` for row `r`); 0 without it.
    Counts only grow, so with `worst` the block stops as soon as none can
    end below: every :data:`PRUNE_WORDS` words short of the last, it
    compares the running counts with `worst` and, where none is below,
    returns 0 at once and stores nothing (a search never reads the counts
    of a block no code of which enters a k-list).
    """
    arrays = (counts, x, wt)
    compare = not isinstance(worst, types.NoneType)
    if compare and not (
        isinstance(worst, types.Array)
        and worst.ndim == 1
        and worst.dtype == types.int64
    ):
        return None
    if not (
        _literal_block(rows, vectors)
        and all(
            isinstance(a, types.Array) and a.ndim == 2 and a.layout == "C"
            for a in arrays
        )
        and counts.dtype in (types.int64, types.int32)
        and x.dtype == wt.dtype == types.uint64
    ):
        return None
    n_rows, n_vectors = rows.literal_value, vectors.literal_value

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        vec = ir.VectorType(i64, LANES)
        stored = ir.VectorType(context.get_data_type(sig.args[0].dtype), LANES)
        counts_s, x_s, wt_s = (
            context.make_array(sig.args[pos])(context, builder, args[pos])
            for pos in (0, 3, 5)
        )
        c_row, c_col, x_row, w_col = (
            context.cast(builder, args[pos], sig.args[pos], types.int64)
            for pos in (1, 2, 4, 6)
        )
        c_stride = builder.extract_value(counts_s.shape, 1)

        def store(totals):
            for r in range(n_rows):
                c_at = builder.add(
                    builder.mul(builder.add(c_row, ir.Constant(i64, r)), c_stride),
                    c_col,
                )
                for v in range(n_vectors):
                    at = builder.add(c_at, ir.Constant(i64, LANES * v))
                    total = totals[r * n_vectors + v]
                    if stored != vec:
                        total = builder.trunc(total, stored)
                    builder.store(
                        total, _vector_at(builder, counts_s.data, at, stored), align=4
                    )

        if not compare:
            store(
                _running_counts(
                    context, builder, x_s, x_row, wt_s, w_col, n_rows, n_vectors
                )
            )
            return ir.Constant(i64, 0)
        kth_data = context.make_array(sig.args[9])(context, builder, args[9]).data
        kth = [
            builder.load(
                _vector_at(builder, kth_data, ir.Constant(i64, LANES * v), vec),
                align=8,
            )
            for v in range(n_vectors)
        ]

        def rows_below(totals):
            """Store the counts; the mask of the rows with one below its k-th."""
            store(totals)
            mask = ir.Constant(i64, 0)
            no_lane = ir.Constant(ir.IntType(LANES), 0)
            for r in range(n_rows):
                below = None
                for v in range(n_vectors):
                    lanes = builder.icmp_signed("<", totals[r * n_vectors + v], kth[v])
                    below = lanes if below is None else builder.or_(below, lanes)
                bits = builder.bitcast(below, ir.IntType(LANES))
                hit = builder.zext(builder.icmp_unsigned("!=", bits, no_lane), i64)
                mask = builder.or_(mask, builder.shl(hit, ir.Constant(i64, r)))
            return mask

        return _pruned_counts(
            builder, x_s, x_row, wt_s, w_col, n_rows, n_vectors, kth, rows_below
        )

    sig = types.uint64(counts, c_row, c_col, x, x_row, wt, w_col, rows, vectors, worst)
    return sig, codegen


def fma_exact(alpha, beta, n_bits):
    """Whether :func:`xor_affine_block`'s float32 outputs, by fused
    multiply-add, are the float64 map's for every dot of `n_bits` bits.

    The float64 map (numpy's ``float32(dot * float64(alpha) +
    float64(beta))``) rounds twice: the product of an integer below 2**24
    and a float32 is exact in float64, the sum rounds to float64, then to
    float32. A float32 fused multiply-add rounds the exact ``dot * alpha +
    beta`` once. The two agree wherever the exact sum fits in float64's 53
    bits, so that its first rounding does nothing: where `alpha` or `beta`
    is zero, or where the sum's bits, from the top of ``2**L |alpha| +
    |beta|`` (``L`` the bit length of `n_bits`) down to the last bit of the
    smaller of the two float32 grids, number at most 53. True where that
    holds for every column (finite float32 `alpha` and `beta`, `n_bits`
    below 2**24). At 1,024 bits, a column fails where its shift is over
    about 2**17 times smaller than its scale, or 2**28 times larger.
    """
    alpha = np.asarray(alpha, dtype=np.float32).astype(np.float64)
    beta = np.asarray(beta, dtype=np.float32).astype(np.float64)
    finite = np.isfinite(alpha).all() and np.isfinite(beta).all()
    if not (finite and 0 < n_bits < 2**24):
        return False
    e_a, e_b = np.frexp(alpha)[1], np.frexp(beta)[1]  # |x| < 2**e
    # the sum is a multiple of 2**(min(e_a, e_b) - 24), below
    # 2**(max(e_a + L, e_b) + 1) in magnitude
    bits = np.maximum(e_a + int(n_bits).bit_length(), e_b) + 1 - np.minimum(e_a, e_b)
    return bool(np.all((alpha == 0) | (beta == 0) | (bits + 24 <= 53)))


def _affine_kinds(out, alpha, beta):
    """How :func:`xor_affine_block` scales: "fma32" (float32 `alpha`, `beta`
    and `out`), "float" (other float32/64 ones: in float64), "int" (int64
    all three), else None."""
    if out.dtype == alpha.dtype == beta.dtype == types.float32:
        return "fma32"
    floats = (types.float32, types.float64)
    if out.dtype in floats and alpha.dtype in floats and beta.dtype in floats:
        return "float"
    if out.dtype == alpha.dtype == beta.dtype == types.int64:
        return "int"
    return None


@intrinsic(prefer_literal=True)
def xor_affine_block(
    typingctx, out, o_row, o_col, x, x_row, wt, w_col, n_bits, alpha, beta, rows,
    vectors,
):  # fmt: skip
    """:func:`xor_count_block` with the sign layer's affine map on its counts.

    ``out[o_row + r, o_col + j] = (n_bits - 2 count[r, j]) * alpha[o_col + j]
    + beta[o_col + j]`` for ``j < 8 vectors``, where ``count[r, j]`` is the
    count of row ``x_row + r`` of `x` against column ``w_col + j`` of `wt`:
    the counts never leave the registers. With float `alpha`, `beta` and
    `out` (32 or 64 bits, not all float32), the integer converts to
    float64, is multiplied and shifted in float64 (no fused multiply-add)
    and rounds once to the type of `out`, as numpy computes ``dot *
    float64(alpha) + float64(beta)``; with int64 all three, in int64.

    With float32 all three, in float32: the count converts exactly (below
    2**24), the dot is ``fma(count, -2, n_bits)`` (exact) and the output
    ``fma(dot, alpha, beta)``, rounded once: the float64 map's outputs
    where :func:`fma_exact` holds (the caller checks; passing float64
    scales takes the float64 map), in about half the instructions. At 1,024
    bits the epilogue is a sixth of the block's work in float64 (AMD EPYC,
    Zen 4: 1,024 x 1,024 at batch 64, 0.066 ms against 0.060 ms). Arrays
    C-contiguous, indices in range (not checked).
    """
    kind = (
        _affine_kinds(out, alpha, beta)
        if all(isinstance(a, types.Array) for a in (out, alpha, beta))
        else None
    )
    if not (
        kind is not None
        and _literal_block(rows, vectors)
        and out.ndim == 2
        and alpha.ndim == beta.ndim == 1
        and all(isinstance(a, types.Array) and a.ndim == 2 for a in (x, wt))
        and x.dtype == wt.dtype == types.uint64
    ):
        return None
    n_rows, n_vectors = rows.literal_value, vectors.literal_value

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        out_s, x_s, wt_s, alpha_s, beta_s = (
            context.make_array(sig.args[pos])(context, builder, args[pos])
            for pos in (0, 3, 5, 8, 9)
        )
        o_row, o_col, x_row, w_col, n = (
            context.cast(builder, args[pos], sig.args[pos], types.int64)
            for pos in (1, 2, 4, 6, 7)
        )
        totals = _running_counts(
            context, builder, x_s, x_row, wt_s, w_col, n_rows, n_vectors
        )

        def lanes(array):
            return ir.VectorType(context.get_data_type(array.dtype), LANES)

        wide = ir.VectorType(ir.DoubleType() if kind == "float" else i64, LANES)

        def widened(value, array):
            """`value` (a vector of `array`'s type) in the type of the sums."""
            if kind in ("int", "fma32") or array.dtype == types.float64:
                return value
            return builder.fpext(value, wide)

        scales = []
        for v in range(n_vectors):
            at = builder.add(o_col, ir.Constant(i64, LANES * v))
            scales.append(
                tuple(
                    widened(
                        builder.load(
                            _vector_at(builder, s.data, at, lanes(t)), align=4
                        ),
                        t,
                    )
                    for s, t in ((alpha_s, sig.args[8]), (beta_s, sig.args[9]))
                )
            )
        n_vec = splat(builder, n, ir.VectorType(i64, LANES))
        one = ir.Constant(ir.VectorType(i64, LANES), [1] * LANES)
        o_stride = builder.extract_value(out_s.shape, 1)
        if kind == "fma32":
            f32 = lanes(sig.args[0])
            fma = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(f32, [f32] * 3), "llvm.fma.v8f32"
            )
            n_f = builder.sitofp(n_vec, f32)
            minus_two = ir.Constant(f32, [-2.0] * LANES)

        def output(count, a, b):
            """The output vector of the counts `count` at scales `a`, `b`."""
            if kind == "fma32":  # counts and dots below 2**24: exact in float32
                c = builder.sitofp(count, f32)
                return builder.call(fma, [builder.call(fma, [c, minus_two, n_f]), a, b])
            dot = builder.sub(n_vec, builder.shl(count, one))
            if kind == "int":
                return builder.add(builder.mul(dot, a), b)
            y = builder.fadd(builder.fmul(builder.sitofp(dot, wide), a), b)
            if sig.args[0].dtype == types.float32:
                y = builder.fptrunc(y, lanes(sig.args[0]))
            return y

        for r in range(n_rows):
            o_at = builder.mul(builder.add(o_row, ir.Constant(i64, r)), o_stride)
            for v in range(n_vectors):
                y = output(totals[r * n_vectors + v], *scales[v])
                at = builder.add(o_at, builder.add(o_col, ir.Constant(i64, LANES * v)))
                builder.store(
                    y, _vector_at(builder, out_s.data, at, lanes(sig.args[0])), align=4
                )
        return context.get_dummy_value()

    sig = types.none(
        out, o_row, o_col, x, x_row, wt, w_col, n_bits, alpha, beta, rows, vectors
    )
    return sig, codegen


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
def _grouped_queries(Q):
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
    nearest pivot (:func:`_grouped_queries`), so that a block's queries
    share their far codes. Neither changes a result: each query's list
    depends on its own counts alone.
    """
    n_q, n_words = Q.shape
    if n_words > PRUNE_WORDS and n_q >= 2 * QUERY_BLOCK:
        order = _grouped_queries(Q)
        d, i = np.empty_like(out_d), np.empty_like(out_i)
        _knn_blocks(Q[order], T, d, i)
        for q in range(n_q):
            out_d[order[q]] = d[q]
            out_i[order[q]] = i[q]
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
