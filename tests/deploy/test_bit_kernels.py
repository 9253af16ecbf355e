"""The packed bit layer kernels against plain numpy references."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from sksign.deploy._kernels import (
    bit_accumulate,
    channel_shares,
    fire_pixels,
    pack_ge,
    unpack_words,
    xnor_affine,
)
from sksign.deploy._kernels._bits import (
    certain_step_bits,
    flag_buffers,
    pack_flags,
    step_interval,
)
from sksign.deploy._kernels._madd import BLOCK_ROWS, step_by_pairs
from sksign.deploy._kernels._xnor import vector_blocks, xnor_affine_vectors
from sksign.kernels import pack_bits, packed_to_words

WIDTHS = [1, 7, 8, 63, 64, 65, 130, 200]

#: The sign x sign kernels: carry-save adders, and the register blocks
#: (chosen on AVX-512 VPOPCNTDQ; generic LLVM IR, so checked on any CPU).
XNOR_KERNELS = [
    pytest.param(xnor_affine, id="carry_save"),
    pytest.param(xnor_affine_vectors, id="vectors"),
]


def _words(bits):
    return packed_to_words(pack_bits(bits), bits.shape[1])


def _weights(kernel, w):
    """The 0/1 weight rows `w` as `kernel` reads them: word-major, and in
    blocks of 32 columns for the register blocks."""
    wt = _words(w).T.copy()
    return vector_blocks(wt) if kernel is xnor_affine_vectors else wt


@given(
    n=st.integers(1, 5),
    width=st.integers(1, 200),
    seed=st.integers(0, 2**32 - 1),
)
def test_pack_ge_lays_bits_out_as_packed_to_words(n, width, seed):
    """Check that pack_ge gives the words of pack_bits + packed_to_words."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, width)).astype(np.float32)
    z[rng.random((n, width)) < 0.2] = 0.0  # ties: 1[z >= 0] fires on 0
    thr = np.zeros(width, dtype=np.float32)
    out = np.empty((n, -(-width // 64)), dtype=np.uint64)
    pack_ge(z, thr, out, 0, n)
    np.testing.assert_array_equal(out, _words((z >= 0).astype(np.uint8)))
    back = np.empty((n, width), dtype=np.uint8)
    unpack_words(out, width, back, 0, n)
    np.testing.assert_array_equal(back, z >= 0)


def test_pack_ge_compares_with_each_threshold():
    """Check ``z >= threshold`` per unit, NaN never firing."""
    z = np.array([[0.5, 0.5, -1.0, np.nan]], dtype=np.float32)
    thr = np.array([0.5, 0.6, -1.0, 0.0], dtype=np.float32)
    out = np.empty((1, 1), dtype=np.uint64)
    pack_ge(z, thr, out, 0, 1)
    back = np.empty((1, 4), dtype=np.uint8)
    unpack_words(out, 4, back, 0, 1)
    assert back.tolist() == [[1, 0, 1, 0]]


@pytest.mark.parametrize("kernel", XNOR_KERNELS)
@pytest.mark.parametrize("n_in", WIDTHS)
@pytest.mark.parametrize("n_rows", [1, 3, 4, 9])
def test_xnor_affine_gives_exact_sign_dot_products(kernel, n_in, n_rows):
    """Check that the XNOR-popcount integers equal the +-1 dot products exactly."""
    rng = np.random.default_rng(n_in * 10 + n_rows)
    a = rng.integers(0, 2, (n_rows, n_in)).astype(np.uint8)
    w = rng.integers(0, 2, (11, n_in)).astype(np.uint8)
    ref = (2.0 * a - 1) @ (2.0 * w - 1).T
    out = np.empty((n_rows, 11), dtype=np.int64)
    ones, zeros = np.ones(11, np.int64), np.zeros(11, np.int64)
    kernel(_words(a), _weights(kernel, w), n_in, ones, zeros, out, 0, n_rows, 0, 11)
    np.testing.assert_array_equal(out, ref.astype(np.int64))
    # split over rows and columns: the same numbers
    part = np.zeros_like(out)
    for r0, r1 in ((0, n_rows // 2), (n_rows // 2, n_rows)):
        for c0, c1 in ((0, 5), (5, 11)):
            kernel(
                _words(a), _weights(kernel, w), n_in, ones, zeros, part, r0, r1, c0, c1
            )
    np.testing.assert_array_equal(part, out)


def test_xnor_affine_scales_and_shifts():
    """Check ``dot * alpha + beta`` per output."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, (5, 70)).astype(np.uint8)
    w = rng.integers(0, 2, (3, 70)).astype(np.uint8)
    alpha = np.array([0.5, -2.0, 0.25], np.float32)
    beta = np.array([1.0, 0.0, -3.0], np.float32)
    out = np.empty((5, 3), np.float32)
    xnor_affine(_words(a), _words(w).T.copy(), 70, alpha, beta, out, 0, 5, 0, 3)
    ref = ((2.0 * a - 1) @ (2.0 * w - 1).T) * alpha + beta
    np.testing.assert_array_equal(out, ref.astype(np.float32))


def _sign_dots(a, w):
    """Exact +-1 dot products of the 0/1 rows of `a` and `w` (numpy int64)."""
    return (2 * a.astype(np.int64) - 1) @ (2 * w.astype(np.int64) - 1).T


def _xnor_dots(a, w, r0, r1, c0, c1, kernel=xnor_affine):
    """Integer outputs of `kernel` on rows r0:r1, columns c0:c1, -1 elsewhere."""
    n_out = w.shape[0]
    out = np.full((a.shape[0], n_out), -1, dtype=np.int64)
    ones, zeros = np.ones(n_out, np.int64), np.zeros(n_out, np.int64)
    wt = _weights(kernel, w)
    kernel(_words(a), wt, a.shape[1], ones, zeros, out, r0, r1, c0, c1)
    return out


@settings(deadline=None)  # the first example may compile the kernels
@given(
    n_rows=st.integers(1, 11),
    n_in=st.integers(1, 1100),
    n_out=st.integers(1, 300),
    data=st.data(),
)
def test_xnor_affine_matches_numpy_on_any_ranges(n_rows, n_in, n_out, data):
    """Check exact dot products on random sizes, row and column ranges.

    Covers both paths of the carry-save kernel (few rows or words, and
    tiles of columns with carry-save groups of words) and the register
    blocks (weights in place and copied, a last block under 32 columns),
    bit counts off multiples of 64, rows off the blocks, column ranges off
    the tiles and starting past 0.
    """
    seed = data.draw(st.integers(0, 2**32 - 1))
    r0 = data.draw(st.integers(0, n_rows - 1))
    r1 = data.draw(st.integers(r0 + 1, n_rows))
    c0 = data.draw(st.integers(0, n_out - 1))
    c1 = data.draw(st.integers(c0 + 1, n_out))
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, (n_rows, n_in)).astype(np.uint8)
    w = rng.integers(0, 2, (n_out, n_in)).astype(np.uint8)
    ref = np.full((n_rows, n_out), -1, dtype=np.int64)
    ref[r0:r1, c0:c1] = _sign_dots(a, w)[r0:r1, c0:c1]
    for kernel in (xnor_affine, xnor_affine_vectors):
        np.testing.assert_array_equal(_xnor_dots(a, w, r0, r1, c0, c1, kernel), ref)


@pytest.mark.parametrize("kernel", XNOR_KERNELS)
@pytest.mark.parametrize("n_rows", [1, 3, 4, 7, 9])
@pytest.mark.parametrize("n_in", [64, 511, 512, 64 * 17 + 3, 64 * 40])
def test_xnor_affine_counts_constant_words_exactly(kernel, n_rows, n_in):
    """Check all-ones / all-zeros words: every counter of a group saturates."""
    n_out = 300  # more than one tile of columns, the last one partial
    a = np.zeros((n_rows, n_in), np.uint8)
    a[::2] = 1  # rows of ones and of zeros
    w = np.zeros((n_out, n_in), np.uint8)
    w[1::3] = 1
    w[2::3, : n_in // 2] = 1  # half ones
    out = _xnor_dots(a, w, 0, n_rows, 0, n_out, kernel)
    np.testing.assert_array_equal(out, _sign_dots(a, w))
    assert out[0, 0] == -n_in  # ones against -1
    assert out[0, 1] == n_in  # ones against +1
    if n_rows > 1:
        assert out[1, 0] == n_in
        assert out[1, 1] == -n_in


@pytest.mark.parametrize("kernel", XNOR_KERNELS)
@pytest.mark.parametrize("n_rows", [2, 4, 6, 33])
def test_xnor_affine_float_outputs_do_not_depend_on_the_split(kernel, n_rows):
    """Check ``dot * alpha + beta`` in float32, the same for any split."""
    rng = np.random.default_rng(n_rows)
    n_in, n_out = 1000, 260
    a = rng.integers(0, 2, (n_rows, n_in)).astype(np.uint8)
    w = rng.integers(0, 2, (n_out, n_in)).astype(np.uint8)
    alpha = rng.uniform(-1, 1, n_out).astype(np.float32)
    beta = rng.uniform(-1, 1, n_out).astype(np.float32)
    xw, wt = _words(a), _weights(kernel, w)
    out = np.empty((n_rows, n_out), np.float32)
    kernel(xw, wt, n_in, alpha, beta, out, 0, n_rows, 0, n_out)
    ref = _sign_dots(a, w) * alpha.astype(np.float64) + beta.astype(np.float64)
    np.testing.assert_array_equal(out, ref.astype(np.float32))
    part = np.empty_like(out)
    for r0, r1 in ((0, 1), (1, n_rows)):  # 1 row (in place) and the rest
        for c0, c1 in ((0, 129), (129, n_out)):
            kernel(xw, wt, n_in, alpha, beta, part, r0, r1, c0, c1)
    np.testing.assert_array_equal(part, out)


@pytest.mark.parametrize("n_in", WIDTHS)
@pytest.mark.parametrize("n_rows", [1, 5, 17])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bit_accumulate_sums_the_rows_of_active_bits(n_in, n_rows, dtype):
    """Check real weights x bits against a float64 matrix product."""
    rng = np.random.default_rng(n_in + n_rows)
    bits = (rng.random((n_rows, n_in)) < 0.4).astype(np.uint8)
    wt = rng.standard_normal((n_in, 13)).astype(np.float32)
    bias = rng.standard_normal(13).astype(np.float32)
    out = np.empty((n_rows, 13), dtype=dtype)
    out[:] = bias
    bit_accumulate(_words(bits), wt, out, 0, n_rows, 0, 13)
    ref = bits.astype(np.float64) @ wt.astype(np.float64) + bias
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    if dtype is np.float64:
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    # ranges of rows and of columns (as threads split them): the same sums
    parts = np.empty_like(out)
    parts[:] = bias
    split = n_rows // 2
    for r0, r1 in ((0, split), (split, n_rows)):
        for c0, c1 in ((0, 5), (5, 6), (6, 13)):
            bit_accumulate(_words(bits), wt, parts, r0, r1, c0, c1)
    np.testing.assert_array_equal(parts, out)


def _if_reference(current, T, threshold, reset):
    dtype = current.dtype
    v = np.zeros(current.shape[1], dtype)
    spikes = []
    for t in range(T):
        v = (v + current[t]).astype(dtype)
        s = (v - dtype.type(threshold)) >= 0
        spikes.append(s)
        v = np.where(s, 0.0 if reset == "zero" else v - dtype.type(threshold), v)
        v = v.astype(dtype)
    return np.array(spikes, dtype=np.uint8)


@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_if_neuron_rows_match_the_neuron_equations(reset, constant, dtype):
    """Check integrate-and-fire spikes on rows (``if_neuron``: one pixel of
    m units to :func:`fire_pixels`) against a reference, in the current's dtype."""
    rng = np.random.default_rng(1)
    n, T, m, thr = 3, 5, 70, 0.75
    rows = n if constant else n * T
    current = rng.uniform(-0.5, 1.2, (rows, m)).astype(dtype)
    current[0, :3] = 0.75  # exactly on the threshold: fires
    out = np.empty((n * T, 2), np.uint64)
    one = dtype(1)
    args = (current, T, constant, dtype(thr), one, False, reset == "zero", m, out)
    fire_pixels(*args, 0, n)
    got = np.empty((n * T, m), np.uint8)
    unpack_words(out, m, got, 0, n * T)
    for i in range(n):
        cur = (
            np.repeat(current[i : i + 1], T, 0)
            if constant
            else current[i * T : (i + 1) * T]
        )
        np.testing.assert_array_equal(
            got[i * T : (i + 1) * T], _if_reference(cur, T, thr, reset)
        )
    assert got[0, :3].tolist() == [1, 1, 1]


def _exact_step(bits, wt, thr):
    """``1[sum of active w >= thr]`` with exact (float64) sums."""
    return (bits.astype(np.float64) @ wt.astype(np.float64)) >= thr


@pytest.mark.parametrize("n_in", [1, 63, 65, 200, 1025])
@pytest.mark.parametrize("n_out", [1, 64, 130])
@pytest.mark.parametrize("ties", [False, True])
def test_certified_steps_equal_the_step_of_the_exact_sum(n_in, n_out, ties):
    """Check the step kernels give ``1[exact sum >= threshold]``, ties included.

    The int16 sums of the active weights, the float32 BLAS sums and (where
    the CPU has AVX2) the ``vpmaddwd`` int32 products, each certified.
    """
    from sksign.deploy._kernels import step_certified, step_int16
    from sksign.deploy._ops._common import quantise as _quantise

    rng = np.random.default_rng(n_in * 1000 + n_out + ties)
    n = 9
    bits = (rng.random((n, n_in)) < 0.5).astype(np.uint8)
    if ties:  # small integers: many sums land exactly on the threshold
        wt = rng.integers(-3, 4, (n_in, n_out)).astype(np.float32)
        thr = rng.integers(-2, 3, n_out).astype(np.float32)
    else:
        wt = (rng.standard_normal((n_in, n_out)) * 0.1).astype(np.float32)
        thr = (rng.standard_normal(n_out) * 0.1).astype(np.float32)
    xw = _words(bits)
    q, scale, abs_sum, w_rows, pairs, _lut = _quantise(wt)
    ref = _exact_step(bits, wt, thr)
    n_words = -(-n_out // 64)
    out = np.empty((n, n_words), np.uint64)
    step_int16(xw, q, scale, thr, w_rows, out, 0, n, 0, n_out)
    got = np.empty((n, n_out), np.uint8)
    unpack_words(out, n_out, got, 0, n)
    np.testing.assert_array_equal(got, ref)
    z = bits.astype(np.float32) @ wt
    out2 = np.empty_like(out)
    step_certified(z, xw, abs_sum, thr, w_rows, out2, 0, n)
    np.testing.assert_array_equal(out2, out)
    if pairs is not None:
        tiles = -(-n // BLOCK_ROWS)
        x32 = np.zeros((tiles * BLOCK_ROWS, -(-n_in // 2)), np.int32)
        sums = np.empty(
            (len(x32), pairs.shape[1] * (len(pairs) // x32.shape[1])), np.int32
        )
        out3 = np.empty_like(out)
        step_by_pairs(xw, n_in, pairs, scale, thr, w_rows, x32, sums, out3, 0, tiles)
        np.testing.assert_array_equal(out3, out)
    if n_out > 64:  # output ranges on word boundaries give the same words
        part = np.empty_like(out)
        step_int16(xw, q, scale, thr, w_rows, part, 0, n, 0, 64)
        step_int16(xw, q, scale, thr, w_rows, part, 0, n, 64, n_out)
        np.testing.assert_array_equal(part, out)


def test_certified_step_falls_back_when_the_float_sum_is_off():
    """Check a float32 sum that is wrong near the threshold is corrected."""
    from sksign.deploy._kernels import step_certified
    from sksign.deploy._ops._common import quantise as _quantise

    wt = np.array([[1.0], [1e-8], [-1.0]], np.float32)
    thr = np.array([1e-8], np.float32)  # exact sum 1e-8 >= 1e-8: fires
    bits = np.array([[1, 1, 1]], np.uint8)
    z = np.array([[0.0]], np.float32)  # float32 (1 + 1e-8) - 1 = 0 < thr
    _, _, abs_sum, w_rows, _, _ = _quantise(wt)
    out = np.empty((1, 1), np.uint64)
    step_certified(z, _words(bits), abs_sum, thr, w_rows, out, 0, 1)
    got = np.empty((1, 1), np.uint8)
    unpack_words(out, 1, got, 0, 1)
    assert got[0, 0] == 1


def test_certified_step_clears_a_bit_the_float_sum_sets():
    """Check a float32 sum just above the threshold whose exact sum is below
    it gives 0, among neighbours decided from the float sums."""
    from sksign.deploy._kernels import step_certified
    from sksign.deploy._ops._common import quantise as _quantise

    # output 1: exact sum 1 - 1e-8 - 1 = -1e-8 < 0; outputs 0 and 2 are clear
    wt = np.array([[1.0, 1.0, -1.0], [0.0, -1e-8, 0.0], [0.0, -1.0, 0.0]], np.float32)
    thr = np.zeros(3, np.float32)
    bits = np.array([[1, 1, 1]], np.uint8)
    z = np.array([[1.0, 1e-9, -1.0]], np.float32)  # output 1 wrong, above 0
    _, _, abs_sum, w_rows, _, _ = _quantise(wt)
    out = np.empty((1, 1), np.uint64)
    step_certified(z, _words(bits), abs_sum, thr, w_rows, out, 0, 1)
    got = np.empty((1, 3), np.uint8)
    unpack_words(out, 3, got, 0, 1)
    np.testing.assert_array_equal(got[0], [1, 0, 0])


def test_word_bit_is_the_inverse_of_unit_of_bit_and_matches_pack_bits():
    """Check the one bit-position formula: word_bit(u) sets the bit that
    unit_of_bit maps back to u, the bit pack_bits + packed_to_words set."""
    from sksign.deploy._kernels._bits import unit_of_bit, word_bit

    for u in range(200):
        mask = int(word_bit(u))
        assert mask.bit_count() == 1
        pos = mask.bit_length() - 1
        assert unit_of_bit(u // 64, pos) == u
        row = np.zeros((1, 200), dtype=np.uint8)
        row[0, u] = 1
        words = packed_to_words(pack_bits(row), 200)
        assert int(words[0, u // 64]) == mask


@njit
def _packed_flags(bits, out, i):
    """`out[i]` from the 0/1 values `bits` through flag_buffers and pack_flags."""
    flag_words, flags = flag_buffers(out.shape[1])
    for u in range(bits.shape[0]):
        flags[u] = bits[u]
    pack_flags(flag_words, out, i)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 200), st.integers(0, 2**32 - 1))
def test_pack_flags_packs_as_pack_bits(n_units, seed):
    """Check the multiply that packs 0/1 flags, 8 at a time, against
    pack_bits + packed_to_words on random flags of any count (the flags
    past the units 0)."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, (1, n_units), dtype=np.uint8)
    out = np.zeros((2, -(-n_units // 64)), np.uint64)
    _packed_flags(bits[0], out, 1)
    np.testing.assert_array_equal(out[1], packed_to_words(pack_bits(bits), n_units)[0])
    assert not out[0].any()


@pytest.mark.parametrize("n_units", [1, 7, 63, 64, 65, 130])
@pytest.mark.parametrize("pixels", [1, 3, 49, 64])
def test_channel_shares_are_numpys_global_average_pool(n_units, pixels):
    """Check the share of 1 bits per unit over each sample's pixels against
    numpy's float32 mean of the unpacked bits, bit for bit, on 3 samples
    split over the rows."""
    rng = np.random.default_rng(n_units * 100 + pixels)
    bits = (rng.random((3 * pixels, n_units)) < 0.3).astype(np.uint8)
    words = _words(bits)
    counts = bits.reshape(3, pixels, n_units).sum(axis=1)
    ref = counts.astype(np.float32) / np.float32(pixels)
    out = np.full((3, n_units), np.nan, np.float32)
    channel_shares(words, pixels, n_units, out, 0, 1)
    channel_shares(words, pixels, n_units, out, 1, 3)
    np.testing.assert_array_equal(out, ref)


@njit
def _certain_bits(z, threshold, bound):
    """:func:`certain_step_bits` of each row of `z`: bits, doubts, any."""
    n_words = -(-threshold.shape[0] // 64)
    low, high = step_interval(threshold, bound)
    out = np.zeros((z.shape[0], n_words), np.uint64)
    doubt = np.zeros((z.shape[0], n_words), np.uint64)
    unsure = np.zeros(z.shape[0], np.bool_)
    flat = z.reshape(-1)
    for i in range(z.shape[0]):
        unsure[i] = certain_step_bits(
            flat, i * z.shape[1], threshold, low, high, out, i, doubt[i]
        )
    return out, doubt, unsure


@settings(max_examples=60, deadline=None)  # the first example compiles
@given(
    st.integers(1, 200),
    st.integers(1, 5),
    st.floats(0, 1),
    st.integers(0, 2**32 - 1),
)
def test_certain_step_bits_flag_every_output_within_the_bound(
    n_out, n_rows, spread, seed
):
    """Check the bits are ``z > t``, and every ``|z - t| <= bound`` is in doubt.

    Against float64 numpy, sums placed at, near and far from their
    thresholds, subnormal ones too; doubts past the bound stay few.
    """
    rng = np.random.default_rng(seed)
    threshold = rng.standard_normal(n_out).astype(np.float32)
    threshold[::7] = rng.standard_normal(len(threshold[::7])) * 1e-39  # subnormal
    bound = np.abs(rng.standard_normal(n_out)) * spread * 1e-3
    bound[::5] = 0.0
    # sums at the threshold, one float32 step either side, and farther off
    offsets = rng.choice([0.0, 1.0, -1.0, 1e-4, -1e-4, 1.0, -0.3], (n_rows, n_out))
    z = (threshold + offsets * rng.random((n_rows, n_out))).astype(np.float32)
    z[:, ::3] = np.nextafter(threshold[::3], rng.choice([-np.inf, np.inf]))
    out, doubt, unsure = _certain_bits(np.ascontiguousarray(z), threshold, bound)
    np.testing.assert_array_equal(out, _words((z > threshold).astype(np.uint8)))
    near = np.abs(z.astype(np.float64) - threshold) <= bound
    flagged = _words(near.astype(np.uint8))
    assert ((flagged & ~doubt) == 0).all()  # every output within the bound
    assert (doubt & ~_words(np.ones_like(z, np.uint8)) == 0).all()  # no padding
    np.testing.assert_array_equal(unsure, doubt.any(axis=1))
    wide = np.abs(z.astype(np.float64) - threshold) <= 2 * bound + 1e-6 * (
        np.abs(threshold) + 1e-30
    )
    # the doubts are the bound's, widened by roundings only
    assert ((doubt & ~_words(wide.astype(np.uint8))) == 0).all()
