"""Numba kernels of convolutions that read ``pixel_bits`` maps in place.

The maps are channels last, the ``C`` bits of a pixel in ``ceil(C / 64)``
words in the unit layout of :mod:`sksign.deploy._kernels._bits` (see
:mod:`sksign.deploy._maps`), passed flat: word ``j`` of pixel ``(y, x)`` of
sample ``n`` is ``x[((n * H + y) * W + x) * wpp + j]``. An output row is a
sample and an output pixel, row-major over ``(n, Ho, Wo)``. The geometry
travels as the int64 array ``g = (H, W, wpp, k, stride, padding, Ho, Wo)``.
No im2col of the whole maps: each kernel gathers the taps of a block of
output rows as it goes (:func:`origins`, :func:`tap_offset`). Serial over a
range of output rows ``[r0, r1)``, GIL released (the caller splits the
work). The real-weights kernels are in :mod:`sksign.deploy._kernels._sums`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from numba import literal_unroll, literally, njit

from sksign.deploy._kernels._bits import pack_affine_ge
from sksign.deploy._kernels._vectors import (
    FLOAT_LANES,
    LANES,
    UNROLL_FLOATS,
    rows_at_once,
    scaled_add_row_block,
    scaled_add_rows,
)
from sksign.kernels import popcount64

__all__ = [
    "BLOCK_FLOATS",
    "block_buffers",
    "epilogue_rows",
    "float_conv",
    "float_conv_step",
    "mean_pool",
    "origins",
    "start_block",
    "tap_offset",
    "tap_offsets",
    "xnor_conv",
]

#: Output rows of a block in :func:`xnor_conv` (one division per block).
XNOR_CONV_BLOCK = 64


#: Floats of the sums of a block of output rows (they stay in L1 while a
#: weight row, or a slice of a table, serves every row of the block).
BLOCK_FLOATS = 4096


@njit(cache=True, nogil=True)
def block_buffers(width):
    """``(block, acc, offs, org)``: the output rows of a block of sums
    `width` wide, its float32 sums (flat), and each row's tap offset and
    patch origin (:func:`origins`, :func:`tap_offset`)."""
    block = max(4, min(256, BLOCK_FLOATS // max(1, width)))
    acc = np.empty(block * width, np.float32)
    offs = np.empty(block, np.int64)
    org = np.empty((block, 3), np.int64)
    return block, acc, offs, org


@njit(cache=True, nogil=True, fastmath=False)
def epilogue_rows(acc, width, bias, scale, shift, residual, b0, nb, out):
    """``out[b0 + r] = acc[r * width :][:n_out] + bias`` for the `nb` rows
    of a block, then the fused ops.

    If `scale` has entries, the sums then go through the affine map
    ``* scale + shift`` (a ``channel_affine`` taken over); if `residual` has
    rows, ``residual[row]`` is then added (an ``add`` taken over). Each step
    is rounded to float32 as the op it replaces rounds it (a product, then a
    sum; no fused multiply-add), so the output is the one the ops would give
    one after the other. The choice of ops is made once for the block (made
    per row, around a loop of a few outputs, it took 3 times as long as the
    sums of a 3-channel stem).
    """
    n_out = out.shape[1]
    affine, residual_add = scale.shape[0] > 0, residual.shape[0] > 0
    # row slices: indices from a range need no negative-index fix-up, and
    # the loops vectorise (indexing out[b0 + r, c] took twice as long)
    if not affine and not residual_add:
        for r in range(nb):
            o, a = out[b0 + r], acc[r * width : r * width + n_out]
            for c in range(n_out):
                o[c] = a[c] + bias[c]
    elif not residual_add:
        for r in range(nb):
            o, a = out[b0 + r], acc[r * width : r * width + n_out]
            for c in range(n_out):
                o[c] = (a[c] + bias[c]) * scale[c] + shift[c]
    elif not affine:
        for r in range(nb):
            o, a = out[b0 + r], acc[r * width : r * width + n_out]
            res = residual[b0 + r]
            for c in range(n_out):
                o[c] = (a[c] + bias[c]) + res[c]
    else:
        for r in range(nb):
            o, a = out[b0 + r], acc[r * width : r * width + n_out]
            res = residual[b0 + r]
            for c in range(n_out):
                o[c] = ((a[c] + bias[c]) * scale[c] + shift[c]) + res[c]


@njit(cache=True, nogil=True, inline="always")
def origins(b0, nb, g, org):
    """``org[r]`` = (sample * H, top row, left column) of the patch of row ``b0 + r``.

    One division for the block, then increments (a division per row and tap
    would cost more than the sums).
    """
    h, s, p, ho, wo = g[0], g[4], g[5], g[6], g[7]
    ox = b0 % wo
    t = b0 // wo
    oy = t % ho
    n = t // ho
    for r in range(nb):
        org[r, 0] = n * h
        org[r, 1] = oy * s - p
        org[r, 2] = ox * s - p
        ox += 1
        if ox == wo:
            ox = 0
            oy += 1
            if oy == ho:
                oy = 0
                n += 1


@njit(cache=True, nogil=True, inline="always")
def start_block(acc, width, g, org, b0, nb):
    """Zero the float32 sums of a block of `nb` rows from ``b0`` (`acc`,
    `width` a row) and find their patch origins (:func:`origins`); return
    the vectors of 8 floats a row adds at a time (the literal the kernels
    compile a loop for: 1 to 8)."""
    for i in range(nb * width):
        acc[i] = 0.0
    origins(b0, nb, g, org)
    return min(width, UNROLL_FLOATS) // LANES


@njit(cache=True, nogil=True, inline="always")
def tap_offset(org, r, ky, kx, g):
    """Offset of the first word of tap ``(ky, kx)`` of block row `r`, -1 if padded."""
    iy = org[r, 1] + ky
    ix = org[r, 2] + kx
    if iy < 0 or iy >= g[0] or ix < 0 or ix >= g[1]:
        return -1
    return ((org[r, 0] + iy) * g[1] + ix) * g[2]


@njit(cache=True, nogil=True, inline="always")
def tap_offsets(org, nb, ky, kx, g, offs):
    """``offs[r]`` = :func:`tap_offset` of tap ``(ky, kx)`` for each block row r."""
    for r in range(nb):
        offs[r] = tap_offset(org, r, ky, kx, g)


@njit(cache=True, nogil=True, fastmath=False)
def xnor_conv(
    x, wt, n_bits, g, taps_per_word, tap_bits, corr, alpha, beta, out, r0, r1
):
    """Sign x sign convolution of bit maps: ``(a . s + corr) * alpha + beta``.

    The taps of each output row are gathered into a compact patch (a tap of
    ``C <= 32`` channels takes ``tap_bits`` bits, ``taps_per_word`` taps a
    word, see :func:`~sksign.deploy._maps.compact_taps`; wider taps keep
    their words), padded taps as zero words, and counted against each
    output's weight words with one scalar popcount per word (a patch is a
    few words; the counts of a word go over the outputs in vectors); the
    padding corrections ``corr`` (per output pixel,
    :func:`~sksign.deploy._maps.conv_corrections`) are added before the
    float32 affine map.

    Parameters
    ----------
    x : ndarray of shape (n * H * W * wpp,), dtype uint64
        The maps, flat.
    wt : ndarray of shape (n_patch_words, n_out), dtype uint64
        Compact weight signs, word-major.
    n_bits : int
        ``k * k * C``.
    g : ndarray of shape (8,), dtype int64
        Geometry (module docstring).
    taps_per_word, tap_bits : int
        Compact layout (one tap of ``64 * wpp`` bits when ``wpp > 1``).
    corr : ndarray of shape (Ho * Wo, n_out), dtype int32
    alpha, beta : ndarray of shape (n_out,), dtype float32
    out : ndarray of shape (n * Ho * Wo, n_out), dtype float32
    r0, r1 : int
        Output row range.
    """
    n_cw, n_out = wt.shape
    wpp, k, h, w = g[2], g[3], g[0], g[1]
    n_pix = g[6] * g[7]
    n_bits32 = np.int32(n_bits)
    patch = np.empty(n_cw, np.uint64)
    dots = np.empty(n_out, np.int32)
    org = np.empty((XNOR_CONV_BLOCK, 3), np.int64)
    # word and shift of each tap (no division in the loops)
    tap_word = np.empty(k * k, np.int64)
    tap_shift = np.empty(k * k, np.uint64)
    for t in range(k * k):
        tap_word[t] = t // taps_per_word if wpp == 1 else t * wpp
        tap_shift[t] = (t % taps_per_word) * tap_bits if wpp == 1 else 0
    for b0 in range(r0, r1, XNOR_CONV_BLOCK):
        nb = min(XNOR_CONV_BLOCK, r1 - b0)
        origins(b0, nb, g, org)
        pix = b0 % n_pix
        for r in range(nb):
            for j in range(n_cw):
                patch[j] = 0
            iy0, ix0 = org[r, 1], org[r, 2]
            inside = iy0 >= 0 and ix0 >= 0 and iy0 + k <= h and ix0 + k <= w
            for ky in range(k):
                for kx in range(k):
                    if inside:
                        off = ((org[r, 0] + iy0 + ky) * w + ix0 + kx) * wpp
                    else:
                        off = tap_offset(org, r, ky, kx, g)
                        if off < 0:
                            continue  # zero words: the corrections add it back
                    t = ky * k + kx
                    if wpp == 1:
                        patch[tap_word[t]] |= x[off] << tap_shift[t]
                    else:
                        for j in range(wpp):
                            patch[tap_word[t] + j] = x[off + j]
            # counts vectorised over the outputs, word by word
            for c in range(n_out):
                dots[c] = 0
            for j in range(n_cw):
                pj = patch[j]
                wj = wt[j]
                for c in range(n_out):
                    dots[c] += np.int32(popcount64(pj ^ wj[c]))
            cr = corr[pix]
            o = out[b0 + r]
            for c in range(n_out):
                o[c] = (
                    np.float32(np.int32(n_bits32 - 2 * dots[c] + cr[c])) * alpha[c]
                    + beta[c]
                )
            pix = pix + 1 if pix + 1 < n_pix else 0


#: Inputs of a run of ``scaled_add_rows`` in :func:`float_conv`: the weights
#: it reads (this many rows of 64 floats) stay in L1 while every row of a
#: block of outputs reads them.
FLOAT_CONV_RUN = 64


@njit(cache=True, nogil=True, fastmath=False)
def _float_rows(x, flat, g, acc, org, nb, width, n_vec):
    """``acc[r]`` += the float32 sums of block row r, `n_vec` vectors at a time.

    Per row of the patch (ky), run of at most :data:`FLOAT_CONV_RUN` inputs
    and slice of outputs, every row of the block in turn: each row adds its
    inputs in the order ``(kx, c)``, whatever the block. Rows whose patch
    row lies inside the maps go :func:`rows_at_once` at a time
    (:func:`scaled_add_row_block`: their chains of adds overlap), the same
    sums as one by one.
    """
    literally(n_vec)
    k, channels = g[3], g[2]
    chunk = n_vec * LANES
    span = k * channels  # the inputs of a row of the patch
    group = rows_at_once(n_vec, FLOAT_LANES)
    dsts = np.empty(group, np.int64)
    starts = np.empty(group, np.int64)
    for ky in range(k):
        for t0 in range(0, span, FLOAT_CONV_RUN):
            t1 = min(span, t0 + FLOAT_CONV_RUN)
            n = t1 - t0
            for c in range(0, width, chunk):
                w0 = ky * span * width + c
                waiting = 0  # rows gathered for scaled_add_row_block
                for r in range(nb):
                    iy, ix = org[r, 1] + ky, org[r, 2]
                    if iy < 0 or iy >= g[0]:
                        continue
                    dst = r * width + c
                    if ix >= 0 and ix + k <= g[1]:
                        # the taps of the patch's row are adjacent pixels
                        dsts[waiting] = dst
                        starts[waiting] = tap_offset(org, r, ky, 0, g) + t0
                        waiting += 1
                        if waiting == group:
                            w = w0 + t0 * width
                            scaled_add_row_block(
                                acc, dsts, x, starts, flat, w, n, width, n_vec
                            )
                            waiting = 0
                        continue
                    for kx in range(t0 // channels, (t1 - 1) // channels + 1):
                        if ix + kx < 0 or ix + kx >= g[1]:
                            continue  # zero padding adds nothing
                        a = max(t0, kx * channels)
                        b = min(t1, (kx + 1) * channels)
                        o = tap_offset(org, r, ky, kx, g) + a - kx * channels
                        scaled_add_rows(
                            acc, dst, x, o, flat, w0 + a * width, b - a, width, n_vec
                        )
                for q in range(waiting):
                    scaled_add_rows(
                        acc,
                        dsts[q],
                        x,
                        starts[q],
                        flat,
                        w0 + t0 * width,
                        n,
                        width,
                        n_vec,
                    )


@njit(cache=True, nogil=True, fastmath=False)
def _sparse_rows(x, flat, g, acc, offs, org, nb, width, n_vec):
    """:func:`_float_rows` for sparse maps: the zero inputs skipped.

    Per tap and input channel, the rows of the block whose input is not 0
    add its weight row scaled (the rows of the block share each weight row
    read); the same sums, in the same order.
    """
    literally(n_vec)
    k, channels = g[3], g[2]
    chunk = n_vec * LANES
    for ky in range(k):
        for kx in range(k):
            tap_offsets(org, nb, ky, kx, g, offs)
            tap = (ky * k + kx) * channels
            for ch in range(channels):
                src = (tap + ch) * width
                for r in range(nb):
                    o = offs[r]
                    if o < 0 or x[o + ch] == 0:
                        continue
                    for c in range(0, width, chunk):
                        dst = r * width + c
                        scaled_add_rows(acc, dst, x, o + ch, flat, src + c, 1, 0, n_vec)


@njit(cache=True, nogil=True, fastmath=False)
def float_conv(x, weights, sparse, g, bias, scale, shift, residual, out, r0, r1):
    """Real weights on channels-last float maps: ``out = conv(x) + bias``.

    A direct convolution: per output row and tap, the weight rows of the
    tap's channels scaled by the inputs and added with the sums in
    registers (:func:`~sksign.deploy._kernels._vectors.scaled_add_rows`;
    the taps of a row of the patch in one run where none is padded), or,
    on `sparse` maps, each nonzero input alone (zero inputs skipped: a
    branch that pays where nearly all are zero, as in the spike counts of
    an untrained SEW-ResNet). The float32 sums go in the order ``(ky, kx,
    c)``, each product and sum rounded, whatever the block and the path (a
    zero input adds nothing).

    Parameters
    ----------
    x : ndarray of shape (n * H * W * C,), dtype float32
        The maps, flat (channels last).
    weights : ndarray of shape (k * k * C, width), dtype float32
        One row per patch unit ``(ky, kx, c)``, the outputs padded with zeros
        to ``width`` (:func:`~sksign.deploy._kernels._vectors.padded_width`).
    sparse : bool
        Skip the zero inputs one by one.
    g : ndarray of shape (8,), dtype int64
        Geometry, with ``C`` in place of the words per pixel.
    bias : ndarray of shape (n_out,), dtype float32
    scale, shift : ndarray of shape (n_out,) or (0,), dtype float32
        A per-channel affine map applied next (empty: none), see
        :func:`epilogue_rows`.
    residual : ndarray of shape (n * Ho * Wo, n_out) or (0, 0), dtype float32
        Maps added last (empty: none).
    out : ndarray of shape (n * Ho * Wo, n_out), dtype float32
    r0, r1 : int
        Output row range.
    """
    width = weights.shape[1]
    block, acc, offs, org = block_buffers(width)
    flat = weights.reshape(-1)
    for b0 in range(r0, r1, block):
        nb = min(block, r1 - b0)
        _float_block(x, flat, sparse, g, width, acc, offs, org, b0, nb)
        epilogue_rows(acc, width, bias, scale, shift, residual, b0, nb, out)


@njit(cache=True, nogil=True, fastmath=False)
def float_conv_step(x, weights, sparse, g, bias, scale, shift, out, r0, r1):
    """:func:`float_conv` with its affine map, then a step: the ``pixel_bits``
    ``1[(conv(x) + bias) * scale + shift >= 0]``, without the float maps.

    Each block's sums get the bias in float32, then go through
    :func:`~sksign.deploy._kernels.pack_affine_ge` while still in cache: the
    ops rounded as :func:`epilogue_rows` and a ``pixel_step`` round them, so
    the bits are those of the layers one after the other.

    Parameters
    ----------
    x, weights, sparse, g, bias : as :func:`float_conv`
    scale, shift : ndarray of shape (n_out,), dtype float32
    out : ndarray of shape (n * Ho * Wo, ceil(n_out / 64)), dtype uint64
        The bits of each output pixel.
    r0, r1 : int
        Output row range.
    """
    width = weights.shape[1]
    n_out = bias.shape[0]
    block, acc, offs, org = block_buffers(width)
    z = np.empty((block, n_out), np.float32)
    flat = weights.reshape(-1)
    for b0 in range(r0, r1, block):
        nb = min(block, r1 - b0)
        _float_block(x, flat, sparse, g, width, acc, offs, org, b0, nb)
        for r in range(nb):
            zr, a = z[r], acc[r * width : r * width + n_out]
            for c in range(n_out):
                zr[c] = a[c] + bias[c]
        pack_affine_ge(z, scale, shift, out[b0 : b0 + nb], 0, nb)


@njit(cache=True, nogil=True, fastmath=False)
def _float_block(x, flat, sparse, g, width, acc, offs, org, b0, nb):
    """The float32 sums of the block of `nb` output rows from ``b0`` into
    `acc` (flat, `width` a row): zeroed, then every tap's inputs added
    (:func:`_float_rows`, or :func:`_sparse_rows` on `sparse` maps)."""
    n_vec = start_block(acc, width, g, org, b0, nb)
    for count in literal_unroll((1, 2, 3, 4, 5, 6, 7, 8)):
        if count == n_vec:
            if sparse:
                _sparse_rows(x, flat, g, acc, offs, org, nb, width, count)
            else:
                _float_rows(x, flat, g, acc, org, nb, width, count)


@njit(cache=True, nogil=True, fastmath=False)
def mean_pool(x, h, w, channels, k, out, r0, r1):
    """``k x k`` average pooling (stride ``k``) of channels-last float maps.

    Each mean is the float64 sum of its ``k * k`` float32 inputs divided by
    ``k * k``, rounded once to float32.

    Parameters
    ----------
    x : ndarray of shape (n * H * W * C,), dtype float32
        The maps, flat (channels last).
    h, w, channels, k : int
        H, W, C and the window.
    out : ndarray of shape (n * (H // k) * (W // k), C), dtype float32
    r0, r1 : int
        Output row range (a row is a sample and an output pixel).
    """
    ho, wo = h // k, w // k
    area = np.float64(k * k)
    acc = np.empty(channels, np.float64)
    for row in range(r0, r1):
        ox = row % wo
        t = row // wo
        oy = t % ho
        n = t // ho
        for c in range(channels):
            acc[c] = 0.0
        for dy in range(k):
            base = ((n * h + oy * k + dy) * w + ox * k) * channels
            for dx in range(k):
                src = x[base + dx * channels : base + (dx + 1) * channels]
                for c in range(channels):
                    acc[c] += np.float64(src[c])
        o = out[row]
        for c in range(channels):
            o[c] = np.float32(acc[c] / area)
