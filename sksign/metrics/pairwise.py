"""Bit packing and Hamming distances on packed bit codes (XOR + popcount).

The public path of the packed-bit functions next to the scorers; they live in
:mod:`sksign.kernels` (numpy/numba only), which also holds the word-level search
the estimators use.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.kernels import (
    pack_bits,
    packed_hamming_distances,
    packed_kneighbors,
    unpack_bits,
)

__all__ = [
    "pack_bits",
    "packed_hamming_distances",
    "packed_kneighbors",
    "unpack_bits",
]
