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
from numba.extending import intrinsic

__all__ = [
    "LANES",
    "UNROLL_FLOATS",
    "add_vectors",
    "padded_width",
    "rows_at_once",
    "scaled_add_row_block",
    "scaled_add_rows",
]

#: Floats of one vector add of :func:`add_vectors` (the output widths of the
#: real-weights kernels are padded to a multiple of it).
LANES = 8


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
    n_vectors = n_vec.literal_value

    def codegen(context, builder, signature, args):
        vec = ir.VectorType(ir.FloatType(), LANES).as_pointer()
        step = ir.Constant(ir.IntType(64), LANES)
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


def _sums_in_registers(builder, sums_at, n_vectors, n, terms):
    """Emit ``sums += terms(t)`` for ``t = 0 .. n - 1``, the sums in registers.

    `sums_at(v)` is the pointer of the v-th vector of sums (loaded before the
    loop, stored after it); `terms(t)` emits the `n_vectors` vectors added at
    step `t` (an i64 value). The adds go in the order of `t`, each rounded.
    """
    i64 = ir.IntType(64)
    vec = ir.VectorType(ir.FloatType(), LANES)
    ptrs = [sums_at(v) for v in range(n_vectors)]
    start = [builder.load(p, align=4) for p in ptrs]
    entry = builder.block
    loop = builder.append_basic_block("sums_loop")
    done = builder.append_basic_block("sums_done")
    builder.cbranch(builder.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    builder.position_at_end(loop)
    t = builder.phi(i64)
    t.add_incoming(ir.Constant(i64, 0), entry)
    sums = []
    for v in range(n_vectors):
        phi = builder.phi(vec)
        phi.add_incoming(start[v], entry)
        sums.append(phi)
    new = [builder.fadd(sums[v], term) for v, term in enumerate(terms(t))]
    t_next = builder.add(t, ir.Constant(i64, 1))
    t.add_incoming(t_next, loop)
    for v in range(n_vectors):
        sums[v].add_incoming(new[v], loop)
    builder.cbranch(builder.icmp_signed("<", t_next, n), loop, done)
    builder.position_at_end(done)
    final = []
    for v in range(n_vectors):  # the phis first, then the stores
        phi = builder.phi(vec)
        phi.add_incoming(start[v], entry)
        phi.add_incoming(new[v], loop)
        final.append(phi)
    for v in range(n_vectors):
        builder.store(final[v], ptrs[v], align=4)


def _vector_at(builder, base, index, v):
    """Pointer of the v-th vector of floats from ``base[index]``."""
    offset = builder.add(index, ir.Constant(ir.IntType(64), LANES * v))
    vec = ir.VectorType(ir.FloatType(), LANES)
    return builder.bitcast(builder.gep(base, [offset]), vec.as_pointer())


def _broadcast(builder, base, index):
    """A vector of :data:`LANES` copies of the float ``base[index]``."""
    vec = ir.VectorType(ir.FloatType(), LANES)
    every_lane = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES)
    a = builder.load(builder.gep(base, [index]), align=4)
    a = builder.insert_element(ir.Constant(vec, ir.Undefined), a, ir.IntType(32)(0))
    return builder.shuffle_vector(a, ir.Constant(vec, ir.Undefined), every_lane)


def _float32_arrays(*arrays):
    return all(isinstance(a, types.Array) and a.dtype == types.float32 for a in arrays)


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
    n_vectors = n_vec.literal_value

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
            a = _broadcast(builder, x, builder.add(j, t))
            row = builder.add(k, builder.mul(t, stride))
            return [
                builder.fmul(
                    a, builder.load(_vector_at(builder, rows, row, v), align=4)
                )
                for v in range(n_vectors)
            ]

        def sums_at(v):
            return _vector_at(builder, out, at, v)

        _sums_in_registers(builder, sums_at, n_vectors, n, terms)
        return context.get_dummy_value()

    return types.void(dst, i, xs, j, src, k, n, stride, n_vec), codegen


#: Vectors of sums :func:`scaled_add_row_block` holds in registers (of the
#: 16 of AVX2, the rest hold the weights and an input).
SUM_REGISTERS = 8


@njit(cache=True, inline="always")
def rows_at_once(n_vec):
    """Rows :func:`scaled_add_row_block` adds at once for `n_vec` vectors."""
    return max(1, SUM_REGISTERS // n_vec)


@intrinsic(prefer_literal=True)
def scaled_add_row_block(typingctx, dst, dsts, xs, js, src, k, n, stride, n_vec):
    """:func:`scaled_add_rows` for :func:`rows_at_once` ``(n_vec)`` rows at once.

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
    n_vectors = n_vec.literal_value
    n_rows = rows_at_once(n_vectors)

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
                builder.load(_vector_at(builder, rows, row, v), align=4)
                for v in range(n_vectors)
            ]
            products = []
            for r in range(n_rows):
                a = _broadcast(builder, x, builder.add(j[r], t))
                products += [builder.fmul(a, w) for w in weights]
            return products

        def sums_at(s):
            r, v = divmod(s, n_vectors)
            return _vector_at(builder, out, at[r], v)

        _sums_in_registers(builder, sums_at, n_rows * n_vectors, n, terms)
        return context.get_dummy_value()

    sig = types.void(dst, dsts, xs, js, src, k, n, stride, n_vec)
    return sig, codegen
