"""A float map convolution's chain to its step, decided from the look-up sums.

In a wide ResNet the sum of a block (a convolution of real weights on bit
maps, plus the shortcut's maps) goes to one BatchNorm and step alone:
``bit_conv2d`` + ``add`` + ``channel_affine`` + ``pixel_step``. Run one
after the other, the layers compute, per output row and channel,

    f = the float32 table sums of the convolution (:func:`sum_conv`'s order),
    v = (f + bias) + residual,          y = v * scale + shift,
    bit = y >= 0,

each operation rounded to float32. The bit is a monotone function of ``f``
(rounding to nearest is monotone; the product turns it round where ``scale``
is negative), so it is known wherever it is the same at both ends of an
interval that holds ``f``. The look-up sums of the 14-bit weights
(:mod:`sksign.deploy._kernels._lut`) give one: ``e = lut_scale * sums`` lies
within ``k * lut_scale / 2`` of the exact sum of the active weights (``k``
active bits; exactly 0 for an output whose weights are all 0, as a folded
BatchNorm of zero scale leaves them), and ``f`` within the float32 sums'
:func:`sum_bound` of it.
Only where the two ends disagree (an output near its step) is ``f`` summed
as the layers sum it (:func:`_float_sum`, the same terms in the same order),
so the bits are those of the layers one after the other, bit for bit.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from numba import njit

from sksign.deploy._kernels._bits import flag_buffers, pack_flags
from sksign.deploy._kernels._conv import origins, tap_offset
from sksign.deploy._kernels._lut import (
    LUT_KIND,
    LUT_ROWS,
    fine_sum,
    lut_available,
    lut_inputs,
    lut_sums,
)
from sksign.deploy._kernels._madd import active_units

__all__ = ["block_sums", "chain_by_lut", "chain_step"]

#: Interval ends are clipped to +-this (float32 holds it); an output whose
#: interval reaches past it is summed as the layers sum it.
_FINITE = 3.0e38


def block_sums():
    """How a block's float sum that goes to a BatchNorm and step alone runs
    here, in words (the packed summary's ``block_sums``)."""
    in_one_pass = (
        "float32 table sums with the add, affine map and step in the same pass"
    )
    if lut_available():
        how = "vpermb + vpdpbusd" if LUT_KIND == "vbmi" else "vpshufb, AVX2"
        return (
            f"to the step's bits by the 14-bit weight tables ({how}) "
            "from 128 channels and 32 rows, float32 table sums only for the "
            f"outputs in doubt; narrower, {in_one_pass}"
        )
    return in_one_pass


@njit(cache=True, nogil=True, inline="always")
def _chain_bit(f, bias, res, scale, shift):
    """The bit of the float32 sum `f` through the chain, rounded as the
    layers round (``epilogue_rows``' add, then ``pack_affine_ge``)."""
    v = (f + bias) + res
    return v * scale + shift >= np.float32(0.0)


@njit(cache=True, nogil=True, fastmath=False)
def _table_rows(maps, g, org, n_vals, nib_word, nib_shift, picked):
    """``picked[t]``: the table row that term ``t`` (tap, then group) of the
    row of patch origin ``org[0]`` adds (a padded tap's groups: their zero
    rows), as ``sum_conv`` picks them."""
    k, n_groups = g[3], nib_word.shape[0]
    mask = np.uint64(n_vals - 1)
    for tap in range(k * k):
        off = tap_offset(org, 0, tap // k, tap % k, g)
        for m in range(n_groups):
            word = maps[off + nib_word[m]] if off >= 0 else np.uint64(0)
            v = (word >> np.uint64(nib_shift[m])) & mask
            t = tap * n_groups + m
            picked[t] = t * n_vals + np.int64(v)


@njit(cache=True, nogil=True, fastmath=False)
def _float_sum(rows, picked, o):
    """Output `o`'s float32 table sum over the rows `picked`, in order, from
    zero: the sum ``sum_conv`` makes."""
    acc = np.float32(0.0)
    for t in range(picked.shape[0]):
        acc = acc + rows[picked[t], o]
    return acc


@njit(cache=True, nogil=True, fastmath=False)
def chain_step(sums, x32, lut, floats, chain, out, r0, r1):
    """The bits of output rows ``r0 .. r1 - 1`` from their look-up `sums`.

    `floats` is ``(maps, g, rows, nib_word, nib_shift, bound, steps)``: the
    convolution's input maps (flat words), geometry, table rows
    (``table.reshape(-1, width)``), groups, and per output the bound of its
    float32 sums and the step of its 14-bit weights (the look-up scale, 0
    where all its weights are 0: its sums are then exactly 0); `chain` is
    ``(bias, residual, scale, shift)``, float32.
    """
    _, lut_scale, fine, fine_scale = lut
    maps, g, rows, nib_word, nib_shift, bound, steps = floats
    bias, residual, scale, shift = chain
    n_out, n_words = bias.shape[0], out.shape[1]
    # few arrays a loop, so that LLVM's checks of their overlap pass and the
    # loops vectorise: the look-up scale and the bound, the chain's constants
    coef = np.empty((3, n_out), np.float64)
    params = np.empty((3, n_out), np.float32)
    for o in range(n_out):
        coef[0, o], coef[1, o], coef[2, o] = lut_scale[o], bound[o], steps[o]
        params[0, o], params[1, o], params[2, o] = bias[o], scale[o], shift[o]
    ends = np.empty((3, n_out), np.float32)  # low end, high end, too wide
    # the flags of the bits, then those of the outputs in doubt
    flag_words, flags = flag_buffers(2 * n_words)
    near = 64 * n_words
    org = np.empty((1, 3), np.int64)
    picked = np.empty(g[3] * g[3] * nib_word.shape[0], np.int64)
    n_vals = rows.shape[0] // picked.shape[0]
    for i in range(r0, r1):
        k = active_units(x32, i)
        half = k * (0.5 + 1e-9)
        res, row_sums = residual[i], sums[i]
        for o in range(n_out):
            e = coef[0, o] * row_sums[o]
            m = half * coef[2, o] + coef[1, o]
            # wide enough that rounding the ends to float32 keeps f inside
            m += 2.0**-22 * (abs(e) + m) + 1e-37
            ends[0, o] = np.float32(max(e - m, -_FINITE))
            ends[1, o] = np.float32(min(e + m, _FINITE))
            ends[2, o] = np.float32(abs(e) + m >= _FINITE)
        unsure = 0
        for o in range(n_out):
            b, a, c = params[0, o], params[1, o], params[2, o]
            at_lo = _chain_bit(ends[0, o], b, res[o], a, c)
            at_hi = _chain_bit(ends[1, o], b, res[o], a, c)
            doubt = (at_lo != at_hi) | (ends[2, o] != 0)
            flags[o] = at_lo
            flags[near + o] = doubt
            unsure += doubt
        if unsure == 0:
            pack_flags(flag_words, out, i)
            continue
        picked_row = False
        for o in range(n_out):
            if not flags[near + o]:
                continue
            b, a, c = bias[o], scale[o], shift[o]
            # the residual weights first: a sum within k * fine_scale / 2 of
            # the exact one (as in step_lut), widened by float64 rounding
            coarse = lut_scale[o] * row_sums[o]
            rest = fine_scale[o] * fine_sum(x32, i, fine, o)
            e = coarse + rest
            m = k * (0.5 + 1e-6) * fine_scale[o] * (steps[o] > 0) + bound[o]
            m += 2.0**-50 * (abs(coarse) + abs(rest))
            m += 2.0**-22 * (abs(e) + m) + 1e-37
            if abs(e) + m < _FINITE:
                at_lo = _chain_bit(np.float32(e - m), b, res[o], a, c)
                if at_lo == _chain_bit(np.float32(e + m), b, res[o], a, c):
                    flags[o] = at_lo
                    continue
            # still in doubt: the float32 sum as the layers make it
            if not picked_row:
                origins(i, 1, g, org)
                _table_rows(maps, g, org, n_vals, nib_word, nib_shift, picked)
                picked_row = True
            flags[o] = _chain_bit(_float_sum(rows, picked, o), b, res[o], a, c)
        pack_flags(flag_words, out, i)


@njit(cache=True, nogil=True, fastmath=False)
def chain_by_lut(xw, n_in, lut, floats, chain, idx, x32, sums, out, t0, t1):
    """:func:`chain_step` of tiles ``t0 .. t1 - 1`` of rows in one pass:
    their look-up inputs (`xw` the patches as rows of words, `n_in` units)
    and sums, then the bits (what one thread does). `lut` is
    :func:`~sksign.deploy._kernels._lut.lut_weights` of the convolution;
    `idx`, `x32` and `sums` as for
    :func:`~sksign.deploy._kernels._lut.step_by_lut`."""
    n_out = chain[0].shape[0]
    lut_inputs(xw, n_in, idx, x32, t0, t1)
    lut_sums(idx, lut[0], sums, t0, t1, 0, n_out)
    r1 = min(t1 * LUT_ROWS, xw.shape[0])
    chain_step(sums, x32, lut, floats, chain, out, t0 * LUT_ROWS, r1)
