"""Packed-bit Hamming kernels, sign-code scorers and sign geometry."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
from sksign.inspection import loo_purity, sign_gap
from sksign.metrics._gate_dominance import (
    GateDominanceReport,
    gate_dominance,
    gate_dominance_from_activations,
    gate_dominance_report,
    make_gate_dominance_scorer,
)
from sksign.metrics._interventions import (
    intervention_score,
    make_intervention_scorer,
)
from sksign.metrics.pairwise import (
    pack_bits,
    packed_hamming_distances,
    packed_kneighbors,
    unpack_bits,
)

# The public names are declared in sksign/_public.py.
__all__ = public_names(__name__)
