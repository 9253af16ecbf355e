"""SEW-ResNet: a spike-element-wise residual net over T time steps.

The HTAF paper's SNN. Tensors between layers are laid out
``(batch, time, channels, height, width)``; convolutions and BatchNorm see
batch and time folded together, the neurons
(:class:`~sksign.nn.layers.spiking.IFNeuron`, or
:class:`~sksign.nn.layers.spiking.LIFNeuron` with a leak) integrate over
time. The image is presented at every step (direct encoding), the readout is
averaged over the steps. Each neuron's spike function is HTAF (or STE /
scaled sigmoid) in ``train()`` and the exact step in ``eval()``; the
membrane starts at 0 in every forward call, so no state is carried from one
batch to the next.

A SEW block (Fang et al., 2021) is ``sn2(bn2(conv2(sn1(bn1(conv1(s))))))``
combined with its input spikes ``s`` (or their downsampled version) by
``connect``: "add" (``A + S``), "iand" (``(1 - A) * S``) or "and"
(``A * S``).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from sksign.nn._validation import (
    check_option,
    check_sizes,
    check_step_activation,
    check_time_steps,
)
from sksign.nn.activations import STEP_ACTIVATIONS
from sksign.nn.architectures._images import ImageInput, check_image_shape
from sksign.nn.layers.readout import Readout
from sksign.nn.layers.spiking import IFNeuron, LIFNeuron

__all__ = ["SEWBlock", "SEWResNet"]

_CONNECTS = ("add", "iand", "and")
_NEURONS = ("if", "lif")


def _neuron(kind: str, activation: str, alpha0: float, alpha1: float, **kw):
    if kind == "lif":
        return LIFNeuron(activation=activation, alpha0=alpha0, alpha1=alpha1, **kw)
    return IFNeuron(activation, alpha0, alpha1, **kw)


class _TimeFolded(nn.Sequential):
    """Run a conv/BatchNorm stack on ``(B, T, ...)`` with time folded into batch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t = x.shape[:2]
        y = super().forward(x.reshape(b * t, *x.shape[2:]))
        return y.reshape(b, t, *y.shape[1:])


class SEWBlock(nn.Module):
    """SEW basic block on spike tensors ``(B, T, C, H, W)``.

    Children: ``down`` and ``sn_down`` (only when the stride or width
    changes: 1x1 conv + BatchNorm and neurons on the shortcut), ``conv1``
    (conv + BatchNorm, time folded), ``sn1``, ``conv2``, ``sn2``. The
    shortcut runs first, so ``sn2`` is the block's last spiking layer.

    Parameters
    ----------
    c_in, c_out : int
        Channels.
    stride : int, default=1
        Stride of the first convolution.
    connect : {"add", "iand", "and"}, default="add"
        Element-wise residual function.
    neuron : {"if", "lif"}, default="if"
        Neuron model.
    activation : {"htaf", "ste", "scaled_sigmoid"}, default="htaf"
        Spike function in training.
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    **neuron_kwargs
        ``threshold``, ``reset``, ``tau`` (LIF) of the neurons.

    Examples
    --------
    >>> import torch
    >>> SEWBlock(4, 8, stride=2).eval()(torch.rand(2, 3, 4, 8, 8)).shape
    torch.Size([2, 3, 8, 4, 4])
    """

    def __init__(
        self,
        c_in: int,
        c_out: int,
        stride: int = 1,
        connect: str = "add",
        neuron: str = "if",
        activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        **neuron_kwargs,
    ) -> None:
        super().__init__()
        self.connect = check_option("connect", connect, _CONNECTS, "SEWBlock")
        sn = (neuron, activation, alpha0, alpha1)
        # the downsample first (registered and run), so that the block's last
        # spiking layer, in module order and in call order, is sn2
        if stride != 1 or c_in != c_out:
            self.down = _TimeFolded(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )
            self.sn_down = _neuron(*sn, **neuron_kwargs)
        self.conv1 = _TimeFolded(
            nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out)
        )
        self.sn1 = _neuron(*sn, **neuron_kwargs)
        self.conv2 = _TimeFolded(
            nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out)
        )
        self.sn2 = _neuron(*sn, **neuron_kwargs)

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        identity = self.sn_down(self.down(s)) if hasattr(self, "down") else s
        a = self.sn2(self.conv2(self.sn1(self.conv1(s))))
        s = identity
        if self.connect == "add":
            return a + s
        if self.connect == "iand":
            return (1.0 - a) * s
        return a * s


class SEWResNet(nn.Module):
    """SEW-ResNet-18 for 32x32 images, over `time_steps` steps.

    Children: ``input``, ``stem`` (3x3 conv + BatchNorm), ``sn_stem``,
    ``layer1`` ... ``layer4`` (``nn.Sequential`` of :class:`SEWBlock`,
    ``blocks`` per stage, widths ``width * (1, 2, 4, 8)``, strides 1, 2, 2,
    2), ``pool`` (global average, time folded), ``out`` (readout at every
    step, averaged over the steps).

    Parameters
    ----------
    n_outputs : int, default=10
        Classes.
    input_shape : tuple of int, default=(3, 32, 32)
        ``(channels, height, width)``; height and width at least 8.
    width : int, default=64
        Channels of the first stage.
    blocks : sequence of int, default=(2, 2, 2, 2)
        Blocks per stage (SEW-ResNet-18).
    time_steps : int, default=4
        T (the HTAF paper: T = 4).
    connect : {"add", "iand", "and"}, default="add"
        SEW residual function.
    neuron : {"if", "lif"}, default="if"
        Neuron model.
    activation : {"htaf", "ste", "scaled_sigmoid"}, default="htaf"
        Spike function in training (exact step in eval).
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    threshold : float, default=1.0
        Firing threshold.
    reset : {"subtract", "zero"}, default="subtract"
        Reset after a spike.
    tau : float, default=2.0
        Time constant of LIF neurons.
    detach_reset : bool, default=True
        Stop the gradient through each neuron's reset, as the published
        SEW-ResNet trains. With HTAF's slope of ``alpha0 * alpha1 / 4`` at the
        threshold, a reset that passes gradients multiplies the gradient of the
        membrane potential by about ``1 - threshold * alpha0 * alpha1 / 4``
        per step (-4.5 for HTAF(2, 11)); on padded digits (width 8, 20 epochs)
        the net reached 0.74 with the reset detached and 0.55 without.

    Examples
    --------
    >>> import torch
    >>> net = SEWResNet(10, (3, 8, 8), width=4, blocks=(1, 1, 1, 1), time_steps=2)
    >>> net.eval()(torch.rand(2, 3, 8, 8)).shape
    torch.Size([2, 10])
    """

    #: Total downsampling of the net.
    downsampling = 8

    def __init__(
        self,
        n_outputs: int = 10,
        input_shape: Sequence[int] = (3, 32, 32),
        width: int = 64,
        blocks: Sequence[int] = (2, 2, 2, 2),
        time_steps: int = 4,
        connect: str = "add",
        neuron: str = "if",
        activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        threshold: float = 1.0,
        reset: str = "subtract",
        tau: float = 2.0,
        detach_reset: bool = True,
    ) -> None:
        super().__init__()
        check_step_activation(activation, "sew_resnet", STEP_ACTIVATIONS)
        shape = check_image_shape("sew_resnet", input_shape, min_size=self.downsampling)
        (width,) = check_sizes("width", width)
        blocks = check_sizes("blocks", blocks)
        if len(blocks) != 4:
            raise ValueError(
                "The 'blocks' parameter of SEWResNet must hold 4 ints (blocks per "
                f"stage). Got {blocks!r} instead."
            )
        self.time_steps = check_time_steps(time_steps)
        neuron = check_option("neuron", neuron, _NEURONS, "SEWResNet")
        if not isinstance(detach_reset, bool | np.bool_):
            raise TypeError(
                "The 'detach_reset' parameter of SEWResNet must be a bool. Got "
                f"{detach_reset!r} instead."
            )
        kw = {
            "threshold": threshold,
            "reset": reset,
            "detach_reset": bool(detach_reset),
        }
        if neuron == "lif":
            kw["tau"] = tau
        cfg = {"connect": connect, "neuron": neuron, "activation": activation}
        cfg.update(alpha0=alpha0, alpha1=alpha1, **kw)
        self.input = ImageInput(shape)
        self.stem = nn.Sequential(
            nn.Conv2d(shape[0], width, 3, padding=1, bias=False), nn.BatchNorm2d(width)
        )
        self.sn_stem = _neuron(neuron, activation, alpha0, alpha1, **kw)
        c_in = width
        for i, (mult, stride, n) in enumerate(zip((1, 2, 4, 8), (1, 2, 2, 2), blocks)):
            c_out = width * mult
            stage = [SEWBlock(c_in, c_out, stride, **cfg)]
            stage += [SEWBlock(c_out, c_out, **cfg) for _ in range(n - 1)]
            self.add_module(f"layer{i + 1}", nn.Sequential(*stage))
            c_in = c_out
        self.pool = _TimeFolded(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.n_features_out = c_in
        self.out = Readout(c_in, n_outputs)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled spike features averaged over time ``(N, 8 * width)``."""
        return self._features_t(x).mean(dim=1)

    def _features_t(self, x: torch.Tensor) -> torch.Tensor:
        z = self.stem(self.input(x))  # direct encoding: the same current each step
        s = self.sn_stem(z.unsqueeze(1).expand(-1, self.time_steps, *z.shape[1:]))
        s = self.layer4(self.layer3(self.layer2(self.layer1(s))))
        return self.pool(s)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self._features_t(x)).mean(dim=1)

    def extra_repr(self) -> str:
        return f"time_steps={self.time_steps}"
