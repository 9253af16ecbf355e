"""Network builders: MLP and small CNN with any activation of the family.

Every builder returns an ``nn.Sequential`` with named children so that layers
are addressed by name: dense block ``i`` is ``fc{i}`` (Linear) then ``act{i}``
(activation); conv block ``i`` is ``conv{i}``, ``conv_act{i}``, ``pool{i}``;
the readout is ``out``. The last hidden layer is the last ``act{i}``.

The network factory (:func:`~sksign.nn.architectures.factory.build_network`,
``ARCHITECTURES``, ``infer_input_shape``) lives in
:mod:`sksign.nn.architectures.factory`, which builds on this module. Their
old paths here (``sksign.nn.modules.build_network``, ...) keep working: this
module forwards them lazily (a module-level ``__getattr__``), because an
import of the factory here would be an import cycle. ``ACTIVATIONS``,
``STEP_ACTIVATIONS`` and ``make_activation`` live in
:mod:`sksign.nn.activations` and are re-exported here under their old paths.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib
import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from torch import nn

from sksign.nn._validation import check_sizes
from sksign.nn.activations import ACTIVATIONS, STEP_ACTIVATIONS, make_activation
from sksign.nn.layers.readout import Readout

__all__ = [
    "ACTIVATIONS",
    "MLP",
    "STEP_ACTIVATIONS",
    "SmallCNN",
    "make_activation",
]

# Old paths of the factory's names (sksign.nn.modules.build_network, ...),
# forwarded by __getattr__ to their home, sksign.nn.architectures.factory.
_MOVED_TO_FACTORY = ("ARCHITECTURES", "build_network", "infer_input_shape")


def __getattr__(name: str) -> Any:
    """Forward the old paths of the factory's names to their home, the factory."""
    if name in _MOVED_TO_FACTORY:
        return getattr(importlib.import_module("sksign.nn.architectures.factory"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def dense_stack(
    layers: OrderedDict,
    n_in: int,
    hidden_layer_sizes: Sequence[int],
    activation: str,
    alpha0: float,
    alpha1: float,
) -> int:
    """Append ``fc{i}``, ``act{i}`` to `layers`; return the last width.

    Shared by :class:`MLP`, :class:`SmallCNN` and the ICBM backbones.
    """
    for i, width in enumerate(hidden_layer_sizes):
        layers[f"fc{i}"] = nn.Linear(n_in, width)
        layers[f"act{i}"] = make_activation(activation, alpha0, alpha1)
        n_in = width
    return n_in


class MLP(nn.Sequential):
    """Fully connected net: ``fc0, act0, ..., fc{L-1}, act{L-1}, out``.

    Parameters
    ----------
    n_features : int
        Input width.
    n_outputs : int
        Output width (classes or regression targets).
    hidden_layer_sizes : sequence of int, default=(256, 256)
        Width of each hidden layer.
    activation : str, default="htaf"
        One of :data:`ACTIVATIONS`.
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters (see :func:`make_activation`).

    Examples
    --------
    >>> import torch
    >>> net = MLP(4, 3, hidden_layer_sizes=(8, 8), activation="relu")
    >>> [name for name, _ in net.named_children()]
    ['fc0', 'act0', 'fc1', 'act1', 'out']
    >>> net(torch.zeros(2, 4)).shape
    torch.Size([2, 3])
    """

    def __init__(
        self,
        n_features: int,
        n_outputs: int,
        hidden_layer_sizes: Sequence[int] = (256, 256),
        activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
    ) -> None:
        sizes = check_sizes("hidden_layer_sizes", hidden_layer_sizes)
        layers: OrderedDict = OrderedDict()
        n_in = dense_stack(layers, n_features, sizes, activation, alpha0, alpha1)
        layers["out"] = Readout(n_in, n_outputs)
        super().__init__(layers)


class SmallCNN(nn.Sequential):
    """Small CNN on flat rows: reshape, conv blocks, dense blocks, readout.

    Each conv block is a 3x3 convolution (padding 1), the activation and a 2x2
    max-pool (skipped once the map is 1 pixel wide). Children:
    ``unflatten, conv0, conv_act0, pool0, ..., flatten, fc0, act0, ..., out``.

    Parameters
    ----------
    n_features : int
        Flat input width; must equal ``prod(input_shape)``.
    n_outputs : int
        Output width.
    input_shape : tuple of int
        ``(channels, height, width)`` of one image.
    conv_channels : sequence of int, default=(16, 32)
        Channels of each conv block.
    hidden_layer_sizes : sequence of int, default=(128,)
        Dense layers after the conv blocks.
    activation, alpha0, alpha1
        As in :class:`MLP`.

    Examples
    --------
    >>> import torch
    >>> net = SmallCNN(64, 10, (1, 8, 8), conv_channels=(4,), hidden_layer_sizes=(16,))
    >>> net(torch.zeros(2, 64)).shape
    torch.Size([2, 10])
    """

    def __init__(
        self,
        n_features: int,
        n_outputs: int,
        input_shape: Sequence[int],
        conv_channels: Sequence[int] = (16, 32),
        hidden_layer_sizes: Sequence[int] = (128,),
        activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
    ) -> None:
        input_shape = check_sizes("input_shape", input_shape)
        if len(input_shape) != 3 or math.prod(input_shape) != n_features:
            raise ValueError(
                "input_shape must be (channels, height, width) with a product "
                f"equal to the number of features {n_features}; got {input_shape!r}."
            )
        channels = check_sizes("conv_channels", conv_channels)
        sizes = check_sizes("hidden_layer_sizes", hidden_layer_sizes)
        layers: OrderedDict = OrderedDict()
        layers["unflatten"] = nn.Unflatten(1, input_shape)
        c, h, w = input_shape
        for i, out_c in enumerate(channels):
            layers[f"conv{i}"] = nn.Conv2d(c, out_c, kernel_size=3, padding=1)
            layers[f"conv_act{i}"] = make_activation(activation, alpha0, alpha1)
            if min(h, w) >= 2:
                layers[f"pool{i}"] = nn.MaxPool2d(2)
                h, w = h // 2, w // 2
            c = out_c
        layers["flatten"] = nn.Flatten()
        n_in = dense_stack(layers, c * h * w, sizes, activation, alpha0, alpha1)
        layers["out"] = Readout(n_in, n_outputs)
        super().__init__(layers)
