"""Binary layers (XNOR / Bi-Real weights) and the Bi-Real-style binary MLP.

:func:`binary_sign` is the sign of the latent weights with a clipped
straight-through gradient; :class:`BinaryLinear` and :class:`BinaryConv2d`
use ``scale * sign(W)`` in their forward pass (one scale per output unit or
channel). :class:`BinaryMLP` stacks binary blocks with real shortcuts; the
Bi-Real ResNet-18 (:mod:`sksign.nn.architectures.bireal`) is built from the
binary convolutions.

A binary block (Bi-Real Net, the HTAF paper) reads the real-valued residual
stream ``x``, binarises it with a step-like activation, multiplies the bits
with binary weights and adds the result back onto the real stream::

    a = act(x)                       # HTAF in train(), exact 1[x >= 0] in eval()
    b = 2 * a - 1                    # {0, 1} -> {-1, +1}
    z = b @ (scale * sign(W)).T      # binary weights, per-output scale mean|W|
    z = BatchNorm(z)                 # optional (Bi-Real uses it)
    x = z + shortcut(x)              # identity, or a real projection if widths change

Why ``2 * a - 1``: the activations of the family give {0, 1} at inference
(``H(x) = 1[x >= 0]``), while Bi-Real (like XNOR-Net) multiplies +/-1
activations with +/-1 weights, so that a dot product is
``n - 2 * popcount(xor)``. The affine map keeps every unit a single bit (the
bit ``a``), costs nothing at deployment and centres the inputs of the binary
layer; in training with HTAF it maps the smooth output into (-1, 1).

The first layer (``stem``) and the readout (``out``) stay real-valued, as in
Bi-Real Net; the readout reads the real residual stream.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sksign.nn._validation import check_option, check_sizes, check_step_activation
from sksign.nn.activations import STEP_ACTIVATIONS, StepActivation, make_activation
from sksign.nn.layers.readout import Readout

__all__ = ["BinaryConv2d", "BinaryLinear", "BinaryMLP", "binary_sign"]

_WEIGHT_GRADS = ("scaled", "ste")


class _SignSTE(torch.autograd.Function):
    """Forward ``+1 if w >= 0 else -1``; backward the clipped identity."""

    @staticmethod
    def forward(ctx, w):
        ctx.save_for_backward(w)
        return torch.where(w >= 0, torch.ones_like(w), -torch.ones_like(w))

    @staticmethod
    def backward(ctx, grad_output):
        (w,) = ctx.saved_tensors
        return grad_output * (w.abs() <= 1.0).to(grad_output.dtype)


def binary_sign(w: torch.Tensor) -> torch.Tensor:
    """Sign with ``sign(0) = +1`` and a straight-through (clipped) gradient.

    Forward ``+1 if w >= 0 else -1``; backward ``grad * 1[|w| <= 1]``.

    Parameters
    ----------
    w : torch.Tensor
        Latent real weights.

    Returns
    -------
    torch.Tensor
        ``+1`` or ``-1`` per entry, in the dtype of `w`.

    Examples
    --------
    >>> import torch
    >>> w = torch.tensor([-2.0, -0.5, 0.0, 0.5], requires_grad=True)
    >>> s = binary_sign(w)
    >>> s.sum().backward()
    >>> s.detach(), w.grad
    (tensor([-1., -1.,  1.,  1.]), tensor([0., 1., 1., 1.]))
    """
    return _SignSTE.apply(w)


class BinaryLinear(nn.Linear):
    """Linear layer with binary weights ``scale * sign(W)`` (XNOR / Bi-Real).

    The real latent weights ``W`` are trained; the forward pass uses
    ``scale_o * sign(W_o)`` for each output unit ``o``, with the per-output
    scaling factor ``scale_o = mean |W_o|``. The bias (if any) stays real.

    Parameters
    ----------
    in_features, out_features : int
        As in :class:`torch.nn.Linear`.
    bias : bool, default=False
        Real bias (Bi-Real's binary convolutions have none; a following
        BatchNorm supplies the shift).
    weight_grad : {"scaled", "ste"}, default="scaled"
        Gradient reaching the latent weights. "scaled" (Bi-Real's
        magnitude-aware gradient): the gradient flows through both
        ``sign(W)`` (clipped straight-through, ``1[|W| <= 1]``) and the
        scaling factor ``mean |W|``. "ste": the scale is a constant and the
        gradient is the clipped straight-through one times the scale.
    binary : bool, default=True
        False keeps real weights (to isolate the effect of binary
        activations).

    Examples
    --------
    >>> import torch
    >>> layer = BinaryLinear(4, 2)
    >>> w = layer.binary_weight()
    >>> w.shape, bool((w.abs() == w.abs()[:, :1]).all())
    (torch.Size([2, 4]), True)
    >>> layer(torch.ones(3, 4)).shape
    torch.Size([3, 2])
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = False,
        weight_grad: str = "scaled",
        binary: bool = True,
    ) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.weight_grad = check_option(
            "weight_grad", weight_grad, _WEIGHT_GRADS, "BinaryLinear"
        )
        self.binary = bool(binary)

    def binary_weight(self) -> torch.Tensor:
        """The weights the forward pass uses (``scale * sign(W)`` if binary)."""
        w = self.weight
        if not self.binary:
            return w
        scale = w.abs().mean(dim=1, keepdim=True)
        if self.weight_grad == "ste":
            scale = scale.detach()
        return scale * binary_sign(w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.binary_weight(), self.bias)

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, binary={self.binary}, "
            f"weight_grad={self.weight_grad!r}"
        )


class BinaryConv2d(nn.Conv2d):
    """Conv2d with binary weights ``scale * sign(W)``, one scale per channel.

    ``scale_o = mean |W_o|`` over the input channels and the kernel; the
    gradient reaches the latent weights through the clipped straight-through
    sign (and the scale, for ``weight_grad="scaled"``), as in
    :class:`BinaryLinear`.

    Parameters
    ----------
    in_channels, out_channels, kernel_size : int
        As in :class:`torch.nn.Conv2d`.
    stride, padding : int, default=1
        As in :class:`torch.nn.Conv2d`.
    weight_grad : {"scaled", "ste"}, default="scaled"
        See :class:`BinaryLinear`.
    binary : bool, default=True
        False keeps real weights.

    Examples
    --------
    >>> import torch
    >>> conv = BinaryConv2d(2, 4, 3)
    >>> w = conv.binary_weight()
    >>> bool((w.abs().flatten(1) == w.abs().flatten(1)[:, :1]).all())
    True
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 1,
        weight_grad: str = "scaled",
        binary: bool = True,
    ) -> None:
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, bias=False
        )
        self.weight_grad = check_option(
            "weight_grad", weight_grad, _WEIGHT_GRADS, "BinaryConv2d"
        )
        self.binary = bool(binary)

    def binary_weight(self) -> torch.Tensor:
        """The weights the forward pass uses (``scale * sign(W)`` if binary)."""
        w = self.weight
        if not self.binary:
            return w
        scale = w.abs().mean(dim=(1, 2, 3), keepdim=True)
        if self.weight_grad == "ste":
            scale = scale.detach()
        return scale * binary_sign(w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.binary_weight(), None, self.stride, self.padding)


class BinaryMLP(nn.Module):
    """Bi-Real-style binary MLP with real-valued shortcuts.

    Children, in forward order: ``stem`` (real Linear), optionally
    ``stem_bn``; then for each block ``i``: ``act{i}`` (the step-like
    activation, a :class:`~sksign.nn.activations.StepActivation`: its input
    is the real stream, its output the block's bits), ``fc{i}``
    (:class:`BinaryLinear`), ``bn{i}`` (BatchNorm1d, if ``batch_norm``) and
    ``short{i}`` (identity, or a real ``Linear`` without bias when the width
    changes); finally ``out`` (real Linear readout of the real stream).
    Note that ``act{i}`` comes *before* ``fc{i}`` (Bi-Real binarises the
    input of each binary layer), unlike
    :class:`~sksign.nn.architectures.modules.MLP`.

    Parameters
    ----------
    n_features : int
        Input width.
    n_outputs : int
        Output width.
    hidden_layer_sizes : sequence of int, default=(256, 256)
        Output width of each binary block; the stem maps the input to
        ``hidden_layer_sizes[0]``.
    activation : {"htaf", "ste", "scaled_sigmoid"}, default="htaf"
        The binary activation: smooth (or straight-through) in training,
        the exact step at inference.
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters (see :func:`~sksign.nn.activations.make_activation`).
    batch_norm : bool, default=True
        BatchNorm after each binary linear layer (and after the stem), as in
        Bi-Real Net.
    binary_weights : bool, default=True
        Binary weights in the blocks; False keeps them real.
    weight_grad : {"scaled", "ste"}, default="scaled"
        See :class:`BinaryLinear`.

    Examples
    --------
    >>> import torch
    >>> net = BinaryMLP(6, 3, hidden_layer_sizes=(8, 8))
    >>> net.eval()(torch.randn(4, 6)).shape
    torch.Size([4, 3])
    >>> len(net.binary_activations())
    2
    """

    def __init__(
        self,
        n_features: int,
        n_outputs: int,
        hidden_layer_sizes: Sequence[int] = (256, 256),
        activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        batch_norm: bool = True,
        binary_weights: bool = True,
        weight_grad: str = "scaled",
    ) -> None:
        super().__init__()
        check_step_activation(activation, "bnn", STEP_ACTIVATIONS)
        sizes = check_sizes("hidden_layer_sizes", hidden_layer_sizes)
        if not sizes:
            raise ValueError(
                "architecture='bnn' needs at least one hidden layer; got "
                f"hidden_layer_sizes={hidden_layer_sizes!r}."
            )
        self.n_blocks = len(sizes)
        self.batch_norm = bool(batch_norm)
        self.stem = nn.Linear(n_features, sizes[0])
        if self.batch_norm:
            self.stem_bn = nn.BatchNorm1d(sizes[0])
        n_in = sizes[0]
        for i, width in enumerate(sizes):
            self.add_module(f"act{i}", make_activation(activation, alpha0, alpha1))
            self.add_module(
                f"fc{i}",
                BinaryLinear(
                    n_in, width, weight_grad=weight_grad, binary=binary_weights
                ),
            )
            if self.batch_norm:
                self.add_module(f"bn{i}", nn.BatchNorm1d(width))
            shortcut = nn.Identity() if width == n_in else nn.Linear(n_in, width, False)
            self.add_module(f"short{i}", shortcut)
            n_in = width
        self.out = Readout(n_in, n_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        if self.batch_norm:
            x = self.stem_bn(x)
        for i in range(self.n_blocks):
            a = getattr(self, f"act{i}")(x)
            z = getattr(self, f"fc{i}")(2.0 * a - 1.0)
            if self.batch_norm:
                z = getattr(self, f"bn{i}")(z)
            x = z + getattr(self, f"short{i}")(x)
        return self.out(x)

    def binary_activations(self) -> list[StepActivation]:
        """The block activations ``act0, act1, ...``."""
        return [getattr(self, f"act{i}") for i in range(self.n_blocks)]
