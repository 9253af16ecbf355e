"""Numba kernels of real weights on ``pixel_bits`` maps: sums of weights over bits.

A convolution of 0/1 maps with real weights is, per output row, a sum of
weights over the active bits of its patch, read in place from the maps
(layout and geometry ``g`` as in :mod:`sksign.deploy._kernels._conv`). Two
ways to add them up, both in float32, in an order fixed by the row alone
(never by the batch or the split over threads):

- by table look-ups: each nibble (4 bits) of a pixel's words selects one of
  16 precomputed sums of its 4 weights (:func:`~sksign.deploy._maps.nibble_tables`),
  one vector add per nonzero nibble and tap, in the order ``(ky, kx)``, then
  nibble;
- by weight rows: the row of weights of each active bit, in the order
  ``(ky, kx)``, then word, then bit; the rows of a block share each weight
  row they read, which reads 4 times fewer bytes than the tables (better
  for few rows, where reading the tables costs more than the sums).

Serial over a range of output rows ``[r0, r1)``, GIL released.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from numba import njit

from sksign.deploy._kernels._bits import unit_of_bit, word_bit
from sksign.deploy._kernels._conv import (
    LANES,
    add_lanes,
    block_buffers,
    origins,
    tap_offset,
)
from sksign.kernels import popcount64

__all__ = ["sum_conv", "sum_conv_step"]


@njit(cache=True, nogil=True, fastmath=False)
def _table_sums(x, table, nib_word, nib_shift, g, acc, offs, org, nb):
    """``acc[r]`` = the sum of the table rows of the nonzero nibbles of block row r."""
    k = g[3]
    n_vals, width = table.shape[2], table.shape[3]
    mask = np.uint64(n_vals - 1)
    flat = table.reshape(-1)
    n_nib = nib_word.shape[0]
    for ky in range(k):
        for kx in range(k):
            for r in range(nb):
                offs[r] = tap_offset(org, r, ky, kx, g)
            tap = (ky * k + kx) * n_nib
            for m in range(n_nib):
                base = (tap + m) * n_vals * width
                wd = nib_word[m]
                sh = nib_shift[m]
                for r in range(nb):
                    o = offs[r]
                    if o < 0:
                        continue  # zero padding: 0 bits add nothing
                    v = np.int64((x[o + wd] >> sh) & mask)
                    if v == 0:
                        continue
                    src = base + v * width
                    dst = r * width
                    for c in range(0, width, LANES):
                        add_lanes(acc, dst + c, flat, src + c)


@njit(cache=True, nogil=True, fastmath=False)
def _row_sums(x, weights, channels, g, acc, offs, org, nb):
    """``acc[r]`` = the sum of the weight rows of the active bits of block row r.

    Row by row, each over its own bits (a branch per row and bit on whether
    the row has it would be a coin toss).
    """
    k, wpp = g[3], g[2]
    width = weights.shape[1]
    flat = weights.reshape(-1)
    for r in range(nb):
        dst = r * width
        for ky in range(k):
            for kx in range(k):
                o = tap_offset(org, r, ky, kx, g)
                if o < 0:
                    continue
                tap = (ky * k + kx) * channels
                for j in range(wpp):
                    bits = x[o + j]
                    while bits:
                        low = bits & (~bits + np.uint64(1))
                        bits ^= low
                        ch = unit_of_bit(j, popcount64(low - np.uint64(1)))
                        if ch < channels:
                            src = (tap + ch) * width
                            for c in range(0, width, LANES):
                                add_lanes(acc, dst + c, flat, src + c)


@njit(cache=True, nogil=True, fastmath=False)
def _sums(x, table, nib_word, nib_shift, weights, by_table, g, acc, offs, org, b0, nb):
    """The float32 sums of the block of `nb` rows from ``b0`` into `acc` (flat)."""
    for i in range(nb * weights.shape[1]):
        acc[i] = 0.0
    origins(b0, nb, g, org)
    if by_table:
        _table_sums(x, table, nib_word, nib_shift, g, acc, offs, org, nb)
    else:
        _row_sums(x, weights, weights.shape[0] // (g[3] * g[3]), g, acc, offs, org, nb)


@njit(cache=True, nogil=True, fastmath=False)
def sum_conv(x, table, nib_word, nib_shift, weights, by_table, g, bias, out, r0, r1):
    """Real weights on bit maps: ``out = conv(bits) + bias``, float32.

    Parameters
    ----------
    x : ndarray of shape (n * H * W * wpp,), dtype uint64
        The maps, flat.
    table : ndarray of shape (k * k, n_nibbles, 16, width), dtype float32
        Sums of the weights of each nibble value, per tap and nibble, the
        outputs padded with zeros to ``width``, a multiple of ``LANES``
        (read if `by_table`).
    nib_word : ndarray of shape (n_nibbles,), dtype int64
        Word of the pixel that holds each nibble.
    nib_shift : ndarray of shape (n_nibbles,), dtype uint64
        Its lowest bit in that word.
    weights : ndarray of shape (k * k * C, width), dtype float32
        The weights, one row per patch unit ``(ky, kx, c)``, padded alike
        (read unless `by_table`).
    by_table : bool
        Sum by table look-ups, else by weight rows.
    g : ndarray of shape (8,), dtype int64
        Geometry.
    bias : ndarray of shape (n_out,), dtype float32
    out : ndarray of shape (n * Ho * Wo, n_out), dtype float32
    r0, r1 : int
        Output row range.
    """
    n_out, width = out.shape[1], weights.shape[1]
    block, acc, offs, org = block_buffers(width)
    for b0 in range(r0, r1, block):
        nb = min(block, r1 - b0)
        args = (x, table, nib_word, nib_shift, weights, by_table, g, acc, offs, org)
        _sums(*args, b0, nb)
        for r in range(nb):
            a = acc[r * width : r * width + n_out]
            o = out[b0 + r]
            for c in range(n_out):
                o[c] = a[c] + bias[c]


@njit(cache=True, nogil=True, fastmath=False)
def _exact_patch_sum(x, org, r, g, channels, w_rows, o):
    """Sum of ``w_rows[o]`` over the set bits of block row r's patch, in float64."""
    k = g[3]
    s = 0.0
    for ky in range(k):
        for kx in range(k):
            off = tap_offset(org, r, ky, kx, g)
            if off < 0:
                continue
            base = (ky * k + kx) * channels
            for ch in range(channels):
                if x[off + ch // 64] & word_bit(ch):
                    s += np.float64(w_rows[o, base + ch])
    return s


@njit(cache=True, nogil=True, fastmath=False)
def sum_conv_step(
    x,
    table,
    nib_word,
    nib_shift,
    weights,
    by_table,
    g,
    threshold,
    bound,
    w_rows,
    out,
    r0,
    r1,
):
    """The step of :func:`sum_conv`, made exact: ``1[sum of active w >= threshold]``.

    The float32 sum ``z`` is within ``bound[o]`` of the exact sum (see
    :func:`~sksign.deploy._ops._common.sum_bounds`); where that leaves no
    doubt the bit is set from ``z``, elsewhere the weights of the active
    bits are summed in float64 (`w_rows`), so the bit depends neither on the
    way of summing nor on the batch.

    Parameters
    ----------
    x, table, nib_word, nib_shift, weights, by_table, g
        As :func:`sum_conv`.
    threshold : ndarray of shape (n_out,), dtype float32
        Per-output threshold (bias and BatchNorm folded in).
    bound : ndarray of shape (n_out,), dtype float64
        Error bound of ``z`` per output, for the way of summing chosen.
    w_rows : ndarray of shape (n_out, k * k * C), dtype float32
        The exact weights, one row per output, patch order ``(ky, kx, c)``.
    out : ndarray of shape (n * Ho * Wo, ceil(n_out / 64)), dtype uint64
        Receives the packed bits.
    r0, r1 : int
        Output row range.
    """
    n_out, width = threshold.shape[0], weights.shape[1]
    channels = w_rows.shape[1] // (g[3] * g[3])
    block, acc, offs, org = block_buffers(width)
    for b0 in range(r0, r1, block):
        nb = min(block, r1 - b0)
        args = (x, table, nib_word, nib_shift, weights, by_table, g, acc, offs, org)
        _sums(*args, b0, nb)
        for r in range(nb):
            row = b0 + r
            for w in range(out.shape[1]):
                out[row, w] = 0
            a = acc[r * width : r * width + n_out]
            for o in range(n_out):
                t = np.float64(threshold[o])
                v = np.float64(a[o]) - t
                if abs(v) > bound[o]:
                    fire = v > 0  # no branch on the bit: it is a coin toss
                else:  # rare: too close to tell in float32
                    fire = _exact_patch_sum(x, org, r, g, channels, w_rows, o) >= t
                out[row, o // 64] |= np.uint64(fire) * word_bit(o)
