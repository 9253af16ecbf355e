"""The sign x sign kernel of the packed nets: XNOR-popcount with an affine map.

Bits in the unit layout of :mod:`sksign.deploy._kernels._bits`; serial over a
range of rows and output columns, GIL released (the caller splits the work).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from sksign.kernels import (
    popcount64,
    vector_kernels,
    xor_affine_block,
    xor_count_block,
)

__all__ = [
    "sign_products",
    "vector_blocks",
    "xnor_affine",
    "xnor_affine_vectors",
    "xnor_kernel",
    "xnor_weights",
]

#: Output columns of a tile in :func:`xnor_affine` (its weights and counters
#: stay in L1).
XNOR_TILE = 128
#: Input words per carry-save group in :func:`xnor_affine` (one popcount each).
XNOR_GROUP = 8
#: Rows from which :func:`xnor_affine` goes by tiles (fewer rows read the
#: weights in place: copying a tile would cost more than it saves).
XNOR_TILE_MIN_ROWS = 4


@njit(cache=True, nogil=True, inline="always")
def _csa(a, b, c):
    """Carry-save adder of three words, bit by bit: ``(carry, sum)``."""
    u = a ^ b
    return (a & b) | (u & c), u ^ c


@njit(cache=True, nogil=True, inline="always")
def _csa8(s1, s2, s4, d0, d1, d2, d3, d4, d5, d6, d7):
    """Add eight words to the bit-sliced counters ``s1, s2, s4`` (Harley-Seal).

    Returns the new counters and the carry word of weight 8: per bit,
    ``s1 + 2 s2 + 4 s4 + 8 carry`` grows by the eight input bits.
    """
    c2a, s1 = _csa(s1, d0, d1)
    c2b, s1 = _csa(s1, d2, d3)
    c4a, s2 = _csa(s2, c2a, c2b)
    c2a, s1 = _csa(s1, d4, d5)
    c2b, s1 = _csa(s1, d6, d7)
    c4b, s2 = _csa(s2, c2a, c2b)
    c8, s4 = _csa(s4, c4a, c4b)
    return s1, s2, s4, c8


@intrinsic
def _fma32(typingctx, x, y, z):
    """``x * y + z`` of three float32, rounded once (``llvm.fma.f32``: one
    ``vfmadd`` where the CPU has FMA, vectorised in loops)."""
    if not all(t == types.float32 for t in (x, y, z)):
        return None

    def codegen(context, builder, sig, args):
        f32 = ir.FloatType()
        fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(f32, [f32] * 3), "llvm.fma.f32"
        )
        return builder.call(fma, args)

    return types.float32(x, y, z), codegen


def _affine_value(dot, a, b):
    """``dot * a + b`` as the sign layer computes it (see the overload)."""
    return dot * a + b


@overload(_affine_value)
def _affine_value_typed(dot, a, b):
    """Float32 `a` and `b`: one float32 fused multiply-add (the float64 map's
    value where :func:`~sksign.kernels.fma_exact` holds); otherwise as
    numba promotes ``dot * a + b`` (float64 for float scales, no fused
    multiply-add; int64 for integer ones)."""
    if a == types.float32 and b == types.float32:
        return lambda dot, a, b: _fma32(np.float32(dot), a, b)
    return lambda dot, a, b: dot * a + b


@njit(cache=True, nogil=True, inline="always")
def _affine_store(acc, n_bits, a, b, o, n):
    """``o[c] = (n_bits - 2 acc[c]) * a[c] + b[c]`` for ``c < n``, by
    :func:`_affine_value` (float32 scales: fused multiply-adds)."""
    if n_bits < 2**31:
        # the dot product fits in int32, which converts to float in vectors
        for c in range(n):
            o[c] = _affine_value(np.int32(n_bits - 2 * np.int64(acc[c])), a[c], b[c])
    else:  # pragma: no cover - over 2**31 input bits
        for c in range(n):
            o[c] = (n_bits - 2 * np.int64(acc[c])) * a[c] + b[c]


@njit(cache=True, nogil=True, fastmath=False)
def _xnor_rows_direct(xw, wt, n_bits, alpha, beta, out, r0, r1, c0, c1):
    """:func:`xnor_affine` with the weights read in place, one popcount a word.

    For few rows or words; four rows share each weight row read.
    """
    n_words = xw.shape[1]
    n = c1 - c0
    acc0 = np.empty(n, np.uint64)
    acc1 = np.empty(n, np.uint64)
    acc2 = np.empty(n, np.uint64)
    acc3 = np.empty(n, np.uint64)
    a = alpha[c0:c1]
    b = beta[c0:c1]
    i = r0
    while i + 4 <= r1:
        for c in range(n):
            acc0[c] = 0
            acc1[c] = 0
            acc2[c] = 0
            acc3[c] = 0
        for w in range(n_words):
            x0 = xw[i, w]
            x1 = xw[i + 1, w]
            x2 = xw[i + 2, w]
            x3 = xw[i + 3, w]
            row = wt[w, c0:c1]
            for c in range(n):
                t = row[c]
                acc0[c] += popcount64(x0 ^ t)
                acc1[c] += popcount64(x1 ^ t)
                acc2[c] += popcount64(x2 ^ t)
                acc3[c] += popcount64(x3 ^ t)
        _affine_store(acc0, n_bits, a, b, out[i, c0:c1], n)
        _affine_store(acc1, n_bits, a, b, out[i + 1, c0:c1], n)
        _affine_store(acc2, n_bits, a, b, out[i + 2, c0:c1], n)
        _affine_store(acc3, n_bits, a, b, out[i + 3, c0:c1], n)
        i += 4
    while i < r1:
        for c in range(n):
            acc0[c] = 0
        for w in range(n_words):
            x0 = xw[i, w]
            row = wt[w, c0:c1]
            for c in range(n):
                acc0[c] += popcount64(x0 ^ row[c])
        _affine_store(acc0, n_bits, a, b, out[i, c0:c1], n)
        i += 1


@njit(cache=True, nogil=True, inline="always")
def _xnor_groups2(xw, i, wb, st, n, n_groups):
    """Carry-save counts of rows ``i, i + 1`` over the full groups of 8 words."""
    a1, a2, a4, a8 = st[0, 0], st[0, 1], st[0, 2], st[0, 3]
    b1, b2, b4, b8 = st[1, 0], st[1, 1], st[1, 2], st[1, 3]
    for g in range(n_groups):
        w = XNOR_GROUP * g
        w0, w1, w2, w3 = wb[w], wb[w + 1], wb[w + 2], wb[w + 3]
        w4, w5, w6, w7 = wb[w + 4], wb[w + 5], wb[w + 6], wb[w + 7]
        x0, x1, x2, x3 = xw[i, w], xw[i, w + 1], xw[i, w + 2], xw[i, w + 3]
        x4, x5, x6, x7 = xw[i, w + 4], xw[i, w + 5], xw[i, w + 6], xw[i, w + 7]
        y0, y1, y2, y3 = (
            xw[i + 1, w],
            xw[i + 1, w + 1],
            xw[i + 1, w + 2],
            xw[i + 1, w + 3],
        )
        y4, y5, y6, y7 = (
            xw[i + 1, w + 4],
            xw[i + 1, w + 5],
            xw[i + 1, w + 6],
            xw[i + 1, w + 7],
        )
        for c in range(n):
            q0, q1, q2, q3 = w0[c], w1[c], w2[c], w3[c]
            q4, q5, q6, q7 = w4[c], w5[c], w6[c], w7[c]
            s1, s2, s4, c8 = _csa8(
                a1[c], a2[c], a4[c],
                x0 ^ q0, x1 ^ q1, x2 ^ q2, x3 ^ q3,
                x4 ^ q4, x5 ^ q5, x6 ^ q6, x7 ^ q7,
            )  # fmt: skip
            a1[c], a2[c], a4[c] = s1, s2, s4
            a8[c] += popcount64(c8)
            s1, s2, s4, c8 = _csa8(
                b1[c], b2[c], b4[c],
                y0 ^ q0, y1 ^ q1, y2 ^ q2, y3 ^ q3,
                y4 ^ q4, y5 ^ q5, y6 ^ q6, y7 ^ q7,
            )  # fmt: skip
            b1[c], b2[c], b4[c] = s1, s2, s4
            b8[c] += popcount64(c8)


@njit(cache=True, nogil=True, inline="always")
def _xnor_groups1(xw, i, wb, st, n, n_groups):
    """Carry-save counts of row ``i`` over the full groups of 8 words."""
    a1, a2, a4, a8 = st[0, 0], st[0, 1], st[0, 2], st[0, 3]
    for g in range(n_groups):
        w = XNOR_GROUP * g
        w0, w1, w2, w3 = wb[w], wb[w + 1], wb[w + 2], wb[w + 3]
        w4, w5, w6, w7 = wb[w + 4], wb[w + 5], wb[w + 6], wb[w + 7]
        x0, x1, x2, x3 = xw[i, w], xw[i, w + 1], xw[i, w + 2], xw[i, w + 3]
        x4, x5, x6, x7 = xw[i, w + 4], xw[i, w + 5], xw[i, w + 6], xw[i, w + 7]
        for c in range(n):
            s1, s2, s4, c8 = _csa8(
                a1[c], a2[c], a4[c],
                x0 ^ w0[c], x1 ^ w1[c], x2 ^ w2[c], x3 ^ w3[c],
                x4 ^ w4[c], x5 ^ w5[c], x6 ^ w6[c], x7 ^ w7[c],
            )  # fmt: skip
            a1[c], a2[c], a4[c] = s1, s2, s4
            a8[c] += popcount64(c8)


@njit(cache=True, nogil=True, inline="always")
def _xnor_finish(xw, i, wb, sr, n, n_groups, n_bits, a, b, o):
    """Total the counters ``sr`` of row ``i``, add the last words, store the outputs."""
    acc = sr[3]
    for c in range(n):
        acc[c] = (
            XNOR_GROUP * acc[c]
            + popcount64(sr[0, c])
            + 2 * popcount64(sr[1, c])
            + 4 * popcount64(sr[2, c])
        )
    for w in range(XNOR_GROUP * n_groups, xw.shape[1]):
        x = xw[i, w]
        row = wb[w]
        for c in range(n):
            acc[c] += popcount64(x ^ row[c])
    _affine_store(acc, n_bits, a, b, o, n)


@njit(cache=True, nogil=True, fastmath=False)
def _xnor_rows_tiled(xw, wt, n_bits, alpha, beta, out, r0, r1, c0, c1):
    """:func:`xnor_affine` by tiles of columns, carry-save counts (many rows)."""
    n_words = xw.shape[1]
    n_groups = n_words // XNOR_GROUP
    # the padded stride keeps the rows of a tile off the same cache sets
    stride = XNOR_TILE + 8
    wb = np.empty((n_words, stride), np.uint64)
    st = np.empty((2, 4, stride), np.uint64)
    for t0 in range(c0, c1, XNOR_TILE):
        t1 = min(t0 + XNOR_TILE, c1)
        n = t1 - t0
        for w in range(n_words):
            src = wt[w, t0:t1]
            dst = wb[w]
            for c in range(n):
                dst[c] = src[c]
        a, b = alpha[t0:t1], beta[t0:t1]
        i = r0
        while i < r1:
            k = min(2, r1 - i)
            for r in range(k):
                for level in range(4):
                    s = st[r, level]
                    for c in range(n):
                        s[c] = 0
            if k == 2:
                _xnor_groups2(xw, i, wb, st, n, n_groups)
            else:
                _xnor_groups1(xw, i, wb, st, n, n_groups)
            for r in range(k):
                _xnor_finish(
                    xw, i + r, wb, st[r], n, n_groups, n_bits, a, b, out[i + r, t0:t1]
                )
            i += k


@njit(cache=True, nogil=True, fastmath=False)
def xnor_affine(xw, wt, n_bits, alpha, beta, out, r0, r1, c0, c1):
    """Sign x sign layer: ``out = (n_bits - 2 popcount(x ^ w)) * alpha + beta``.

    With ``a = 2 x - 1`` and ``s = 2 w - 1`` in {-1, +1}, the integer
    ``n_bits - 2 * popcount(x ^ w)`` is exactly ``a . s``. The weights are
    stored word-major (one row per input word, one column per output), so the
    counts of one input word against a row of outputs vectorise over the
    outputs without a horizontal sum. From :data:`XNOR_TILE_MIN_ROWS` rows on,
    the outputs go by tiles of :data:`XNOR_TILE` columns (copied to an
    L1-resident buffer), two rows share each weight read, and the words of
    a group of :data:`XNOR_GROUP` go through carry-save adders (Harley-Seal:
    bitwise operations only) into bit-sliced counters, so one popcount
    serves eight words. Fewer rows (or fewer than eight words) read the
    weights in place, one popcount per word, four rows sharing each weight
    row read.

    Parameters
    ----------
    xw : ndarray of shape (n_rows, n_words), dtype uint64
        Packed input bits.
    wt : ndarray of shape (n_words, n_out), dtype uint64
        Packed weight signs (bit 1 = +1), the transpose of the output-major
        words of :func:`~sksign.kernels.packed_to_words`.
    n_bits : int
        Input bits per row (the padding is zero in both).
    alpha, beta : ndarray of shape (n_out,)
        Per-output scale and shift (binary weight scale, BatchNorm, bias).
        Float64: the outputs are ``float64(dot) * alpha + beta`` rounded to
        `out`'s type. Float32: ``fma(dot, alpha, beta)`` in float32, the
        same floats where :func:`~sksign.kernels.fma_exact` holds (the
        caller checks, as ``xnor_dense`` does).
    out : ndarray of shape (n_rows, n_out)
        Receives the outputs (float) or, with ``alpha = 1, beta = 0`` and an
        integer `out`, the exact dot products.
    r0, r1, c0, c1 : int
        Row and output-column ranges.
    """
    if r1 - r0 >= XNOR_TILE_MIN_ROWS and xw.shape[1] >= XNOR_GROUP:
        _xnor_rows_tiled(xw, wt, n_bits, alpha, beta, out, r0, r1, c0, c1)
    else:
        _xnor_rows_direct(xw, wt, n_bits, alpha, beta, out, r0, r1, c0, c1)


#: Output columns of a register block of :func:`xnor_affine_vectors` (four
#: vectors of eight words: ``xor_affine_block(..., rows, 4)``), and of a
#: block of its weights (:func:`vector_blocks`).
VECTOR_COLUMNS = 32


def vector_blocks(wt):
    """Word-major weights ``wt`` (n_words, n_out) as :func:`xnor_affine_vectors`
    reads them: blocks of :data:`VECTOR_COLUMNS` columns, each C-contiguous,
    shape (n_blocks, n_words, VECTOR_COLUMNS), zero past the last column.

    A block's words lie 256 bytes apart: read in place from a wide layer's
    rows (a page or more apart), a block's words had shared a few L1 sets,
    so the kernel had copied each block on every call. Laid out once, at
    load, with the affine map applied in registers, the 1024 x 1024 layer
    at batch 64 went from 62% to 81% of the popcount peak (Intel Xeon).
    """
    n_words, n_out = wt.shape
    n_blocks = -(-n_out // VECTOR_COLUMNS)
    padded = np.zeros((n_words, n_blocks * VECTOR_COLUMNS), np.uint64)
    padded[:, :n_out] = wt
    blocks = padded.reshape(n_words, n_blocks, VECTOR_COLUMNS).transpose(1, 0, 2)
    return np.ascontiguousarray(blocks)


@njit(cache=True, nogil=True, inline="always")
def _partial_rows(xw, src, off, counts, n_bits, a, b, out, r0, r1, t0, n):
    """Rows ``r0 .. r1 - 1`` against the block `src`, four rows a register
    block; the outputs ``t0 .. t0 + n - 1`` from its column `off`."""
    i = r0
    while i < r1:
        rows = min(4, r1 - i)
        if rows == 4:
            xor_count_block(counts, 0, 0, xw, i, src, 0, 4, 4, None)
        else:
            for r in range(rows):
                xor_count_block(counts, r, 0, xw, i + r, src, 0, 1, 4, None)
        for r in range(rows):
            _affine_store(counts[r, off:], n_bits, a, b, out[i + r, t0 : t0 + n], n)
        i += rows


@njit(cache=True, nogil=True, fastmath=False)
def xnor_affine_vectors(xw, wb, n_bits, alpha, beta, out, r0, r1, c0, c1):
    """:func:`xnor_affine` on the register blocks of
    :func:`~sksign.kernels._vector_counts.xor_affine_block`.

    The same outputs, from the weights in :func:`vector_blocks` `wb` instead
    of `wt`. Each block of 32 output columns takes four input rows at a
    time, with the 16 running counts in registers (one XOR, one
    ``vpopcntq`` and one add per eight products on AVX-512 VPOPCNTDQ, where
    :func:`xnor_kernel` chooses it); the affine map is applied in registers
    and the outputs stored from there. A block cut by the column range
    stores its counts first.

    Float32 `alpha` and `beta` go through float32 fused multiply-adds, the
    float64 map's outputs only where :func:`~sksign.kernels.fma_exact`
    holds (``xnor_dense`` checks it once and passes float64 scales where it
    fails, which keep the float64 map).
    """
    counts = np.empty((4, VECTOR_COLUMNS), np.int64)
    for blk in range(c0 // VECTOR_COLUMNS, -(-c1 // VECTOR_COLUMNS)):
        first = VECTOR_COLUMNS * blk
        t0, t1 = max(c0, first), min(c1, first + VECTOR_COLUMNS)
        src = wb[blk]
        if t1 - t0 < VECTOR_COLUMNS:
            a, b = alpha[t0:t1], beta[t0:t1]
            _partial_rows(
                xw, src, t0 - first, counts, n_bits, a, b, out, r0, r1, t0, t1 - t0
            )
            continue
        i = r0
        while i + 4 <= r1:
            xor_affine_block(out, i, t0, xw, i, src, 0, n_bits, alpha, beta, 4, 4)
            i += 4
        while i < r1:
            xor_affine_block(out, i, t0, xw, i, src, 0, n_bits, alpha, beta, 1, 4)
            i += 1


def xnor_kernel():
    """The sign x sign kernel for this CPU: :func:`xnor_affine_vectors` where
    it has AVX-512 VPOPCNTDQ, else :func:`xnor_affine` (carry-save adders).
    It reads the weights as :func:`xnor_weights` lays them out."""
    return xnor_affine_vectors if vector_kernels() else xnor_affine


def xnor_weights(wt):
    """Word-major weights ``wt`` (n_words, n_out) as :func:`xnor_kernel` reads
    them: :func:`vector_blocks` for the register blocks, else `wt`."""
    return vector_blocks(wt) if vector_kernels() else wt


def sign_products():
    """How :func:`xnor_kernel` multiplies signs here, in words."""
    if vector_kernels():
        return "XOR + vpopcntq on register blocks of 4 rows x 32 outputs"
    return "XOR, carry-save adders (8 words) + popcount, tiles of 128 outputs"
