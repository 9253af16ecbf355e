"""The direct convolution kernels on ``pixel_bits`` maps against numpy references."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest

from sksign.deploy._kernels import (
    float_conv,
    mean_pool,
    padded_width,
    sum_conv,
    sum_conv_step,
    xnor_conv,
)
from sksign.deploy._kernels._madd import patch_pairs, patch_words
from sksign.deploy._maps import (
    compact_taps,
    conv_corrections,
    im2col,
    map_geometry,
    nibble_tables,
    pack_pixels,
    tap_layout,
    words_per_pixel,
)
from sksign.deploy._ops._common import (
    quantise,
    step_by_lut_tiles,
    step_by_pairs,
)
from sksign.deploy._ops._tables import sum_bound
from sksign.kernels import pack_bits, packed_to_words, target_has

#: The epilogue arguments of sum_conv and float_conv that take over nothing.
NO_EPILOGUE = (
    np.zeros(0, np.float32),
    np.zeros(0, np.float32),
    np.zeros((0, 0), np.float32),
)

# (batch, channels, size, out channels, kernel, stride, padding): channels
# not multiples of 8 or 64, maps of one pixel, batch 1, stride 2, padding 0/1
GEOMETRIES = [
    (1, 16, 8, 16, 3, 1, 1),
    (2, 3, 5, 7, 3, 1, 1),
    (3, 5, 7, 9, 3, 2, 1),
    (1, 33, 4, 40, 3, 2, 0),
    (2, 64, 3, 65, 3, 1, 1),
    (1, 70, 1, 3, 3, 1, 1),
    (2, 130, 4, 17, 1, 2, 0),
    (1, 1, 1, 1, 1, 1, 0),
    (5, 12, 6, 33, 3, 1, 1),
    (3, 8, 5, 130, 3, 2, 1),
    (2, 24, 6, 128, 3, 1, 1),
]


def _maps(rng, n, c, size, density=0.5):
    """Random 0/1 maps (n, H, W, C) and their ``pixel_bits``."""
    bits = (rng.random((n, size, size, c)) < density).astype(np.uint8)
    words = pack_pixels(bits.reshape(n, -1) - 0.5, c, lambda k, r, *a: k(*a, 0, r))
    return bits, words


def _attrs(c, size, oc, k, s, p):
    return {"shape": [c, size, size], "kernel": k, "stride": s, "padding": p}


def _patches(on, k, s, p):
    """im2col of 0/1 maps (zero padded), float64, patch order (ky, kx, c)."""
    patches, _ = im2col(on.astype(np.float64), k, s, p)
    return patches


def _sum_arrays(wt, c, k, bits):
    """What sum_conv reads: the tables and the weights padded alike."""
    lanes = padded_width(wt.shape[1])  # the widths the kernels unroll
    table, nib_word, nib_shift = nibble_tables(wt, c, k, lanes, bits=bits)
    weights = np.zeros((len(wt), table.shape[3]), np.float32)
    weights[:, : wt.shape[1]] = wt
    return table, nib_word, nib_shift, weights


@pytest.mark.parametrize(("tables", "bits"), [(True, 4), (True, 8), (False, 4)])
@pytest.mark.parametrize(("n", "c", "size", "oc", "k", "s", "p"), GEOMETRIES)
def test_sum_conv_equals_a_float64_product(n, c, size, oc, k, s, p, tables, bits):
    """Check real weights on bit maps (tables of 4 or 8 bits, or weight rows).

    Against a float64 im2col product.
    """
    rng = np.random.default_rng(c * 31 + oc)
    on, words = _maps(rng, n, c, size)
    wt = rng.standard_normal((k * k * c, oc)).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32)
    arrays = _sum_arrays(wt, c, k, bits)
    g = map_geometry(_attrs(c, size, oc, k, s, p))
    rows = n * int(g[6] * g[7])
    out = np.empty((rows, oc), np.float32)
    sum_conv(words.reshape(-1), *arrays, tables, g, bias, *NO_EPILOGUE, out, 0, rows)
    ref = _patches(on, k, s, p) @ wt.astype(np.float64) + bias
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    # any split of the rows gives the same sums, bit for bit
    again = np.empty_like(out)
    for a, b in [(0, rows // 3), (rows // 3, rows)]:
        sum_conv(words.reshape(-1), *arrays, tables, g, bias, *NO_EPILOGUE, again, a, b)
    np.testing.assert_array_equal(again, out)


@pytest.mark.parametrize(("tables", "bits"), [(True, 4), (True, 8), (False, 4)])
@pytest.mark.parametrize(("n", "c", "size", "oc", "k", "s", "p"), GEOMETRIES)
def test_sum_conv_step_is_the_exact_step(
    n, c, size, oc, k, s, p, tables, bits, garbage_buffers
):
    """Check ``1[sum of active w >= threshold]``, ties included, bit for bit.

    Weights on a grid of 1/8 make the float64 sums exact, and thresholds
    equal to some of those sums put outputs exactly on the tie (where the
    float32 sum cannot decide and the exact sum is taken). The products and
    look-ups of the patches take their buffers full of garbage: they read
    none they have not written.
    """
    rng = np.random.default_rng(c * 7 + oc)
    on, words = _maps(rng, n, c, size)
    wt = (rng.integers(-16, 17, (k * k * c, oc)) / 8).astype(np.float32)
    sums = _patches(on, k, s, p) @ wt.astype(np.float64)
    threshold = rng.standard_normal(oc).astype(np.float32)
    threshold[::2] = sums[0, ::2]  # exact ties on the first row
    arrays = _sum_arrays(wt, c, k, bits)
    terms = arrays[0].shape[0] * arrays[0].shape[1] if tables else len(wt)
    bound = sum_bound(wt, terms)
    g = map_geometry(_attrs(c, size, oc, k, s, p))
    rows = n * int(g[6] * g[7])
    out = np.empty((rows, words_per_pixel(oc)), np.uint64)
    w_rows = np.ascontiguousarray(wt.T)
    args = (words.reshape(-1), *arrays, tables, g, threshold, bound, w_rows, out)
    sum_conv_step(*args, 0, rows)
    ref = pack_pixels(
        (sums >= threshold).astype(np.float32) - 0.5, oc, lambda k, r, *a: k(*a, 0, r)
    )
    np.testing.assert_array_equal(out, ref.reshape(out.shape))
    if target_has("avx2"):  # the vpmaddwd products of the patches, certified
        _, scale, _, w_rows, pairs, _ = quantise(wt)
        by_pairs = np.empty_like(out)
        step_by_pairs(
            (words.reshape(-1), g, c, pairs, scale, threshold), w_rows, by_pairs, 2
        )
        np.testing.assert_array_equal(by_pairs, out)
    lut = quantise(wt)[5]
    if lut is not None and c % 8 == 0:  # the look-up sums of the patches' words
        width = len(wt)
        patches = np.empty((rows, -(-width // 64)), np.uint64)
        patch_words(words.reshape(-1), g, c, patches, 0, rows)
        by_lut = np.empty_like(out)
        step_by_lut_tiles(lut, threshold, patches, width, w_rows, by_lut, 2)
        np.testing.assert_array_equal(by_lut, out)


@pytest.mark.skipif(not target_has("avx2"), reason="needs AVX2")
@pytest.mark.parametrize(("n", "c", "size", "oc", "k", "s", "p"), GEOMETRIES)
def test_patch_pairs_are_the_patches(n, c, size, oc, k, s, p):
    """Check the paired patch bits against im2col (by bytes and unit by unit)."""
    rng = np.random.default_rng(c * 5 + size)
    on, words = _maps(rng, n, c, size)
    g = map_geometry(_attrs(c, size, oc, k, s, p))
    patches = _patches(on, k, s, p).astype(np.int32)
    width = patches.shape[1]
    x32 = np.full((len(patches), -(-width // 2)), -1, np.int32)
    patch_pairs(words.reshape(-1), g, c, x32, 0, len(patches))
    pairs = np.zeros((len(patches), 2 * x32.shape[1]), np.int32)
    pairs[:, :width] = patches
    np.testing.assert_array_equal(x32, pairs[:, 0::2] | (pairs[:, 1::2] << 16))


#: Taps of one and of several whole words (their words copied as words).
WORD_TAPS = [(2, 128, 4, 8, 3, 1, 1), (1, 192, 3, 8, 3, 2, 1)]


@pytest.mark.parametrize(
    ("n", "c", "size", "oc", "k", "s", "p"), GEOMETRIES + WORD_TAPS
)
def test_patch_words_are_the_packed_patches(n, c, size, oc, k, s, p):
    """Check the patches as rows of words against im2col packed by
    :func:`~sksign.kernels.pack_bits` (channels in whole bytes only), every
    word written (the buffer starts full of ones)."""
    if c % 8:
        pytest.skip("patch_words takes channels in whole bytes")
    rng = np.random.default_rng(c * 3 + size)
    on, words = _maps(rng, n, c, size)
    g = map_geometry(_attrs(c, size, oc, k, s, p))
    patches = _patches(on, k, s, p).astype(np.uint8)
    width = patches.shape[1]
    pw = np.full((len(patches), -(-width // 64)), ~np.uint64(0), np.uint64)
    patch_words(words.reshape(-1), g, c, pw, 0, len(patches) // 2)
    patch_words(words.reshape(-1), g, c, pw, len(patches) // 2, len(patches))
    np.testing.assert_array_equal(pw, packed_to_words(pack_bits(patches), width))


@pytest.mark.parametrize(("n", "c", "size", "oc", "k", "s", "p"), GEOMETRIES)
def test_xnor_conv_equals_a_sign_product(n, c, size, oc, k, s, p):
    """Check the direct XNOR conv (compact taps, padding corrections) exactly."""
    rng = np.random.default_rng(c * 13 + oc)
    on, words = _maps(rng, n, c, size)
    signs = rng.random((oc, k, k, c)) < 0.5
    group = 64 * words_per_pixel(c)
    padded = np.zeros((oc, k, k, group), np.uint8)
    padded[..., :c] = signs
    raw = np.packbits(padded.reshape(oc, -1), axis=1)
    wt = compact_taps(packed_to_words(raw, k * k * group), c, k)
    per_word, tap_bits, n_words = tap_layout(c, k)
    assert wt.shape == (n_words, oc)
    s_pm = 2 * signs.astype(np.int64) - 1
    corr = conv_corrections(s_pm, (c, size, size), k, s, p)
    alpha = rng.standard_normal(oc).astype(np.float32)
    beta = rng.standard_normal(oc).astype(np.float32)
    g = map_geometry(_attrs(c, size, oc, k, s, p))
    rows = n * int(g[6] * g[7])
    out = np.empty((rows, oc), np.float32)
    args = (words.reshape(-1), wt, k * k * c, g, per_word, tap_bits, corr)
    xnor_conv(*args, alpha, beta, out, 0, rows)
    # zero padding of the +-1 activations: 0, as torch pads 2 a - 1
    a = 2 * _patches(on, k, s, p) - 1
    a *= _patches(np.ones_like(on), k, s, p)
    dots = (a @ s_pm.reshape(oc, -1).T).astype(np.int64)
    ref = dots.astype(np.float32) * alpha + beta
    np.testing.assert_array_equal(out, ref)


def _table_order_sums(words, table, nib_word, nib_shift, g, rows):
    """The table sums of output rows `rows`, added in float32 in the kernel's
    order (tap, then group), a padded tap adding nothing."""
    h, w, wpp, k, s, p, ho, wo = (int(v) for v in g)
    n_vals = table.shape[2]
    sums = np.zeros((len(rows), table.shape[3]), np.float32)
    for i, row in enumerate(rows):
        n, pix = divmod(row, ho * wo)
        oy, ox = divmod(pix, wo)
        for ky in range(k):
            for kx in range(k):
                iy, ix = oy * s - p + ky, ox * s - p + kx
                if not (0 <= iy < h and 0 <= ix < w):
                    continue
                at = ((n * h + iy) * w + ix) * wpp
                for m in range(len(nib_word)):
                    word = int(words[at + nib_word[m]])
                    val = word >> int(nib_shift[m]) & (n_vals - 1)
                    sums[i] = sums[i] + table[ky * k + kx, m, val]
    return sums


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize(
    ("n", "c", "size", "oc", "k", "s", "p"),
    [*GEOMETRIES, (2, 16, 6, 32, 3, 1, 1), (1, 20, 5, 136, 3, 1, 1)],
)
def test_table_sums_add_in_their_order_bit_for_bit(
    n, c, size, oc, k, s, p, bits, lanes
):
    """Check the register blocks of table rows against float32 sums in term
    order, bit for bit: vectors of 8 or 16 floats (whatever this CPU has),
    rows inside the maps read in place and border rows gathered, blocks of
    rows and single rows, outputs over several chunks."""
    from sksign.deploy._kernels._conv import block_buffers, origins
    from sksign.deploy._kernels._sums import _table_sums, _table_terms

    rng = np.random.default_rng(c * 13 + oc + bits)
    _, words = _maps(rng, n, c, size)
    words = words.reshape(-1)
    wt = rng.standard_normal((k * k * c, oc)).astype(np.float32)
    table, nib_word, nib_shift, _ = _sum_arrays(wt, c, k, bits)
    g = map_geometry(_attrs(c, size, oc, k, s, p))
    rows = n * int(g[6] * g[7])
    width = table.shape[3]
    n_vec = min(width, 64) // 8
    block, acc, _, org = block_buffers(width)
    terms = _table_terms(nib_word, nib_shift, table.shape[2], g)
    for b0 in range(0, rows, block):
        nb = min(block, rows - b0)
        acc[:] = 0
        origins(b0, nb, g, org)
        _table_sums(words, table, terms, g, acc, org, nb, n_vec, lanes)
        ref = _table_order_sums(
            words, table, nib_word, nib_shift, g, range(b0, b0 + nb)
        )
        got = acc[: nb * width].reshape(nb, width)
        np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


def test_nibble_tables_sum_the_weights_of_each_nibble():
    """Check a table row is the sum of the weights of its set bits."""
    rng = np.random.default_rng(0)
    c, k, oc = 12, 3, 5
    wt = rng.standard_normal((k * k * c, oc)).astype(np.float32)
    table, nib_word, nib_shift = nibble_tables(wt, c, k)
    # 12 channels: byte 0 (two nibbles) and the high nibble of byte 1
    assert table.shape == (k * k, 3, 16, 8)  # 5 outputs, padded to 8
    assert not table[..., oc:].any()
    assert nib_word.tolist() == [0, 0, 0]
    assert nib_shift.tolist() == [0, 4, 12]
    for unit in range(c):
        one = np.zeros((1, 1, 1, c), np.uint8)
        one[..., unit] = 1
        (word,) = pack_pixels(one.reshape(1, -1) - 0.5, c, lambda f, r, *a: f(*a, 0, r))
        hits = [
            (m, int(word[0]) >> int(nib_shift[m]) & 15)
            for m in range(3)
            if int(word[0]) >> int(nib_shift[m]) & 15
        ]
        assert len(hits) == 1
        m, v = hits[0]
        np.testing.assert_array_equal(table[4, m, v, :oc], wt[4 * c + unit])


def test_sum_conv_chooses_its_tables_by_rows(monkeypatch):
    """Check bytes serve many rows, nibbles fewer, weight rows very few or past caps."""
    from sksign.deploy._ops import _tables
    from sksign.deploy._ops._common import Context
    from sksign.deploy._ops._tables import SumConv

    rng = np.random.default_rng(3)
    c, oc, k = 16, 16, 3
    wt = rng.standard_normal((k * k * c, oc)).astype(np.float32)
    layer = {
        "attrs": {"shape": [c, 8, 8], "channels": oc, "kernel": k},
        "tensors": {"weight_t": "w"},
    }
    sums = SumConv(layer, Context({"w": wt}, {}))
    by_bytes = -(-sums.tables[8][0].nbytes // _tables.BYTE_TABLE_ROW_BYTES)
    assert sums.args(10**6)[0].shape[2] == 256  # bytes
    assert sums.args(by_bytes)[0].shape[2] == 256
    assert sums.args(by_bytes - 1)[0].shape[2] == 16  # nibbles
    assert sums.args(1)[0].shape[2] == 16
    # tables of more bytes a row than the limit: by weight rows
    nibbles = sums.tables[4][0].nbytes
    monkeypatch.setattr(_tables, "NIBBLE_TABLE_ROW_BYTES", nibbles // 2)
    assert sums.args(1)[-1] is False  # by weight rows
    assert sums.args(2)[0].shape[2] == 16
    assert sums.bound(1).shape == (oc,)
    # maps with few bits set sum by weight rows, at any number of rows
    assert sums.args(10**6, sparse=True)[-1] is False
    assert np.all(sums.bound(10**6, sparse=True) > sums.bound(10**6))  # more terms
    for share, sparse in [(0.0, True), (0.01, True), (0.03, False), (0.5, False)]:
        _, words = _maps(rng, 4, c, 8, density=share)
        # below C / 800 = 2% of the bits set (16 channels)
        assert sums.sparse(words) is sparse
    monkeypatch.setattr(_tables, "LUT_MAX_BYTES", 0)
    monkeypatch.setattr(_tables, "BYTE_TABLE_MAX_BYTES", 0)
    rows = SumConv(layer, Context({"w": wt}, {}))
    assert rows.args(10**6)[-1] is False  # by weight rows
    np.testing.assert_array_equal(rows.args(1)[3][:, :oc], wt)


def _in_order_float32(patches, wt, bias):
    """``patches @ wt + bias`` summed in float32 unit by unit, in patch order."""
    sums = np.zeros((len(patches), wt.shape[1]), np.float32)
    for u in range(wt.shape[0]):  # a product, then a sum, each rounded
        sums = sums + patches[:, u : u + 1].astype(np.float32) * wt[u]
    return sums + bias


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize(("n", "c", "size", "oc", "k", "s", "p"), GEOMETRIES)
def test_float_conv_equals_a_float64_product(n, c, size, oc, k, s, p, sparse):
    """Check the direct float conv (every input, or the nonzero ones) against
    im2col @ w in float64, and its float32 sums bit for bit against the same
    sums made in patch order."""
    rng = np.random.default_rng(c * 17 + oc)
    x = rng.standard_normal((n, size, size, c)).astype(np.float32)
    x[rng.random(x.shape) < 0.5] = 0  # sparse, as spike counts are
    wt = rng.standard_normal((k * k * c, oc)).astype(np.float32)
    weights = np.zeros((len(wt), padded_width(oc)), np.float32)
    weights[:, :oc] = wt
    bias = rng.standard_normal(oc).astype(np.float32)
    g = map_geometry(_attrs(c, size, oc, k, s, p))
    g[2] = c  # floats per pixel
    rows = n * int(g[6] * g[7])
    out = np.empty((rows, oc), np.float32)
    float_conv(x.reshape(-1), weights, sparse, g, bias, *NO_EPILOGUE, out, 0, rows)
    patches = _patches(x, k, s, p)
    ref = patches @ wt.astype(np.float64) + bias
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out, _in_order_float32(patches, wt, bias))


@pytest.mark.parametrize(("n", "c", "h", "w", "k"), [(2, 5, 7, 9, 2), (1, 3, 6, 6, 3)])
def test_mean_pool_equals_numpy(n, c, h, w, k):
    """Check the average pooling (odd sizes cut) against numpy, bit for bit."""
    x = np.random.default_rng(0).standard_normal((n, h, w, c)).astype(np.float32)
    ho, wo = h // k, w // k
    out = np.empty((n * ho * wo, c), np.float32)
    mean_pool(x.reshape(-1), h, w, c, k, out, 0, n * ho * wo)
    crop = x[:, : ho * k, : wo * k].reshape(n, ho, k, wo, k, c)
    ref = (crop.sum(axis=(2, 4), dtype=np.float64) / (k * k)).astype(np.float32)
    np.testing.assert_array_equal(out, ref.reshape(out.shape))
