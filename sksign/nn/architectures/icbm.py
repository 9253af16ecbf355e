"""The implicit concept bottleneck model (ICBM) network.

Any classifier ``f = h(g(x))`` becomes an ICBM when the last activation of
its feature extractor ``g`` is an HTAF in training and the exact step at
inference (the HTAF paper): the representation is then a binary concept
vector ``c in {0, 1}^N``. :class:`ICBMNet` builds that as::

    backbone -> fc (Linear) -> concepts (HTAF, N units) -> head (Linear)

The backbone is a dense stack ("mlp"), a small CNN ("cnn"), one of the
papers' image nets ("resnet18", "wrn", "vit", "sew_resnet", "bireal": the
net without its readout, see :class:`ImageBackbone`), any torch module that
returns ``(batch, features)``, or nothing ("identity") when X holds
precomputed embeddings of a frozen backbone.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from collections.abc import Sequence

import torch
from torch import nn

from sksign.nn._validation import check_n_concepts, check_sizes
from sksign.nn.activations import ACTIVATIONS, StepActivation, make_activation
from sksign.nn.architectures.factory import IMAGE_ARCHITECTURES, build_network
from sksign.nn.architectures.modules import SmallCNN, dense_stack
from sksign.nn.hooks import temporarily_eval
from sksign.nn.layers.readout import Readout

# check_n_concepts stays importable from here (its old path), not public
__all__ = [
    "BACKBONES",
    "ICBMNet",
    "ImageBackbone",
    "backbone_output_width",
    "build_backbone",
]

#: Built-in backbone names accepted by :class:`ICBMNet`.
BACKBONES = ("mlp", "cnn", "identity", *IMAGE_ARCHITECTURES)


class ImageBackbone(nn.Module):
    """One of the papers' image nets without its readout: ``net.forward_features``.

    Parameters
    ----------
    net : nn.Module
        A net of :mod:`sksign.nn` with a ``forward_features`` method (its
        readout ``out`` is removed).

    Examples
    --------
    >>> import torch
    >>> from sksign.nn.architectures.resnet import ResNet18
    >>> g = ImageBackbone(ResNet18(10, (3, 8, 8), width=2))
    >>> g(torch.zeros(2, 3, 8, 8)).shape
    torch.Size([2, 16])
    """

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        if hasattr(net, "out"):
            del net.out
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net.forward_features(x)


def build_backbone(
    backbone,
    n_features: int,
    *,
    hidden_layer_sizes: Sequence[int] = (256,),
    activation: str = "relu",
    alpha0: float = 2.0,
    alpha1: float = 11.0,
    input_shape: Sequence[int] | None = None,
    conv_channels: Sequence[int] = (16, 32),
    backbone_kwargs: dict | None = None,
) -> nn.Module:
    """The feature extractor ``g`` called `backbone` (see :data:`BACKBONES`).

    "mlp": ``fc0, act0, ...`` as in
    :class:`~sksign.nn.architectures.modules.MLP` without the readout; "cnn":
    :class:`~sksign.nn.architectures.modules.SmallCNN` without the readout
    (needs `input_shape`); the image nets ("resnet18", "wrn", "vit",
    "sew_resnet", "bireal"): the net built by
    :func:`~sksign.nn.architectures.factory.build_network` with
    `backbone_kwargs`, without its readout (:class:`ImageBackbone`;
    `input_shape` as there);
    "identity": no layers; an ``nn.Module`` instance is deep-copied (the
    caller's module is never trained).

    Examples
    --------
    >>> g = build_backbone("mlp", 10, hidden_layer_sizes=(8, 4))
    >>> [name for name, _ in g.named_children()]
    ['fc0', 'act0', 'fc1', 'act1']
    """
    if isinstance(backbone, nn.Module):
        return copy.deepcopy(backbone)
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"The 'backbone_activation' parameter must be one of {ACTIVATIONS}. "
            f"Got {activation!r} instead."
        )
    if isinstance(backbone, str) and backbone == "identity":
        return nn.Identity()
    if isinstance(backbone, str) and backbone in IMAGE_ARCHITECTURES:
        net = build_network(
            backbone,
            n_features,
            1,
            input_shape=input_shape,
            activation=activation,
            alpha0=alpha0,
            alpha1=alpha1,
            **(backbone_kwargs or {}),
        )
        return ImageBackbone(net)
    if isinstance(backbone, str) and backbone == "mlp":
        layers: OrderedDict = OrderedDict()
        sizes = check_sizes("hidden_layer_sizes", hidden_layer_sizes)
        dense_stack(layers, n_features, sizes, activation, alpha0, alpha1)
        return nn.Sequential(layers) if layers else nn.Identity()
    if isinstance(backbone, str) and backbone == "cnn":
        if input_shape is None:
            raise ValueError("backbone='cnn' needs input_shape=(channels, h, w).")
        net = SmallCNN(
            n_features,
            1,
            input_shape,
            conv_channels=conv_channels,
            hidden_layer_sizes=hidden_layer_sizes,
            activation=activation,
            alpha0=alpha0,
            alpha1=alpha1,
        )
        del net.out
        return net
    raise ValueError(
        f"The 'backbone' parameter must be one of {BACKBONES} or an nn.Module "
        f"instance. Got {backbone!r} instead."
    )


def backbone_output_width(
    backbone: nn.Module, n_features: int, input_shape: Sequence[int] | None = None
) -> int:
    """Width of the backbone's output, found by a forward pass on zeros.

    Raises a ValueError when the backbone cannot take the input or does not
    return a ``(batch, features)`` tensor. The backbone runs in ``eval()``
    mode; every submodule's mode is restored after.

    Examples
    --------
    >>> from torch import nn
    >>> backbone_output_width(nn.Sequential(nn.Linear(10, 6), nn.ReLU()), 10)
    6
    """
    shape = (2, *input_shape) if input_shape is not None else (2, n_features)
    param = next(backbone.parameters(), None)
    kw = {"dtype": torch.float32}
    if param is not None:
        kw["device"] = param.device
    try:
        with temporarily_eval(backbone), torch.no_grad():
            out = backbone(torch.zeros(shape, **kw))
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        raise ValueError(
            f"The backbone could not process input of shape {shape[1:]} "
            f"(per sample): {exc}. Its first layer must take {n_features} "
            "features (or the images X was given as)."
        ) from exc
    if not isinstance(out, torch.Tensor) or out.dim() != 2:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out)
        raise ValueError(
            "The backbone must return a tensor of shape (batch, features); got "
            f"{got}. End it with nn.Flatten() (or pooling) so that each sample "
            "gives a feature vector."
        )
    return int(out.shape[1])


class ICBMNet(nn.Module):
    """Backbone, then a binary concept layer, then a linear head.

    Children: ``unflatten`` (only when `input_shape` is given and the
    backbone is a custom module: flat rows are reshaped to images),
    ``backbone``, ``fc`` (Linear to ``n_concepts``), ``concepts`` (the
    concept activation; HTAF in ``train()``, exact step in ``eval()``) and
    ``head`` (Linear to the outputs).

    Parameters
    ----------
    backbone : str or nn.Module
        One of :data:`BACKBONES` or a module (see :func:`build_backbone`).
    n_features : int
        Input width (flat rows).
    n_concepts : int
        Number of concept units N.
    n_outputs : int
        Number of classes.
    hidden_layer_sizes : sequence of int, default=(256,)
        Dense layers of the "mlp" and "cnn" backbones.
    backbone_activation : str, default="relu"
        Activation inside the built-in backbones.
    concept_activation : str, default="htaf"
        The concept activation: "htaf" (ICBM), "ste" or "scaled_sigmoid"
        (baselines), or a plain activation such as "relu" (the reference
        net without a bottleneck of bits).
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters of the concept layer.
    input_shape : tuple of int, default=None
        ``(channels, height, width)`` of one image ("cnn", or custom
        backbones that take images).
    conv_channels : sequence of int, default=(16, 32)
        Conv blocks of the "cnn" backbone.
    freeze_backbone : bool, default=False
        Freeze the backbone's parameters and keep it in eval mode (batch
        norm statistics included) while training.
    backbone_kwargs : dict, default=None
        Arguments of an image backbone (``{"width": 16}`` for "resnet18";
        see :func:`~sksign.nn.architectures.factory.architecture_arguments`).

    Examples
    --------
    >>> import torch
    >>> net = ICBMNet("mlp", 10, 8, 3, hidden_layer_sizes=(16,)).eval()
    >>> net(torch.randn(4, 10)).shape, net.concept_bits(torch.randn(4, 10)).shape
    (torch.Size([4, 3]), torch.Size([4, 8]))
    """

    def __init__(
        self,
        backbone,
        n_features: int,
        n_concepts: int,
        n_outputs: int,
        *,
        hidden_layer_sizes: Sequence[int] = (256,),
        backbone_activation: str = "relu",
        concept_activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        input_shape: Sequence[int] | None = None,
        conv_channels: Sequence[int] = (16, 32),
        freeze_backbone: bool = False,
        backbone_kwargs: dict | None = None,
    ) -> None:
        super().__init__()
        n_concepts = check_n_concepts(n_concepts)
        custom = isinstance(backbone, nn.Module)
        if input_shape is not None:
            input_shape = check_sizes("input_shape", input_shape)
            if math.prod(input_shape) != n_features:
                raise ValueError(
                    f"input_shape {input_shape} does not hold {n_features} features."
                )
        if custom and input_shape is not None:
            self.unflatten = nn.Unflatten(1, input_shape)
        self.backbone = build_backbone(
            backbone,
            n_features,
            hidden_layer_sizes=hidden_layer_sizes,
            activation=backbone_activation,
            alpha0=alpha0,
            alpha1=alpha1,
            input_shape=input_shape,
            conv_channels=conv_channels,
            backbone_kwargs=backbone_kwargs,
        )
        width = backbone_output_width(
            self.backbone, n_features, input_shape if custom else None
        )
        self.freeze_backbone = bool(freeze_backbone)
        if self.freeze_backbone:
            for p in self.backbone.parameters():
                p.requires_grad_(False)
        self.fc = nn.Linear(width, n_concepts)
        self.concepts = make_activation(concept_activation, alpha0, alpha1)
        self.head = Readout(n_concepts, n_outputs)
        self.n_concepts = n_concepts
        self.step_concepts = isinstance(self.concepts, StepActivation)

    def train(self, mode: bool = True) -> ICBMNet:
        super().train(mode)
        if self.freeze_backbone:
            self.backbone.eval()
        return self

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Backbone output ``g(x)``."""
        if hasattr(self, "unflatten"):
            x = self.unflatten(x)
        return self.backbone(x)

    def concept_logits(self, x: torch.Tensor) -> torch.Tensor:
        """Pre-activations ``z`` of the concept units."""
        return self.fc(self.features(x))

    def concept_bits(self, x: torch.Tensor) -> torch.Tensor:
        """Concept bits: ``1[z >= 0]`` (step-like), ``1[z > 0]`` otherwise.

        For a step-like concept activation these equal the eval-mode output
        of ``concepts`` (the exact step).
        """
        z = self.concept_logits(x)
        if torch.isnan(z).any():
            raise ValueError(
                "the concept layer produced NaN pre-activations, so the concept "
                "bits are undefined; check the input and the weights of the net."
            )
        return (z >= 0) if self.step_concepts else (z > 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.concepts(self.concept_logits(x)))
