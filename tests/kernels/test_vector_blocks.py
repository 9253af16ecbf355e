"""The register blocks of :mod:`sksign.kernels._vector_counts` against numpy.

``xor_count_block`` stores the XOR-popcount counts of a block of rows
against a block of columns; ``xor_affine_block`` maps them to the sign
layer's ``(n_bits - 2 count) * alpha + beta`` in registers and stores
that (float32 scales and outputs by fused multiply-adds, which
``fma_exact`` certifies equal to numpy's float64 map). Generic LLVM IR:
checked on any CPU.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from sksign.kernels import fma_exact, xor_affine_block, xor_count_block


@njit
def _counts(counts, c_row, x, x_row, wt, w_col, rows, c_col=0):
    if rows == 4:
        xor_count_block(counts, c_row, c_col, x, x_row, wt, w_col, 4, 2, None)
    else:
        xor_count_block(counts, c_row, c_col, x, x_row, wt, w_col, 1, 2, None)


@njit
def _affine(out, o_row, o_col, x, x_row, wt, w_col, n_bits, alpha, beta, rows):
    if rows == 4:
        xor_affine_block(
            out, o_row, o_col, x, x_row, wt, w_col, n_bits, alpha, beta, 4, 2
        )
    else:
        xor_affine_block(
            out, o_row, o_col, x, x_row, wt, w_col, n_bits, alpha, beta, 1, 2
        )


def _reference_counts(x, x_row, wt, w_col, rows):
    """Popcounts of ``x[x_row + r] ^ wt[:, w_col + j]`` in Python integers."""
    return np.array(
        [
            [
                sum(int(v).bit_count() for v in x[x_row + r] ^ wt[:, w_col + j])
                for j in range(16)
            ]
            for r in range(rows)
        ],
        dtype=np.int64,
    )


def _operands(rng, n_words, n_rows, n_cols):
    x = rng.integers(0, 2**64, (n_rows, n_words), dtype=np.uint64)
    wt = rng.integers(0, 2**64, (n_words, n_cols), dtype=np.uint64)
    return x, wt


@settings(deadline=None, max_examples=40)  # the first examples compile
@given(
    n_words=st.integers(0, 20),
    rows=st.sampled_from([1, 4]),
    x_row=st.integers(0, 3),
    w_col=st.integers(0, 9),
    c_col=st.integers(0, 7),
    dtype=st.sampled_from([np.int64, np.int32]),
    seed=st.integers(0, 2**32 - 1),
)
def test_counts_match_python_popcounts(n_words, rows, x_row, w_col, c_col, dtype, seed):
    """Check every count of a block at any row and column offset of the
    operands and of `counts` (int64 or int32), and that nothing outside the
    block's cells of `counts` is written."""
    rng = np.random.default_rng(seed)
    x, wt = _operands(rng, n_words, 8, 32)
    counts = np.full((6, 24), -1, dtype)
    _counts(counts, 1, x, x_row, wt, w_col, rows, c_col)
    ref = np.full_like(counts, -1)
    ref[1 : 1 + rows, c_col : c_col + 16] = _reference_counts(x, x_row, wt, w_col, rows)
    np.testing.assert_array_equal(counts, ref)


def test_count_block_rejects_other_layouts_and_dtypes():
    """Check that counts of another dtype, or operands that are not
    C-contiguous, do not compile (the block computes C-order addresses)."""
    from numba.core.errors import TypingError

    x, wt = _operands(np.random.default_rng(0), 2, 4, 16)
    for counts, xs, wts in [
        (np.zeros((4, 16), np.float64), x, wt),
        (np.zeros((4, 16), np.int16), x, wt),
        (np.zeros((16, 4), np.int64).T, x, wt),
        (np.zeros((4, 16), np.int64), np.asfortranarray(x), wt),
        (np.zeros((4, 16), np.int64), x, np.zeros((4, 32), np.uint64)[:2, ::2]),
    ]:
        with pytest.raises(TypingError):
            _counts(counts, 0, xs, 0, wts, 0, 1)


def test_counts_of_constant_words_saturate():
    """Check all-ones against all-zeros words: 64 a word, 0 against themselves."""
    x = np.array([[2**64 - 1] * 5, [0] * 5], np.uint64)
    wt = np.zeros((5, 16), np.uint64)
    counts = np.empty((2, 16), np.int64)
    _counts(counts, 0, x, 0, wt, 0, 1)
    _counts(counts, 1, x, 1, wt, 0, 1)
    assert counts[0].tolist() == [5 * 64] * 16
    assert counts[1].tolist() == [0] * 16


@pytest.mark.parametrize(
    ("out_dtype", "scale_dtype"),
    [
        (np.float32, np.float32),
        (np.float32, np.float64),
        (np.float64, np.float32),
        (np.float64, np.float64),
        (np.int64, np.int64),
    ],
)
@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.parametrize("n_bits", [1, 63, 64, 700, 1280])
def test_affine_outputs_round_as_numpy(out_dtype, scale_dtype, rows, n_bits):
    """Check ``(n_bits - 2 count) * alpha + beta``: for floats computed in
    float64 and rounded once to the output's type (bit for bit; all float32
    by fused multiply-adds, on scales fma_exact certifies), for int64
    exactly; the other cells of `out` untouched."""
    rng = np.random.default_rng(n_bits + rows)
    n_words = -(-n_bits // 64)
    x, wt = _operands(rng, n_words, 6, 24)
    if n_bits % 64:  # the padding bits are zero in both operands
        keep = np.uint64(2 ** (n_bits % 64) - 1) << np.uint64(64 - n_bits % 64)
        x[:, -1] &= keep
        wt[-1] &= keep
    if scale_dtype == np.int64:
        alpha = rng.integers(-5, 6, 40).astype(np.int64)
        beta = rng.integers(-100, 100, 40).astype(np.int64)
    else:
        alpha = rng.standard_normal(40).astype(scale_dtype)
        beta = rng.standard_normal(40).astype(scale_dtype)
        assert fma_exact(alpha, beta, n_bits)
    sentinel = -7
    out = np.full((7, 40), sentinel, out_dtype)
    _affine(out, 2, 5, x, 1, wt, 3, n_bits, alpha, beta, rows)
    dots = n_bits - 2 * _reference_counts(x, 1, wt, 3, rows)
    if scale_dtype == np.int64:
        values = dots * alpha[5:21] + beta[5:21]
    else:
        values = (
            dots.astype(np.float64) * alpha[5:21].astype(np.float64)
            + beta[5:21].astype(np.float64)
        ).astype(out_dtype)
    ref = np.full_like(out, sentinel)
    ref[2 : 2 + rows, 5:21] = values
    np.testing.assert_array_equal(out, ref)


def test_affine_block_rejects_other_dtypes():
    """Check that integer outputs with float scales do not compile."""
    from numba.core.errors import TypingError

    x, wt = _operands(np.random.default_rng(0), 2, 4, 16)
    out = np.zeros((4, 16), np.int32)
    alpha = beta = np.ones(16, np.float32)
    with pytest.raises(TypingError):
        _affine(out, 0, 0, x, 0, wt, 0, 128, alpha, beta, 1)


def _float32_pair():
    """Two finite float32 values with full 24-bit significands (their last
    bit set) and exponents from equal to far apart: the pairs at the edge of
    float64's 53 bits come up."""
    significand = st.integers(2**22, 2**23 - 1).map(lambda k: 2 * k + 1)
    sign = st.sampled_from([-1, 1])
    return st.builds(
        lambda ka, kb, sa, sb, e, gap: (
            np.float32(sa * ka * 2.0 ** (e - 23)),
            np.float32(sb * kb * 2.0 ** (e + gap - 23)),
        ),
        significand,
        significand,
        sign,
        sign,
        st.integers(-60, 60),
        st.integers(-60, 60),
    )


@settings(max_examples=400, deadline=None)
@given(pair=_float32_pair(), n_bits=st.integers(1, 2**24 - 1), data=st.data())
def test_fma_exact_means_the_float64_sum_never_rounds(pair, n_bits, data):
    """Check fma_exact's claim: where it holds, ``dot * float64(alpha) +
    float64(beta)`` is the exact rational sum for every dot of `n_bits` bits
    (so one float32 rounding of it is the fused multiply-add's); the odd
    dots near +-n_bits give the longest sums."""
    a, b = pair
    if not fma_exact(np.array([a]), np.array([b]), n_bits):
        return
    dots = {-n_bits, n_bits, 0, 1 - n_bits % 2}
    dots |= {d - (d + n_bits) % 2 for d in (n_bits - 1, 1 - n_bits)}
    dots |= set(data.draw(st.lists(st.integers(-n_bits, n_bits), max_size=20)))
    for dot in dots:
        got = np.float64(dot) * np.float64(a) + np.float64(b)
        assert Fraction(float(got)) == dot * Fraction(float(a)) + Fraction(float(b))


def test_fma_exact_passes_batch_norm_scales_and_refuses_the_rest():
    """Check the guard on the scales a BatchNorm folds into a sign layer, on
    a shift far below its scale, and on what it never certifies."""
    rng = np.random.default_rng(0)
    alpha = (10.0 ** rng.uniform(-3, 1, 1000)).astype(np.float32)
    beta = (rng.choice([-1, 1], 1000) * 10.0 ** rng.uniform(-3, 1, 1000)).astype(
        np.float32
    )
    assert fma_exact(alpha, beta, 1024)
    assert fma_exact(alpha, np.zeros_like(beta), 2**24 - 1)  # one term: exact
    assert not fma_exact([1 + 2.0**-23], [2.0**-40 + 2.0**-63], 1024)  # 74 bits
    assert not fma_exact([1.0], [np.inf], 1024)
    assert not fma_exact([np.nan], [0.0], 1024)
    assert not fma_exact([1.0], [0.0], 2**24)  # dots past float32's integers


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_bits=st.sampled_from([1, 63, 130, 700, 4097]),
    scale_exponents=st.tuples(st.integers(-40, 40), st.integers(-40, 40)),
)
def test_float32_affine_equals_the_float64_map_where_fma_exact(
    seed, n_bits, scale_exponents
):
    """Check the float32 (fused multiply-add) outputs against numpy's float64
    map, bit for bit, on every column whose scales fma_exact certifies;
    rows of all-ones and all-zeros words give the extreme dots."""
    rng = np.random.default_rng(seed)
    n_words = -(-n_bits // 64)
    x, wt = _operands(rng, n_words, 4, 16)
    x[0], x[1] = 2**64 - 1, 0
    keep = np.uint64(2 ** (n_bits % 64 or 64) - 1) << np.uint64(-n_bits % 64)
    x[:, -1] &= keep
    wt[-1] &= keep
    e_a, e_b = scale_exponents
    alpha = rng.uniform(-1, 1, 16) * 2.0 ** (e_a + rng.integers(-3, 4, 16))
    beta = rng.uniform(-1, 1, 16) * 2.0 ** (e_b + rng.integers(-3, 4, 16))
    alpha, beta = alpha.astype(np.float32), beta.astype(np.float32)
    out = np.empty((4, 16), np.float32)
    _affine(out, 0, 0, x, 0, wt, 0, n_bits, alpha, beta, 4)
    dots = n_bits - 2 * _reference_counts(x, 0, wt, 0, 4)
    ref = (dots * alpha.astype(np.float64) + beta.astype(np.float64)).astype(np.float32)
    exact = [fma_exact(alpha[j : j + 1], beta[j : j + 1], n_bits) for j in range(16)]
    np.testing.assert_array_equal(out[:, exact], ref[:, exact])


@njit
def _counts_below(counts, x, x_row, wt, worst, rows):
    if rows == 4:
        return xor_count_block(counts, 0, 0, x, x_row, wt, 0, 4, 2, worst)
    return xor_count_block(counts, 0, 0, x, x_row, wt, 0, 1, 2, worst)


@settings(max_examples=200, deadline=None)
@given(
    n_words=st.integers(1, 40),
    rows=st.sampled_from([1, 4]),
    seed=st.integers(0, 2**32 - 1),
    share=st.floats(0.0, 0.6),
    data=st.data(),
)
def test_counts_against_the_kth_stop_once_none_can_enter(
    n_words, rows, seed, share, data
):
    """Check xor_count_block with `worst`: the mask of the rows with a count
    below their column's k-th; the counts stored where it goes on to the
    last word, nothing stored where, at a check every PRUNE_WORDS words
    short of the last, no running count was below its k-th."""
    from sksign.kernels._vector_counts import PRUNE_WORDS

    rng = np.random.default_rng(seed)
    x, wt = _operands(rng, n_words, 4, 16)
    near = data.draw(st.integers(-1, 15))  # a column close to row 0, or none
    if near >= 0:
        wt[:, near] = x[0] ^ (rng.random(n_words) < 0.1).astype(np.uint64)
    worst = np.round(rng.uniform(0, share * 64 * n_words, 16)).astype(np.int64)
    worst[data.draw(st.integers(0, 16)) :] = -1  # lanes past a block's queries
    sentinel = -3
    counts = np.full((rows, 16), sentinel, np.int64)
    mask = _counts_below(counts, x, 0, wt, worst, rows)
    full = _reference_counts(x, 0, wt, 0, rows)
    assert mask == sum(1 << r for r in range(rows) if (full[r] < worst).any())
    stopped = any(
        (_reference_counts(x[:, :w], 0, wt[:w], 0, rows) >= worst).all()
        for w in range(PRUNE_WORDS, n_words, PRUNE_WORDS)
    )
    if stopped:
        assert mask == 0
        assert (counts == sentinel).all()
    else:
        np.testing.assert_array_equal(counts, full)
