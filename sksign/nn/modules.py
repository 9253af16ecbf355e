"""Network builders: MLP and small CNN with any activation of the family.

Every builder returns an ``nn.Sequential`` with named children so that layers
are addressed by name: dense block ``i`` is ``fc{i}`` (Linear) then ``act{i}``
(activation); conv block ``i`` is ``conv{i}``, ``conv_act{i}``, ``pool{i}``;
the readout is ``out``. The last hidden layer is the last ``act{i}``.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

from torch import nn

from sksign.nn.activations import HTAF, ScaledSigmoid, STEHeaviside

__all__ = [
    "ACTIVATIONS",
    "ARCHITECTURES",
    "MLP",
    "SmallCNN",
    "build_network",
    "make_activation",
]

#: Activation names accepted by :func:`make_activation` and the estimators.
ACTIVATIONS = ("htaf", "ste", "scaled_sigmoid", "relu", "silu", "gelu", "tanh")
#: Step-like activations: exact Heaviside step at inference.
STEP_ACTIVATIONS = ("htaf", "ste", "scaled_sigmoid")
#: Built-in architecture names accepted by :func:`build_network`: dense
#: (DHN) and convolutional nets, the Bi-Real-style binary MLP
#: (:mod:`sksign.nn.binary`) and the spiking MLP (:mod:`sksign.nn.spiking`).
ARCHITECTURES = ("mlp", "cnn", "bnn", "snn")


def make_activation(name: str, alpha0: float = 2.0, alpha1: float = 11.0) -> nn.Module:
    """Build the activation module called `name`.

    "scaled_sigmoid" uses ``k = alpha0 * alpha1`` (the same slope at 0 as the
    HTAF with those parameters); "ste" uses the clipped-identity surrogate.
    """
    if name == "htaf":
        return HTAF(alpha0, alpha1)
    if name == "ste":
        return STEHeaviside()
    if name == "scaled_sigmoid":
        return ScaledSigmoid(k=float(alpha0) * float(alpha1))
    plain = {"relu": nn.ReLU, "silu": nn.SiLU, "gelu": nn.GELU, "tanh": nn.Tanh}
    if name in plain:
        return plain[name]()
    raise ValueError(
        f"The 'activation' parameter must be one of {ACTIVATIONS}. "
        f"Got {name!r} instead."
    )


def _check_sizes(name: str, sizes) -> tuple[int, ...]:
    if isinstance(sizes, int):
        sizes = (sizes,)
    try:
        sizes = tuple(int(s) for s in sizes)
    except TypeError as exc:
        raise TypeError(f"{name} must be a sequence of ints; got {sizes!r}.") from exc
    if any(s < 1 for s in sizes):
        raise ValueError(f"{name} must hold positive ints; got {sizes!r}.")
    return sizes


def _dense_stack(
    layers: OrderedDict,
    n_in: int,
    hidden_layer_sizes: Sequence[int],
    activation: str,
    alpha0: float,
    alpha1: float,
) -> int:
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
        sizes = _check_sizes("hidden_layer_sizes", hidden_layer_sizes)
        layers: OrderedDict = OrderedDict()
        n_in = _dense_stack(layers, n_features, sizes, activation, alpha0, alpha1)
        layers["out"] = nn.Linear(n_in, n_outputs)
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
        input_shape = _check_sizes("input_shape", input_shape)
        if len(input_shape) != 3 or math.prod(input_shape) != n_features:
            raise ValueError(
                "input_shape must be (channels, height, width) with a product "
                f"equal to the number of features {n_features}; got {input_shape!r}."
            )
        channels = _check_sizes("conv_channels", conv_channels)
        sizes = _check_sizes("hidden_layer_sizes", hidden_layer_sizes)
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
        n_in = _dense_stack(layers, c * h * w, sizes, activation, alpha0, alpha1)
        layers["out"] = nn.Linear(n_in, n_outputs)
        super().__init__(layers)


def infer_input_shape(n_features: int, input_shape=None) -> tuple[int, int, int]:
    """``input_shape`` as (C, H, W); a square one-channel image when None."""
    if input_shape is not None:
        shape = _check_sizes("input_shape", input_shape)
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
    """
    from sksign.nn.spiking import check_time_steps

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
        from sksign.nn.binary import BinaryMLP

        return BinaryMLP(n_features, n_outputs, hidden_layer_sizes, **common, **kwargs)
    if architecture == "snn":
        from sksign.nn.spiking import SpikingMLP

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
