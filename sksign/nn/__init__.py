"""Torch building blocks (no scikit-learn inside): activations and networks."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

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
from sksign.nn.modules import MLP, SmallCNN, build_network, make_activation

__all__ = [
    "HTAF",
    "MLP",
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
    "make_activation",
    "pool_signs",
    "quadrant_bounds",
    "record_signs",
    "resolve_layers",
    "temporarily_eval",
]
