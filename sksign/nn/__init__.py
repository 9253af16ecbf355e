"""Torch building blocks (no scikit-learn inside): activations and networks."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign.nn._capture import (
    ActivationCapture,
    capture_activations,
    forward_hooks,
)
from sksign.nn.activations import (
    HTAF,
    ScaledSigmoid,
    STEHeaviside,
    StepActivation,
    force_step_mode,
    heaviside,
    htaf,
    htaf_alpha0_min,
    htaf_grid,
    htaf_product_limit,
)
from sksign.nn.binary import BinaryLinear, BinaryMLP, binary_sign
from sksign.nn.hooks import (
    SignRecorder,
    activation_kind,
    find_activations,
    pool_signs,
    quadrant_bounds,
    record_signs,
    resolve_layers,
    temporarily_eval,
)
from sksign.nn.icbm import BACKBONES, ICBMNet, check_n_concepts
from sksign.nn.interventions import (
    magnitude_randomization,
    reference_magnitudes,
    sign_flip,
)
from sksign.nn.modules import (
    ACTIVATIONS,
    ARCHITECTURES,
    MLP,
    STEP_ACTIVATIONS,
    SmallCNN,
    build_network,
    infer_input_shape,
    make_activation,
)
from sksign.nn.spiking import IFNeuron, SpikingMLP
from sksign.nn.summary import binary_summary

__all__ = [
    "ACTIVATIONS",
    "ARCHITECTURES",
    "BACKBONES",
    "STEP_ACTIVATIONS",
    "check_n_concepts",
    "infer_input_shape",
    "ActivationCapture",
    "capture_activations",
    "forward_hooks",
    "HTAF",
    "MLP",
    "BinaryLinear",
    "BinaryMLP",
    "ICBMNet",
    "IFNeuron",
    "SpikingMLP",
    "binary_sign",
    "binary_summary",
    "STEHeaviside",
    "ScaledSigmoid",
    "SignRecorder",
    "SmallCNN",
    "StepActivation",
    "activation_kind",
    "build_network",
    "find_activations",
    "force_step_mode",
    "heaviside",
    "htaf",
    "htaf_alpha0_min",
    "htaf_grid",
    "htaf_product_limit",
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
