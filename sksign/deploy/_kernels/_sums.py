"""Numba kernels of real weights on ``pixel_bits`` maps: sums of weights over bits.

A convolution of 0/1 maps with real weights is, per output row, a sum of
weights over the active bits of its patch, read in place from the maps
(layout and geometry ``g`` as in :mod:`sksign.deploy._kernels._conv`). Two
ways to add them up, both in float32, in an order fixed by the row alone
(never by the batch or the split over threads):

- by table look-ups: each nibble (4 bits) of a pixel's words selects one of
  16 precomputed sums of its 4 weights (:func:`~sksign.deploy._maps.nibble_tables`),
  one row of vector adds per nibble and tap (a zero nibble adds its row of
  zeros), in the order ``(ky, kx)``, then
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
from numba import literal_unroll, literally, njit

from sksign.deploy._kernels._bits import (
    certain_step_bits,
    pack_affine_ge,
    step_interval,
    unit_of_bit,
    word_bit,
)
from sksign.deploy._kernels._conv import (
    block_buffers,
    epilogue_rows,
    start_block,
    tap_offset,
)
from sksign.deploy._kernels._madd import PAIRS_MIN_CHANNELS
from sksign.deploy._kernels._vectors import (
    DOUBLE_LANES,
    FLOAT_LANES,
    LANES,
    add_vectors,
    rows_at_once,
    table_sums_block,
)
from sksign.kernels import popcount64

__all__ = [
    "row_table_sums",
    "sum_conv",
    "sum_conv_step",
    "sum_conv_to_step",
    "table_sums",
]


#: Bytes of table slices a pass over the rows of a block reads, unless that
#: is fewer than :data:`TABLE_PASS_MIN_TERMS` terms. Slices that stay in L1
#: (or nearly: 48 KB on an Intel Xeon with AVX-512) serve the rows' look-ups
#: faster than L2: the nibble tables of 32 to 128 outputs (2-8 KB a term) at
#: 64 KB a pass against 256 KB, whole nets at batch 32, one thread, three
#: alternating rounds in separate processes: WRN-10-2 20.7-22.6 against
#: 22.7-23.4 ms, step ResNet-18 16.9-17.9 against 18.3-19.4 (2-core Intel
#: Xeon, AVX-512; no change with the AVX2 paths forced).
TABLE_PASS_BYTES = 2**16
#: Fewest terms a pass takes: each pass loads and stores the block's sums.
#: 32 KB passes made the byte tables of 16 outputs (16 KB a term) two terms
#: a pass; 16 terms (256 KB) took the step ResNet-18 of width 16 from
#: 40-41.8 to 37-38.5 ms at batch 64 (AMD EPYC Zen 4, one thread; 45-47 to
#: 40-41 ms with the AVX2 paths), and 1 MB was no faster.
TABLE_PASS_MIN_TERMS = 16


def table_sums():
    """How the real-weights convolutions on bit maps add their table rows here."""
    vectors = "16 floats (AVX-512)" if FLOAT_LANES == 16 else "8 floats"
    return (
        f"table rows in vectors of {vectors}, blocks of rows summed in registers "
        f"(before a step, from {PAIRS_MIN_CHANNELS} channels: vpmaddwd where the "
        "CPU has AVX2)"
    )


@njit(cache=True, nogil=True, fastmath=False)
def _table_terms(nib_word, nib_shift, n_vals, g):
    """``(n_terms, 4)`` int64: per term (tap, then group), the offset of its
    word in a gathered patch and from the patch's first pixel in the maps,
    its shift, and the values of a group (see :func:`table_sums_block`)."""
    k, wpp, w = g[3], g[2], g[1]
    n_groups = nib_word.shape[0]
    terms = np.empty((k * k * n_groups, 4), np.int64)
    for t in range(k * k * n_groups):
        tap, m = divmod(t, n_groups)
        ky, kx = divmod(tap, k)
        terms[t, 0] = tap * wpp + nib_word[m]
        terms[t, 1] = (ky * w + kx) * wpp + nib_word[m]
        terms[t, 2] = nib_shift[m]
        terms[t, 3] = n_vals
    return terms


@njit(cache=True, nogil=True, inline="always")
def _terms_per_pass(table):
    """Terms a pass over the rows of a block takes: their slices of `table`
    (``(taps, groups, n_vals, width)``) take :data:`TABLE_PASS_BYTES`, or
    :data:`TABLE_PASS_MIN_TERMS` terms at least."""
    slice_bytes = table.itemsize * table.shape[2] * table.shape[3]
    return max(TABLE_PASS_MIN_TERMS, TABLE_PASS_BYTES // slice_bytes)


@njit(cache=True, nogil=True, fastmath=False)
def _add_table_rows(arrays, col, r0, r1, t0, t1, c, n_vec, lanes):
    """:func:`~sksign.deploy._kernels._vectors.table_sums_block` on the rows
    ``r0 .. r1 - 1`` of `arrays`: :func:`rows_at_once` at a time, the rest
    one by one (terms ``t0 .. t1 - 1``, column `col` of the terms, sums from
    float `c`; `n_vec` and `lanes` literals)."""
    literally(n_vec)
    literally(lanes)
    group = rows_at_once(n_vec, lanes)
    r = r0
    while r + group <= r1:
        table_sums_block(arrays, (r, col, t0, t1, c), n_vec, lanes, False)
        r += group
    while r < r1:
        table_sums_block(arrays, (r, col, t0, t1, c), n_vec, lanes, True)
        r += 1


@njit(cache=True, nogil=True, fastmath=False)
def _table_sums(x, table, terms, g, acc, org, nb, n_vec, lanes):
    """``acc[r]`` += the sum of the table rows of the groups of block row r.

    A row whose patch lies inside the maps reads its words in place; the
    words of the others are gathered first (a padded tap as zero words: its
    groups select their zero rows, which add nothing). Then, per pass over
    a run of terms (tap and group) whose table slices stay in cache
    (:data:`TABLE_PASS_BYTES`, :data:`TABLE_PASS_MIN_TERMS`),
    :func:`~sksign.deploy._kernels._vectors.table_sums_block` adds the rows
    :func:`rows_at_once` at a time with their sums in registers
    (vectors of `lanes` floats where they divide a row; `n_vec` vectors of
    8 floats a row, literals). Each row adds its terms in the order ``(ky,
    kx)``, then group, whatever the block.
    """
    literally(n_vec)
    literally(lanes)
    chunk = n_vec * LANES
    k, wpp = g[3], g[2]
    width = table.shape[3]
    rows = table.reshape(-1, width)
    n_words = k * k * wpp
    patch = np.empty(nb * n_words, np.uint64)
    # rows inside the maps first, then those gathered: their first word in
    # the maps or the patch, and the first float of their sums
    bases = np.empty(nb, np.int64)
    dsts = np.empty(nb, np.int64)
    inside = 0
    outside = nb
    for r in range(nb):
        iy, ix = org[r, 1], org[r, 2]
        if iy >= 0 and ix >= 0 and iy + k <= g[0] and ix + k <= g[1]:
            bases[inside] = ((org[r, 0] + iy) * g[1] + ix) * wpp
            dsts[inside] = r * width
            inside += 1
            continue
        outside -= 1
        at = outside * n_words
        bases[outside] = at
        dsts[outside] = r * width
        for ky in range(k):
            for kx in range(k):
                o = tap_offset(org, r, ky, kx, g)
                for j in range(wpp):
                    patch[at + j] = x[o + j] if o >= 0 else np.uint64(0)
                at += wpp
    per_pass = _terms_per_pass(table)
    n_terms = terms.shape[0]
    for t0 in range(0, n_terms, per_pass):
        t1 = min(n_terms, t0 + per_pass)
        for c in range(0, width, chunk):
            for words, col, r0, r1 in ((x, 1, 0, inside), (patch, 0, inside, nb)):
                arrays = (acc, dsts, words, bases, rows, terms)
                _add_table_rows(arrays, col, r0, r1, t0, t1, c, n_vec, lanes)


@njit(cache=True, nogil=True, fastmath=False)
def row_table_sums(x, table, nib_word, nib_shift, g, bias, sums, out, r0, r1):
    """``out[r]`` = the sum of the table rows the words of row ``r`` select,
    plus `bias`, in float64 rounded once to ``out``'s dtype.

    Rows ``r0 .. r1 - 1`` of the words `x`: a row of words is the map of one
    pixel (`g` the geometry of a 1 x 1 convolution of it), and `table`,
    `nib_word` and `nib_shift` what
    :func:`~sksign.deploy._maps.nibble_tables` made for it in float64. Each
    row adds its terms in order, from zero, by
    :func:`~sksign.deploy._kernels._vectors.table_sums_block` in float64, in
    passes over the terms as :func:`_table_sums`, into `sums` (float64 of
    shape ``(rows, width)``, `width` a multiple of 8 up to 64); then the
    bias. `out` of shape ``(rows, n_out)``, ``n_out <= width``.
    """
    terms = _table_terms(nib_word, nib_shift, table.shape[2], g)
    n_vec = sums.shape[1] // LANES
    for count in literal_unroll((1, 2, 3, 4, 5, 6, 7, 8)):
        if count == n_vec:
            _row_table_sums(x, table, terms, sums, r0, r1, count, DOUBLE_LANES)
    for r in range(r0, r1):
        for o in range(out.shape[1]):
            out[r, o] = sums[r, o] + np.float64(bias[o])


@njit(cache=True, nogil=True, fastmath=False)
def _row_table_sums(x, table, terms, out, r0, r1, n_vec, lanes):
    """:func:`row_table_sums` with `n_vec` and `lanes` literals."""
    literally(n_vec)
    literally(lanes)
    n_words, width = x.shape[1], out.shape[1]
    nb = r1 - r0
    bases = np.empty(nb, np.int64)
    dsts = np.empty(nb, np.int64)
    for r in range(nb):
        bases[r] = (r0 + r) * n_words
        dsts[r] = (r0 + r) * width
        out[r0 + r] = 0
    per_pass = _terms_per_pass(table)
    n_terms = terms.shape[0]
    arrays = (
        out.reshape(-1),
        dsts,
        x.reshape(-1),
        bases,
        table.reshape(-1, width),
        terms,
    )
    for t0 in range(0, n_terms, per_pass):
        t1 = min(n_terms, t0 + per_pass)
        _add_table_rows(arrays, 1, 0, nb, t0, t1, 0, n_vec, lanes)


@njit(cache=True, nogil=True, fastmath=False)
def _row_sums(x, weights, channels, g, acc, offs, org, nb, n_vec):
    """``acc[r]`` = the sum of the weight rows of the active bits of block row r.

    Row by row, each over its own bits (a branch per row and bit on whether
    the row has it would be a coin toss); the rows are added `n_vec` vectors
    at a time (a literal). Holding the sums in registers over a row's list
    of weight rows measured no faster: reading the weight rows bounds it.
    """
    literally(n_vec)
    chunk = n_vec * LANES
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
                    bits = x[np.uint64(o + j)]  # no negative-index fix-up
                    while bits:
                        low = bits & (~bits + np.uint64(1))
                        bits ^= low
                        ch = unit_of_bit(j, popcount64(low - np.uint64(1)))
                        if ch < channels:
                            src = (tap + ch) * width
                            for c in range(0, width, chunk):
                                add_vectors(acc, dst + c, flat, src + c, n_vec)


@njit(cache=True, nogil=True, fastmath=False)
def _block_sums(block, acc, offs, org, nb, n_vec):
    """:func:`_table_sums` or :func:`_row_sums`, `n_vec` a literal.

    `block` is ``(x, table, terms, weights, by_table, g)``.
    """
    literally(n_vec)
    x, table, terms, weights, by_table, g = block
    if by_table:
        _table_sums(x, table, terms, g, acc, org, nb, n_vec, FLOAT_LANES)
    else:
        channels = weights.shape[0] // (g[3] * g[3])
        _row_sums(x, weights, channels, g, acc, offs, org, nb, n_vec)


@njit(cache=True, nogil=True, fastmath=False)
def _sums(x, table, terms, weights, by_table, g, acc, offs, org, b0, nb):
    """The float32 sums of the block of `nb` rows from ``b0`` into `acc` (flat).

    `terms` is :func:`_table_terms` of the layer (made once per call).

    The width of the rows (padded by
    :func:`~sksign.deploy._kernels._vectors.padded_width`) picks the vectors
    added at a time, a literal: one compiled loop per count, 1 to 8.
    """
    n_vec = start_block(acc, weights.shape[1], g, org, b0, nb)
    for count in literal_unroll((1, 2, 3, 4, 5, 6, 7, 8)):
        if count == n_vec:
            block = (x, table, terms, weights, by_table, g)
            _block_sums(block, acc, offs, org, nb, count)


@njit(cache=True, nogil=True, fastmath=False)
def sum_conv(
    x,
    table,
    nib_word,
    nib_shift,
    weights,
    by_table,
    g,
    bias,
    scale,
    shift,
    residual,
    out,
    r0,
    r1,
):
    """Real weights on bit maps: ``out = conv(bits) + bias``, float32.

    Parameters
    ----------
    x : ndarray of shape (n * H * W * wpp,), dtype uint64
        The maps, flat.
    table : ndarray of shape (k * k, n_nibbles, 16, width), dtype float32
        Sums of the weights of each nibble value, per tap and nibble, the
        outputs padded with zeros to ``width`` (``padded_width(n_out)``,
        see :func:`~sksign.deploy._kernels._vectors.padded_width`)
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
    scale, shift : ndarray of shape (n_out,) or (0,), dtype float32
        A per-channel affine map applied next (empty: none), see
        :func:`~sksign.deploy._kernels._conv.epilogue_rows`.
    residual : ndarray of shape (n * Ho * Wo, n_out) or (0, 0), dtype float32
        Maps added last (empty: none).
    out : ndarray of shape (n * Ho * Wo, n_out), dtype float32
    r0, r1 : int
        Output row range.
    """
    width = weights.shape[1]
    block, acc, offs, org = block_buffers(width)
    terms = _table_terms(nib_word, nib_shift, table.shape[2], g)
    for b0 in range(r0, r1, block):
        nb = min(block, r1 - b0)
        args = (x, table, terms, weights, by_table, g, acc, offs, org)
        _sums(*args, b0, nb)
        epilogue_rows(acc, width, bias, scale, shift, residual, b0, nb, out)


@njit(cache=True, nogil=True, fastmath=False)
def sum_conv_to_step(x, sums, g, chain, out, r0, r1):
    """The bits of :func:`sum_conv`, a residual add, an affine map and a step.

    ``1[((z + bias) + residual) * scale + shift >= 0]`` per output row and
    channel, with ``z`` the float32 sums of :func:`sum_conv`, each operation
    rounded to float32 as the layers round it (:func:`epilogue_rows`'
    add, then :func:`~sksign.deploy._kernels._bits.pack_affine_ge`), so the
    bits are those of ``bit_conv2d`` + ``add`` + ``channel_affine`` +
    ``pixel_step`` one after the other, bit for bit; a block's sums go to
    the step while in cache, and no float maps are written. Measured on an
    Intel Xeon (AVX-512), batch 32, one thread, against the layers' float
    maps: 2-6% faster for 16 to 64 channels.

    Parameters
    ----------
    x, g
        As :func:`sum_conv`.
    sums : tuple
        ``(table, nib_word, nib_shift, weights, by_table)`` as :func:`sum_conv`
        takes them.
    chain : tuple
        ``(bias, residual, scale, shift)``, float32: the bias of shape
        ``(n_out,)``, the maps added, of shape ``(n * Ho * Wo, n_out)``, and the
        affine map before the step.
    out : ndarray of shape (n * Ho * Wo, ceil(n_out / 64)), dtype uint64
        Receives the packed bits.
    r0, r1 : int
        Output row range.
    """
    table, nib_word, nib_shift, weights, by_table = sums
    bias, residual, scale, shift = chain
    n_out, width = bias.shape[0], weights.shape[1]
    block, acc, offs, org = block_buffers(width)
    terms = _table_terms(nib_word, nib_shift, table.shape[2], g)
    summed = np.empty((block, n_out), np.float32)  # (z + bias) + residual
    none = np.empty(0, np.float32)
    for b0 in range(r0, r1, block):
        nb = min(block, r1 - b0)
        args = (x, table, terms, weights, by_table, g, acc, offs, org)
        _sums(*args, b0, nb)
        epilogue_rows(acc, width, bias, none, none, residual[b0:], 0, nb, summed)
        pack_affine_ge(summed, scale, shift, out[b0:], 0, nb)


@njit(cache=True, nogil=True, fastmath=False)
def _active_units(x, org, r, g, channels, units):
    """The patch units ``(ky, kx, c)`` of the set bits of block row r's
    patch, in that order, into `units`; returns how many. A zero word is
    skipped whole (an all-zero patch costs a look at each tap's words)."""
    k, wpp = g[3], g[2]
    n = 0
    for ky in range(k):
        for kx in range(k):
            off = tap_offset(org, r, ky, kx, g)
            if off < 0:
                continue
            base = (ky * k + kx) * channels
            for j in range(wpp):
                word = x[off + j]
                if word == 0:
                    continue
                for ch in range(64 * j, min(channels, 64 * j + 64)):
                    if word & word_bit(ch):
                        units[n] = base + ch
                        n += 1
    return n


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
    :func:`~sksign.deploy._ops._tables.sum_bound`); where that leaves no
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
    terms = _table_terms(nib_word, nib_shift, table.shape[2], g)
    t64 = np.empty(n_out, np.float64)  # the thresholds in float64
    for o in range(n_out):
        t64[o] = threshold[o]
    low, high = step_interval(threshold, bound)
    doubt = np.empty(out.shape[1], np.uint64)
    units = np.empty(w_rows.shape[1], np.int64)
    for b0 in range(r0, r1, block):
        nb = min(block, r1 - b0)
        args = (x, table, terms, weights, by_table, g, acc, offs, org)
        _sums(*args, b0, nb)
        for r in range(nb):
            row, at = b0 + r, r * width
            # in vectors, with no branch on a bit (a coin toss): the bits
            # from the float32 sums, and which are too close to tell
            if certain_step_bits(acc, at, threshold, low, high, out, row, doubt):
                # rare: sum those in float64 from the weights
                n_active = _active_units(x, org, r, g, channels, units)
                for o in range(n_out):
                    if doubt[o // 64] & word_bit(o):
                        exact = 0.0
                        for i in range(n_active):
                            exact += np.float64(w_rows[o, units[i]])
                        bit = word_bit(o)
                        if exact >= t64[o]:
                            out[row, o // 64] |= bit
                        else:
                            out[row, o // 64] &= ~bit
