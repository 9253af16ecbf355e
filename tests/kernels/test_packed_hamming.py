"""Tests for the packed Hamming kernels of sksign.kernels: packing, distances, k-NN.

Moved from tests/metrics/test_pairwise.py, which keeps the tests of the old
public path ``sksign.metrics.pairwise``.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.distance import cdist

from sksign._compat import InvalidParameterError
from sksign.kernels import (
    pack_bits,
    packed_hamming_distances,
    packed_kneighbors,
    unpack_bits,
)

PUBLIC_FUNCTIONS = [pack_bits, unpack_bits, packed_hamming_distances, packed_kneighbors]


def _random_bits(rng, n, n_bits):
    return rng.integers(0, 2, size=(n, n_bits), dtype=np.uint8)


def _with_garbage_padding(packed, n_bits, rng):
    """Set random values in the padding bits past `n_bits`."""
    packed = packed.copy()
    if n_bits % 8:
        pad_mask = (1 << (8 - n_bits % 8)) - 1
        packed[:, -1] |= rng.integers(0, 256, packed.shape[0]).astype(np.uint8) & (
            pad_mask
        )
    return packed


@st.composite
def bit_matrices(draw, max_rows=12, max_bits=200):
    n_bits = draw(st.integers(1, max_bits))
    n_rows = draw(st.integers(1, max_rows))
    return draw(arrays(np.uint8, (n_rows, n_bits), elements=st.integers(0, 1)))


@pytest.mark.parametrize("func", PUBLIC_FUNCTIONS)
def test_public_functions_declare_param_constraints(func):
    """Check that every public function validates its parameters."""
    assert hasattr(func, "_skl_parameter_constraints")


def test_invalid_params_raise():
    """Check that out-of-range parameters raise InvalidParameterError."""
    codes = pack_bits(np.ones((3, 9)))
    with pytest.raises(InvalidParameterError, match="n_neighbors"):
        packed_kneighbors(codes, codes, 0)
    with pytest.raises(InvalidParameterError, match="batch_size"):
        packed_hamming_distances(codes, batch_size=0)
    with pytest.raises(InvalidParameterError, match="n_bits"):
        unpack_bits(codes, n_bits=0)


def test_pack_bits_equals_numpy_packbits_for_01_pm1_and_bool():
    """Check that 0/1, +-1 and bool inputs pack like numpy.packbits(x > 0)."""
    rng = np.random.default_rng(0)
    bits = _random_bits(rng, 5, 21)
    expected = np.packbits(bits, axis=-1)
    np.testing.assert_array_equal(pack_bits(bits), expected)
    np.testing.assert_array_equal(pack_bits(2 * bits.astype(np.int8) - 1), expected)
    np.testing.assert_array_equal(pack_bits(bits.astype(bool)), expected)
    np.testing.assert_array_equal(
        pack_bits(bits.T, axis=0), np.packbits(bits.T, axis=0)
    )


def test_pack_bits_rejects_nan_and_strings():
    """Check that NaN raises ValueError and non-numeric input raises TypeError."""
    with pytest.raises(ValueError, match="NaN"):
        pack_bits([[1.0, np.nan]])
    with pytest.raises(TypeError, match="dtype"):
        pack_bits([["a", "b"]])


@settings(max_examples=50, deadline=None)
@given(bits=bit_matrices())
def test_pack_unpack_round_trip(bits):
    """Check that unpack_bits(pack_bits(x), n_bits) == x for any bit count."""
    n_bits = bits.shape[1]
    packed = pack_bits(bits)
    assert packed.shape == (bits.shape[0], -(-n_bits // 8))
    np.testing.assert_array_equal(unpack_bits(packed, n_bits), bits)


@settings(max_examples=50, deadline=None)
@given(a=bit_matrices(), seed=st.integers(0, 2**32 - 1))
def test_packed_distance_equals_count_on_unpacked_bits(a, seed):
    """Check the packed distance against the count of differing bits."""
    rng = np.random.default_rng(seed)
    n_bits = a.shape[1]
    b = _random_bits(rng, 7, n_bits)
    pa = _with_garbage_padding(pack_bits(a), n_bits, rng)
    pb = _with_garbage_padding(pack_bits(b), n_bits, rng)
    expected = (a[:, None, :] != b[None, :, :]).sum(-1)
    got = packed_hamming_distances(pa, pb, n_bits=n_bits)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(
        packed_hamming_distances(pa, pb, n_bits=n_bits, normalize=True),
        expected / n_bits,
    )


@settings(max_examples=50, deadline=None)
@given(bits=bit_matrices(max_rows=8))
def test_metric_axioms(bits):
    """Check identity, symmetry and the triangle inequality."""
    D = packed_hamming_distances(pack_bits(bits), n_bits=bits.shape[1])
    np.testing.assert_array_equal(np.diag(D), 0)
    np.testing.assert_array_equal(D, D.T)
    distinct = (bits[:, None, :] != bits[None, :, :]).any(-1)
    np.testing.assert_array_equal(D > 0, distinct)
    assert np.all(D[:, None, :] <= D[:, :, None] + D[None, :, :])


@settings(max_examples=50, deadline=None)
@given(
    bits=bit_matrices(max_rows=40, max_bits=150),
    batch_size=st.integers(1, 50),
    n_jobs=st.sampled_from([1, 2]),
    k=st.integers(1, 5),
)
def test_results_invariant_to_batch_size_and_threads(bits, batch_size, n_jobs, k):
    """Check that distances and neighbours do not depend on batching or threads."""
    n_bits = bits.shape[1]
    codes = pack_bits(bits)
    D = packed_hamming_distances(codes, n_bits=n_bits)
    np.testing.assert_array_equal(
        packed_hamming_distances(
            codes, n_bits=n_bits, batch_size=batch_size, n_jobs=n_jobs
        ),
        D,
    )
    k = min(k, len(codes))
    dist, ind = packed_kneighbors(codes, codes, k, n_bits=n_bits)
    dist2, ind2 = packed_kneighbors(
        codes, codes, k, n_bits=n_bits, batch_size=batch_size, n_jobs=n_jobs
    )
    np.testing.assert_array_equal(dist, dist2)
    np.testing.assert_array_equal(ind, ind2)


@pytest.mark.parametrize("n_bits", [1, 7, 63, 64, 65, 256, 1000])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_kneighbors_equals_stable_sort_of_distances(n_bits, n_jobs):
    """Check neighbours equal a stable argsort of the full distance matrix."""
    rng = np.random.default_rng(n_bits)
    # Enough codes that two threads split the codes, not only the queries.
    A = pack_bits(_random_bits(rng, 50, n_bits))
    B = pack_bits(_random_bits(rng, 2500, n_bits))
    k = 7
    D = packed_hamming_distances(A, B, n_bits=n_bits)
    expected_ind = np.argsort(D, axis=1, kind="stable")[:, :k]
    dist, ind = packed_kneighbors(A, B, k, n_bits=n_bits, n_jobs=n_jobs)
    np.testing.assert_array_equal(ind, expected_ind)
    np.testing.assert_array_equal(dist, np.take_along_axis(D, expected_ind, 1))
    normalized, _ = packed_kneighbors(A, B, k, n_bits=n_bits, normalize=True)
    np.testing.assert_allclose(
        normalized,
        cdist(unpack_bits(A, n_bits), unpack_bits(B, n_bits), "hamming")[
            np.arange(len(A))[:, None], expected_ind
        ],
        rtol=0,
        atol=0,
    )


def test_kneighbors_ties_go_to_smaller_index():
    """Check that equal distances are ordered by the index in B."""
    bits = np.array([[1, 0, 1], [0, 0, 0], [1, 0, 1], [1, 1, 1], [1, 0, 1]])
    codes = pack_bits(bits)
    dist, ind = packed_kneighbors(codes[:1], codes, 5, n_bits=3)
    np.testing.assert_array_equal(ind, [[0, 2, 4, 3, 1]])
    np.testing.assert_array_equal(dist, [[0, 0, 0, 1, 2]])


def test_one_sample():
    """Check single-row inputs."""
    a = pack_bits([[1, 0, 1, 1, 0]])
    b = pack_bits([[0, 0, 1, 1, 1]])
    np.testing.assert_array_equal(packed_hamming_distances(a, b, n_bits=5), [[2]])
    dist, ind = packed_kneighbors(a, b, 1, n_bits=5, normalize=True)
    np.testing.assert_array_equal(dist, [[0.4]])
    np.testing.assert_array_equal(ind, [[0]])


def test_memmap_input(tmp_path):
    """Check that a numpy.memmap of packed codes is searched batch by batch."""
    rng = np.random.default_rng(0)
    codes = pack_bits(_random_bits(rng, 300, 100))
    mm = np.memmap(tmp_path / "codes.u8", dtype=np.uint8, mode="w+", shape=codes.shape)
    mm[:] = codes
    mm.flush()
    ro = np.memmap(tmp_path / "codes.u8", dtype=np.uint8, mode="r", shape=codes.shape)
    expected = packed_kneighbors(codes, codes, 3, n_bits=100)
    got = packed_kneighbors(ro, ro, 3, n_bits=100, batch_size=64)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


def test_bad_inputs_raise_clear_errors():
    """Check the errors for wrong dtypes, bit counts, widths and k."""
    codes = pack_bits(np.ones((4, 12)))
    with pytest.raises(TypeError, match="uint8"):
        packed_hamming_distances(codes.astype(np.int64))
    with pytest.raises(TypeError, match="uint8"):
        unpack_bits(codes.astype(np.int16))
    for n_bits in (8, 17):
        with pytest.raises(ValueError, match=r"9 <= n_bits <= 16"):
            packed_hamming_distances(codes, n_bits=n_bits)
    with pytest.raises(ValueError, match="same number of bytes"):
        packed_hamming_distances(codes, codes[:, :1])
    msg = (
        "Expected n_neighbors <= n_samples_fit, but n_neighbors = 5, n_samples_fit = 4"
    )
    with pytest.raises(ValueError, match=msg):
        packed_kneighbors(codes, codes, 5)
