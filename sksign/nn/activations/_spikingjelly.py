"""HTAF as a spikingjelly surrogate function (optional: needs spikingjelly).

spikingjelly's neurons take a ``surrogate_function`` module: in its spiking
mode the forward pass is the Heaviside step and the backward a surrogate
derivative; otherwise the forward is the smooth "primitive" function.
:class:`HTAFSurrogate` plugs HTAF into that interface, so any spikingjelly
net (``neuron.IFNode(surrogate_function=HTAFSurrogate())``) trains the way
the HTAF paper trains SNNs: with ``smooth_training=True`` (the default) the
spike function is the smooth HTAF in the forward AND backward pass while the
module is in ``train()``, and the exact step in ``eval()``; with
``smooth_training=False`` it is the classic surrogate (step forward, HTAF
derivative backward) in both modes.

This module imports spikingjelly and is not imported by :mod:`sksign.nn`;
``sksign.nn.HTAFSurrogate`` loads it on first access.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import torch

try:
    from spikingjelly.activation_based.surrogate import SurrogateFunctionBase
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "HTAFSurrogate needs spikingjelly: pip install --no-deps spikingjelly "
        "loguru (its own dependencies pull torchvision, which fails beside the "
        "CPU build of torch)."
    ) from exc

from sksign.nn._validation import check_positive
from sksign.nn.activations._htaf import _htaf_derivative, htaf
from sksign.nn.activations._step import heaviside

__all__ = ["HTAFSurrogate"]


class _StepWithHTAFGrad(torch.autograd.Function):
    """Forward ``1[x >= 0]``, backward the HTAF derivative."""

    @staticmethod
    def forward(ctx, x, alpha0, alpha1):
        ctx.save_for_backward(x)
        ctx.alpha0, ctx.alpha1 = alpha0, alpha1
        return heaviside(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad = _htaf_derivative(x, ctx.alpha0, ctx.alpha1)
        return grad_output * grad, None, None


class HTAFSurrogate(SurrogateFunctionBase):
    """HTAF for spikingjelly neurons (a ``SurrogateFunctionBase``).

    Parameters
    ----------
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    spiking : bool, default=True
        spikingjelly's switch: True gives spikes (the step) wherever the
        smooth training forward does not apply; False always gives the
        smooth HTAF.
    smooth_training : bool, default=True
        In ``train()``, use the smooth HTAF in the forward pass too (the
        HTAF paper); False keeps spikes in training (a surrogate gradient).

    Examples
    --------
    >>> import torch
    >>> sg = HTAFSurrogate()
    >>> sg.eval()(torch.tensor([-0.5, 0.5]))
    tensor([0., 1.])
    >>> [round(v, 3) for v in sg.train()(torch.tensor([-0.5, 0.5])).tolist()]
    [0.0, 1.0]
    """

    def __init__(
        self,
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        spiking: bool = True,
        smooth_training: bool = True,
    ) -> None:
        super().__init__(
            spiking=spiking,
            alpha0=check_positive("alpha0", alpha0, "HTAFSurrogate"),
            alpha1=check_positive("alpha1", alpha1, "HTAFSurrogate"),
        )
        self.smooth_training = bool(smooth_training)

    @staticmethod
    def spiking_function(x, alpha0=2.0, alpha1=11.0):
        return _StepWithHTAFGrad.apply(x, float(alpha0), float(alpha1))

    @staticmethod
    def primitive_function(x, alpha0=2.0, alpha1=11.0):
        return htaf(x, alpha0, alpha1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and self.smooth_training:
            return self.primitive_function(x, **self._sg_params)
        return super().forward(x)
