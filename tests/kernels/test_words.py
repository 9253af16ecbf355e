"""Tests for the word-level kernels and the input helpers of sksign.kernels."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest

from sksign._compat import InvalidParameterError
from sksign.kernels import (
    as_bits,
    auto_batch_size,
    check_n_bits,
    check_packed,
    effective_n_threads,
    pack_bits,
    packed_hamming_distances,
    packed_kneighbors,
    packed_to_words,
    words_hamming_distances,
    words_kneighbors,
)


def _codes(seed, n, n_bits):
    rng = np.random.default_rng(seed)
    return pack_bits(rng.integers(0, 2, size=(n, n_bits)))


def test_as_bits_is_x_greater_than_zero():
    """Check the bit rule and the error types of as_bits."""
    x = np.array([[-1.0, 0.0, 0.5, 2.0]])
    np.testing.assert_array_equal(as_bits(x), x > 0)
    with pytest.raises(ValueError, match="X contains NaN"):
        as_bits([[np.nan]], "X")
    with pytest.raises(ValueError, match="infinity"):
        as_bits([[np.inf]])
    with pytest.raises(TypeError, match="dtype"):
        as_bits([["a"]])


def test_as_bits_strict_takes_only_one_bit_per_value():
    """Check strict as_bits: 0/1, -1/+1 and bool pass (-1 gives 0); other
    values, and 0 mixed with -1, raise naming them."""
    bits = np.array([[0, 1, 1, 0]], dtype=np.uint8)
    for x in (bits, bits.astype(bool), 2 * bits.astype(np.int8) - 1, bits * 1.0):
        np.testing.assert_array_equal(as_bits(x, strict=True), bits == 1)
    assert not as_bits(-np.ones((2, 3)), strict=True).any()
    with pytest.raises(ValueError, match=r"other values: \[0\.5\]"):
        as_bits([[0.5, 1.0]], "X", strict=True)
    with pytest.raises(ValueError, match=r"\[2, 3\].*looks like packed bytes"):
        as_bits(np.array([[2, 3, 1]], dtype=np.uint8), "X", strict=True)
    with pytest.raises(ValueError, match=r"\[2, 3, 4, 5, 6, \.\.\.\]"):
        as_bits(np.arange(10)[None], strict=True)
    with pytest.raises(ValueError, match=r"mixes the values 0 and -1"):
        as_bits([[-1, 0, 1]], strict=True)
    # the default stays x > 0 for any value
    np.testing.assert_array_equal(as_bits([[0.5, 2, -3]]), [[True, True, False]])


def test_check_packed_with_n_bits_checks_width_and_padding():
    """Check check_packed(n_bits=...) refuses a wrong byte count and set
    padding bits, naming n_bits and the bytes."""
    packed = pack_bits(np.ones((3, 9), dtype=np.uint8))
    assert check_packed(packed, n_bits=9) is packed
    with pytest.raises(ValueError, match=r"ceil\(17 / 8\) = 3 bytes"):
        check_packed(packed, n_bits=17)
    packed[1, 1] |= 1
    with pytest.raises(ValueError, match=r"n_bits=9.*2 bytes.*rows \[1\]"):
        check_packed(packed, "codes", n_bits=9)
    assert check_packed(packed, n_bits=16) is packed
    assert check_packed(packed) is packed


def test_packed_to_words_clears_padding():
    """Check that padding bits past n_bits are zero in the words."""
    packed = np.full((3, 2), 0xFF, dtype=np.uint8)
    words = packed_to_words(packed, 9)
    assert words.shape == (3, 1)
    assert words.dtype == np.uint64
    assert words.flags.c_contiguous
    np.testing.assert_array_equal(np.unpackbits(words.view(np.uint8), axis=1).sum(1), 9)
    np.testing.assert_array_equal(packed_to_words(packed), packed_to_words(packed, 16))
    with pytest.raises(TypeError, match="uint8"):
        packed_to_words(packed.astype(np.int64), 9)
    with pytest.raises(ValueError, match="9 <= n_bits <= 16"):
        packed_to_words(packed, 17)


def test_check_helpers():
    """Check check_packed, check_n_bits, auto_batch_size and effective_n_threads."""
    with pytest.raises(TypeError, match="codes must be bit-packed"):
        check_packed(np.zeros((2, 2), dtype=np.int8), "codes")
    assert check_n_bits(None, 3) == 24
    with pytest.raises(ValueError, match="17 <= n_bits <= 24"):
        check_n_bits(16, 3)
    assert auto_batch_size(7, 10) == 7
    assert auto_batch_size(None, 0) == 1 << 26
    assert effective_n_threads(-100) == 1
    with pytest.raises(ValueError, match="n_jobs == 0"):
        effective_n_threads(0)


@pytest.mark.parametrize("n_bits", [5, 64, 200])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_word_kernels_match_packed_functions(n_bits, n_jobs):
    """Check the word-level search and distances against the packed ones."""
    A, B = _codes(0, 70, n_bits), _codes(1, 2100, n_bits)
    WA, WB = packed_to_words(A, n_bits), packed_to_words(B, n_bits)
    D = packed_hamming_distances(A, B, n_bits=n_bits)
    np.testing.assert_array_equal(words_hamming_distances(WA, WB, n_jobs=n_jobs), D)
    out = np.zeros(D.shape)
    assert words_hamming_distances(WA, WB, out=out) is out
    np.testing.assert_array_equal(out, D)
    expected = packed_kneighbors(A, B, 6, n_bits=n_bits)
    got = words_kneighbors(WA, WB, 6, n_jobs=n_jobs)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


def test_word_kernels_reject_bad_input():
    """Check the errors for wrong dtypes, widths, shapes and k."""
    W = packed_to_words(_codes(0, 4, 70), 70)
    with pytest.raises(TypeError, match="uint64"):
        words_kneighbors(W.astype(np.int64), W, 1)
    with pytest.raises(ValueError, match="same number of words"):
        words_hamming_distances(W, W[:, :1])
    with pytest.raises(ValueError, match="must have shape"):
        words_hamming_distances(W, W, out=np.empty((4, 3)))
    with pytest.raises(ValueError, match="n_neighbors <= n_codes"):
        words_kneighbors(W, W, 5)
    with pytest.raises(InvalidParameterError, match="n_neighbors"):
        words_kneighbors(W, W, 0)
