"""The k-NN and distance-matrix popcount kernels against a plain numpy reference.

Every kernel (the generic ``knn_counts``; where the CPU has AVX2, the nibble
kernels ``knn_counts_nibbles`` and ``knn_counts_sliced``; the register
blocks ``knn_counts_vectors``, chosen on AVX-512 VPOPCNTDQ but generic LLVM
IR, so checked on every CPU; likewise ``pairwise_counts``,
``pairwise_counts_nibbles``, ``pairwise_counts_sliced`` and
``pairwise_counts_vectors`` for the distance matrix) must give the k nearest
codes in the order of a stable sort of the float64 distances, for every code
width (the nibble kernel's chunks of 31 words and its unrolled 4-word path
included), every number of queries around the blocks of 16, 32 and 64 and of
codes around the blocks of 4 and tiles of 64, ties and the largest distances
(all bits different: the byte sums at their limit).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit
from numba.core import config

from sksign.kernels import _words as words_module
from sksign.kernels import target_has, words_hamming_distances, words_kneighbors
from sksign.kernels._klists import (
    LIST_LANES,
    insert_in_vector,
    lanes_below,
    trailing_zeros,
)
from sksign.kernels._nibbles import (
    knn_counts_nibbles,
    nibble_kernels,
    pairwise_counts_nibbles,
)
from sksign.kernels._popcount import knn_counts, pairwise_counts
from sksign.kernels._sliced_nibbles import PAIRWISE_MIN_ROWS as SLICED_MIN_ROWS
from sksign.kernels._sliced_nibbles import (
    block_queries,
    knn_counts_sliced,
    pairwise_counts_sliced,
)
from sksign.kernels._vector_counts import PRUNE_WORDS, vector_kernels
from sksign.kernels._vector_search import (
    CODE_TILE_BYTES,
    GROUP_PIVOTS,
    QUERY_BLOCK,
    SPAN_BLOCKS,
    grouped_queries,
    knn_counts_vectors,
    pairwise_counts_vectors,
)

#: The nibble kernels compile wherever the CPU has AVX2 (they are chosen only
#: without VPOPCNTDQ, but checked on every AVX2 machine).
HAS_AVX2 = target_has("avx2")


def _all(generic, nibbles, vectors, sliced=None):
    """The generic kernel, its nibble twins where the CPU has AVX2, and its
    register-block twin (generic IR: it runs on any CPU)."""
    needs_avx2 = pytest.mark.skipif(not HAS_AVX2, reason="needs AVX2")
    return [
        pytest.param(generic, id="generic"),
        pytest.param(nibbles, id="nibbles", marks=needs_avx2),
        *([pytest.param(sliced, id="sliced", marks=needs_avx2)] if sliced else []),
        pytest.param(vectors, id="vectors"),
    ]


KERNELS = _all(knn_counts, knn_counts_nibbles, knn_counts_vectors, knn_counts_sliced)


def _reference(Q, T, k):
    """(counts, indices) from float64 bit arrays and a stable sort."""
    bits_q = np.unpackbits(Q.view(np.uint8), axis=1).astype(np.float64)
    bits_t = np.unpackbits(T.view(np.uint8), axis=1).astype(np.float64)
    D = bits_q @ (1 - bits_t).T + (1 - bits_q) @ bits_t.T
    order = np.argsort(D, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(D, order, axis=1).astype(np.int64), order


def _search(kernel, Q, T, k):
    d = np.full((Q.shape[0], k), -7, dtype=np.int64)
    i = np.full_like(d, -7)
    kernel(Q, T, d, i)
    return d, i


def _words(rng, n, n_words, density=0.5):
    bits = rng.random((n, 64 * n_words)) < density
    return np.packbits(bits, axis=1).view(np.uint64).reshape(n, n_words)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n_words", [1, 3, 4, 5, 8, 16, 17, 31, 32, 33, 62, 64, 70])
def test_kernels_match_the_reference(kernel, n_words):
    """Check every width against the reference, ties included."""
    rng = np.random.default_rng(n_words)
    n_q, n_t = 67, 150
    Q, T = _words(rng, n_q, n_words), _words(rng, n_t, n_words)
    T[::7] = T[3]  # many codes at equal distances
    T[5] = Q[0]  # a distance of zero
    k = 9
    d, i = _search(kernel, Q, T, k)
    expected_d, expected_i = _reference(Q, T, k)
    np.testing.assert_array_equal(d, expected_d)
    np.testing.assert_array_equal(i, expected_i)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n_queries", [1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 130])
def test_kernels_take_any_number_of_queries(kernel, n_queries):
    """Check the blocks of queries (16 per group, 32 or 64 per block) and of
    codes (4 per register block, 64 per tile: 90 and 131 codes)."""
    rng = np.random.default_rng(n_queries)
    for n_words, n_codes in ((4, 90), (20, 131)):
        Q, T = _words(rng, n_queries, n_words), _words(rng, n_codes, n_words)
        d, i = _search(kernel, Q, T, 4)
        expected_d, expected_i = _reference(Q, T, 4)
        np.testing.assert_array_equal(d, expected_d)
        np.testing.assert_array_equal(i, expected_i)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n_words", [1, 4, 16, 31, 32, 62, 63])
def test_kernels_count_every_bit_different(kernel, n_words):
    """Check the largest counts: the nibble kernel sums 31 words in bytes,
    the sliced one up to 31 bytes of a code."""
    ones = np.full((3, n_words), np.iinfo(np.uint64).max, dtype=np.uint64)
    zeros = np.zeros((5, n_words), dtype=np.uint64)
    d, i = _search(kernel, ones, zeros, 5)
    assert (d == 64 * n_words).all()
    np.testing.assert_array_equal(i, np.tile(np.arange(5), (3, 1)))


@pytest.mark.parametrize("kernel", KERNELS)
def test_k_equal_to_the_number_of_codes_returns_them_all(kernel):
    rng = np.random.default_rng(3)
    Q, T = _words(rng, 20, 4), _words(rng, 6, 4)
    d, i = _search(kernel, Q, T, 6)
    assert (np.sort(i, axis=1) == np.arange(6)).all()
    np.testing.assert_array_equal((d, i), _reference(Q, T, 6))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("k", [1, LIST_LANES - 1, LIST_LANES, LIST_LANES + 1, 20])
def test_lists_in_a_vector_and_longer_lists_match_the_reference(kernel, k):
    """Check k up to a vector's lanes (one vector a list) and past it (a
    scalar insertion), on codes with many ties and queries past a block."""
    rng = np.random.default_rng(k)
    Q, T = _words(rng, 70, 4, 0.9), _words(rng, 300, 4, 0.9)
    T[::5] = T[2]
    np.testing.assert_array_equal(_search(kernel, Q, T, k), _reference(Q, T, k))


def test_register_blocks_by_tiles_of_codes_and_spans_of_queries():
    """Check the register-block search where the codes take two tiles (the
    second of a few codes, not a multiple of 4) and the queries two spans
    (the second of one query): the same lists as the reference."""
    n_words = 64
    step = CODE_TILE_BYTES // (8 * n_words)
    n_t, n_q = step + 6, SPAN_BLOCKS * QUERY_BLOCK + 1
    rng = np.random.default_rng(11)
    Q, T = _words(rng, n_q, n_words, 0.7), _words(rng, n_t, n_words, 0.7)
    T[::9] = T[4]  # ties across the tiles
    T[step + 2] = Q[0]  # the nearest code in the second tile
    d, i = _search(knn_counts_vectors, Q, T, 5)
    expected_d, expected_i = _reference(Q, T, 5)
    np.testing.assert_array_equal(d, expected_d)
    np.testing.assert_array_equal(i, expected_i)
    assert i[0, 0] == step + 2


def _clustered(rng, n, n_words, centres, flip):
    """Codes around `centres` (rows of words), each bit flipped with
    probability `flip`, and the centre of each."""
    which = rng.integers(0, len(centres), n)
    noise = _words(rng, n, n_words, flip)
    return centres[which] ^ noise, which


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n_words", [4, PRUNE_WORDS + 1, 2 * PRUNE_WORDS, 64, 70])
@pytest.mark.parametrize("k", [1, 5, LIST_LANES + 3])
def test_searches_that_stop_codes_early_keep_the_reference_lists(kernel, n_words, k):
    """Check the searches where most codes stop before their last word (the
    register blocks every PRUNE_WORDS words, with the queries grouped; the
    nibble kernel after each 31-word chunk; the sliced one after half a
    code, with the queries grouped from two of its blocks) on clustered
    codes, where a query's k-th is far below the other clusters' counts,
    ties and duplicates included: the reference lists, in the caller's
    query order."""
    rng = np.random.default_rng(n_words + k)
    centres = _words(rng, 6, n_words)
    sliced = kernel is knn_counts_sliced
    n_q = 2 * block_queries(n_words) + 5 if sliced else 3 * QUERY_BLOCK + 5
    Q, _ = _clustered(rng, n_q, n_words, centres, 0.05)
    T, _ = _clustered(rng, 403, n_words, centres, 0.05)
    T[::11] = T[7]  # ties
    T[100] = Q[-1]  # a distance of zero for the last query
    d, i = _search(kernel, Q, T, k)
    expected_d, expected_i = _reference(Q, T, k)
    np.testing.assert_array_equal(d, expected_d)
    np.testing.assert_array_equal(i, expected_i)
    assert d[-1, 0] == 0


def test_grouped_queries_put_each_pivots_queries_together():
    """Check the order the register-block search groups its queries in: a
    permutation, sorted by the nearest pivot (every n_q // n_pivots-th
    query, ties to the first), the queries of a pivot in their own order."""
    rng = np.random.default_rng(5)
    n_words = 12
    for n_q in (2 * QUERY_BLOCK, 150, GROUP_PIVOTS * QUERY_BLOCK + 7):
        Q, _ = _clustered(rng, n_q, n_words, _words(rng, 9, n_words), 0.1)
        order = grouped_queries(Q)
        assert sorted(order.tolist()) == list(range(n_q))
        n_pivots = min(GROUP_PIVOTS, n_q // QUERY_BLOCK)
        pivots = Q[:: n_q // n_pivots][:n_pivots]
        counts = np.unpackbits((Q[:, None, :] ^ pivots[None]).view(np.uint8), axis=2)
        nearest = counts.sum(axis=2).argmin(axis=1)
        assert (np.diff(nearest[order]) >= 0).all()
        for p in np.unique(nearest):
            members = order[nearest[order] == p]
            assert (np.diff(members) > 0).all()


@njit
def _insert(ld, li, row, d, j):
    insert_in_vector(ld, li, row, d, j)


@given(
    counts=st.lists(st.integers(0, 9), min_size=LIST_LANES, max_size=LIST_LANES),
    d=st.integers(0, 10),
    j=st.integers(0, 1000),
    row=st.integers(0, 2),
)
def test_insert_in_vector_is_a_stable_sorted_insertion(counts, d, j, row):
    """Check the vector insertion against Python's: after every count not
    above `d`, the last entry dropped, the other rows untouched."""
    counts = sorted(counts)
    ld = np.full((3, LIST_LANES), -5, np.int64)
    li = np.full((3, LIST_LANES), -6, np.int64)
    ld[row] = counts
    li[row] = np.arange(LIST_LANES) + 100
    entries = list(zip(counts, range(100, 100 + LIST_LANES), strict=True))
    place = sum(c <= d for c in counts)
    expected = ([*entries[:place], (d, j), *entries[place:]])[:LIST_LANES]
    _insert(ld, li, row, d, j)
    assert list(zip(ld[row].tolist(), li[row].tolist(), strict=True)) == expected
    others = [r for r in range(3) if r != row]
    assert (ld[others] == -5).all()
    assert (li[others] == -6).all()


@settings(max_examples=40, deadline=None)
@given(
    n_q=st.integers(1, 40),
    n_t=st.integers(1, 40),
    n_words=st.integers(1, 9),
    seed=st.integers(0, 2**32 - 1),
    density=st.sampled_from([0.02, 0.5, 0.98]),
    data=st.data(),
)
def test_the_kernels_agree_on_random_codes(n_q, n_t, n_words, seed, density, data):
    """Check both kernels against the reference on random (often tied) codes."""
    k = data.draw(st.integers(1, n_t))
    rng = np.random.default_rng(seed)
    Q, T = _words(rng, n_q, n_words, density), _words(rng, n_t, n_words, density)
    expected = _reference(Q, T, k)
    kernels = [knn_counts, knn_counts_vectors]
    nibbles = [knn_counts_nibbles, knn_counts_sliced] if HAS_AVX2 else []
    for kernel in kernels + nibbles:
        np.testing.assert_array_equal(_search(kernel, Q, T, k), expected)


@njit
def _lanes_below_16(a, i, b, j):
    return lanes_below(a, i, b, j, 16)


@njit
def _trailing_zeros(x):
    return trailing_zeros(x)


def test_lanes_below_and_trailing_zeros():
    """Check the mask of lanes below and its bit positions against numpy."""
    rng = np.random.default_rng(0)
    a = rng.integers(-5, 5, 40)
    b = rng.integers(-5, 5, 40)
    for i, j in [(0, 0), (3, 11), (24, 1)]:
        mask = _lanes_below_16(a, i, b, j)
        expected = a[i : i + 16] < b[j : j + 16]
        assert [bool(mask >> np.uint64(lane) & np.uint64(1)) for lane in range(16)] == (
            expected.tolist()
        )
    for x in [1, 2, 96, 1 << 63, 0]:
        expected = 64 if x == 0 else (x & -x).bit_length() - 1
        assert _trailing_zeros(np.uint64(x)) == expected


def test_nibble_kernels_follow_numba_target(monkeypatch):
    """Check the nibble kernels run only on an AVX2 target without VPOPCNTDQ."""
    for features, expected in [
        ("+avx2,+popcnt", True),
        ("+avx512f,+avx512vpopcntdq,+avx2", False),
        ("-avx2,+popcnt", False),
    ]:
        monkeypatch.setattr(config, "CPU_FEATURES", features)
        assert nibble_kernels() is expected


def test_vector_kernels_follow_numba_target(monkeypatch):
    """Check the register blocks are chosen only on an AVX-512 VPOPCNTDQ
    target, the nibble kernels on AVX2, else the generic ones."""
    for features, expected in [
        ("+avx2,+popcnt", ("AVX2 nibble", knn_counts_sliced)),
        ("+avx512f,+avx512vpopcntdq,+avx2", ("AVX-512", knn_counts_vectors)),
        ("+avx512f,-avx512vpopcntdq,+avx2", ("AVX2 nibble", None)),
        ("-avx2,+popcnt", ("generic (LLVM ctpop)", knn_counts)),
    ]:
        monkeypatch.setattr(config, "CPU_FEATURES", features)
        name, knn, pairwise = words_module.hamming_kernels()
        assert vector_kernels() is (expected[1] is knn_counts_vectors)
        assert name.startswith(expected[0])
        assert expected[1] is None or knn is expected[1]
        assert pairwise.__name__ == knn.__name__.replace("knn", "pairwise")


_CHOICES = [
    ("generic", knn_counts, pairwise_counts),
    ("vectors", knn_counts_vectors, pairwise_counts_vectors),
] + (
    [
        ("nibbles", knn_counts_nibbles, pairwise_counts_nibbles),
        ("sliced", knn_counts_sliced, pairwise_counts_sliced),
    ]
    if HAS_AVX2
    else []
)


def test_words_kneighbors_gives_the_same_with_every_kernel(monkeypatch):
    """Check the search returns the same neighbours through every kernel."""
    rng = np.random.default_rng(5)
    Q, T = _words(rng, 70, 5), _words(rng, 300, 5)
    T[::4] = T[1]
    results = []
    for choice in _CHOICES:
        monkeypatch.setattr(words_module, "hamming_kernels", lambda c=choice: c)
        results.append(words_kneighbors(Q, T, 7, n_jobs=2))
    for result in results:
        np.testing.assert_array_equal(result, _reference(Q, T, 7))


PAIRWISE = _all(
    pairwise_counts,
    pairwise_counts_nibbles,
    pairwise_counts_vectors,
    pairwise_counts_sliced,
)


def _reference_matrix(A, B):
    """Popcounts of ``A[i] ^ B[j]`` by float64 products of the bits."""
    bits_a = np.unpackbits(A.view(np.uint8), axis=1).astype(np.float64)
    bits_b = np.unpackbits(B.view(np.uint8), axis=1).astype(np.float64)
    return bits_a @ (1 - bits_b).T + (1 - bits_a) @ bits_b.T


@pytest.mark.parametrize("kernel", PAIRWISE)
@pytest.mark.parametrize("n_words", [0, 1, 4, 5, 9, 16, 17, 31, 32, 33, 64, 70])
@pytest.mark.parametrize(
    ("n_a", "n_b", "dtype"),
    [
        (1, 1, np.int32),
        (3, 17, np.int64),
        (20, 65, np.int32),
        (9, 130, np.int64),
        (13, 1000, np.int32),
        (16, 45, np.int64),
        (SLICED_MIN_ROWS + 3, 101, np.int32),
    ],
)
def test_distance_matrix_kernels_match_the_reference(kernel, n_words, n_a, n_b, dtype):
    """Check every count of the distance matrix (int32 or int64), the
    largest ones too, for rows around the blocks of 16 and 64, words around
    the chunks of 31, and codes over several tiles of the register blocks
    (from 33 words, 1,000 codes take more than one), and last blocks of 1,
    2, 8, 13 and 17 codes (one, two and four vectors). The register blocks
    take 13 to 20 rows at every width, fewer rows at the narrower codes
    only (the others go to the generic kernel); the sliced kernel, from
    SLICED_MIN_ROWS rows (the others go to the word kernel)."""
    rng = np.random.default_rng(n_words * 1000 + n_a + n_b)
    A, B = _words(rng, n_a, n_words), _words(rng, n_b, n_words)
    if n_words:
        B[0] = ~A[0]  # all bits different
    out = np.full((n_a, n_b), -7, dtype)
    kernel(A, B, out)
    np.testing.assert_array_equal(out, _reference_matrix(A, B))
    if n_words:
        assert out[0, 0] == 64 * n_words


def test_words_hamming_distances_gives_the_same_with_every_kernel(monkeypatch):
    """Check the distance matrix is the same through every kernel and threads."""
    rng = np.random.default_rng(6)
    A, B = _words(rng, 37, 3), _words(rng, 50, 3)
    results = []
    for choice in _CHOICES:
        monkeypatch.setattr(words_module, "hamming_kernels", lambda c=choice: c)
        results.append(words_hamming_distances(A, B, n_jobs=2))
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])
    np.testing.assert_array_equal(results[0], words_hamming_distances(A, B))


@pytest.mark.parametrize("choice", _CHOICES, ids=[c[0] for c in _CHOICES])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_distances_fill_any_out(monkeypatch, choice, n_jobs):
    """Check `out` of other dtypes and layouts through every kernel (the
    register blocks fill them from int32 buffers of a few rows: three or
    more per thread here) against the reference counts."""
    rng = np.random.default_rng(7)
    A, B = _words(rng, 30, 3), _words(rng, 45, 3)
    ref = _reference_matrix(A, B)
    monkeypatch.setattr(words_module, "hamming_kernels", lambda: choice)
    monkeypatch.setattr(words_module, "_BUFFER_BYTES", 4 * 45 * 4)
    for out in [
        np.zeros(ref.shape, np.int64),
        np.zeros(ref.shape, np.float32),
        np.zeros(ref.shape, np.uint16),
        np.zeros(ref.shape, np.int32, order="F"),
        np.zeros((ref.shape[1], ref.shape[0]), np.int64).T,
        np.zeros((ref.shape[0], 2 * ref.shape[1]), np.int32)[:, ::2],
    ]:
        assert words_hamming_distances(A, B, out=out, n_jobs=n_jobs) is out
        np.testing.assert_array_equal(out, ref)
