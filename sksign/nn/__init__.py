"""Torch building blocks (no scikit-learn inside): activations and networks.

- :mod:`sksign.nn.activations`: the HTAF family and :func:`make_activation`;
- :mod:`sksign.nn.modules`, :mod:`sksign.nn.binary`, :mod:`sksign.nn.spiking`,
  :mod:`sksign.nn.icbm`: the networks; the papers' image nets
  :mod:`sksign.nn.resnet` (ResNet-18, WideResNet), :mod:`sksign.nn.vit`,
  :mod:`sksign.nn.sew_resnet` and :mod:`sksign.nn.bireal`; and
  :mod:`sksign.nn.factory` (:func:`build_network`), which builds any of them
  by name;
- :mod:`sksign.nn.hooks`: activation kinds, layer resolution, pooling, sign
  recording, and the one place where forward hooks are attached
  (:func:`forward_hooks`, :func:`capture_activations`,
  :func:`temporarily_eval`);
- :mod:`sksign.nn.interventions`, :mod:`sksign.nn.losses`,
  :mod:`sksign.nn.summary`: what is computed over any module with them;
- :mod:`sksign.nn.batchnorm`: BatchNorm statistics re-estimated with the
  exact step (:func:`recalibrate_batchnorm`).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
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
from sksign.nn.batchnorm import batchnorm_layers, recalibrate_batchnorm
from sksign.nn.binary import BinaryLinear, BinaryMLP, binary_sign
from sksign.nn.bireal import BinaryConv2d, BiRealResNet18
from sksign.nn.factory import (
    ARCHITECTURES,
    IMAGE_ARCHITECTURES,
    architecture_arguments,
    build_network,
    check_input_shape,
    infer_input_shape,
)
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
    temporary_mode,
)
from sksign.nn.icbm import BACKBONES, ICBMNet
from sksign.nn.interventions import (
    magnitude_randomization,
    reference_magnitudes,
    sign_flip,
)
from sksign.nn.modules import MLP, SmallCNN
from sksign.nn.resnet import ResNet18, WideResNet
from sksign.nn.sew_resnet import LIFNeuron, SEWResNet
from sksign.nn.spiking import IFNeuron, SpikingMLP
from sksign.nn.summary import binary_summary
from sksign.nn.vit import VisionTransformer

# Loaded on first access: it needs the optional spikingjelly.
_LAZY = {"HTAFSurrogate": "sksign.nn._spikingjelly"}


def __getattr__(name: str):
    """Load the optional names (``HTAFSurrogate``) on first access."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The public names are declared in sksign/_public.py. The others imported
# here (check_n_concepts, check_input_shape) are internal checkers:
# importable for sksign's own modules, not public.
__all__ = public_names(__name__)
