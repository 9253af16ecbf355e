"""The baselines HTAF is compared with: the STE and the scaled sigmoid.

Both are :class:`~sksign.nn.activations.StepActivation` modules: the exact
step at inference, a smooth stand-in in training (a surrogate gradient for
the straight-through estimator, the function itself for the sigmoid).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import torch

from sksign.nn._validation import check_option, check_positive
from sksign.nn.activations._step import StepActivation, heaviside

__all__ = ["STEHeaviside", "ScaledSigmoid"]


class _STEFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, surrogate, k):
        ctx.save_for_backward(x)
        ctx.surrogate, ctx.k = surrogate, k
        return heaviside(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        if ctx.surrogate == "clip":
            grad = grad_output * (x.abs() <= 1.0).to(grad_output.dtype)
        else:
            s = torch.sigmoid(ctx.k * x)
            grad = grad_output * ctx.k * s * (1.0 - s)
        return grad, None, None


class STEHeaviside(StepActivation):
    """Straight-through estimator: forward step, backward a smooth stand-in.

    Parameters
    ----------
    surrogate : {"clip", "sigmoid"}, default="clip"
        "clip": gradient ``1[|x| <= 1]`` (clipped identity); "sigmoid": the
        derivative of ``sigmoid(k * x)``.
    k : float, default=4.0
        Slope of the sigmoid surrogate.
    mode : {"auto", "smooth", "hard"}, default="auto"
        "smooth" is the straight-through step (same forward, surrogate
        gradient); "hard" has no gradient.

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([-0.5, 2.0], requires_grad=True)
    >>> y = STEHeaviside()(x)
    >>> y.sum().backward()
    >>> y.detach(), x.grad
    (tensor([0., 1.]), tensor([1., 0.]))
    """

    def __init__(self, surrogate: str = "clip", k: float = 4.0, mode: str = "auto"):
        super().__init__(mode)
        self.surrogate = check_option(
            "surrogate", surrogate, ("clip", "sigmoid"), "STEHeaviside"
        )
        self.k = check_positive("k", k, "STEHeaviside")

    def smooth(self, x: torch.Tensor) -> torch.Tensor:
        return _STEFunction.apply(x, self.surrogate, self.k)

    def extra_repr(self) -> str:
        return f"surrogate={self.surrogate!r}, k={self.k:g}, mode={self.mode!r}"


class ScaledSigmoid(StepActivation):
    """Scaled sigmoid ``sigmoid(k * x)`` in training, exact step at inference.

    The baseline HTAF is compared with (the HTAF paper). ``k = alpha0 *
    alpha1`` gives the same slope at 0 as an HTAF.

    Parameters
    ----------
    k : float, default=22.0
        Slope factor.
    mode : {"auto", "smooth", "hard"}, default="auto"
        See :class:`StepActivation`.

    Examples
    --------
    >>> import torch
    >>> act = ScaledSigmoid(k=22.0)
    >>> act(torch.tensor([0.0])), act.eval()(torch.tensor([-0.1, 0.1]))
    (tensor([0.5000]), tensor([0., 1.]))
    """

    def __init__(self, k: float = 22.0, mode: str = "auto"):
        super().__init__(mode)
        self.k = check_positive("k", k, "ScaledSigmoid")

    def smooth(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.k * x)

    def extra_repr(self) -> str:
        return f"k={self.k:g}, mode={self.mode!r}"
