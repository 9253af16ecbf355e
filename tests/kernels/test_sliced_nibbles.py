"""The sliced-query nibble counts against float64 numpy.

``sliced_counts`` adds, for every query of a block of 96, the popcount of
its XOR with one code over a range of the code's bytes, and says which
counts fall below the queries' k-th ones. Checked here on random codes and
ranges (odd lengths, runs past the 31 bytes summed in bytes, the unrolled
16 bytes of a 256-bit code's half), stored and added, with the k-th counts
set on, just above and just below the counts; and the layouts it reads
(``slice_queries``, ``code_offsets``) against their definitions. The k-NN
search on these counts is checked with the other kernels in
``test_knn_kernels.py``.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from sksign.kernels import target_has
from sksign.kernels._sliced_nibbles import (
    BLOCK_QUERIES,
    BYTE_RUN,
    MAX_SLICED_WORDS,
    NIBBLE_XOR_COUNTS,
    WIDE_BLOCK_QUERIES,
    code_counts,
    code_offsets,
    slice_queries,
)

pytestmark = pytest.mark.skipif(not target_has("avx2"), reason="needs AVX2")


@njit
def _slice(Q, q0, m, qs):
    slice_queries(Q, q0, m, qs)


@njit
def _offsets(T, j, offsets):
    code_offsets(T, j, offsets)


@njit
def _counts(tile, qs, offsets, b0, n, add, worst):
    return code_counts(tile, qs, NIBBLE_XOR_COUNTS, offsets, b0, n, add, worst)


def _bits(words):
    """The bits of uint64 rows, little-endian within a word, as float64."""
    return np.unpackbits(words.view(np.uint8), axis=1, bitorder="little").astype(
        np.float64
    )


def _mask(below):
    return sum(1 << int(q) for q in np.flatnonzero(below))


def test_nibble_tables_count_the_xor_of_two_nibbles():
    for v in range(16):
        for i in range(16):
            assert NIBBLE_XOR_COUNTS[16 * v + i] == bin(v ^ i).count("1")


@pytest.mark.parametrize("m", [1, 37, BLOCK_QUERIES])
def test_slice_queries_puts_each_nibble_of_each_query_in_a_byte(m):
    rng = np.random.default_rng(m)
    n_words = 3
    Q = rng.integers(0, 2**64, size=(m + 5, n_words), dtype=np.uint64)
    qs = np.full((16 * n_words, BLOCK_QUERIES), 99, dtype=np.uint8)
    _slice(Q, 5, m, qs)
    raw = Q[5:].view(np.uint8)  # (m, 8 n_words), little-endian bytes
    expected = np.zeros_like(qs)
    expected[0::2, :m] = (raw & 0x0F).T
    expected[1::2, :m] = (raw >> 4).T
    np.testing.assert_array_equal(qs, expected)


def test_code_offsets_are_sixteen_times_each_nibble():
    rng = np.random.default_rng(1)
    T = rng.integers(0, 2**64, size=(4, 5), dtype=np.uint64)
    offsets = np.zeros((2, 5), dtype=np.uint64)
    _offsets(T, 2, offsets)
    raw = T[2].view(np.uint8).astype(np.int64)
    np.testing.assert_array_equal(offsets[0].view(np.uint8), (raw & 0x0F) * 16)
    np.testing.assert_array_equal(offsets[1].view(np.uint8), raw & 0xF0)


@settings(max_examples=60, deadline=None)
@given(
    qb=st.sampled_from([WIDE_BLOCK_QUERIES, BLOCK_QUERIES]),
    n_words=st.integers(1, MAX_SLICED_WORDS),
    seed=st.integers(0, 2**32 - 1),
    density=st.sampled_from([0.02, 0.5, 1.0]),
    data=st.data(),
)
def test_sliced_counts_match_numpy(qb, n_words, seed, density, data):
    """Check the counts over a byte range and the mask of those below the
    k-th counts, stored then added, against float64 sums of the bits, on
    blocks of both sizes."""
    rng = np.random.default_rng(seed)
    m = data.draw(st.integers(1, qb))
    n_bytes = 8 * n_words
    b0 = data.draw(st.integers(0, n_bytes - 1))
    edges = sorted({1, n_bytes - b0, min(16, n_bytes - b0)})  # 16: unrolled
    n = data.draw(st.sampled_from(edges) | st.integers(1, n_bytes - b0))
    code = (rng.random((1, 64 * n_words)) < density).astype(np.uint8)
    queries = rng.random((m, 64 * n_words)) < 0.5
    T = np.packbits(code, axis=1, bitorder="little").view(np.uint64)
    Q = np.packbits(queries, axis=1, bitorder="little").view(np.uint64)
    qs = np.zeros((16 * n_words, qb), dtype=np.uint8)
    _slice(Q, 0, m, qs)
    offsets = np.zeros((2, n_words), dtype=np.uint64)
    _offsets(T, 0, offsets)
    part = slice(8 * b0, 8 * (b0 + n))
    expected = np.full(qb, _bits(T)[0, part].sum())  # the zero queries past m
    expected[:m] = (_bits(Q)[:, part] != _bits(T)[:, part]).sum(axis=1)
    # k-th counts on, one above and one below the counts; lanes past the
    # block that must stay as they are
    worst = np.full(qb + 8, -1, dtype=np.int16)
    worst[:qb] = expected + rng.integers(-1, 2, qb)
    tile = np.full(qb + 8, -3, dtype=np.int16)
    lo, hi = _counts(tile, qs, offsets, b0, n, False, worst)
    np.testing.assert_array_equal(tile[:qb], expected)
    assert (tile[qb:] == -3).all()
    below = expected < worst[:qb]
    assert (int(lo), int(hi)) == (_mask(below[:64]), _mask(below[64:]))
    # added to what the tile holds
    tile[:qb] = 7
    lo, hi = _counts(tile, qs, offsets, b0, n, True, worst)
    np.testing.assert_array_equal(tile[:qb], expected + 7)
    assert (tile[qb:] == -3).all()
    below = expected + 7 < worst[:qb]
    assert (int(lo), int(hi)) == (_mask(below[:64]), _mask(below[64:]))


@pytest.mark.parametrize("qb", [WIDE_BLOCK_QUERIES, BLOCK_QUERIES])
@pytest.mark.parametrize("n", [BYTE_RUN - 1, BYTE_RUN, BYTE_RUN + 1, 2 * BYTE_RUN + 3])
def test_runs_of_bytes_hold_every_bit_different(n, qb):
    """Check byte sums at their limit: every bit of `n` bytes different,
    summed in runs of at most BYTE_RUN bytes."""
    n_words = MAX_SLICED_WORDS
    T = np.zeros((1, n_words), dtype=np.uint64)
    Q = np.full((qb, n_words), np.iinfo(np.uint64).max, dtype=np.uint64)
    qs = np.zeros((16 * n_words, qb), dtype=np.uint8)
    _slice(Q, 0, qb, qs)
    offsets = np.zeros((2, n_words), dtype=np.uint64)
    _offsets(T, 0, offsets)
    tile = np.zeros(qb, dtype=np.int16)
    worst = np.full(qb, 8 * n + 1, dtype=np.int16)
    lo, hi = _counts(tile, qs, offsets, 3, n, False, worst)
    assert (tile == 8 * n).all()
    below = np.ones(qb, dtype=bool)
    assert (int(lo), int(hi)) == (_mask(below[:64]), _mask(below[64:]))
