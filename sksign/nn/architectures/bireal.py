"""Bi-Real ResNet-18: binary convolutions with a real shortcut around each.

Every 3x3 convolution of the ResNet-18 body is a binary unit (Bi-Real Net,
the HTAF paper's BNN)::

    a = act(x)                          # HTAF/STE/SS in train(), 1[x >= 0] in eval()
    z = conv(2 a - 1, scale * sign(W))  # binary weights, per-channel scale
    x = BatchNorm(z) + shortcut(x)      # real shortcut around every binary conv

so a block of ResNet-18 holds two binary units and the stream between them
stays real. The shortcut is the identity, or (stride 2 or a width change)
average pooling then a real 1x1 convolution and BatchNorm, as in Bi-Real
Net. The stem (3x3 convolution, BatchNorm) and the readout stay real. The
``{0, 1} -> {-1, +1}`` map ``2 a - 1`` is the one of
:class:`~sksign.nn.layers.binary.BinaryMLP`: every unit is the single bit
``a``. The binary convolution itself,
:class:`~sksign.nn.layers.binary.BinaryConv2d`, is a layer of
:mod:`sksign.nn.layers.binary`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sksign.nn._validation import check_sizes, check_step_activation
from sksign.nn.activations import STEP_ACTIVATIONS, make_activation
from sksign.nn.architectures._images import ImageInput, check_image_shape
from sksign.nn.layers.binary import BinaryConv2d
from sksign.nn.layers.readout import Readout

__all__ = ["BiRealResNet18", "BiRealUnit"]


class BiRealUnit(nn.Module):
    """One binary unit: ``bn(conv(2 act(x) - 1)) + shortcut(x)``.

    Parameters
    ----------
    c_in, c_out : int
        Channels.
    stride : int, default=1
        Stride of the binary convolution.
    activation : {"htaf", "ste", "scaled_sigmoid"}, default="htaf"
        The binary activation's trainer.
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    weight_grad : {"scaled", "ste"}, default="scaled"
        See :class:`BinaryConv2d`.
    binary_weights : bool, default=True
        Binary weights; False keeps them real.

    Examples
    --------
    >>> import torch
    >>> BiRealUnit(4, 8, stride=2).eval()(torch.randn(1, 4, 8, 8)).shape
    torch.Size([1, 8, 4, 4])
    """

    def __init__(
        self,
        c_in: int,
        c_out: int,
        stride: int = 1,
        activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        weight_grad: str = "scaled",
        binary_weights: bool = True,
    ) -> None:
        super().__init__()
        self.act = make_activation(activation, alpha0, alpha1)
        self.conv = BinaryConv2d(
            c_in, c_out, 3, stride, 1, weight_grad=weight_grad, binary=binary_weights
        )
        self.bn = nn.BatchNorm2d(c_out)
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.AvgPool2d(stride) if stride != 1 else nn.Identity(),
                nn.Conv2d(c_in, c_out, 1, bias=False),
                nn.BatchNorm2d(c_out),
            )
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(2.0 * self.act(x) - 1.0)) + self.shortcut(x)


class BiRealResNet18(nn.Module):
    """Bi-Real ResNet-18 for 32x32 images (16 binary units, real shortcuts).

    Children: ``input``, ``conv1`` and ``bn1`` (real stem, 3x3), ``layer1``
    ... ``layer4`` (``nn.Sequential`` of four :class:`BiRealUnit` each, the
    two binary convolutions of two basic blocks; widths ``width * (1, 2, 4,
    8)``, the first unit of stages 2-4 with stride 2), ``pool``,
    ``flatten`` and ``out`` (real readout).

    Parameters
    ----------
    n_outputs : int, default=10
        Classes.
    input_shape : tuple of int, default=(3, 32, 32)
        ``(channels, height, width)``; height and width at least 8.
    width : int, default=64
        Channels of the first stage.
    activation : {"htaf", "ste", "scaled_sigmoid"}, default="htaf"
        Trainer of the binary activations (exact step at inference).
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    weight_grad : {"scaled", "ste"}, default="scaled"
        See :class:`BinaryConv2d`.
    binary_weights : bool, default=True
        Binary weights in the units.

    Examples
    --------
    >>> import torch
    >>> net = BiRealResNet18(10, (3, 8, 8), width=4).eval()
    >>> net(torch.randn(2, 3, 8, 8)).shape
    torch.Size([2, 10])
    """

    #: Total downsampling of the net.
    downsampling = 8

    def __init__(
        self,
        n_outputs: int = 10,
        input_shape: Sequence[int] = (3, 32, 32),
        width: int = 64,
        activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        weight_grad: str = "scaled",
        binary_weights: bool = True,
    ) -> None:
        super().__init__()
        check_step_activation(activation, "bireal", STEP_ACTIVATIONS)
        shape = check_image_shape("bireal", input_shape, min_size=self.downsampling)
        (width,) = check_sizes("width", width)
        unit = {
            "activation": activation,
            "alpha0": alpha0,
            "alpha1": alpha1,
            "weight_grad": weight_grad,
            "binary_weights": binary_weights,
        }
        self.input = ImageInput(shape)
        self.conv1 = nn.Conv2d(shape[0], width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        c_in = width
        for i, (mult, stride) in enumerate(zip((1, 2, 4, 8), (1, 2, 2, 2))):
            c_out = width * mult
            units = [BiRealUnit(c_in, c_out, stride, **unit)]
            units += [BiRealUnit(c_out, c_out, **unit) for _ in range(3)]
            self.add_module(f"layer{i + 1}", nn.Sequential(*units))
            c_in = c_out
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.n_features_out = c_in
        self.out = Readout(c_in, n_outputs)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled real features ``(N, 8 * width)`` before the readout."""
        x = self.bn1(self.conv1(self.input(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.flatten(self.pool(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.forward_features(x))
