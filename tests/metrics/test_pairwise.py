"""Tests for sksign.metrics.pairwise, the older public path of the packed kernels.

The kernels themselves are tested in tests/kernels.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest

import sksign.kernels
import sksign.metrics
import sksign.metrics.pairwise
from sksign.metrics.pairwise import (
    pack_bits,
    packed_hamming_distances,
    packed_kneighbors,
    unpack_bits,
)

OLD_PUBLIC_NAMES = [
    "pack_bits",
    "packed_hamming_distances",
    "packed_kneighbors",
    "unpack_bits",
]


@pytest.mark.parametrize("name", OLD_PUBLIC_NAMES)
def test_old_path_gives_the_kernels_functions(name):
    """Check sksign.metrics(.pairwise) re-export the very functions of kernels."""
    assert name in sksign.metrics.pairwise.__all__
    func = getattr(sksign.kernels, name)
    assert getattr(sksign.metrics.pairwise, name) is func
    assert getattr(sksign.metrics, name) is func


def test_old_path_still_computes():
    """Check a round trip and a search through the old import path."""
    bits = np.array([[1, 0, 1, 1, 0], [0, 0, 1, 1, 1], [1, 0, 1, 1, 1]])
    codes = pack_bits(bits)
    np.testing.assert_array_equal(unpack_bits(codes, 5), bits)
    np.testing.assert_array_equal(
        packed_hamming_distances(codes, n_bits=5), [[0, 2, 1], [2, 0, 1], [1, 1, 0]]
    )
    dist, ind = packed_kneighbors(codes[:1], codes, 2, n_bits=5, normalize=True)
    np.testing.assert_array_equal(dist, [[0.0, 0.2]])
    np.testing.assert_array_equal(ind, [[0, 2]])
