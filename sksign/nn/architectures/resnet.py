"""Residual nets for 32x32 images: the CIFAR ResNet-18 and WideResNets.

Both take any activation of :data:`~sksign.nn.activations.ACTIVATIONS` and
build one activation MODULE per call site, so forward hooks see each
activation of each block as its own module (S_int and S_out of a block are
two modules, not two calls of one ReLU):

- :class:`ResNet18`: the CIFAR variant of ResNet-18 (3x3 stem, no max-pool;
  11.17M parameters at width 64 with 10 classes). A block is ``conv1, bn1,
  act1, conv2, bn2, (+ shortcut), act2`` and returns the output of ``act2``,
  so the sign recorder reads S_int from ``act1`` and S_out from ``act2``.
  With a step-like activation it is built from pre-activation blocks
  instead (``preactivation="auto"``), the form in which a step at every
  activation trains;
- :class:`WideResNet`: WRN-depth-k (pre-activation blocks ``bn, act, conv``:
  every step activation comes right after a BatchNorm, the deep Heaviside
  net of the HTAF paper; WRN-28-10 has 36.5M parameters).

Both take images ``(N, C, H, W)`` or flat rows ``(N, C * H * W)``.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sksign.nn._validation import check_sizes
from sksign.nn.activations import STEP_ACTIVATIONS, make_activation
from sksign.nn.architectures._images import ImageInput, check_image_shape
from sksign.nn.layers.readout import Readout

__all__ = ["BasicBlock", "ResNet18", "WideBlock", "WideResNet"]


def _conv3x3(c_in: int, c_out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """ResNet basic block with two activation modules (S_int, S_out).

    ``act1(bn1(conv1(x)))``, then ``act2(bn2(conv2(.)) + shortcut(x))``;
    the shortcut is the identity, or a 1x1 convolution and BatchNorm when
    the stride or the width changes.

    Parameters
    ----------
    c_in, c_out : int
        Channels in and out.
    stride : int, default=1
        Stride of ``conv1`` (and of the shortcut).
    activation : str, default="relu"
        One of :data:`~sksign.nn.activations.ACTIVATIONS`.
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.

    Examples
    --------
    >>> import torch
    >>> block = BasicBlock(4, 8, stride=2)
    >>> block(torch.zeros(1, 4, 8, 8)).shape
    torch.Size([1, 8, 4, 4])
    """

    def __init__(
        self,
        c_in: int,
        c_out: int,
        stride: int = 1,
        activation: str = "relu",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
    ) -> None:
        super().__init__()
        self.conv1 = _conv3x3(c_in, c_out, stride)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.act1 = make_activation(activation, alpha0, alpha1)
        self.conv2 = _conv3x3(c_out, c_out)
        self.bn2 = nn.BatchNorm2d(c_out)
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                nn.BatchNorm2d(c_out),
            )
        else:
            self.shortcut = nn.Identity()
        self.act2 = make_activation(activation, alpha0, alpha1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.act2(out + self.shortcut(x))


class ResNet18(nn.Module):
    """The CIFAR ResNet-18: 3x3 stem, no max-pool, four stages of two blocks.

    Two forms, chosen by `preactivation`:

    - post-activation (He et al., 2016a; the default for "relu", "silu",
      "gelu", "tanh"): children ``input`` (reshape/shape check), ``conv1``,
      ``bn1``, ``act1`` (the stem), ``layer1`` ... ``layer4``
      (``nn.Sequential`` of two :class:`BasicBlock` each), ``pool`` (global
      average), ``flatten`` and ``out`` (the readout);
    - pre-activation (He et al., 2016b; the default for the step-like
      "htaf", "ste" and "scaled_sigmoid"): children ``input``, ``conv1``
      (the stem, a convolution only), ``layer1`` ... ``layer4``
      (``nn.Sequential`` of two :class:`WideBlock` each: ``bn1, act1,
      conv1, bn2, act2, conv2`` + shortcut), ``bn``, ``act``, ``pool``,
      ``flatten`` and ``out``: the deep Heaviside net form of the HTAF
      paper's WideResNet. The last convolution of each residual branch
      (``conv2``) starts at zero, so each block starts as the identity
      (the analogue of Goyal et al.'s zero-initialised last BatchNorm).

    Stage widths are ``width * (1, 2, 4, 8)``, strides 1, 2, 2, 2.
    :meth:`forward_features` returns the pooled features.

    Parameters
    ----------
    n_outputs : int, default=10
        Classes.
    input_shape : tuple of int, default=(3, 32, 32)
        ``(channels, height, width)``; height and width at least 8 (the
        net downsamples by 8).
    width : int, default=64
        Channels of the first stage (64: 11.17M parameters with 10 classes,
        11.17M also in the pre-activation form).
    activation : str, default="relu"
        One of :data:`~sksign.nn.activations.ACTIVATIONS`; one module per
        call site.
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    preactivation : bool or "auto", default="auto"
        Build pre-activation blocks; "auto" does so for the step-like
        activations (:data:`~sksign.nn.activations.STEP_ACTIVATIONS`) only.

    Notes
    -----
    A step at every activation of the post-activation form does not train:
    each block applies the step to ``bn2(conv2(.)) + x``, where ``x``, the
    previous block's output, is a map of bits (values in (0, 1) in
    training), so the sum leans positive; and the gradient reaching the
    stem passes through the activation of every block on the identity path,
    each a factor up to HTAF's slope at 0, ``alpha0 * alpha1 / 4`` (5.5 for
    HTAF(2, 11)). In the pre-activation form every step follows a BatchNorm
    (the HTAF paper's deep Heaviside nets), the identity path carries real
    values, and the zero-initialised branches keep the slopes from
    compounding at the start. Three things are needed for a step at every
    activation, measured on the 1,797 digits padded to 32x32 at width 8
    (Adam, ``lr=1e-3``, batches of 32):

    - the pre-activation form: after 5 epochs the post-activation net
      stays at chance (10%) with HTAF(2, 11) and with ``alpha0`` annealed
      from 0.05; with HTAF(0.36, 11) (slope 1) it fits in training (89%)
      but not with the exact step (13%; 22% after re-estimation);
    - a smaller slope than HTAF(2, 11) in a net this deep: on 899 training
      images, HTAF(1, 11) reaches 74% held-out accuracy with the exact step
      after 20 epochs, HTAF(2, 11) 35% (it trains, slowly), and HTAF(2, 11)
      reached by annealing ``alpha0`` from 1 over the 20 epochs (the
      estimators' ``alpha0_start=1.0, anneal_epochs=20``) 55%; annealing
      from 0.36 trains fast until the slope grows, then the loss rises;
    - BatchNorm statistics re-estimated with the exact step after training
      (:func:`~sksign.nn.recalibrate_batchnorm`; the estimators do it,
      ``recalibrate_bn=True``): without it the statistics collected on the
      smooth activations leave the exact-step net near chance (HTAF(1, 11),
      5 epochs on all 1,797 images: 80% in training, 19% with the exact
      step, 71% with the exact step after the re-estimation).

    References
    ----------
    He, Zhang, Ren and Sun, "Deep residual learning for image recognition",
    CVPR 2016 (2016a); "Identity mappings in deep residual networks", ECCV
    2016 (2016b).

    Examples
    --------
    >>> import torch
    >>> net = ResNet18(10, (3, 16, 16), width=4)
    >>> net(torch.zeros(2, 3, 16, 16)).shape, net(torch.zeros(2, 768)).shape
    (torch.Size([2, 10]), torch.Size([2, 10]))
    >>> ResNet18(10, (3, 16, 16), width=4, activation="htaf").preactivation
    True
    """

    #: Total downsampling of the net.
    downsampling = 8

    def __init__(
        self,
        n_outputs: int = 10,
        input_shape: Sequence[int] = (3, 32, 32),
        width: int = 64,
        activation: str = "relu",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        preactivation: bool | str = "auto",
    ) -> None:
        super().__init__()
        shape = check_image_shape("resnet18", input_shape, min_size=self.downsampling)
        (width,) = check_sizes("width", width)
        self.preactivation = _check_preactivation(preactivation, activation)
        act = {"activation": activation, "alpha0": alpha0, "alpha1": alpha1}
        self.input = ImageInput(shape)
        self.conv1 = _conv3x3(shape[0], width)
        if not self.preactivation:
            self.bn1 = nn.BatchNorm2d(width)
            self.act1 = make_activation(activation, alpha0, alpha1)
        block = WideBlock if self.preactivation else BasicBlock
        c_in = width
        for i, (mult, stride) in enumerate(zip((1, 2, 4, 8), (1, 2, 2, 2))):
            c_out = width * mult
            stage = nn.Sequential(
                block(c_in, c_out, stride, **act), block(c_out, c_out, **act)
            )
            self.add_module(f"layer{i + 1}", stage)
            c_in = c_out
        if self.preactivation:
            self.bn = nn.BatchNorm2d(c_in)
            self.act = make_activation(activation, alpha0, alpha1)
            # each residual branch starts at zero, so the net starts as its
            # identity paths and the slopes of the steps do not compound
            for name, m in self.named_modules():
                if name.endswith(".conv2"):
                    nn.init.zeros_(m.weight)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.n_features_out = c_in
        self.out = Readout(c_in, n_outputs)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled features ``(N, 8 * width)`` before the readout."""
        x = self.conv1(self.input(x))
        if not self.preactivation:
            x = self.act1(self.bn1(x))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        if self.preactivation:
            x = self.act(self.bn(x))
        return self.flatten(self.pool(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.forward_features(x))


def _check_preactivation(preactivation, activation: str) -> bool:
    if preactivation == "auto":
        return activation in STEP_ACTIVATIONS
    if not isinstance(preactivation, bool):
        raise ValueError(
            "The 'preactivation' parameter of ResNet18 must be True, False or "
            f"'auto'. Got {preactivation!r} instead."
        )
    return preactivation


class WideBlock(nn.Module):
    """Pre-activation wide block: ``bn1, act1, conv1, bn2, act2, conv2`` + shortcut.

    Every activation follows a BatchNorm. The shortcut is the identity, or
    a 1x1 convolution of the activated input when the stride or width
    changes (as in the reference WideResNet).

    Parameters
    ----------
    c_in, c_out : int
        Channels in and out.
    stride : int, default=1
        Stride of ``conv1``.
    activation : str, default="htaf"
        One of :data:`~sksign.nn.activations.ACTIVATIONS`.
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    dropout : float, default=0.0
        Dropout between the two convolutions.

    Examples
    --------
    >>> import torch
    >>> WideBlock(4, 8, stride=2)(torch.zeros(1, 4, 8, 8)).shape
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
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(c_in)
        self.act1 = make_activation(activation, alpha0, alpha1)
        self.conv1 = _conv3x3(c_in, c_out, stride)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.act2 = make_activation(activation, alpha0, alpha1)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.conv2 = _conv3x3(c_out, c_out)
        self.equal = stride == 1 and c_in == c_out
        if not self.equal:
            self.shortcut = nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.act1(self.bn1(x))
        out = self.conv2(self.dropout(self.act2(self.bn2(self.conv1(a)))))
        return out + (x if self.equal else self.shortcut(a))


class WideResNet(nn.Module):
    """WideResNet-depth-k for 32x32 images (pre-activation blocks).

    Children: ``input``, ``conv1`` (3x3 stem, 16 channels), ``block1``,
    ``block2``, ``block3`` (``(depth - 4) / 6`` :class:`WideBlock` each,
    widths ``16k, 32k, 64k``, strides 1, 2, 2), ``bn``, ``act``, ``pool``,
    ``flatten`` and ``out``. WRN-28-10: 36.5M parameters; WRN-16-4 is the
    CPU-sized one (2.7M).

    Parameters
    ----------
    n_outputs : int, default=10
        Classes.
    input_shape : tuple of int, default=(3, 32, 32)
        ``(channels, height, width)``; height and width at least 4.
    depth : int, default=16
        ``6 n + 4`` layers (16, 22, 28, 40, ...).
    widen_factor : int, default=4
        k.
    activation : str, default="htaf"
        One of :data:`~sksign.nn.activations.ACTIVATIONS`; the HTAF paper's
        deep Heaviside nets use "htaf", "ste" or "scaled_sigmoid".
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    dropout : float, default=0.0
        Dropout inside each block.

    Examples
    --------
    >>> import torch
    >>> net = WideResNet(10, (3, 8, 8), depth=10, widen_factor=1)
    >>> net(torch.zeros(2, 3, 8, 8)).shape
    torch.Size([2, 10])
    """

    #: Total downsampling of the net.
    downsampling = 4

    def __init__(
        self,
        n_outputs: int = 10,
        input_shape: Sequence[int] = (3, 32, 32),
        depth: int = 16,
        widen_factor: int = 4,
        activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        shape = check_image_shape("wrn", input_shape, min_size=self.downsampling)
        (depth,) = check_sizes("depth", depth)
        (k,) = check_sizes("widen_factor", widen_factor)
        if (depth - 4) % 6 or depth < 10:
            raise ValueError(
                "The 'depth' parameter of WideResNet must be 6 n + 4 with n >= 1 "
                f"(10, 16, 22, 28, 40, ...). Got {depth!r} instead."
            )
        n = (depth - 4) // 6
        act = {"activation": activation, "alpha0": alpha0, "alpha1": alpha1}
        self.input = ImageInput(shape)
        self.conv1 = _conv3x3(shape[0], 16)
        c_in = 16
        for i, (c_out, stride) in enumerate(zip((16 * k, 32 * k, 64 * k), (1, 2, 2))):
            blocks = [
                WideBlock(c_in if j == 0 else c_out, c_out, stride if j == 0 else 1,
                          dropout=dropout, **act)
                for j in range(n)
            ]  # fmt: skip
            self.add_module(f"block{i + 1}", nn.Sequential(*blocks))
            c_in = c_out
        self.bn = nn.BatchNorm2d(c_in)
        self.act = make_activation(activation, alpha0, alpha1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.n_features_out = c_in
        self.out = Readout(c_in, n_outputs)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled features ``(N, 64 k)`` before the readout."""
        x = self.conv1(self.input(x))
        x = self.block3(self.block2(self.block1(x)))
        return self.flatten(self.pool(self.act(self.bn(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.forward_features(x))
