"""The vpmaddwd products of bits with 16-bit weights and their certified step.

Where the CPU has AVX2, a layer of real weights on bits followed by a step
multiplies many rows of bits by its int16 weights with ``vpmaddwd``
(:mod:`sksign.deploy._kernels._madd`): the int32 sums must equal numpy's
int64 product exactly, for any size (odd inputs, outputs off the blocks of
16, rows off the tiles), and the layer's bits must be those of the BLAS path
and the step of the exact float64 sum (the certified step of the sums is
checked beside the other step kernels in test_bit_kernels.py).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sksign.deploy._kernels._madd import (
    BLOCK_ROWS,
    COARSE_LANES,
    coarse_flags,
    pair_bits,
    pair_sums,
    pair_weights,
    step_pairs,
)
from sksign.deploy._ops import _common
from sksign.deploy._ops._common import BLAS_MIN_ROWS, quantise, step_rows
from sksign.kernels import pack_bits, packed_to_words
from sksign.kernels._popcount import target_has

pytestmark = pytest.mark.skipif(not target_has("avx2"), reason="needs AVX2")


def _words(bits):
    return packed_to_words(pack_bits(bits), bits.shape[1])


def _products(bits, q):
    """The int32 sums of the pair kernels, rows and outputs cut back."""
    rows, n_in = bits.shape
    pairs = pair_weights(q)
    n_pairs = -(-n_in // 2)
    padded = -(-rows // BLOCK_ROWS) * BLOCK_ROWS
    x32 = np.zeros((padded, n_pairs), np.int32)
    pair_bits(_words(bits), n_in, x32, 0, rows)
    sums = np.full((padded, pairs.shape[0] // n_pairs * 16), -7, np.int32)
    pair_sums(x32, pairs, sums, 0, padded)
    return sums[:rows, : q.shape[1]]


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 13),
    n_in=st.integers(1, 300),
    n_out=st.integers(1, 70),
    seed=st.integers(0, 2**32 - 1),
)
def test_pair_sums_equal_the_integer_product(rows, n_in, n_out, seed):
    """Check the int32 sums against numpy's int64 product, the extremes too."""
    rng = np.random.default_rng(seed)
    bits = (rng.random((rows, n_in)) < rng.random()).astype(np.uint8)
    q = rng.integers(-32767, 32768, (n_in, n_out)).astype(np.int16)
    q[:, 0] = 32767  # the largest sums
    ref = bits.astype(np.int64) @ q.astype(np.int64)
    np.testing.assert_array_equal(_products(bits, q), ref)


@pytest.mark.parametrize("rows", [BLAS_MIN_ROWS, 64, 67])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_step_rows_gives_the_same_bits_by_pairs_or_blas(rows, n_threads, monkeypatch):
    """Check the layer's paths for many rows (and the threads) agree: the
    ``vpmaddwd`` pairs, the BLAS product and, where the CPU has them, the
    look-up tables."""
    rng = np.random.default_rng(rows)
    n_in, n_out = 300, 100
    wt = rng.integers(-3, 4, (n_in, n_out)).astype(np.float32)  # ties
    thr = rng.integers(-2, 3, n_out).astype(np.float32)
    bits = (rng.random((rows, n_in)) < 0.5).astype(np.uint8)
    steps = quantise(wt)
    assert steps[4] is not None
    xw = _words(bits)
    by_pairs = step_rows(wt, (*steps[:5], None), thr, xw, n_in, n_out, n_threads)
    by_blas = step_rows(wt, (*steps[:4], None, None), thr, xw, n_in, n_out, n_threads)
    np.testing.assert_array_equal(by_pairs, by_blas)
    if steps[5] is not None:
        by_lut = step_rows(wt, steps, thr, xw, n_in, n_out, n_threads)
        np.testing.assert_array_equal(by_lut, by_blas)
    exact = (bits.astype(np.float64) @ wt.astype(np.float64)) >= thr
    np.testing.assert_array_equal(by_pairs, _words(exact.astype(np.uint8)))


@pytest.mark.parametrize("n_threads", [1, 2])
def test_step_rows_by_pairs_reads_no_buffer_it_has_not_written(
    n_threads, garbage_buffers
):
    """Check the ``vpmaddwd`` path's bits with its buffers (pairs, sums)
    handed out full of garbage, on dense rows whose last tile is cut short
    (the map convolutions: ``test_sum_conv_step_is_the_exact_step``)."""
    from sksign.deploy._kernels._madd import BLOCK_ROWS

    rng = np.random.default_rng(3)
    n_in, n_out = 300, 100
    wt = (rng.standard_normal((n_in, n_out)) * 0.05).astype(np.float32)
    thr = (rng.standard_normal(n_out) * 0.3).astype(np.float32)
    steps = quantise(wt)
    if steps[4] is None:
        pytest.skip("no vpmaddwd pairs on this CPU")
    rows = 2 * BLOCK_ROWS + 3
    bits = (rng.random((rows, n_in)) < 0.5).astype(np.uint8)
    xw = _words(bits)
    got = step_rows(wt, (*steps[:5], None), thr, xw, n_in, n_out, n_threads)
    exact = (bits.astype(np.float64) @ wt.astype(np.float64)) >= thr
    np.testing.assert_array_equal(got, _words(exact.astype(np.uint8)))


def test_no_pairs_without_avx2_or_past_the_int32_range(monkeypatch):
    """Check quantise lays out no pairs where they cannot run or be exact."""
    wt = np.ones((3, 2), np.float32)
    monkeypatch.setattr(_common, "target_has", lambda feature: False)
    assert quantise(wt)[4] is None
    monkeypatch.setattr(_common, "target_has", lambda feature: True)
    monkeypatch.setattr(_common, "MAX_INPUTS", 2)
    assert quantise(wt)[4] is None


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(BLAS_MIN_ROWS, 40),
    n_in=st.integers(1, 200),
    n_out=st.integers(1, 150),
    spread=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_steps_in_doubt_are_decided_by_the_exact_sum(rows, n_in, n_out, spread, seed):
    """Check the certified step of the pair sums on small integer weights.

    Ties at the threshold put from none to every output of a row in doubt,
    so the outputs summed four at a time (and the one left over) are all
    checked against the float64 step.
    """
    rng = np.random.default_rng(seed)
    wt = rng.integers(-spread, spread + 1, (n_in, n_out)).astype(np.float32)
    wt[0, 0] += 0.5  # a scale that does not divide the weights
    thr = rng.integers(-spread, spread + 1, n_out).astype(np.float32)
    bits = (rng.random((rows, n_in)) < rng.random()).astype(np.uint8)
    steps = quantise(wt)
    got = step_rows(wt, steps, thr, _words(bits), n_in, n_out, 1)
    exact = (bits.astype(np.float64) @ wt.astype(np.float64)) >= thr
    np.testing.assert_array_equal(got, _words(exact.astype(np.uint8)))


@pytest.mark.parametrize("n_in", [1, 45, 301])
def test_steps_in_doubt_read_no_weight_past_an_odd_count(n_in):
    """Check the float64 sums of the outputs in doubt stop at the last unit.

    With an odd number of inputs the last pair has a padding unit with no
    weight; the weights are laid out so that whatever lies past the last
    row is NaN, and every output is put exactly on its threshold (in doubt).
    """
    rng = np.random.default_rng(n_in)
    n_out, rows = 9, BLOCK_ROWS
    wt = rng.integers(-4, 5, (n_in, n_out)).astype(np.float32)
    bits = (rng.random((rows, n_in)) < 0.5).astype(np.uint8)
    bits[:, -1] = 1
    thr = (bits[0].astype(np.float64) @ wt).astype(np.float32)  # ties on row 0
    _, scale, _, w_rows, pairs, _ = quantise(wt)
    after = np.full(n_out * n_in + 16, np.nan, np.float32)
    w_rows_nan = after[: n_out * n_in].reshape(n_out, n_in)
    w_rows_nan[:] = w_rows
    x32 = np.zeros((rows, -(-n_in // 2)), np.int32)
    pair_bits(_words(bits), n_in, x32, 0, rows)
    sums = np.empty((rows, pairs.shape[0] // x32.shape[1] * 16), np.int32)
    pair_sums(x32, pairs, sums, 0, rows)
    out = np.empty((rows, 1), np.uint64)
    step_pairs(sums, x32, scale, thr, w_rows_nan, out, 0, rows)
    exact = (bits.astype(np.float64) @ wt.astype(np.float64)) >= thr
    np.testing.assert_array_equal(out, _words(exact.astype(np.uint8)))
    assert exact[0].all()  # every output of row 0 fires, by its exact sum


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 3 * COARSE_LANES + 5),
    step=st.sampled_from([1, 2]),
    half=st.sampled_from([0.0, 1.0, 2.0, 2.5]),
    seed=st.integers(0, 2**32 - 1),
)
def test_coarse_flags_equal_their_float64_definition(n, step, half, seed):
    """Check the coarse flags and their count against numpy's float64, on
    sums set to fall exactly on the threshold and on the doubt's bound, in
    vectors (contiguous rows) and one by one (a strided row, the tail)."""
    rng = np.random.default_rng(seed)
    sums = np.zeros(n * step, np.int32)
    sums[::step] = rng.integers(-6, 7, n)
    row = sums[::step]
    scale = rng.choice([0.25, 0.5, 1.0], n)
    # thresholds on the sum, half a step or a whole step off it, or between
    t64 = scale * row + scale * rng.choice([0.0, 0.5, -1.0, 2.0, 2.5, 0.3], n)
    fire = np.full(n + 8, 7, np.uint8)
    near = np.full(n + 8, 7, np.uint8)
    unsure = coarse_flags(row, scale, t64, half, fire, near)
    v = scale * row.astype(np.float64) - t64
    want_near = np.abs(v) <= half * scale + 1e-300
    np.testing.assert_array_equal(fire[:n], v > 0)
    np.testing.assert_array_equal(near[:n], want_near)
    assert unsure == want_near.sum()
    assert (fire[n:] == 7).all()  # nothing past n
    assert (near[n:] == 7).all()
