"""16-bit weights on bits by ``vpmaddwd``: exact int32 sums for many rows (AVX2).

A layer of real weights on bits followed by a step (``bit_dense_step``, and
``bit_conv2d_step`` on the patches of its maps, :func:`patch_pairs`) sums
the quantised 16-bit weights of the active bits exactly in int32 and
certifies the step from them (:func:`~sksign.deploy._kernels._step.step_int16`
explains the bound). For a few rows :func:`step_int16` adds the weight rows
of the active bits; for many rows the sums are a matrix product of the 0/1
rows with the int16 weights, which AVX2's ``vpmaddwd`` computes 16
multiply-adds an instruction (two adjacent inputs per int32 lane), twice the
multiply-adds of a float32 FMA of the same width (32 in 512-bit vectors
where the CPU has AVX-512 BW).

Layouts (made by :func:`pair_weights` and :func:`pair_bits`): the inputs in
pairs, ``x32[i, k]`` = unit ``2k`` of row ``i`` in the low 16 bits and unit
``2k + 1`` in the high 16 (0 or 1 each); the weights by blocks of
:data:`BLOCK_OUTPUTS` outputs, ``w32[b * n_pairs + k, j]`` = the int16
weights of inputs ``2k`` (low) and ``2k + 1`` (high) for output
``16 b + j``. A tile of :data:`BLOCK_ROWS` rows by one block of outputs
keeps its 12 vectors of sums in registers over all the pairs (LLVM IR with
the x86 AVX2 intrinsic, so it compiles only where the CPU has AVX2).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from sksign.deploy._kernels._bits import flag_buffers, pack_flags, unit_of_bit, word_bit
from sksign.deploy._kernels._conv import origins, tap_offset
from sksign.kernels import (
    counted_loop,
    llvm_function,
    popcount64,
    splat,
    target_has,
)

__all__ = [
    "BLOCK_OUTPUTS",
    "BLOCK_ROWS",
    "MAX_INPUTS",
    "PAIRS_MIN_CHANNELS",
    "active_units",
    "coarse_flags",
    "conv_step_by_pairs",
    "exact_pair_sum",
    "pair_bits",
    "pair_sums",
    "pair_weights",
    "patch_pairs",
    "patch_words",
    "step_buffers",
    "step_by_pairs",
    "step_pairs",
]

#: Rows of a tile (each with its own two vectors of sums).
BLOCK_ROWS = 5
#: Outputs of a tile: two vectors of eight int32 sums.
BLOCK_OUTPUTS = 16
#: Output rows whose patch origins :func:`patch_pairs` finds at once.
PATCH_BLOCK = 64
#: Most inputs whose int16 weights (|q| <= 32767) sum exactly in int32.
MAX_INPUTS = 65536

#: Output channels from which a conv step goes by these products
#: (``bit_conv2d_step``, where the CPU has AVX2 and the layer no look-up
#: tables, :data:`~sksign.deploy._kernels._lut.LUT_MIN_CHANNELS`): narrower
#: layers sum faster by their float32 tables. With AVX-512 (tables added 16
#: floats a vector, products in 512-bit vectors; step ResNet-18 on an Intel
#: Xeon) the tables win at 64 channels (2.9 -> 1.4 ms and 4.7 -> 2.2 ms at
#: batch 64, even at batch 1) and the products at 128 (1.3 -> 1.1 ms and
#: 2.9 -> 2.2 ms at batch 64, 20% at batch 1). With AVX2 the tables win at
#: 64 channels too, since they were vectorised: the 32 -> 64 step conv of a
#: WRN-10-2 at batch 1 took 65 us by tables against 99 by products (AMD
#: EPYC, Zen 4, AVX2 paths), and with the AVX2 paths forced on an Intel Xeon
#: whole nets ran faster at 128 than at 64 (same process, alternated, best
#: of 5 rounds: WRN-10-2 0.813 -> 0.760 ms at batch 1 and 46.3 -> 39.3 ms at
#: 64, step ResNet-18 0.922 -> 0.906 and 39.5 -> 35.6 ms). An earlier
#: measurement on a Zen 3 (products 7-10% faster whole at batch 1 from 64
#: channels) predates the vectorised tables.
PAIRS_MIN_CHANNELS = 128

#: int32 sums of a ``vpmaddwd``: 16 where the CPU has AVX-512 BW (a block of
#: outputs in one 512-bit vector a row: half the instructions, and 10% off
#: the Heaviside hidden layer 1024 x 1024 at batch 64 on an Intel Xeon,
#: 0.86 -> 0.77 ms), else 8 (two 256-bit vectors). It runs near one
#: instruction a cycle there (97-99 G multiply-adds a second: one port takes
#: 512-bit integer products; LLVM already fuses each product and its add
#: into a ``vpdpwssd`` where the CPU has VNNI, and ten chains of sums
#: instead of five measured the same).
_LANES = 16 if target_has("avx512bw") else 8
_VECTORS = BLOCK_OUTPUTS // _LANES


def pair_weights(q):
    """``w32`` of the module docstring from int16 weights `q` (n_in, n_out)."""
    n_in, n_out = q.shape
    n_pairs = -(-n_in // 2)
    n_blocks = -(-n_out // BLOCK_OUTPUTS)
    padded = np.zeros((2 * n_pairs, n_blocks * BLOCK_OUTPUTS), np.int16)
    padded[:n_in, :n_out] = q
    blocks = padded.reshape(n_pairs, 2, n_blocks, BLOCK_OUTPUTS)
    pairs = np.ascontiguousarray(blocks.transpose(2, 0, 3, 1))
    return pairs.view(np.int32).reshape(n_blocks * n_pairs, BLOCK_OUTPUTS)


def _byte_pairs():
    """``[b, j]``: the pair ``j`` of the 8 units of a byte `b` of a word
    (unit ``t`` is bit ``7 - t``: the layout of ``_bits``)."""
    table = np.zeros((256, 4), np.int32)
    for b in range(256):
        for t in range(8):
            if b >> (7 - t) & 1:
                table[b, t // 2] |= 1 << (16 * (t % 2))
    return table


_BYTE_PAIRS = _byte_pairs()


@njit(cache=True, nogil=True, fastmath=False)
def pair_bits(xw, n_in, x32, r0, r1):
    """``x32`` of the module docstring from packed rows ``xw[r0:r1]``.

    `x32` has ``ceil(n_in / 2)`` columns; units past `n_in` are 0. A whole
    byte of a row gives its four pairs by one look-up (:func:`_byte_pairs`),
    the units of a last partial byte one by one.
    """
    n_pairs = x32.shape[1]
    table = _BYTE_PAIRS
    n_bytes = n_in // 8
    for i in range(r0, r1):
        for b in range(n_bytes):
            word = xw[i, b // 8]
            byte = (word >> np.uint64(8 * (b % 8))) & np.uint64(255)
            for q in range(4):
                x32[i, 4 * b + q] = table[byte, q]
        for k in range(4 * n_bytes, n_pairs):
            lo = 2 * k
            hi = lo + 1
            b0 = (xw[i, lo // 64] & word_bit(lo)) != 0
            b1 = hi < n_in and (xw[i, hi // 64] & word_bit(hi)) != 0
            x32[i, k] = np.int32(b0) | (np.int32(b1) << 16)


def _pmaddwd(builder):
    """``vpmaddwd`` of :data:`_LANES` int32 lanes: ``(function, int16 vector
    type, int32 vector type)``."""
    i16s = ir.VectorType(ir.IntType(16), 2 * _LANES)
    i32s = ir.VectorType(ir.IntType(32), _LANES)
    name = "llvm.x86.avx512.pmaddw.d.512" if _LANES == 16 else "llvm.x86.avx2.pmadd.wd"
    return llvm_function(builder, name, i32s, [i16s, i16s]), i16s, i32s


@intrinsic
def _tile_sums(typingctx, sums, x32, w32, i0, block):
    """``sums[i0 + r, 16 block + j]`` = the int32 sums of the tile (see module).

    Rows ``i0 .. i0 + BLOCK_ROWS - 1`` of `x32` (all in range), block `block`
    of `w32`; `sums` int32 of shape (rows, n_blocks * 16), all C-contiguous.
    """
    if not all(
        isinstance(a, types.Array) and a.dtype == types.int32 for a in (sums, x32, w32)
    ):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        pmaddwd, i16s, i32s = _pmaddwd(builder)
        arr = [
            context.make_array(sig.args[p])(context, builder, args[p])
            for p in (0, 1, 2)
        ]
        out, xs, ws = (a.data for a in arr)
        n_pairs = builder.extract_value(arr[1].shape, 1)
        out_width = builder.extract_value(arr[0].shape, 1)
        i0, block = (
            context.cast(builder, args[p], sig.args[p], types.int64) for p in (3, 4)
        )
        w_base = builder.mul(
            builder.mul(block, n_pairs), ir.Constant(i64, BLOCK_OUTPUTS)
        )
        zero = ir.Constant(i32s, [0] * _LANES)
        keys = [(r, v) for r in range(BLOCK_ROWS) for v in range(_VECTORS)]
        x_rows = [
            builder.mul(builder.add(i0, ir.Constant(i64, r)), n_pairs)
            for r in range(BLOCK_ROWS)
        ]

        def add_pair(k, values):
            """The products of pair `k` added to the running sums."""
            sums = dict(zip(keys, values, strict=True))
            w_row = builder.add(w_base, builder.mul(k, ir.Constant(i64, BLOCK_OUTPUTS)))
            weights = []
            for v in range(_VECTORS):
                at = builder.add(w_row, ir.Constant(i64, _LANES * v))
                p = builder.bitcast(builder.gep(ws, [at]), i32s.as_pointer())
                weights.append(builder.bitcast(builder.load(p, align=4), i16s))
            new = []
            for r in range(BLOCK_ROWS):
                x = builder.load(builder.gep(xs, [builder.add(x_rows[r], k)]), align=4)
                x = builder.bitcast(splat(builder, x, i32s), i16s)
                for v in range(_VECTORS):
                    prod = builder.call(pmaddwd, [x, weights[v]])
                    new.append(builder.add(sums[r, v], prod))
            return new

        initial = [zero] * len(keys)
        finals = counted_loop(builder, n_pairs, initial, add_pair, "pairs")
        col = builder.mul(block, ir.Constant(i64, BLOCK_OUTPUTS))
        for (r, v), value in zip(keys, finals, strict=True):
            row = builder.mul(builder.add(i0, ir.Constant(i64, r)), out_width)
            at = builder.add(builder.add(row, col), ir.Constant(i64, _LANES * v))
            p = builder.bitcast(builder.gep(out, [at]), i32s.as_pointer())
            builder.store(value, p, align=4)
        return context.get_dummy_value()

    return types.void(sums, x32, w32, i0, block), codegen


@njit(cache=True, nogil=True, fastmath=False)
def pair_sums(x32, w32, sums, r0, r1):
    """``sums[r0:r1]`` = the int32 products of rows ``x32[r0:r1]`` with `w32`.

    `r0` and `r1` multiples of :data:`BLOCK_ROWS` (the rows of `x32` padded
    with zeros to one). Each block of outputs goes over every tile of rows
    before the next (its weights stay in cache). It runs near the
    ``vpmaddwd`` peak with or without blocking the rows and pairs for the
    caches (measured: 64-78 G multiply-adds a second either way, widths 1024
    and 4096, 64 and 1024 rows, AMD Zen 3), so it does not. Needs AVX2.
    """
    n_pairs = x32.shape[1]
    n_blocks = w32.shape[0] // max(n_pairs, 1)
    for block in range(n_blocks):
        for i0 in range(r0, r1, BLOCK_ROWS):
            _tile_sums(sums, x32, w32, i0, block)


@njit(cache=True, nogil=True, fastmath=False)
def step_by_pairs(xw, n_in, w32, scale, threshold, w_rows, x32, sums, out, t0, t1):
    """The certified step of tiles ``t0 .. t1 - 1`` of rows, in one pass.

    :func:`pair_bits`, :func:`pair_sums` and :func:`step_pairs` on rows
    ``t0 * BLOCK_ROWS`` to ``t1 * BLOCK_ROWS`` (cut to the rows of `xw`):
    what one thread does, with one hand-over per layer. `x32` and `sums` have
    ``BLOCK_ROWS`` times as many rows as there are tiles.
    """
    r0, r1 = t0 * BLOCK_ROWS, t1 * BLOCK_ROWS
    rows = min(r1, xw.shape[0])
    pair_bits(xw, n_in, x32, r0, rows)
    pair_sums(x32, w32, sums, r0, r1)
    step_pairs(sums, x32, scale, threshold, w_rows, out, r0, rows)


@njit(cache=True, nogil=True, inline="always")
def active_units(x32, i):
    """Number of 1 units of row `i` of paired bits."""
    k = 0
    for p in range(x32.shape[1]):
        v = x32[i, p]
        k += (v & 0xFFFF) + (v >> 16)
    return k


@njit(cache=True, nogil=True, inline="always")
def _unit(x32, i, u):
    """Unit `u` (0 or 1) of row `i` of paired bits, as a float64."""
    return np.float64((x32[i, u >> 1] >> (16 * (u & 1))) & 0xFFFF)


@njit(cache=True, nogil=True, fastmath=False)
def exact_pair_sum(x32, i, w_rows, o):
    """``sum(w_rows[o, u])`` over the 1 units u of row `i`, in float64.

    In unit order over the layer's ``w_rows.shape[1]`` units (never the
    padding unit of an odd count: it has no weight); a 0 unit adds
    ``+-0.0`` (the sum never is ``-0.0``, so this is the sum of the 1 units
    alone) rather than branching on a coin toss.
    """
    s = 0.0
    for u in range(w_rows.shape[1]):
        s += np.float64(w_rows[o, u]) * _unit(x32, i, u)
    return s


@njit(cache=True, nogil=True, fastmath=False)
def _exact_pair_sums4(x32, i, w_rows, outs, at):
    """:func:`exact_pair_sum` of the outputs ``outs[at : at + 4]`` at once.

    Four independent sums, each in unit order (the same float64 sums one by
    one), overlap their adds: a lone sum waits on each add before the next.
    """
    oa, ob, oc, od = outs[at], outs[at + 1], outs[at + 2], outs[at + 3]
    sa = sb = sc = sd = 0.0
    for u in range(w_rows.shape[1]):
        bit = _unit(x32, i, u)
        sa += np.float64(w_rows[oa, u]) * bit
        sb += np.float64(w_rows[ob, u]) * bit
        sc += np.float64(w_rows[oc, u]) * bit
        sd += np.float64(w_rows[od, u]) * bit
    return sa, sb, sc, sd


@njit(cache=True, nogil=True)
def step_buffers(threshold, n_words):
    """The thresholds in float64 and the buffers of a certified step: per
    output a 0/1 flag of its bit and of its doubt (set by compares that
    vectorise, :func:`coarse_flags`) with their words
    (:func:`~sksign.deploy._kernels._bits.flag_buffers`), and one row of
    words of the outputs in doubt."""
    t64 = np.empty(threshold.shape[0], np.float64)
    for o in range(threshold.shape[0]):
        t64[o] = threshold[o]
    fire_words, fire_flags = flag_buffers(n_words)
    near_words, near_flags = flag_buffers(n_words)
    doubt = np.empty((1, n_words), np.uint64)
    return t64, fire_words, fire_flags, near_words, near_flags, doubt


#: Outputs :func:`coarse_flags` takes in one vector of doubles (512 bits: the
#: loop vectoriser keeps to 256 on these CPUs, and the flags took a fifth of
#: a 256 x 256 step layer's time).
COARSE_LANES = 8


@intrinsic
def _coarse_vector(typingctx, row_sums, scale, t64, half, fire_flags, near_flags, o):
    """:func:`coarse_flags` of outputs ``o .. o + COARSE_LANES - 1`` in one
    vector of doubles, the same operations in the same order (no fused
    multiply-add); returns the number in doubt. Contiguous arrays (not
    checked), in range."""
    kinds = (types.int32, types.float64, types.float64, None, types.uint8, types.uint8)
    arrays = (row_sums, scale, t64, None, fire_flags, near_flags)
    if not all(
        a is None or (isinstance(a, types.Array) and a.dtype == k)
        for a, k in zip(arrays, kinds, strict=True)
    ) or not isinstance(half, types.Float):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        n = COARSE_LANES
        f64, i8 = ir.DoubleType(), ir.IntType(8)
        vd = ir.VectorType(f64, n)
        at = context.cast(builder, args[6], sig.args[6], types.int64)
        data = {
            p: context.make_array(sig.args[p])(context, builder, args[p]).data
            for p in (0, 1, 2, 4, 5)
        }

        def load(p, kind, align):  # aligned as the elements only
            ptr = builder.gep(data[p], [at])
            vector = builder.bitcast(ptr, ir.VectorType(kind, n).as_pointer())
            return builder.load(vector, align=align)

        def store(p, flags):
            ptr = builder.bitcast(
                builder.gep(data[p], [at]), ir.VectorType(i8, n).as_pointer()
            )
            builder.store(builder.zext(flags, ir.VectorType(i8, n)), ptr, align=1)

        sums = builder.sitofp(load(0, ir.IntType(32), 4), vd)
        scale_v, t_v = load(1, f64, 8), load(2, f64, 8)
        half_v = splat(
            builder, context.cast(builder, args[3], sig.args[3], types.float64), vd
        )
        v = builder.fsub(builder.fmul(scale_v, sums), t_v)
        store(4, builder.fcmp_ordered(">", v, ir.Constant(vd, [0.0] * n)))
        fabs = llvm_function(builder, f"llvm.fabs.v{n}f64", vd, [vd])
        bound = builder.fadd(
            builder.fmul(half_v, scale_v), ir.Constant(vd, [1e-300] * n)
        )
        close = builder.fcmp_ordered("<=", builder.call(fabs, [v]), bound)
        store(5, close)
        bits = builder.bitcast(close, ir.IntType(n))
        ctpop = llvm_function(
            builder, f"llvm.ctpop.i{n}", ir.IntType(n), [ir.IntType(n)]
        )
        return builder.zext(builder.call(ctpop, [bits]), i64)

    sig = types.int64(row_sums, scale, t64, half, fire_flags, near_flags, o)
    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def coarse_flags(row_sums, scale, t64, half, fire_flags, near_flags):
    """Per output the flag of ``scale * sum > threshold`` and of its doubt
    (within ``half * scale`` of it: `half` is half a step of each active
    unit's rounding); the number in doubt. :data:`COARSE_LANES` outputs a
    vector where the arrays are contiguous, the rest one by one."""
    unsure = 0
    n = t64.shape[0]
    o = 0
    if (
        row_sums.strides[0] == 4
        and scale.strides[0] == 8
        and t64.strides[0] == 8
        and fire_flags.strides[0] == 1
        and near_flags.strides[0] == 1
    ):
        while o + COARSE_LANES <= n:
            unsure += _coarse_vector(
                row_sums, scale, t64, half, fire_flags, near_flags, o
            )
            o += COARSE_LANES
    for j in range(o, n):
        v = scale[j] * row_sums[j] - t64[j]
        fire_flags[j] = v > 0
        close = abs(v) <= half * scale[j] + 1e-300
        near_flags[j] = close
        unsure += close
    return unsure


@njit(cache=True, nogil=True, fastmath=False)
def step_pairs(sums, x32, scale, threshold, w_rows, out, r0, r1):
    """The step of the exact int32 sums of 16-bit weights, certified.

    As :func:`~sksign.deploy._kernels._step.step_int16` does with its sums:
    ``scale * sums`` lies within ``k * scale / 2`` of the exact sum of the
    active float32 weights (``k`` active bits, counted in `x32`); the bit is
    set from it where that leaves no doubt (0/1 flags with no branch on the
    bit, packed into words by :func:`~sksign.deploy._kernels._bits.pack_flags`),
    else from the float64 sum of the weights: about one output in a thousand
    at 1024 inputs, so the outputs in doubt are flagged alike, then summed
    four at a time (:func:`_exact_pair_sums4`).
    """
    n_out, n_words = threshold.shape[0], out.shape[1]
    t64, fire_words, fire_flags, near_words, near_flags, doubt = step_buffers(
        threshold, n_words
    )
    outs = np.empty(n_out + 3, np.int64)  # the outputs in doubt, padded to 4
    for i in range(r0, r1):
        half = active_units(x32, i) * (0.5 + 1e-9)
        unsure = coarse_flags(sums[i], scale, t64, half, fire_flags, near_flags)
        pack_flags(fire_words, out, i)
        if unsure == 0:
            continue
        pack_flags(near_words, doubt, 0)
        c = 0
        for w in range(n_words):
            bits = doubt[0, w]
            while bits:
                low = bits & (~bits + np.uint64(1))
                bits ^= low
                outs[c] = unit_of_bit(w, popcount64(low - np.uint64(1)))
                c += 1
        for e in range(c, c + 3):
            outs[e] = outs[c - 1]
        g = 0
        while g < c:
            if c - g >= 2:
                s = _exact_pair_sums4(x32, i, w_rows, outs, g)
                m = min(4, c - g)
            else:
                s = (exact_pair_sum(x32, i, w_rows, outs[g]), 0.0, 0.0, 0.0)
                m = 1
            for e in range(m):
                o = outs[g + e]
                bit = word_bit(o)
                fire = np.uint64(s[e] >= t64[o])
                out[i, o // 64] = (out[i, o // 64] & ~bit) | (fire * bit)
            g += m


@njit(cache=True, nogil=True, fastmath=False)
def patch_pairs(x, g, channels, x32, r0, r1):
    """``x32`` of the patches of output rows ``r0:r1`` of a map convolution.

    Units in the order of the weight rows, ``(ky, kx, c)``; padded taps and
    units past the patch are 0. `x` the flat ``pixel_bits`` maps, `g` the
    geometry of :func:`~sksign.deploy._maps.map_geometry`. With channels in
    whole bytes, a byte of a pixel's word gives its four pairs by one
    look-up; else unit by unit.
    """
    k = g[3]
    table = _BYTE_PAIRS
    by_bytes = channels % 8 == 0
    org = np.empty((PATCH_BLOCK, 3), np.int64)
    for b0 in range(r0, r1, PATCH_BLOCK):
        nb = min(PATCH_BLOCK, r1 - b0)
        origins(b0, nb, g, org)
        for r in range(nb):
            row = b0 + r
            for p in range(x32.shape[1]):
                x32[row, p] = 0
            for ky in range(k):
                for kx in range(k):
                    o = tap_offset(org, r, ky, kx, g)
                    if o < 0:
                        continue
                    base = (ky * k + kx) * channels
                    if by_bytes:
                        for j in range(channels // 8):
                            word = x[o + j // 8]
                            byte = (word >> np.uint64(8 * (j % 8))) & np.uint64(255)
                            at = (base + 8 * j) >> 1
                            for q in range(4):
                                x32[row, at + q] = table[byte, q]
                        continue
                    for c in range(channels):
                        on = (x[o + c // 64] & word_bit(c)) != 0
                        u = base + c
                        x32[row, u >> 1] |= np.int32(on) << (16 * (u & 1))


@njit(cache=True, nogil=True, fastmath=False)
def patch_words(x, g, channels, pw, r0, r1):
    """Rows ``r0:r1`` of `pw`: the patch of each output row of a map
    convolution as a row of words in the unit layout, units in the order of
    the weight rows, ``(ky, kx, c)``; padded taps and units past the patch
    are 0. Channels in whole bytes (``channels % 8 == 0``), so a tap's
    bytes are its pixel's first ``channels / 8`` bytes, copied (whole words
    where the channels fill them).

    Flat indices in loops: slices of the rows (a view per tap, each counted
    in and out) took 4-6 times as long (Intel Xeon: 32 samples of 8 x 8
    maps of 128 channels, 0.48 against 0.09 ms)."""
    k, n_bytes, n_words = g[3], channels // 8, pw.shape[1]
    whole = n_bytes % 8 == 0  # each tap's bytes are whole words
    per_tap = n_bytes // 8 if whole else n_bytes
    xb, pf = x.view(np.uint8), pw.reshape(-1)
    pb = pf.view(np.uint8)
    org = np.empty((PATCH_BLOCK, 3), np.int64)
    for b0 in range(r0, r1, PATCH_BLOCK):
        origins(b0, min(PATCH_BLOCK, r1 - b0), g, org)
        for row in range(b0, min(b0 + PATCH_BLOCK, r1)):
            base = row * n_words
            for j in range(n_words):
                pf[base + j] = 0
            for tap in range(k * k):
                o = tap_offset(org, row - b0, tap // k, tap % k, g)
                if o < 0:
                    continue
                if whole:
                    at = base + tap * per_tap
                    for j in range(per_tap):
                        pf[at + j] = x[o + j]
                else:
                    at = 8 * base + tap * per_tap
                    for j in range(per_tap):
                        pb[at + j] = xb[8 * o + j]


@njit(cache=True, nogil=True, fastmath=False)
def conv_step_by_pairs(
    x, g, channels, w32, scale, threshold, w_rows, x32, sums, out, t0, t1
):
    """:func:`step_by_pairs` for a map convolution: the patches of tiles
    ``t0 .. t1 - 1`` of output rows (:func:`patch_pairs`), their products
    and their certified step, in one pass."""
    r0, r1 = t0 * BLOCK_ROWS, t1 * BLOCK_ROWS
    rows = min(r1, out.shape[0])
    patch_pairs(x, g, channels, x32, r0, rows)
    pair_sums(x32, w32, sums, r0, r1)
    step_pairs(sums, x32, scale, threshold, w_rows, out, r0, rows)
