"""Numba kernels of packed bits: the unit layout, sign packing, sums over bits.

The bit layout of the layer kernels of :mod:`sksign.deploy`. Bits travel as C-contiguous
``uint64`` words laid out as :func:`~sksign.kernels.packed_to_words` lays out
:func:`~sksign.kernels.pack_bits` codes: unit ``u`` of a row is bit
``8 * ((u % 64) // 8) + 7 - u % 8`` of word ``u // 64`` (bytes most
significant bit first, read as little-endian words), padding bits zero. So
weights packed with :func:`~sksign.kernels.pack_bits` and activations packed
here meet bit for bit, and ``popcount(a ^ w)`` (:func:`popcount64`) counts
their disagreements.

Every kernel is serial, works on a range of rows ``[r0, r1)`` and of output
columns ``[c0, c1)`` and releases the GIL, so the caller splits the work over
threads (rows for batches, columns for a single row) with results that never
depend on the split.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from sksign.kernels import load_vector, popcount64

__all__ = [
    "ROW_BLOCK",
    "bit_accumulate",
    "certain_step_bits",
    "channel_shares",
    "count_bits",
    "flag_buffers",
    "pack_affine_ge",
    "pack_flags",
    "pack_ge",
    "step_interval",
    "unit_of_bit",
    "unpack_words",
    "word_bit",
]

#: Rows of a block in :func:`bit_accumulate` (they share each weight row read).
ROW_BLOCK = 4


@njit(cache=True, nogil=True, inline="always")
def unit_of_bit(word, pos):
    """Unit index of bit `pos` (0 = least significant) of word `word`."""
    return 64 * word + 8 * (pos // 8) + 7 - pos % 8


@njit(cache=True, nogil=True, inline="always")
def _bit_position(j):
    """Position (0 = least significant) of the bit of unit `j` of a word,
    ``0 <= j < 64``: the layout of the module docstring."""
    return 8 * (j // 8) + 7 - j % 8


@njit(cache=True, nogil=True, inline="always")
def word_bit(unit):
    """The ``uint64`` mask of `unit`'s bit in its word ``unit // 64``.

    The inverse of :func:`unit_of_bit`; with :func:`_unit_shifts` and
    :func:`_byte_gather`, the kernels' only reading of :func:`_bit_position`.
    """
    return np.uint64(1) << np.uint64(_bit_position(unit % 64))


@njit(cache=True, nogil=True, inline="always")
def _unit_shifts():
    """``shifts[j]`` = the bit position of unit `j` of a word (uint64), for
    the loops that read a word's units by their own shifts (they
    vectorise)."""
    shifts = np.empty(64, np.uint64)
    for j in range(64):
        shifts[j] = _bit_position(j)
    return shifts


def _byte_gather():
    """The multiplier that gathers the low bits of the 8 bytes of a uint64
    (byte ``t`` = unit ``t`` of a byte, 0 or 1) into its top byte, unit ``t``
    at bit ``56 + _bit_position(t)``: a bit of byte ``t`` times ``2**(m_t)``
    lands there for ``m_t = 56 + _bit_position(t) - 8 t``; the other
    products land above bit 63 or at distinct bits below 56 (no carry)."""
    shifts = [56 + _bit_position.py_func(t) - 8 * t for t in range(8)]
    return np.uint64(sum(1 << m for m in shifts))


_BYTE_GATHER = _byte_gather()
_LITTLE_ENDIAN = sys.byteorder == "little"


@njit(cache=True, nogil=True, inline="always")
def flag_buffers(n_words):
    """``(flag_words, flags)`` for :func:`pack_flags`: zeroed uint64 words for
    rows of `n_words` words and their bytes as uint8, one flag a unit (a
    loop that sets flags from a compare vectorises, where setting bits in a
    word does not). Flags past a row's units stay 0 as long as no loop
    writes them."""
    flag_words = np.zeros(8 * n_words, np.uint64)
    return flag_words, flag_words.view(np.uint8)


@njit(cache=True, nogil=True, inline="always")
def pack_flags(flag_words, out, i):
    """``out[i]`` = the words of the units whose flag is 1.

    The flags are the bytes of `flag_words` (of :func:`flag_buffers`), one
    0/1 byte per unit, 0 past the row's units. Eight flags read as one
    little-endian uint64 become a byte of the word by one multiply
    (:func:`_byte_gather`).
    """
    if _LITTLE_ENDIAN:
        for w in range(out.shape[1]):
            word = np.uint64(0)
            for b in range(8):
                byte = (flag_words[8 * w + b] * _BYTE_GATHER) >> np.uint64(56)
                word |= byte << np.uint64(8 * b)
            out[i, w] = word
    else:
        flags = flag_words.view(np.uint8)
        for w in range(out.shape[1]):
            word = np.uint64(0)
            for j in range(64):
                word |= np.uint64(flags[64 * w + j]) * word_bit(j)
            out[i, w] = word


@njit(cache=True, nogil=True, fastmath=False)
def count_bits(words):
    """Number of 1 bits in a 2-D array of uint64 words."""
    s = 0
    for i in range(words.shape[0]):
        for w in range(words.shape[1]):
            s += popcount64(words[i, w])
    return s


@njit(cache=True, nogil=True, fastmath=False)
def pack_ge(z, threshold, out, r0, r1):
    """``out[i]`` = the packed bits ``z[i, u] >= threshold[u]``, rows ``r0:r1``.

    Parameters
    ----------
    z : ndarray of shape (n_rows, n_units), float32 or float64
        Pre-activations.
    threshold : ndarray of shape (n_units,)
        Per-unit threshold (0 for the step ``1[z >= 0]``); NaN never fires.
    out : ndarray of shape (n_rows, ceil(n_units / 64)), dtype uint64
        Receives the words; padding bits are zero.
    r0, r1 : int
        Row range.
    """
    n_units = z.shape[1]
    flag_words, flags = flag_buffers(out.shape[1])
    for i in range(r0, r1):
        for u in range(n_units):
            # no branch on the bit (a coin toss for a step of BatchNorm)
            flags[u] = z[i, u] >= threshold[u]
        pack_flags(flag_words, out, i)


#: Units :func:`_affine_step_bits` steps in one vector.
STEP_GROUP = 16


#: A vector of the float32 values of :data:`STEP_GROUP` units.
_UNIT_VECTOR = ir.VectorType(ir.FloatType(), STEP_GROUP)
#: Lane L takes unit 8 (L // 8) + 7 - L % 8, so that bit L of a compare's
#: mask is that unit's bit in the unit layout.
_UNIT_ORDER = ir.Constant(
    ir.VectorType(ir.IntType(32), STEP_GROUP),
    [8 * (lane // 8) + 7 - lane % 8 for lane in range(STEP_GROUP)],
)


def _load_units(builder, data, at):
    """LLVM IR: the :data:`STEP_GROUP` floats from ``data[at]`` (a float
    pointer), in the lane order :data:`_UNIT_ORDER`."""
    v = load_vector(builder, data, at, _UNIT_VECTOR, align=4)
    return builder.shuffle_vector(
        v, ir.Constant(_UNIT_VECTOR, ir.Undefined), _UNIT_ORDER
    )


def _mask_word(builder, held):
    """LLVM IR: a compare's mask of units in :data:`_UNIT_ORDER` as their
    bits of a uint64 word (the two low bytes)."""
    return builder.zext(builder.bitcast(held, ir.IntType(STEP_GROUP)), ir.IntType(64))


@intrinsic
def _affine_step_bits(typingctx, z, zi, scale, shift, c):
    """The 16 bits ``z.flat[zi + j] * scale[c + j] + shift[c + j] >= 0`` in
    the unit layout of this module (unit ``j`` at bit ``8 (j // 8) + 7 - j %
    8``), as a uint64: one vector product, sum (each rounded to float32, no
    fused multiply-add) and compare, the lanes ordered by a shuffle so that
    the compare's mask is the two bytes. float32 C-contiguous arrays,
    indices in range (not checked)."""
    if not all(
        isinstance(a, types.Array) and a.dtype == types.float32
        for a in (z, scale, shift)
    ):
        return None

    def codegen(context, builder, sig, args):
        z_data, scale_data, shift_data = (
            context.make_array(sig.args[p])(context, builder, args[p]).data
            for p in (0, 2, 3)
        )
        zi, c = (
            context.cast(builder, args[p], sig.args[p], types.int64) for p in (1, 4)
        )
        v = builder.fadd(
            builder.fmul(
                _load_units(builder, z_data, zi), _load_units(builder, scale_data, c)
            ),
            _load_units(builder, shift_data, c),
        )
        zero = ir.Constant(_UNIT_VECTOR, [0.0] * STEP_GROUP)
        return _mask_word(builder, builder.fcmp_ordered(">=", v, zero))

    return types.uint64(z, zi, scale, shift, c), codegen


@intrinsic(prefer_literal=True)
def _compare_bits(typingctx, a, ai, b, bi, op):
    """The 16 bits ``a.flat[ai + j] <op> b.flat[bi + j]`` (op ``">"``, ``">="``
    or ``"<="``, a literal; NaN compares false) in the unit layout of this
    module, as a uint64: one vector compare, the lanes ordered as in
    :func:`_affine_step_bits`. float32 C-contiguous arrays, indices in range
    (not checked)."""
    if not (
        all(isinstance(x, types.Array) and x.dtype == types.float32 for x in (a, b))
        and isinstance(op, types.StringLiteral)
        and op.literal_value in (">", ">=", "<=")
    ):
        return None
    relation = op.literal_value

    def codegen(context, builder, sig, args):
        def load(p):
            data = context.make_array(sig.args[p])(context, builder, args[p]).data
            at = context.cast(builder, args[p + 1], sig.args[p + 1], types.int64)
            return _load_units(builder, data, at)

        return _mask_word(builder, builder.fcmp_ordered(relation, load(0), load(2)))

    return types.uint64(a, ai, b, bi, op), codegen


@njit(cache=True, nogil=True, fastmath=False)
def step_interval(threshold, bound):
    """``(low, high)`` float32 per output: an interval that holds every float
    within ``bound`` of ``threshold`` (float64 bounds rounded outwards), for
    :func:`certain_step_bits`."""
    n = threshold.shape[0]
    low, high = np.empty(n, np.float32), np.empty(n, np.float32)
    for o in range(n):
        t, b = np.float64(threshold[o]), bound[o]
        # margins past the rounding to float32 (half an ulp: 2**-24 of the
        # value, or 2**-150 among the subnormals) and past float64's
        lo, hi = t - b, t + b
        low[o] = np.float32(lo - abs(lo) * 2.0**-22 - 2.0**-148)
        high[o] = np.float32(hi + abs(hi) * 2.0**-22 + 2.0**-148)
    return low, high


# inlined: called once per output row, where a call (its arrays passed as
# structs, their reference counts taken and dropped) took 0.6-1.0 of 3.0-3.3 ms
# in a 16-channel step conv of 65,536 rows (step ResNet-18, batch 64)
@njit(cache=True, nogil=True, fastmath=False, inline="always")
def certain_step_bits(z, zi, threshold, low, high, out, i, doubt):
    """Row `i` of `out`: the bits ``z.flat[zi + o] > threshold[o]``, and in
    `doubt` (one word per word of `out`) the outputs whose ``z`` lies in
    ``[low[o], high[o]]`` (:func:`step_interval`), too close to tell; whether
    any does. Sixteen outputs a vector compare (:func:`_compare_bits`), the
    rest one by one; bits past the outputs stay 0."""
    n_out = threshold.shape[0]
    whole = n_out // STEP_GROUP * STEP_GROUP
    unsure = np.uint64(0)
    for w in range(out.shape[1]):
        fire, near = np.uint64(0), np.uint64(0)
        base = 64 * w
        for g in range(0, min(64, whole - base), STEP_GROUP):
            c = base + g
            at = zi + c
            fire |= _compare_bits(z, at, threshold, c, ">") << np.uint64(g)
            inside = _compare_bits(z, at, low, c, ">=") & _compare_bits(
                z, at, high, c, "<="
            )
            near |= inside << np.uint64(g)
        for j in range(max(0, min(64, whole - base)), min(64, n_out - base)):
            u = base + j
            v = z[zi + u]
            bit = word_bit(j)
            fire |= np.uint64(v > threshold[u]) * bit
            near |= np.uint64((v >= low[u]) & (v <= high[u])) * bit
        out[i, w] = fire
        doubt[w] = near
        unsure |= near
    return unsure != 0


@njit(cache=True, nogil=True, fastmath=False)
def pack_affine_ge(z, scale, shift, out, r0, r1):
    """``out[i]`` = the packed bits ``z[i] * scale + shift >= 0``, rows ``r0:r1``.

    A per-unit affine map (a product, then a sum, each rounded to float32,
    as :func:`~sksign.deploy._kernels.affine_rows` computes it) and the step
    of :func:`pack_ge` in one pass: the bits of a ``channel_affine``
    followed by a step, without the affine map's float output. Sixteen
    units at a time in vectors (:func:`_affine_step_bits`), the rest one by
    one.

    Parameters
    ----------
    z : ndarray of shape (n_rows, n_units), dtype float32
    scale, shift : ndarray of shape (n_units,), dtype float32
    out : ndarray of shape (n_rows, ceil(n_units / 64)), dtype uint64
        Receives the words; padding bits are zero.
    r0, r1 : int
        Row range.
    """
    n_units = z.shape[1]
    flat = z.reshape(-1)
    whole = n_units // STEP_GROUP * STEP_GROUP  # units stepped 16 at a time
    for i in range(r0, r1):
        for w in range(out.shape[1]):
            word = np.uint64(0)
            base = 64 * w
            for g in range(0, min(64, whole - base), STEP_GROUP):
                bits = _affine_step_bits(
                    flat, i * n_units + base + g, scale, shift, base + g
                )
                word |= bits << np.uint64(g)
            for j in range(max(0, min(64, whole - base)), min(64, n_units - base)):
                u = base + j
                v = z[i, u] * scale[u] + shift[u]
                word |= np.uint64(v >= 0) * word_bit(j)
            out[i, w] = word


@njit(cache=True, nogil=True, fastmath=False)
def unpack_words(words, n_units, out, r0, r1):
    """``out[i, u]`` = bit ``u`` of row ``i`` (0 or 1), rows ``r0:r1``.

    A word at a time, each unit by its own shift (a loop that vectorises).
    """
    shifts = _unit_shifts()
    one = np.uint64(1)
    for i in range(r0, r1):
        row = out[i]
        for w in range(-(-n_units // 64)):
            word = words[i, w]
            dst = row[64 * w : min(64 * w + 64, n_units)]
            for j in range(len(dst)):
                dst[j] = (word >> shifts[j]) & one


@njit(cache=True, nogil=True, fastmath=False)
def channel_shares(words, pixels, n_units, out, r0, r1):
    """``out[s, u]`` = the share of the `pixels` of sample `s` whose unit `u`
    is 1, samples ``r0:r1``: the global average pool of a bit map.

    `words` holds ``n * pixels`` rows of one pixel each (the units of a
    pixel packed as by :func:`unpack_words`), sample after sample; `out` is
    float32 of shape ``(n, n_units)``. Each share is the integer count in
    float32 divided by ``float32(pixels)``, as numpy divides
    ``counts.astype(float32) / float32(pixels)``. The counts go a word at a
    time, each unit by its own shift (a loop that vectorises), with no
    unpacked copy of the maps.
    """
    shifts = _unit_shifts()
    one = np.uint64(1)
    acc = np.empty(n_units, np.int64)
    area = np.float32(pixels)
    for s in range(r0, r1):
        for u in range(n_units):
            acc[u] = 0
        for p in range(s * pixels, (s + 1) * pixels):
            for w in range(-(-n_units // 64)):
                word = words[p, w]
                dst = acc[64 * w : min(64 * w + 64, n_units)]
                for j in range(len(dst)):
                    dst[j] += np.int64((word >> shifts[j]) & one)
        for u in range(n_units):
            out[s, u] = np.float32(acc[u]) / area


@njit(cache=True, nogil=True, fastmath=False)
def bit_accumulate(xw, wt, out, r0, r1, c0, c1):
    """Real weights x bits: ``out[i] += sum of wt[u] over the set bits u of row i``.

    The weight rows of the active units are added in increasing unit order,
    in the dtype of `out` (float32, or float64 for a readout). The rows of a
    block share each weight row they use, so a weight row is read once per
    block. Best for a few rows: a weight row costs one vector add per active
    bit, against a multiply-add per bit, active or not, for a matrix product.

    Parameters
    ----------
    xw : ndarray of shape (n_rows, n_words), dtype uint64
        Packed input bits.
    wt : ndarray of shape (n_in, n_out)
        Weights, one row per input unit (the transpose of a torch weight).
    out : ndarray of shape (n_rows, n_out)
        Accumulated into (initialise it with the bias). `wt` and `out`
        C-contiguous.
    r0, r1, c0, c1 : int
        Row and output-column ranges.
    """
    n_words = xw.shape[1]
    n_in, w_stride = wt.shape
    o_stride = out.shape[1]
    # flat arrays, unsigned indices: a row view per active bit and row (each
    # counted in and out) had taken half the time of a narrow layer (256 ->
    # 10 outputs, 1024 rows, 5% set: 376 -> 190 us)
    wf, of = wt.reshape(-1), out.reshape(-1)
    n = c1 - c0
    for b0 in range(r0, r1, ROW_BLOCK):
        b1 = min(b0 + ROW_BLOCK, r1)
        for w in range(n_words):
            any_bits = np.uint64(0)
            for i in range(b0, b1):
                any_bits |= xw[i, w]
            while any_bits:
                low = any_bits & (~any_bits + np.uint64(1))
                pos = popcount64(low - np.uint64(1))
                any_bits ^= low
                u = unit_of_bit(w, pos)
                if u >= n_in:
                    continue
                src = np.uint64(u * w_stride + c0)
                for i in range(b0, b1):
                    if xw[i, w] & low:
                        dst = np.uint64(i * o_stride + c0)
                        for c in range(n):
                            of[dst + np.uint64(c)] += wf[src + np.uint64(c)]
