"""Packed-bit Hamming kernels, sign-code scorers and sign geometry."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign.metrics.pairwise import (
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
