"""The step activations: HTAF, its baselines, and the switch to the exact step.

One module per job, all re-exported here:

- the step (:func:`heaviside`, :class:`StepActivation`) and the switch of
  every step activation of a module to one mode (:func:`force_step_mode`);
- HTAF (:func:`htaf`, :class:`HTAF`, fused float32 CPU kernels in
  ``_htaf_kernel``) and the paper's bounds on its parameters
  (:func:`htaf_alpha0_min`, :func:`htaf_product_limit`, :func:`htaf_grid`);
- the baselines (:class:`STEHeaviside`, :class:`ScaledSigmoid`);
- every activation by name (:data:`ACTIVATIONS`, :func:`make_activation`),
  which every network builder of :mod:`sksign.nn` takes its activations from;
- HTAF as a spikingjelly surrogate (``HTAFSurrogate``, in ``_spikingjelly``:
  loaded on first access of ``sksign.nn.HTAFSurrogate``, it needs the optional
  spikingjelly).

This package was the single module ``sksign/nn/activations.py``: its names
(and the class paths of pickled activations, ``sksign.nn.activations.HTAF``)
are the same here.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
from sksign.nn.activations._baselines import ScaledSigmoid, STEHeaviside
from sksign.nn.activations._htaf import (
    HTAF,
    htaf,
    htaf_alpha0_min,
    htaf_grid,
    htaf_product_limit,
)
from sksign.nn.activations._registry import (
    ACTIVATIONS,
    STEP_ACTIVATIONS,
    make_activation,
)
from sksign.nn.activations._step import StepActivation, force_step_mode, heaviside

# The public names are declared in sksign/_public.py.
__all__ = public_names(__name__)
