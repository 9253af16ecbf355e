"""Real weights on bits by table look-ups in registers: ``vpermb`` + ``vpdpbusd``
(AVX-512 VBMI and VNNI) or ``vpshufb`` (AVX2).

Where the CPU has AVX-512 VBMI and VNNI, a layer of real weights on bits
followed by a step (``bit_dense_step``) sums its quantised weights of many
rows by table look-ups instead of multiply-adds. The weights are quantised
to 14 bits, ``q = rint(w / scale)`` with ``scale = max |w| / 8191`` per
output, so the partial sums of a group of 4 inputs fit in int16. For each
output and each quad of 4 such groups (16 inputs) a 64-byte table holds the
low bytes of the 4 groups' 16 partial sums, and another their high bytes
(signed): ``partial = 256 * high + low``. A row's quad is one int32 lane of
4 indices (one per group, ``16 * group + nibble``), so one ``vpermb`` looks up
the 4 bytes of 16 rows at once and one ``vpdpbusd`` adds them (times 1) to
the 16 rows' int32 sums: 16 rows x 16 inputs of one output in two
instructions per byte plane, 4 times the multiply-adds of a ``vpmaddwd``.
The sums are exact integers (``256 * sum(high) + sum(low)``), and the step is
certified from them as for the ``vpmaddwd`` products
(:func:`~sksign.deploy._kernels._madd.step_pairs`, with this scale: the
bound is 4 times wider, still about a few outputs in a thousand in doubt).

Layouts (made by :func:`lut_weights` and :func:`nibble_index`): the inputs by
their bit positions, word by word, 16 bits a quad (quad ``4 w + h`` is bits
``16 h .. 16 h + 15`` of word ``w``; a group is a nibble of it, bits in order
of significance); ``idx[b, 16 k + r]`` the int32 lane of quad ``k`` of row
``16 b + r``; ``tables[o, 128 k :][:64]`` the low bytes of quad ``k`` of
output ``o`` (``16 * group + value``), the next 64 the high bytes. A tile of
:data:`LUT_BLOCKS` blocks of 16 rows by :data:`LUT_OUTPUTS` outputs keeps
its sums in registers over a run of :data:`LUT_QUADS` quads (whose tables,
24 KB, stay in L1 while every tile of rows reads them).

Where the CPU has AVX2 but no AVX-512 BW (:data:`LUT_KIND` ``"avx2"``), the
same tables are read by ``vpshufb``, which looks up 16-byte tables, one per
128-bit lane: a quad's 64 index bytes lie group by group (byte ``16 g + r``
is group ``g`` of row ``r`` of the block), so one ``vpshufb`` looks up 2
groups of 16 rows from the 32 table bytes of those groups, and the bytes
are added as int16 words
(:func:`~sksign.deploy._kernels._lut_shuffle.shuffle_tile`): 16 rows x 8
inputs of one output in 8 instructions for both byte planes, about twice the
multiply-adds of AVX2's ``vpmaddwd`` per instruction. The sums are the
same integers.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from sksign.deploy._kernels._bits import pack_flags, unit_of_bit, word_bit
from sksign.deploy._kernels._lut_shuffle import shuffle_tile
from sksign.deploy._kernels._madd import (
    active_units,
    coarse_flags,
    exact_pair_sum,
    pair_bits,
    step_buffers,
)
from sksign.kernels import (
    counted_loop,
    load_vector,
    popcount64,
    prefetch,
    target_has,
)

__all__ = [
    "LUT_BLOCKS",
    "LUT_KIND",
    "LUT_MIN_CHANNELS",
    "LUT_OUTPUTS",
    "LUT_PREFETCH_BYTES",
    "LUT_QUADS",
    "LUT_ROWS",
    "LUT_SPLIT_OUTPUTS",
    "LUT_TOP",
    "fine_sum",
    "lut_available",
    "lut_inputs",
    "lut_sums",
    "lut_weights",
    "nibble_index",
    "step_by_lut",
    "step_lut",
]

#: Blocks of 16 rows of a tile (each with its own vectors of sums).
LUT_BLOCKS = 4
#: Rows of a tile.
LUT_ROWS = 16 * LUT_BLOCKS
#: Outputs of a tile: with two byte planes, 2 x 4 x 3 = 24 vectors of sums
#: in registers (4 blocks x 3 outputs measured 296 G multiply-adds a second
#: at 1024 x 1024 and 1024 rows on an Intel Xeon, against 127-224 G for
#: 1 x 8, 2 x 4, 2 x 6 and 3 x 4 blocks x outputs: the tables of a tile's
#: outputs must stay in L1).
LUT_OUTPUTS = 3
#: Outputs of a thread's share where the threads split the outputs (a
#: multiple of 64 and of :data:`LUT_OUTPUTS`).
LUT_SPLIT_OUTPUTS = 192
#: Quads of a run of look-ups (their tables: 3 x 64 x 128 bytes = 24 KB),
#: where a call has several tiles of rows (each run's tables then serve every
#: tile from L1); a call of one tile takes all its quads in one run, its sums
#: stored once (with ``vpermb``: ``vpshufb``'s int16 sums allow 128 quads).
LUT_QUADS = 64
#: How far ahead of the quad being summed the ``vpermb`` kernel asks for
#: each output's tables (bytes: 8 quads). A batch of 64 rows of a 4096 x
#: 4096 layer reads its 134 MB of tables once, at the memory's pace: one
#: thread, Intel Xeon, 12.2 -> 10.6-10.8 ms with 1024 bytes (11.1-11.5 at
#: 512, 2048 or 4096; 10.2-10.9 at 768), 1024 x 1024 at 64 to 1024 rows
#: the same or 2-5% faster.
LUT_PREFETCH_BYTES = 1024
#: Output channels from which a conv step (``bit_conv2d_step``) sums by
#: look-up (measured on an AMD EPYC, Zen 4, WRN-10-2 of width 16 at batch 1:
#: its 32 -> 64 step conv on 256 rows took 65 us by float tables, 99 us by
#: ``vpmaddwd`` (AVX2) and more by ``vpshufb`` look-ups; its 64 -> 128 one
#: on 64 rows 77 us by ``vpmaddwd``, 70-71 us by ``vpshufb``).
LUT_MIN_CHANNELS = 128
#: Largest quantised weight: four of them sum within int16.
LUT_TOP = 8191
#: Largest residual weight but one (:func:`lut_weights`): a residual of
#: ``scale / 2`` maps to it, and float64 rounding may add one.
FINE_TOP = 32766
#: The index lane of a row whose bits are all 0 (each group's value 0).
_EMPTY = 0x30201000

#: The look-up kernel numba compiles for here: ``"vbmi"`` where the CPU has
#: AVX-512 VBMI and VNNI, ``"avx2"`` where it has AVX2 but no AVX-512 BW,
#: else None (no look-ups).
LUT_KIND = (
    "vbmi"
    if target_has("avx512vbmi") and target_has("avx512vnni")
    else "avx2"
    if target_has("avx2") and not target_has("avx512bw")
    else None
)
#: Whether the index bytes of a quad lie group by group (``vpshufb``).
_BY_GROUP = LUT_KIND == "avx2"


def lut_available():
    """Whether numba compiles for a CPU with one of the look-up kernels:
    ``vpermb`` and ``vpdpbusd`` (AVX-512 VBMI and VNNI) or ``vpshufb``
    (AVX2, where the CPU has no AVX-512 BW: there ``vpmaddwd`` multiplies
    512-bit vectors instead), :data:`LUT_KIND`."""
    return LUT_KIND is not None


def step_products():
    """How layers of real weights on bits followed by a step multiply many
    rows here, in words (the packed summary's ``step_products``)."""
    if LUT_KIND == "vbmi":
        return (
            "14-bit weight tables of 4-bit groups by vpermb + vpdpbusd "
            "(AVX-512 VBMI/VNNI) from 32 rows, int16 x bits by vpmaddwd below"
        )
    if LUT_KIND == "avx2":
        return (
            "14-bit weight tables of 4-bit groups by vpshufb + int16 adds "
            "(AVX2) from 128 rows (convolutions from 32), int16 x bits by "
            "vpmaddwd below"
        )
    if target_has("avx2"):
        width = "AVX-512 BW" if target_has("avx512bw") else "AVX2"
        return f"int16 x bits by vpmaddwd ({width}), exact int32"
    return "float32 BLAS of the unpacked bits"


def _quad_units(n_words):
    """``(4 * n_words, 4, 4)`` int64: the unit at bit ``4 g + i`` of each
    quad (group g, bit i), in the unit layout of
    :mod:`sksign.deploy._kernels._bits`."""
    k = np.arange(4 * n_words)
    g = np.arange(4)
    i = np.arange(4)
    word = (k // 4)[:, None, None]
    pos = (16 * (k % 4))[:, None, None] + 4 * g[None, :, None] + i[None, None, :]
    return unit_of_bit.py_func(word, pos)


def lut_weights(wt, chunk=256):
    """``(tables, scale, fine, fine_scale)`` of the float32 weights `wt`
    (inputs x outputs): the byte tables of the module docstring, the scale
    per output (float64), and the residual weights that certify the steps in
    doubt (:func:`step_lut`).

    ``q = rint(wt / scale)``, ``scale = max |wt| / LUT_TOP`` per output (1
    for an all-zero output), so ``|wt - q * scale| <= scale / 2``; ``fine =
    rint((wt - q * scale) / fine_scale)`` as int16, one row per output,
    inputs padded to an even count, with ``fine_scale = scale / (2 *
    FINE_TOP)``, so ``|wt - q * scale - fine * fine_scale| <= fine_scale / 2``
    (up to float64 rounding, which :func:`step_lut` allows for). The tables
    take 8 bytes per input (in whole words) and output (padded to
    :data:`LUT_OUTPUTS`); they are made `chunk` outputs at a time.
    """
    n_in, n_out = wt.shape
    n_words = -(-n_in // 64)
    w64 = wt.astype(np.float64)
    top = np.abs(w64).max(axis=0) if n_in else np.zeros(n_out)
    scale = np.where(top > 0, top / LUT_TOP, 1.0)
    fine_scale = scale / (2 * FINE_TOP)
    units = _quad_units(n_words)
    inside = units < n_in
    units = np.where(inside, units, 0)
    # bits of each of the 16 values of a group
    value_bits = (np.arange(16)[:, None] >> np.arange(4)[None, :]) & 1
    n_out_p = -(-n_out // LUT_OUTPUTS) * LUT_OUTPUTS
    tables = np.zeros((n_out_p, 4 * n_words, 2, 64), np.uint8)
    flip = np.uint8(128 if _BY_GROUP else 0)  # vpshufb adds the high bytes unsigned
    tables[:, :, 1] = flip
    fine = np.zeros((n_out, n_in + n_in % 2), np.int16)
    for o0 in range(0, n_out, chunk):
        o1 = min(n_out, o0 + chunk)
        q = np.clip(np.rint(w64[:, o0:o1] / scale[o0:o1]), -LUT_TOP, LUT_TOP)
        rest = (w64[:, o0:o1] - q * scale[o0:o1]) / fine_scale[o0:o1]
        fine[o0:o1, :n_in] = np.clip(np.rint(rest), -FINE_TOP - 1, FINE_TOP + 1).T
        q = q.astype(np.int64)
        per_bit = np.where(inside[..., None], q[units], 0)  # (quads, 4, 4, outs)
        partial = sum(  # (quads, 4, 16, outs): each group's 16 partial sums
            value_bits[None, None, :, i, None] * per_bit[:, :, i, None, :]
            for i in range(4)
        ).transpose(3, 0, 1, 2)
        tables[o0:o1, :, 0] = (partial & 255).reshape(o1 - o0, -1, 64)
        high = (partial >> 8).astype(np.int8).view(np.uint8) ^ flip
        tables[o0:o1, :, 1] = high.reshape(o1 - o0, -1, 64)
    return tables.reshape(n_out_p, -1), scale, fine, fine_scale


@njit(cache=True, nogil=True, inline="always")
def _quad_lane(xw, r, k, r1):
    """The index lane of quad `k` of row `r` (of the module docstring; the
    lane of no bits set from row `r1` on)."""
    v = np.uint64(0)
    if r < r1:
        c = (xw[r, k // 4] >> np.uint64(16 * (k % 4))) & np.uint64(0xFFFF)
        v = (
            (c & np.uint64(0xF))
            | ((c & np.uint64(0xF0)) << np.uint64(4))
            | ((c & np.uint64(0xF00)) << np.uint64(8))
            | ((c & np.uint64(0xF000)) << np.uint64(12))
        )
    return v | np.uint64(_EMPTY)


@njit(cache=True, nogil=True, fastmath=False)
def nibble_index(xw, idx, r0, r1, r_end):
    """``idx`` of the module docstring for rows ``xw[r0:r1]``; rows ``r1`` to
    `r_end` (the padding of the last tile) look up zeros.

    Where the look-ups are ``vpshufb`` (:data:`LUT_KIND` ``"avx2"``) the 64
    bytes of a block's quad lie group by group instead: byte ``16 g + r``
    is group ``g`` of the block's row ``r`` (`r0` and `r_end` then
    multiples of 16, as the tiles' rows are).
    """
    n_quads = idx.shape[1] // 16
    if not _BY_GROUP:
        for r in range(r0, r_end):
            b, lane = divmod(r, 16)
            for k in range(n_quads):
                idx[b, 16 * k + lane] = np.uint32(_quad_lane(xw, r, k, r1))
        return
    nibbles = np.uint64(0x000F000F000F000F)
    for b in range(r0 // 16, r_end // 16):
        for k in range(n_quads):
            word, shift = k // 4, np.uint64(16 * (k % 4))
            for j in range(4):
                # the quad's 16 bits of rows 4 j .. 4 j + 3, one 16-bit field each
                x = np.uint64(0)
                for i in range(4):
                    r = 16 * b + 4 * j + i
                    if r < r1:
                        c = (xw[r, word] >> shift) & np.uint64(0xFFFF)
                        x |= c << np.uint64(16 * i)
                for g in range(4):
                    y = (x >> np.uint64(4 * g)) & nibbles
                    y = (y | (y >> np.uint64(8))) & np.uint64(0x0000FFFF0000FFFF)
                    y = (y | (y >> np.uint64(16))) & np.uint64(0xFFFFFFFF)
                    idx[b, 16 * k + 4 * g + j] = np.uint32(
                        y | np.uint64(0x10101010 * g)
                    )


@intrinsic(prefer_literal=True)
def _lut_tile(typingctx, sums, idx, tables, at, add):
    """``sums[16 b0 + 16 j + r, o0 + t]`` += the sums of quads ``k0 .. k1 - 1``
    (= them, with no load of the old sums, where the literal `add` is False).

    `at` is ``(b0, o0, k0, k1)``: blocks of rows ``b0 .. b0 + LUT_BLOCKS - 1``
    of `idx` (uint32), outputs ``o0 .. o0 + LUT_OUTPUTS - 1`` of `tables`
    (uint8), `sums` int32; all C-contiguous and in range (not checked). By
    ``vpermb`` + ``vpdpbusd``, or ``vpshufb`` where :data:`LUT_KIND` is
    ``"avx2"`` (:func:`~sksign.deploy._kernels._lut_shuffle.shuffle_tile`).
    """
    arrays = (sums, idx, tables)
    kinds = (types.int32, types.uint32, types.uint8)
    if not all(
        isinstance(a, types.Array) and a.dtype == d
        for a, d in zip(arrays, kinds, strict=True)
    ) or not (
        isinstance(at, types.BaseTuple)
        and len(at) == 4
        and isinstance(add, types.BooleanLiteral)
    ):
        return None
    adds = add.literal_value

    def codegen(context, builder, sig, args):
        i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        structs = [
            context.make_array(sig.args[p])(context, builder, args[p]) for p in range(3)
        ]
        out, ix, tb = (s.data for s in structs)
        n_out, idx_w, tab_w = (builder.extract_value(s.shape, 1) for s in structs)
        b0, o0, k0, k1 = (
            context.cast(builder, v, t, types.int64)
            for t, v in zip(
                sig.args[3], cgutils.unpack_tuple(builder, args[3]), strict=True
            )
        )

        def const(value):
            return ir.Constant(i64, value)

        idx_rows = [
            builder.mul(builder.add(b0, const(j)), idx_w) for j in range(LUT_BLOCKS)
        ]
        tab_rows = [
            builder.mul(builder.add(o0, const(t)), tab_w) for t in range(LUT_OUTPUTS)
        ]
        if LUT_KIND == "avx2":
            at = (idx_rows, tab_rows, b0, o0, k0, k1)
            shuffle_tile(builder, (out, ix, tb, n_out), at, LUT_OUTPUTS, adds)
            return context.get_dummy_value()
        v64, v16 = ir.VectorType(i8, 64), ir.VectorType(i32, 16)
        permb = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(v64, [v64, v64]),
            "llvm.x86.avx512.permvar.qi.512",
        )
        dpbusd = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(v16, [v16, v64, v64]),
            "llvm.x86.avx512.vpdpbusd.512",
        )
        ones = ir.Constant(v64, [1] * 64)
        keys = [
            (j, t, p)
            for j in range(LUT_BLOCKS)
            for t in range(LUT_OUTPUTS)
            for p in (0, 1)
        ]

        def add_quad(step, values):
            k = builder.add(k0, step)
            lanes = [
                load_vector(
                    builder, ix, builder.add(row, builder.mul(k, const(16))), v64, 4
                )
                for row in idx_rows
            ]
            sums = dict(zip(keys, values, strict=True))
            for t in range(LUT_OUTPUTS):
                at_t = builder.add(tab_rows[t], builder.mul(k, const(128)))
                for line in (0, 64):  # the quad's two cache lines, ahead
                    ahead = const(LUT_PREFETCH_BYTES + line)
                    prefetch(builder, tb, builder.add(at_t, ahead))
                low = load_vector(builder, tb, at_t, v64)
                high = load_vector(builder, tb, builder.add(at_t, const(64)), v64)
                for j, x in enumerate(lanes):
                    lo = builder.call(permb, [low, x])
                    hi = builder.call(permb, [high, x])
                    sums[j, t, 0] = builder.call(dpbusd, [sums[j, t, 0], lo, ones])
                    sums[j, t, 1] = builder.call(dpbusd, [sums[j, t, 1], ones, hi])
            return [sums[key] for key in keys]

        zero = ir.Constant(v16, [0] * 16)
        n = builder.sub(k1, k0)
        totals = counted_loop(builder, n, [zero] * len(keys), add_quad, "quads")
        final = dict(zip(keys, totals, strict=True))
        eight = ir.Constant(v16, [8] * 16)
        for j in range(LUT_BLOCKS):
            row0 = builder.mul(builder.add(b0, const(j)), const(16))
            for t in range(LUT_OUTPUTS):
                total = builder.add(builder.shl(final[j, t, 1], eight), final[j, t, 0])
                col = builder.add(o0, const(t))
                for r in range(16):
                    row = builder.add(row0, const(r))
                    at_r = builder.add(builder.mul(row, n_out), col)
                    p = builder.gep(out, [at_r])
                    lane = builder.extract_element(total, ir.Constant(i32, r))
                    if adds:
                        lane = builder.add(builder.load(p), lane)
                    builder.store(lane, p)
        return context.get_dummy_value()

    return types.void(sums, idx, tables, at, add), codegen


@njit(cache=True, nogil=True, fastmath=False)
def lut_sums(idx, tables, sums, t0, t1, c0, c1):
    """``sums[:, c0:c1]`` of the rows of tiles ``t0 .. t1 - 1``: each run of
    quads of each tile of outputs over every tile of rows (its tables stay in
    L1), the first run storing its sums (no zeroing pass, no loads), the
    others adding theirs. `c0` a multiple of :data:`LUT_OUTPUTS`; the sums of
    the last tile's outputs past `c1` are written too. A call of one tile
    (with ``vpermb``) takes all its quads in one run."""
    n_quads = idx.shape[1] // 16
    run = n_quads if t1 - t0 == 1 and not _BY_GROUP else LUT_QUADS
    run = max(run, 1)
    for o0 in range(c0, c1, LUT_OUTPUTS):
        for t in range(t0, t1):
            _lut_tile(
                sums,
                idx,
                tables,
                (t * LUT_BLOCKS, o0, 0, min(n_quads, run)),
                False,
            )
        for k0 in range(run, n_quads, run):
            k1 = min(n_quads, k0 + run)
            for t in range(t0, t1):
                _lut_tile(sums, idx, tables, (t * LUT_BLOCKS, o0, k0, k1), True)


@njit(cache=True, nogil=True, fastmath=False)
def lut_inputs(xw, n_in, idx, x32, t0, t1):
    """:func:`nibble_index` and :func:`~sksign.deploy._kernels._madd.pair_bits`
    of the rows of tiles ``t0 .. t1 - 1`` (cut to the rows of `xw`)."""
    r0, r1 = t0 * LUT_ROWS, t1 * LUT_ROWS
    rows = min(r1, xw.shape[0])
    nibble_index(xw, idx, r0, rows, r1)
    pair_bits(xw, n_in, x32, r0, rows)


# inlined: called per output in doubt, in the loops over rows
@njit(cache=True, nogil=True, fastmath=False, inline="always")
def fine_sum(x32, i, fine, o):
    """``sum(fine[o, u])`` over the 1 units u of row `i` of paired bits (an
    integer sum: any order, so it vectorises)."""
    units = x32[i].view(np.int16)
    s = 0
    for u in range(fine.shape[1]):
        s += np.int64(units[u]) * np.int64(fine[o, u])
    return s


@njit(cache=True, nogil=True, fastmath=False)
def step_lut(sums, x32, lut_scales, fine, threshold, w_rows, out, r0, r1):
    """The step of the exact int32 look-up sums, certified in two stages.

    ``scale * sums`` lies within ``k * scale / 2`` of the exact sum of the
    active float32 weights (``k`` active bits); where that leaves no doubt
    the bit is set from it (0/1 flags packed by
    :func:`~sksign.deploy._kernels._bits.pack_flags`). An output in doubt
    (a few in a thousand at 1024 inputs) adds the residual weights of its
    active bits, exactly in int64: ``scale * sums + fine_scale * fine_sum``
    lies within ``k * fine_scale / 2`` of the exact sum, widened by the
    float64 rounding of the weights' residuals and of this sum. Only an
    output still in doubt (a tie, or within about ``1e-9 max |w|`` of it) is
    decided by the float64 sum of its weights. `lut_scales` is ``(scale,
    fine_scale)`` and `fine` the residual weights of :func:`lut_weights`.
    """
    scale, fine_scale = lut_scales
    n_words = out.shape[1]
    t64, fire_words, fire_flags, near_words, near_flags, doubt = step_buffers(
        threshold, n_words
    )
    for i in range(r0, r1):
        k = active_units(x32, i)
        half = k * (0.5 + 1e-9)
        unsure = coarse_flags(sums[i], scale, t64, half, fire_flags, near_flags)
        pack_flags(fire_words, out, i)
        if unsure == 0:
            continue
        pack_flags(near_words, doubt, 0)
        for w in range(n_words):
            bits = doubt[0, w]
            while bits:
                low = bits & (~bits + np.uint64(1))
                bits ^= low
                o = unit_of_bit(w, popcount64(low - np.uint64(1)))
                coarse = scale[o] * sums[i, o]
                rest = fine_scale[o] * fine_sum(x32, i, fine, o)
                v = (coarse + rest) - t64[o]
                # float64 rounding: of the residuals (1e-6 of a fine step
                # each) and of the three operations here
                slack = 2.0**-50 * (abs(coarse) + abs(rest) + abs(t64[o]))
                if abs(v) > k * (0.5 + 1e-6) * fine_scale[o] + slack:
                    fire = v > 0
                else:
                    fire = exact_pair_sum(x32, i, w_rows, o) >= t64[o]
                bit = word_bit(o)
                out[i, o // 64] = (out[i, o // 64] & ~bit) | (np.uint64(fire) * bit)


@njit(cache=True, nogil=True, fastmath=False)
def step_by_lut(xw, n_in, lut, threshold, w_rows, idx, x32, sums, out, t0, t1, c0, c1):
    """The certified step of outputs ``c0 .. c1 - 1`` of tiles ``t0 .. t1 - 1``
    of rows, in one pass.

    The rows' :func:`lut_inputs` (unless ``c0 > 0`` or ``c1`` short of the
    outputs: then the caller made them), the look-up sums and
    :func:`step_lut` on rows ``t0 * LUT_ROWS`` to ``t1 * LUT_ROWS`` (cut to
    the rows of `xw`): what one thread does, with one hand-over per layer.
    `lut` is :func:`lut_weights` of the layer; `idx` has ``LUT_BLOCKS`` rows
    per tile, `x32` and `sums` ``LUT_ROWS``; `c0` and `c1` are multiples of
    64 and :data:`LUT_OUTPUTS` (or `c1` the outputs).
    """
    tables, scale, fine, fine_scale = lut
    n_out = threshold.shape[0]
    r0, r1 = t0 * LUT_ROWS, t1 * LUT_ROWS
    rows = min(r1, xw.shape[0])
    if c0 == 0 and c1 == n_out:
        lut_inputs(xw, n_in, idx, x32, t0, t1)
        lut_sums(idx, tables, sums, t0, t1, c0, c1)
        scales = (scale, fine_scale)
        step_lut(sums, x32, scales, fine, threshold, w_rows, out, r0, rows)
        return
    lut_sums(idx, tables, sums, t0, t1, c0, c1)
    w0, w1 = c0 // 64, -(-c1 // 64)
    step_lut(
        sums[:, c0:c1],
        x32,
        (scale[c0:c1], fine_scale[c0:c1]),
        fine[c0:c1],
        threshold[c0:c1],
        w_rows[c0:c1],
        out[:, w0:w1],
        r0,
        rows,
    )
