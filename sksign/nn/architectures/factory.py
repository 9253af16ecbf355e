"""The network factory: build any built-in architecture by name.

:func:`build_network` builds the dense (DHN) and convolutional nets of
:mod:`sksign.nn.architectures.modules`, the Bi-Real-style binary MLP
(:mod:`sksign.nn.layers.binary`), the spiking MLP
(:mod:`sksign.nn.layers.spiking`) and the papers' image nets: the CIFAR
ResNet-18 and WideResNets (:mod:`sksign.nn.architectures.resnet`), a small
ViT (:mod:`sksign.nn.architectures.vit`), SEW-ResNet
(:mod:`sksign.nn.architectures.sew_resnet`) and Bi-Real ResNet-18
(:mod:`sksign.nn.architectures.bireal`); the estimators build their nets
through it.
:func:`check_input_shape` tells before training whether images of a shape
fit a net, and :func:`architecture_arguments` lists what each takes.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence

from torch import nn

from sksign.nn._validation import check_sizes, check_time_steps
from sksign.nn.activations import ACTIVATIONS
from sksign.nn.architectures._images import check_image_shape
from sksign.nn.architectures.bireal import BiRealResNet18
from sksign.nn.architectures.modules import MLP, SmallCNN
from sksign.nn.architectures.resnet import ResNet18, WideResNet
from sksign.nn.architectures.sew_resnet import SEWResNet
from sksign.nn.architectures.vit import VisionTransformer
from sksign.nn.layers.binary import BinaryMLP
from sksign.nn.layers.spiking import SpikingMLP

__all__ = [
    "ARCHITECTURES",
    "IMAGE_ARCHITECTURES",
    "architecture_arguments",
    "build_network",
    "infer_input_shape",
]

#: Built-in architecture names accepted by :func:`build_network`: dense
#: (DHN) and convolutional nets, the Bi-Real-style binary MLP
#: (:mod:`sksign.nn.layers.binary`), the spiking MLP
#: (:mod:`sksign.nn.layers.spiking`) and the papers' image nets
#: (:data:`IMAGE_ARCHITECTURES`).
ARCHITECTURES = (
    "mlp",
    "cnn",
    "bnn",
    "snn",
    "resnet18",
    "wrn",
    "vit",
    "sew_resnet",
    "bireal",
)

_IMAGE_CLASSES = {
    "resnet18": ResNet18,
    "wrn": WideResNet,
    "vit": VisionTransformer,
    "sew_resnet": SEWResNet,
    "bireal": BiRealResNet18,
}
#: The architectures that take images (N, C, H, W) (or their flat rows).
IMAGE_ARCHITECTURES = tuple(_IMAGE_CLASSES)
_FLAT_CLASSES = {"mlp": MLP, "cnn": SmallCNN, "bnn": BinaryMLP, "snn": SpikingMLP}
# Arguments build_network fills in itself (not architecture arguments).
_FIXED = {"self", "n_features", "n_outputs", "input_shape"}
_COMMON = ("activation", "alpha0", "alpha1")


def _check_architecture(architecture) -> str:
    if not isinstance(architecture, str) or architecture not in ARCHITECTURES:
        raise ValueError(
            f"The 'architecture' parameter must be one of {ARCHITECTURES} or an "
            f"nn.Module subclass. Got {architecture!r} instead."
        )
    return architecture


def architecture_arguments(architecture: str) -> tuple[str, ...]:
    """The keyword arguments :func:`build_network` accepts for `architecture`.

    Parameters
    ----------
    architecture : str
        One of :data:`ARCHITECTURES`.

    Returns
    -------
    tuple of str
        Sorted argument names (``activation``, ``alpha0``, ``alpha1`` and the
        architecture's own).

    Examples
    --------
    >>> architecture_arguments("resnet18")
    ('activation', 'alpha0', 'alpha1', 'preactivation', 'width')
    """
    architecture = _check_architecture(architecture)
    cls = {**_FLAT_CLASSES, **_IMAGE_CLASSES}[architecture]
    names = set(inspect.signature(cls.__init__).parameters) - _FIXED
    if architecture == "cnn":
        names |= {"input_shape"}
    names.discard("kwargs")
    return tuple(sorted(names | set(_COMMON)))


def _check_arguments(architecture: str, kwargs: dict) -> None:
    valid = architecture_arguments(architecture)
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        raise TypeError(
            f"architecture={architecture!r} got unknown argument(s) {unknown}; "
            f"valid arguments: {list(valid)}."
        )


def check_input_shape(architecture: str, input_shape, **kwargs) -> tuple[int, ...]:
    """Check, before training, that inputs of `input_shape` fit `architecture`.

    Image nets need ``(channels, height, width)`` with height and width at
    least their total downsampling (8 for "resnet18", "sew_resnet" and
    "bireal", 4 for "wrn") and, for "vit", multiples of the patch size.
    The message names the expected shape.

    Parameters
    ----------
    architecture : str
        One of :data:`ARCHITECTURES`.
    input_shape : sequence of int
        Shape of one sample: ``(C, H, W)`` (or ``(H, W)``, one channel) for
        images, ``(n_features,)`` for the dense nets.
    **kwargs
        The architecture's arguments (``patch`` of "vit"); unknown names
        raise a TypeError listing the valid ones.

    Returns
    -------
    tuple of int
        The validated shape.

    Examples
    --------
    >>> check_input_shape("resnet18", (3, 32, 32))
    (3, 32, 32)
    >>> check_input_shape("vit", (3, 30, 30), patch=4)
    Traceback (most recent call last):
    ...
    ValueError: architecture='vit' cuts images into 4x4 patches: expected (N, C, H, W) with H and W multiples of 4; got input_shape=(3, 30, 30).
    """  # noqa: E501
    architecture = _check_architecture(architecture)
    _check_arguments(architecture, kwargs)
    shape = check_sizes("input_shape", input_shape)
    if architecture in ("mlp", "bnn", "snn"):
        return shape
    if len(shape) == 2:  # (height, width): one channel, as in infer_input_shape
        shape = (1, *shape)
    if architecture == "cnn":
        return check_image_shape("cnn", shape)
    if architecture == "vit":
        patch = kwargs.get("patch", 4)
        return check_image_shape("vit", shape, min_size=patch, multiple=patch)
    down = _IMAGE_CLASSES[architecture].downsampling
    return check_image_shape(architecture, shape, min_size=down)


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
            "an image architecture needs input_shape=(channels, height, width) "
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
    ``reset``, ``connect``, ``batch_norm``; the image nets: see
    :func:`architecture_arguments`); an unknown one raises a TypeError that
    lists the valid ones. The image nets (:data:`IMAGE_ARCHITECTURES`) are
    built for ``input_shape`` (a square one-channel image of `n_features`
    pixels when None) and take images or flat rows; `hidden_layer_sizes`
    and `conv_channels` do not apply to them.

    Examples
    --------
    >>> net = build_network("mlp", 4, 3, hidden_layer_sizes=(8,), activation="relu")
    >>> type(net).__name__, [name for name, _ in net.named_children()]
    ('MLP', ['fc0', 'act0', 'out'])
    >>> type(build_network("snn", 4, 3, hidden_layer_sizes=(8,))).__name__
    'SpikingMLP'
    >>> type(build_network("resnet18", 3 * 32 * 32, 10, input_shape=(3, 32, 32),
    ...                    activation="relu", width=8)).__name__
    'ResNet18'
    """
    _check_architecture(architecture)
    _check_arguments(architecture, kwargs)
    time_steps = check_time_steps(time_steps)
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"The 'activation' parameter must be one of {ACTIVATIONS}. "
            f"Got {activation!r} instead."
        )
    common = {"activation": activation, "alpha0": alpha0, "alpha1": alpha1}
    if architecture in _IMAGE_CLASSES:
        shape = check_input_shape(
            architecture, infer_input_shape(n_features, input_shape), **kwargs
        )
        if math.prod(shape) != n_features:
            raise ValueError(
                f"input_shape {shape} does not hold {n_features} features."
            )
        if architecture == "sew_resnet":
            kwargs = {"time_steps": time_steps, **kwargs}
        return _IMAGE_CLASSES[architecture](
            n_outputs, input_shape=shape, **common, **kwargs
        )
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
