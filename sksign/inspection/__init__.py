"""Inspection of fitted nets through their sign codes: sign geometry.

Like :mod:`sklearn.inspection`, these functions read a fitted model together
with data: :func:`sign_gap` compares a net with a k-NN on its sign codes (it
builds on :class:`~sksign.transformers.SignCodeTransformer` and
:class:`~sksign.estimators.SignKNNClassifier`), :func:`loo_purity` measures how
class-coherent the codes' Hamming neighbourhoods are. Both are also importable
from :mod:`sksign.metrics`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
from sksign.inspection._sign_geometry import loo_purity, sign_gap

# The public names are declared in sksign/_public.py.
__all__ = public_names(__name__)
