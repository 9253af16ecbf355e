"""Packed-bit Hamming kernels, sign-code scorers and sign geometry."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign.metrics._geometry import loo_purity, sign_gap
from sksign.metrics._scorers import (
    GateDominanceReport,
    gate_dominance,
    gate_dominance_report,
    intervention_score,
    make_gate_dominance_scorer,
    make_intervention_scorer,
)
from sksign.metrics.pairwise import (
    pack_bits,
    packed_hamming_distances,
    packed_kneighbors,
    unpack_bits,
)

__all__ = [
    "GateDominanceReport",
    "gate_dominance",
    "gate_dominance_report",
    "intervention_score",
    "loo_purity",
    "make_gate_dominance_scorer",
    "make_intervention_scorer",
    "pack_bits",
    "packed_hamming_distances",
    "packed_kneighbors",
    "sign_gap",
    "unpack_bits",
]
