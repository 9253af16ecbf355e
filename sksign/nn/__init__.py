"""Torch building blocks (no scikit-learn inside): activations and networks.

- :mod:`sksign.nn.activations`: the HTAF family and :func:`make_activation`;
- :mod:`sksign.nn.modules`, :mod:`sksign.nn.binary`, :mod:`sksign.nn.spiking`,
  :mod:`sksign.nn.icbm`: the networks, and :mod:`sksign.nn.factory`
  (:func:`build_network`), which builds any of them by name;
- :mod:`sksign.nn.hooks`: activation kinds, layer resolution, pooling, sign
  recording, and the one place where forward hooks are attached
  (:func:`forward_hooks`, :func:`capture_activations`,
  :func:`temporarily_eval`);
- :mod:`sksign.nn.interventions`, :mod:`sksign.nn.losses`,
  :mod:`sksign.nn.summary`: what is computed over any module with them.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign.nn._validation import check_n_concepts
from sksign.nn.activations import (
    ACTIVATIONS,
    HTAF,
    STEP_ACTIVATIONS,
    ScaledSigmoid,
    STEHeaviside,
    StepActivation,
    force_step_mode,
    heaviside,
    htaf,
    htaf_alpha0_min,
    htaf_grid,
    htaf_product_limit,
    make_activation,
)
from sksign.nn.binary import BinaryLinear, BinaryMLP, binary_sign
from sksign.nn.factory import ARCHITECTURES, build_network, infer_input_shape
from sksign.nn.hooks import (
    ActivationCapture,
    SignRecorder,
    activation_kind,
    capture_activations,
    find_activations,
    forward_hooks,
    pool_signs,
    quadrant_bounds,
    record_signs,
    resolve_layers,
    temporarily_eval,
)
from sksign.nn.icbm import BACKBONES, ICBMNet
from sksign.nn.interventions import (
    magnitude_randomization,
    reference_magnitudes,
    sign_flip,
)
from sksign.nn.modules import MLP, SmallCNN
from sksign.nn.spiking import IFNeuron, SpikingMLP
from sksign.nn.summary import binary_summary

__all__ = [
    "ACTIVATIONS",
    "ARCHITECTURES",
    "BACKBONES",
    "HTAF",
    "MLP",
    "STEP_ACTIVATIONS",
    "ActivationCapture",
    "BinaryLinear",
    "BinaryMLP",
    "ICBMNet",
    "IFNeuron",
    "STEHeaviside",
    "ScaledSigmoid",
    "SignRecorder",
    "SmallCNN",
    "SpikingMLP",
    "StepActivation",
    "activation_kind",
    "binary_sign",
    "binary_summary",
    "build_network",
    "capture_activations",
    "check_n_concepts",
    "find_activations",
    "force_step_mode",
    "forward_hooks",
    "heaviside",
    "htaf",
    "htaf_alpha0_min",
    "htaf_grid",
    "htaf_product_limit",
    "infer_input_shape",
    "magnitude_randomization",
    "make_activation",
    "pool_signs",
    "quadrant_bounds",
    "record_signs",
    "reference_magnitudes",
    "resolve_layers",
    "sign_flip",
    "temporarily_eval",
]
