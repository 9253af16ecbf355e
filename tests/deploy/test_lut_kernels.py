"""The look-up sums of bits with 14-bit weights and their certified step.

Where the CPU has AVX-512 VBMI and VNNI, or AVX2 without AVX-512 BW, a layer
of real weights on bits followed by a step sums many rows by table look-ups
(``vpermb`` + ``vpdpbusd``, or ``vpshufb``:
:mod:`sksign.deploy._kernels._lut`): the tables must hold the
partial sums of the quantised weights, the int32 sums must equal numpy's
int64 product exactly for any size (inputs off the words and quads, outputs
off the tiles, rows off the tiles, padding bits set), and the layer's bits
must be the step of the exact float64 sum, whatever the threads and the way
they split the work (rows or outputs), ties and near-ties included.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sksign.deploy._kernels._lut import (
    LUT_BLOCKS,
    LUT_ROWS,
    LUT_TOP,
    lut_available,
    lut_inputs,
    lut_sums,
    lut_weights,
)
from sksign.deploy._ops import _common
from sksign.deploy._ops._common import quantise, step_rows
from sksign.kernels import pack_bits, packed_to_words

pytestmark = pytest.mark.skipif(
    not lut_available(), reason="needs AVX-512 VBMI and VNNI, or AVX2"
)


@pytest.fixture(autouse=True)
def _look_ups_from_32_rows(monkeypatch):
    """Dense layers of 32 rows or more sum by look-up here, whatever rows
    this CPU's kernel starts from (``LUT_DENSE_TILE_ROWS``: 56 rows a tile
    with ``vpshufb``)."""
    monkeypatch.setattr(_common, "LUT_DENSE_MIN_ROWS", _common.LUT_STEP_MIN_ROWS)
    monkeypatch.setattr(_common, "LUT_DENSE_TILE_ROWS", 0)


def _words(bits):
    return packed_to_words(pack_bits(bits), bits.shape[1])


def _quantised(wt, scale):
    """The 14-bit weights of :func:`lut_weights`, in int64."""
    q = np.rint(wt.astype(np.float64) / scale)
    return np.clip(q, -LUT_TOP, LUT_TOP).astype(np.int64)


def _lut_products(bits, wt, padding=False):
    """The int32 look-up sums of the 0/1 rows `bits` with `wt` (and the scale)."""
    rows, n_in = bits.shape
    tables, scale, _, _ = lut_weights(wt)
    xw = _words(bits)
    if padding:  # bits past the inputs must add nothing
        xw[:, -1] |= ~_words(np.ones((1, n_in), np.uint8))[0, -1]
    tiles = -(-rows // LUT_ROWS)
    idx = np.empty((tiles * LUT_BLOCKS, 64 * xw.shape[1]), np.uint32)
    x32 = np.zeros((tiles * LUT_ROWS, -(-n_in // 2)), np.int32)
    sums = np.full((tiles * LUT_ROWS, tables.shape[0]), 7, np.int32)
    lut_inputs(xw, n_in, idx, x32, 0, tiles)
    lut_sums(idx, tables, sums, 0, tiles, 0, wt.shape[1])
    return sums[:rows, : wt.shape[1]], scale


@pytest.mark.parametrize("n_in", [1, 15, 16, 63, 64, 65, 200, 1025, 4100])
@pytest.mark.parametrize("n_out", [1, 3, 4, 100])
@pytest.mark.parametrize("rows", [1, 16, 65])
def test_lut_sums_equal_the_int64_product(n_in, n_out, rows):
    """Check the look-up sums are the exact products of the 14-bit weights."""
    rng = np.random.default_rng(n_in * 7 + n_out * 3 + rows)
    wt = rng.standard_normal((n_in, n_out)).astype(np.float32)
    bits = (rng.random((rows, n_in)) < 0.5).astype(np.uint8)
    got, scale = _lut_products(bits, wt, padding=True)
    np.testing.assert_array_equal(got, bits.astype(np.int64) @ _quantised(wt, scale))


@settings(max_examples=30, deadline=None)
@given(
    n_in=st.integers(1, 300),
    n_out=st.integers(1, 20),
    rows=st.integers(1, 70),
    density=st.floats(0, 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_lut_sums_at_the_extremes_of_the_weights(n_in, n_out, rows, density, seed):
    """Check the sums where the partial sums reach the int16 ends.

    Weights at +-max |w| quantise to +-LUT_TOP, so four of them in a group
    give the largest partial sums the two byte planes hold.
    """
    rng = np.random.default_rng(seed)
    wt = rng.choice([-1.0, 1.0, 0.5, -0.25, 0.0], (n_in, n_out)).astype(np.float32)
    bits = (rng.random((rows, n_in)) < density).astype(np.uint8)
    got, scale = _lut_products(bits, wt)
    np.testing.assert_array_equal(got, bits.astype(np.int64) @ _quantised(wt, scale))


def test_lut_weights_bound_the_residuals():
    """Check ``|w - q scale - fine fine_scale| <= fine_scale / 2`` (with the
    float64 rounding step_lut allows for) and the tables' int16 sums."""
    rng = np.random.default_rng(0)
    wt = (rng.standard_normal((131, 37)) * 10.0 ** rng.integers(-3, 3, 37)).astype(
        np.float32
    )
    wt[:, 5] = 0.0  # an all-zero output
    tables, scale, fine, fine_scale = lut_weights(wt)
    w64 = wt.astype(np.float64)
    q = _quantised(wt, scale)
    rest = w64 - q * scale - fine[:, :131].T * fine_scale
    assert np.all(np.abs(rest) <= fine_scale * (0.5 + 1e-6))
    assert np.all(np.abs(q) <= LUT_TOP)
    assert not fine[:, 131:].any()  # the even padding adds nothing
    assert tables.shape == (39, 4 * 3 * 128)  # 3 words of 4 quads
    # outputs padded to whole tiles, as an output of zero weights
    zero = lut_weights(np.zeros((131, 1), np.float32))[0]
    assert (tables[37:] == zero[0]).all()


@pytest.mark.parametrize("rows", [32, 64, 130])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("n_out", [50, 400])
def test_step_by_lut_is_the_step_of_the_exact_sum(rows, n_threads, n_out):
    """Check the layer's bits by look-ups for many rows, on one or two
    threads (tiles of rows, or ranges of outputs for a single tile), against
    the BLAS path and the float64 step, on small integer weights (ties) and
    on real weights."""
    rng = np.random.default_rng(rows + n_out)
    n_in = 300
    bits = (rng.random((rows, n_in)) < 0.5).astype(np.uint8)
    xw = _words(bits)
    for wt, thr in (
        (
            rng.integers(-3, 4, (n_in, n_out)).astype(np.float32),
            rng.integers(-2, 3, n_out).astype(np.float32),
        ),
        (
            (rng.standard_normal((n_in, n_out)) * 0.05).astype(np.float32),
            (rng.standard_normal(n_out) * 0.3).astype(np.float32),
        ),
    ):
        steps = quantise(wt)
        assert steps[5] is not None
        by_lut = step_rows(wt, steps, thr, xw, n_in, n_out, n_threads)
        by_blas = step_rows(wt, (*steps[:4], None, None), thr, xw, n_in, n_out, 1)
        np.testing.assert_array_equal(by_lut, by_blas)
        exact = (bits.astype(np.float64) @ wt.astype(np.float64)) >= thr
        np.testing.assert_array_equal(by_lut, _words(exact.astype(np.uint8)))


@pytest.mark.parametrize("n_threads", [1, 2])
def test_step_by_lut_reads_no_buffer_it_has_not_written(n_threads, garbage_buffers):
    """Check the look-up path's bits with every buffer it takes (pairs, nibble
    indices, sums) handed out full of garbage: a last tile of 2 rows in 64,
    and outputs split over threads for a single tile."""
    rng = np.random.default_rng(7)
    n_in, n_out = 300, 400
    wt = (rng.standard_normal((n_in, n_out)) * 0.05).astype(np.float32)
    thr = (rng.standard_normal(n_out) * 0.3).astype(np.float32)
    for rows in (66, 40):
        bits = (rng.random((rows, n_in)) < 0.5).astype(np.uint8)
        got = step_rows(wt, quantise(wt), thr, _words(bits), n_in, n_out, n_threads)
        exact = (bits.astype(np.float64) @ wt.astype(np.float64)) >= thr
        np.testing.assert_array_equal(got, _words(exact.astype(np.uint8)))


def test_steps_within_the_first_bound_are_decided_by_the_residuals():
    """Check outputs whose 14-bit sums leave them in doubt come out right.

    Thresholds set just off each row's exact sum (by a hundredth of the
    first bound: every output in doubt after the 14-bit sums) and exactly on
    it (a tie: also in doubt after the residuals).
    """
    rng = np.random.default_rng(1)
    rows, n_in, n_out = 64, 200, 64
    wt = (rng.standard_normal((n_in, n_out)) * 0.1).astype(np.float32)
    bits = (rng.random((rows, n_in)) < 0.5).astype(np.uint8)
    bits[1:] = bits[0]  # one row, so one exact sum per output
    exact = bits[0].astype(np.float64) @ wt.astype(np.float64)
    _, scale, _, _ = lut_weights(wt)
    offsets = rng.choice([-0.01, 0.0, 0.01], n_out) * bits[0].sum() * scale / 2
    thr = (exact + offsets).astype(np.float32)
    steps = quantise(wt)
    got = step_rows(wt, steps, thr, _words(bits), n_in, n_out, 1)
    want = (bits.astype(np.float64) @ wt.astype(np.float64)) >= thr
    np.testing.assert_array_equal(got, _words(want.astype(np.uint8)))


def test_no_tables_past_their_budget_or_without_the_instructions(monkeypatch):
    """Check quantise makes no look-up tables where they cannot run or are
    too large, and that step_rows then keeps to the other paths."""
    wt = np.ones((100, 10), np.float32)
    assert quantise(wt)[5] is not None
    monkeypatch.setattr(_common, "LUT_STEP_MAX_BYTES", 8 * 128 * 10 - 1)
    assert quantise(wt)[5] is None
    monkeypatch.undo()
    monkeypatch.setattr(_common, "lut_available", lambda: False)
    assert quantise(wt)[5] is None


def test_dense_look_ups_take_tiles_with_enough_rows(monkeypatch):
    """Check a dense layer sums by look-up only where its tiles hold
    ``LUT_DENSE_TILE_ROWS`` rows each on average (as with ``vpshufb``), else
    by ``vpmaddwd`` or BLAS, with the same bits either way."""
    calls = []
    tiles = _common.step_by_lut_tiles

    def counted(*args):
        calls.append(len(args[2]))
        return tiles(*args)

    monkeypatch.setattr(_common, "step_by_lut_tiles", counted)
    monkeypatch.setattr(_common, "LUT_DENSE_TILE_ROWS", 56)
    rng = np.random.default_rng(5)
    n_in, n_out = 200, 70
    wt = (rng.standard_normal((n_in, n_out)) * 0.1).astype(np.float32)
    thr = (rng.standard_normal(n_out) * 0.3).astype(np.float32)
    steps = quantise(wt)
    for rows in (48, 55, 56, 64, 96, 111, 112, 128):
        bits = (rng.random((rows, n_in)) < 0.5).astype(np.uint8)
        got = step_rows(wt, steps, thr, _words(bits), n_in, n_out, 1)
        exact = (bits.astype(np.float64) @ wt.astype(np.float64)) >= thr
        np.testing.assert_array_equal(got, _words(exact.astype(np.uint8)))
    assert calls == [56, 64, 112, 128]
