"""XOR + popcount on blocks of registers: the vector-popcount blocks.

Where the CPU has AVX-512 VPOPCNTDQ, one ``vpopcntq`` counts the bits of
eight words, so the XOR, the popcount and the add of a count each cost one
instruction per eight comparisons, and what bounds a kernel is whatever else
it does per vector: loading and storing running counts, reloading operands.
:func:`xor_count_block` says in LLVM IR the block that does nothing else:
``rows`` words broadcast against ``vectors`` vectors of eight words, the
``rows x vectors`` running counts held in registers over all the words of a
code, stored once at the end. It is the inner block of both the Hamming
k-NN search and distance matrix (codes against a block of queries,
:mod:`sksign.kernels._vector_search`) and the packed nets' sign x sign layer
(input rows against a block of output columns), which
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
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from sksign.kernels._ir_loops import counted_loop, splat
from sksign.kernels._popcount import popcount_instructions

__all__ = [
    "LANES",
    "PRUNE_WORDS",
    "fma_exact",
    "vector_kernels",
    "xor_affine_block",
    "xor_count_block",
]

#: 64-bit words per vector (one ``vpopcntq`` on a 512-bit register).
LANES = 8

#: Words between the checks of :func:`xor_count_block` with `worst` for a
#: block whose codes can no longer enter a k-list (the minimum over its rows
#: and one compare per vector of columns: about 20 instructions, against
#: 384 for the 8 words of a 4 x 4 block).
PRUNE_WORDS = 8


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
