"""LLVM-IR vector adds for the real-weights kernels, float32, on AVX2 and up.

The loop vectoriser cannot turn a sum of a few floats into vector adds (a
short loop runs its scalar remainder, after a runtime alias check), and a
loop whose sums go through memory is bound by its stores: these intrinsics
say the vector adds in LLVM IR, their count a compile-time literal (see
:func:`numba.literally`), the sums of a run held in registers. Every add
and product is rounded to float32 in the order written (no fused
multiply-add), so the kernels that use them sum in a fixed order.
C-contiguous arrays, indices in range (not checked).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from sksign.kernels import counted_loop, target_has

__all__ = [
    "DOUBLE_LANES",
    "FLOAT_LANES",
    "LANES",
    "UNROLL_FLOATS",
    "add_vectors",
    "padded_width",
    "rows_at_once",
    "scaled_add_row_block",
    "scaled_add_rows",
    "table_sums_block",
    "vector_lanes",
]

#: Floats of the narrowest vector add (the output widths of the
#: real-weights kernels are padded to a multiple of it).
LANES = 8

#: Floats of the vectors the intrinsics add where a row's floats come in
#: whole such vectors: 16 where the CPU has AVX-512, else 8 (LLVM would
#: split 16 into two on AVX2; the sums are the same either way, lane by
#: lane).
FLOAT_LANES = 16 if target_has("avx512f") else 8
#: Doubles of the same vectors (:func:`table_sums_block` in float64).
DOUBLE_LANES = FLOAT_LANES // 2

#: Vectors of sums the register-block intrinsics hold (of the 16 of AVX2,
#: the rest hold the weights and an input): eight chains of adds in flight
#: hide the add's latency on two add ports.
SUM_REGISTERS = 8


@njit(cache=True, inline="always")
def vector_lanes(n_vec, lanes):
    """Floats of the vectors for rows of `n_vec` vectors of 8 floats:
    `lanes` where they divide the row, else 8."""
    return lanes if (8 * n_vec) % lanes == 0 else 8


@njit(cache=True, inline="always")
def rows_at_once(n_vec, lanes):
    """Rows a register block adds at once (:func:`scaled_add_row_block`,
    :func:`table_sums_block`) for rows of `n_vec` vectors of 8 floats in
    vectors of up to `lanes` floats."""
    return max(1, SUM_REGISTERS * vector_lanes(n_vec, lanes) // (8 * n_vec))


#: Most floats added by one :func:`add_vectors`: an output width above it
#: is padded to a multiple of it (:func:`padded_width`).
UNROLL_FLOATS = 64


def padded_width(n_out):
    """`n_out` in whole vectors, or in whole :data:`UNROLL_FLOATS` above it."""
    step = LANES if n_out <= UNROLL_FLOATS else UNROLL_FLOATS
    return -(-n_out // step) * step


@intrinsic(prefer_literal=True)
def add_vectors(typingctx, dst, i, src, j, n_vec):
    """``dst.flat[i : i + 8 n_vec] += src.flat[j : j + 8 n_vec]``, float32, in vectors.

    The loop vectoriser cannot turn a sum of a few floats into vector adds
    (a short loop runs its scalar remainder, after a runtime alias check),
    and a loop over a few vectors whose count the compiler does not know
    costs about as much as the adds it makes: this says the `n_vec` vector
    adds in LLVM IR, unrolled, `n_vec` a literal (see
    :func:`numba.literally`). C-contiguous arrays, indices in range (not
    checked).
    """
    if not (
        isinstance(n_vec, types.IntegerLiteral)
        and isinstance(dst, types.Array)
        and isinstance(src, types.Array)
        and dst.dtype == types.float32
        and src.dtype == types.float32
        and isinstance(i, types.Integer)
        and isinstance(j, types.Integer)
    ):
        return None
    lanes = vector_lanes.py_func(n_vec.literal_value, FLOAT_LANES)
    n_vectors = 8 * n_vec.literal_value // lanes

    def codegen(context, builder, signature, args):
        vec = ir.VectorType(ir.FloatType(), lanes).as_pointer()
        step = ir.Constant(ir.IntType(64), lanes)
        ptrs = []
        for arr, idx, arr_t, idx_t in (
            (args[0], args[1], signature.args[0], signature.args[1]),
            (args[2], args[3], signature.args[2], signature.args[3]),
        ):
            data = context.make_array(arr_t)(context, builder, arr).data
            ptrs.append((data, context.cast(builder, idx, idx_t, types.int64)))
        (out, at), (rows, start) = ptrs
        for _ in range(n_vectors):
            p = builder.bitcast(builder.gep(out, [at]), vec)
            q = builder.bitcast(builder.gep(rows, [start]), vec)
            total = builder.fadd(builder.load(p, align=4), builder.load(q, align=4))
            builder.store(total, p, align=4)
            at, start = builder.add(at, step), builder.add(start, step)
        return context.get_dummy_value()

    return types.void(dst, i, src, j, n_vec), codegen


def _sums_in_registers(builder, sums_at, n_vectors, n, terms, lanes):
    """Emit ``sums += terms(t)`` for ``t = 0 .. n - 1``, the sums in registers.

    `sums_at(v)` is the pointer of the v-th vector of `lanes` floats of sums
    (loaded before the loop, stored after it); `terms(t)` emits the
    `n_vectors` vectors added at step `t` (an i64 value). The adds go in the
    order of `t`, each rounded.
    """
    ptrs = [sums_at(v) for v in range(n_vectors)]
    start = [builder.load(p, align=4) for p in ptrs]

    def add(t, sums):
        return [builder.fadd(s, term) for s, term in zip(sums, terms(t), strict=True)]

    final = counted_loop(builder, n, start, add, "sums")
    for p, value in zip(ptrs, final, strict=True):
        builder.store(value, p, align=4)


def _vector_at(builder, base, index, v, lanes, elem=None):
    """Pointer of the v-th vector of `lanes` floats (of LLVM type `elem`,
    float by default) from ``base[index]``."""
    offset = builder.add(index, ir.Constant(ir.IntType(64), lanes * v))
    vec = ir.VectorType(ir.FloatType() if elem is None else elem, lanes)
    return builder.bitcast(builder.gep(base, [offset]), vec.as_pointer())


def _broadcast(builder, base, index, lanes):
    """A vector of `lanes` copies of the float ``base[index]``."""
    vec = ir.VectorType(ir.FloatType(), lanes)
    every_lane = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
    a = builder.load(builder.gep(base, [index]), align=4)
    a = builder.insert_element(ir.Constant(vec, ir.Undefined), a, ir.IntType(32)(0))
    return builder.shuffle_vector(a, ir.Constant(vec, ir.Undefined), every_lane)


def _float32_arrays(*arrays):
    return _float_arrays(types.float32, *arrays)


def _float_arrays(dtype, *arrays):
    return all(isinstance(a, types.Array) and a.dtype == dtype for a in arrays)


@intrinsic(prefer_literal=True)
def scaled_add_rows(typingctx, dst, i, xs, j, src, k, n, stride, n_vec):
    """``dst.flat[i : i + 8 n_vec] += sum_t a_t * src.flat[k + t stride :][: 8 n_vec]``.

    With ``a_t = xs.flat[j + t]``, over ``t = 0 .. n - 1`` in that order:
    float32, each product and each sum rounded (no fused multiply-add), the
    `n_vec` vectors of sums held in registers through the loop (said in LLVM
    IR: a loop whose sums go through memory is bound by its stores), `n_vec`
    a literal. C-contiguous arrays, indices in range (not checked).
    """
    if not (isinstance(n_vec, types.IntegerLiteral) and _float32_arrays(dst, xs, src)):
        return None
    lanes = vector_lanes.py_func(n_vec.literal_value, FLOAT_LANES)
    n_vectors = 8 * n_vec.literal_value // lanes

    def codegen(context, builder, sig, args):
        out, x, rows = (
            context.make_array(sig.args[pos])(context, builder, args[pos]).data
            for pos in (0, 2, 4)
        )
        at, j, k, n, stride = (
            context.cast(builder, args[pos], sig.args[pos], types.int64)
            for pos in (1, 3, 5, 6, 7)
        )

        def terms(t):
            a = _broadcast(builder, x, builder.add(j, t), lanes)
            row = builder.add(k, builder.mul(t, stride))
            return [
                builder.fmul(
                    a, builder.load(_vector_at(builder, rows, row, v, lanes), align=4)
                )
                for v in range(n_vectors)
            ]

        def sums_at(v):
            return _vector_at(builder, out, at, v, lanes)

        _sums_in_registers(builder, sums_at, n_vectors, n, terms, lanes)
        return context.get_dummy_value()

    return types.void(dst, i, xs, j, src, k, n, stride, n_vec), codegen


@intrinsic(prefer_literal=True)
def scaled_add_row_block(typingctx, dst, dsts, xs, js, src, k, n, stride, n_vec):
    """:func:`scaled_add_rows` for :func:`rows_at_once` ``(n_vec, FLOAT_LANES)`` rows.

    Row ``r`` adds into ``dst.flat[dsts[r]:]`` its inputs from
    ``xs.flat[js[r]:]``, all rows scaling the same weight rows (`src`, `k`,
    `stride`): each weight vector is read once for the rows, and their sums,
    independent chains of adds, overlap (one row's chain waits on each add).
    Each row's sums are those :func:`scaled_add_rows` makes, bit for bit.
    `dsts` and `js` int64 arrays of at least that many entries.
    """
    if not (
        isinstance(n_vec, types.IntegerLiteral)
        and _float32_arrays(dst, xs, src)
        and all(
            isinstance(a, types.Array) and a.dtype == types.int64 for a in (dsts, js)
        )
    ):
        return None
    lanes = vector_lanes.py_func(n_vec.literal_value, FLOAT_LANES)
    n_vectors = 8 * n_vec.literal_value // lanes
    n_rows = rows_at_once.py_func(n_vec.literal_value, FLOAT_LANES)

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        out, rows_at, x, starts, rows = (
            context.make_array(sig.args[pos])(context, builder, args[pos]).data
            for pos in (0, 1, 2, 3, 4)
        )
        k, n, stride = (
            context.cast(builder, args[pos], sig.args[pos], types.int64)
            for pos in (5, 6, 7)
        )
        at = [
            builder.load(builder.gep(rows_at, [ir.Constant(i64, r)]))
            for r in range(n_rows)
        ]
        j = [
            builder.load(builder.gep(starts, [ir.Constant(i64, r)]))
            for r in range(n_rows)
        ]

        def terms(t):
            row = builder.add(k, builder.mul(t, stride))
            weights = [
                builder.load(_vector_at(builder, rows, row, v, lanes), align=4)
                for v in range(n_vectors)
            ]
            products = []
            for r in range(n_rows):
                a = _broadcast(builder, x, builder.add(j[r], t), lanes)
                products += [builder.fmul(a, w) for w in weights]
            return products

        def sums_at(s):
            r, v = divmod(s, n_vectors)
            return _vector_at(builder, out, at[r], v, lanes)

        _sums_in_registers(builder, sums_at, n_rows * n_vectors, n, terms, lanes)
        return context.get_dummy_value()

    sig = types.void(dst, dsts, xs, js, src, k, n, stride, n_vec)
    return sig, codegen


@intrinsic(prefer_literal=True)
def table_sums_block(typingctx, arrays, at, n_vec, lanes, one_row):
    """Add the table rows that the words of a few rows select, sums in registers.

    `arrays` is ``(acc, dsts, words, bases, table, terms)`` and `at` the
    integers ``(b0, col, t0, t1, c)``.

    The rows are ``n_rows = 1`` if `one_row`, else :func:`rows_at_once`
    ``(n_vec, lanes)``; the sums of a row are ``8 n_vec`` floats, in ``n =
    8 n_vec / L`` vectors of ``L = vector_lanes(n_vec, lanes)`` floats. For
    ``r < n_rows`` the sums are ``acc.flat[dsts[b0 + r] + c :][: 8 n_vec]``
    (``width = table.shape[1]``); for each term ``t`` in ``[t0, t1)``, in
    that order, row ``r`` adds ``table[t * n_vals + val, c :][: 8 n_vec]``
    with ``val = (word >> terms[t, 2]) & (n_vals - 1)``, ``word =
    words[bases[b0 + r] + terms[t, col]]`` and ``n_vals = terms[0, 3]``.
    Each add rounded to float32 in that order: the sums a loop of
    :func:`add_vectors` makes, bit for bit. The rows' chains of adds
    overlap, and each row's sums are loaded once and stored once.

    `acc` float32 and `words` uint64, flat; `dsts` and `bases` int64;
    `table` float32 of shape (n_terms * n_vals, width); `terms` int64 of
    shape (n_terms, 4); all C-contiguous. `n_vec`, `lanes` (8 or 16) and
    `one_row` literals. Indices in range (not checked).

    With `acc` and `table` float64 instead, the same in float64 (each add
    rounded to float64); `lanes` then counts doubles (4 or 8: a vector
    register's worth).
    """
    if not (
        isinstance(arrays, types.BaseTuple)
        and len(arrays) == 6
        and isinstance(at, types.BaseTuple)
        and len(at) == 5
        and all(isinstance(t, types.Integer) for t in at)
        and all(isinstance(a, types.IntegerLiteral) for a in (n_vec, lanes))
        and isinstance(one_row, types.BooleanLiteral)
    ):
        return None
    acc, dsts, words, bases, table, terms = arrays
    if not (
        (_float32_arrays(acc, table) or _float_arrays(types.float64, acc, table))
        and all(isinstance(a, types.Array) for a in (dsts, words, bases, terms))
        and words.dtype == types.uint64
        and dsts.dtype == types.int64
        and bases.dtype == types.int64
        and terms.dtype == types.int64
    ):
        return None
    n_lanes = vector_lanes.py_func(n_vec.literal_value, lanes.literal_value)
    n_vectors = 8 * n_vec.literal_value // n_lanes
    rows = (
        1
        if one_row.literal_value
        else rows_at_once.py_func(n_vec.literal_value, n_lanes)
    )

    elem = ir.DoubleType() if acc.dtype == types.float64 else ir.FloatType()

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        structs = [
            context.make_array(kind)(context, builder, value)
            for kind, value in zip(
                sig.args[0], cgutils.unpack_tuple(builder, args[0]), strict=True
            )
        ]
        out, row_dst, x, row_at, rows_data, term_data = (a.data for a in structs)
        width = builder.extract_value(structs[4].shape, 1)
        b0, col, first, last, c = (
            context.cast(builder, value, kind, types.int64)
            for kind, value in zip(
                sig.args[1], cgutils.unpack_tuple(builder, args[1]), strict=True
            )
        )

        def const(value):
            return ir.Constant(i64, value)

        def load_at(base, index):
            return builder.load(builder.gep(base, [index]))

        row_sums = [
            builder.add(load_at(row_dst, builder.add(b0, const(r))), c)
            for r in range(rows)
        ]
        n_vals = load_at(term_data, const(3))
        mask = builder.sub(n_vals, const(1))
        slice_floats = builder.mul(n_vals, width)
        row_bases = [load_at(row_at, builder.add(b0, const(r))) for r in range(rows)]

        def add_term(k):
            """The table rows the rows' words select at term ``first + k``."""
            t = builder.add(first, k)
            at = builder.mul(t, const(4))
            offset = load_at(term_data, builder.add(at, col))
            shift = load_at(term_data, builder.add(at, const(2)))
            base = builder.add(builder.mul(t, slice_floats), c)
            new = []
            for r in range(rows):
                word = load_at(x, builder.add(row_bases[r], offset))
                val = builder.and_(builder.lshr(word, shift), mask)
                row = builder.add(base, builder.mul(val, width))
                new += [
                    builder.load(
                        _vector_at(builder, rows_data, row, v, n_lanes, elem),
                        align=4,
                    )
                    for v in range(n_vectors)
                ]
            return new

        def sums_at(s):
            r, v = divmod(s, n_vectors)
            return _vector_at(builder, out, row_sums[r], v, n_lanes, elem)

        n_terms = builder.sub(last, first)
        _sums_in_registers(
            builder, sums_at, rows * n_vectors, n_terms, add_term, n_lanes
        )
        return context.get_dummy_value()

    sig = types.void(arrays, at, n_vec, lanes, one_row)
    return sig, codegen
