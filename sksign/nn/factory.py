"""The network factory: build any built-in architecture by name.

:func:`build_network` builds the dense (DHN) and convolutional nets of
:mod:`sksign.nn.modules`, the Bi-Real-style binary MLP
(:mod:`sksign.nn.binary`) and the spiking MLP (:mod:`sksign.nn.spiking`);
the estimators build their nets through it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import nn

from sksign.nn._validation import check_sizes, check_time_steps
from sksign.nn.activations import ACTIVATIONS
from sksign.nn.binary import BinaryMLP
from sksign.nn.modules import MLP, SmallCNN
from sksign.nn.spiking import SpikingMLP

__all__ = ["ARCHITECTURES", "build_network", "infer_input_shape"]

#: Built-in architecture names accepted by :func:`build_network`: dense
#: (DHN) and convolutional nets, the Bi-Real-style binary MLP
#: (:mod:`sksign.nn.binary`) and the spiking MLP (:mod:`sksign.nn.spiking`).
ARCHITECTURES = ("mlp", "cnn", "bnn", "snn")


def infer_input_shape(n_features: int, input_shape=None) -> tuple[int, int, int]:
    """``input_shape`` as (C, H, W); a square one-channel image when None.

    Parameters
    ----------
    n_features : int
        Flat input width.
    input_shape : sequence of int, default=None
        ``(channels, height, width)`` or ``(height, width)`` (one channel).

    Returns
    -------
    tuple of int

    Examples
    --------
    >>> infer_input_shape(64), infer_input_shape(48, (4, 12))
    ((1, 8, 8), (1, 4, 12))
    """
    if input_shape is not None:
        shape = check_sizes("input_shape", input_shape)
        if len(shape) == 2:
            shape = (1, *shape)
        return shape
    side = math.isqrt(n_features)
    if side * side != n_features:
        raise ValueError(
            f"architecture='cnn' needs input_shape=(channels, height, width) "
            f"for {n_features} features (not a square image); pass input_shape "
            "or give X as a 4-D array (n_samples, channels, height, width)."
        )
    return (1, side, side)


def build_network(
    architecture: str,
    n_features: int,
    n_outputs: int,
    *,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: str = "htaf",
    alpha0: float = 2.0,
    alpha1: float = 11.0,
    input_shape=None,
    conv_channels: Sequence[int] = (16, 32),
    time_steps: int = 4,
    **kwargs,
) -> nn.Module:
    """Build the net called `architecture` (see :data:`ARCHITECTURES`).

    `time_steps` (an int >= 1) is used by spiking architectures only. Extra
    keyword arguments go to the architecture's constructor ("bnn":
    ``batch_norm``, ``binary_weights``, ``weight_grad``; "snn": ``threshold``,
    ``reset``, ``connect``, ``batch_norm``).

    Examples
    --------
    >>> net = build_network("mlp", 4, 3, hidden_layer_sizes=(8,), activation="relu")
    >>> type(net).__name__, [name for name, _ in net.named_children()]
    ('MLP', ['fc0', 'act0', 'out'])
    >>> type(build_network("snn", 4, 3, hidden_layer_sizes=(8,))).__name__
    'SpikingMLP'
    """
    time_steps = check_time_steps(time_steps)
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"The 'activation' parameter must be one of {ACTIVATIONS}. "
            f"Got {activation!r} instead."
        )
    common = {"activation": activation, "alpha0": alpha0, "alpha1": alpha1}
    if architecture == "mlp":
        return MLP(n_features, n_outputs, hidden_layer_sizes, **common, **kwargs)
    if architecture == "cnn":
        shape = infer_input_shape(n_features, input_shape)
        return SmallCNN(
            n_features,
            n_outputs,
            shape,
            conv_channels=conv_channels,
            hidden_layer_sizes=hidden_layer_sizes,
            **common,
            **kwargs,
        )
    if architecture == "bnn":
        return BinaryMLP(n_features, n_outputs, hidden_layer_sizes, **common, **kwargs)
    if architecture == "snn":
        return SpikingMLP(
            n_features,
            n_outputs,
            hidden_layer_sizes,
            **common,
            time_steps=time_steps,
            **kwargs,
        )
    raise ValueError(
        f"The 'architecture' parameter must be one of {ARCHITECTURES} or an "
        f"nn.Module subclass. Got {architecture!r} instead."
    )
