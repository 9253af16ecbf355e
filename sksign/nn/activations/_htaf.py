"""HTAF: the activation, its fused kernels' dispatch, and its theory.

HTAF(x | a0, a1) = sigmoid(a1 * tanh(a0 * x)) (the HTAF paper). Nets train
with HTAF in the forward and backward pass and swap it for the exact step
H(x) = 1[x >= 0] at inference, so hidden units are single bits.
:func:`htaf` is the function (a closed-form backward; float32 CPU tensors
through the numba kernels of :mod:`sksign.nn.activations._htaf_kernel`),
:class:`HTAF` the module; :func:`htaf_alpha0_min`,
:func:`htaf_product_limit` and :func:`htaf_grid` are the paper's bounds on
``alpha0`` and ``alpha1``.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real

import numpy as np
import torch

from sksign.nn._validation import check_option, check_positive
from sksign.nn.activations._step import StepActivation

__all__ = [
    "HTAF",
    "htaf",
    "htaf_alpha0_min",
    "htaf_grid",
    "htaf_product_limit",
]


def _htaf_derivative(x: torch.Tensor, alpha0: float, alpha1: float) -> torch.Tensor:
    """dHTAF/dx from `x` by differentiable ops (the double-backward path)."""
    y = alpha0 * x
    u = alpha1 * torch.tanh(y)
    e = torch.exp(-2.0 * torch.abs(y))
    return (
        (4.0 * alpha0 * alpha1)
        * torch.sigmoid(u)
        * torch.sigmoid(-u)
        * e
        / ((1.0 + e) ** 2)
    )


_KERNELS = ("auto", "fused", "eager")


def _fused_kernel():
    """The fused float32 CPU kernels, or None when numba is unavailable."""
    try:
        from sksign.nn.activations import _htaf_kernel
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    return _htaf_kernel


def _compiling() -> bool:
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and compiler.is_compiling())


def _fusable(*tensors: torch.Tensor) -> bool:
    """Float32 CPU tensors outside torch.compile tracing (numba needs memory)."""
    return not _compiling() and all(
        t.dtype == torch.float32 and t.device.type == "cpu" and t.numel() > 0
        for t in tensors
    )


def _dense(x: torch.Tensor) -> torch.Tensor:
    """`x` itself when its memory is one dense block (contiguous or channels
    last), else a contiguous copy."""
    if x.is_contiguous() or (
        x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)
    ):
        return x
    return x.contiguous()


def _flat_numpy(t: torch.Tensor):
    """The memory of a dense tensor as a 1-D numpy array (no copy)."""
    return t.as_strided((t.numel(),), (1,), t.storage_offset()).numpy()


class _HTAFFunction(torch.autograd.Function):
    """sigmoid(a1 * tanh(a0 * x)) with the closed-form backward of the HTAF paper.

    Saves one tensor, the input ``x``, as ReLU saves one; the backward
    recomputes ``tanh``, the sigmoids and ``sech**2`` from it. Float32 CPU
    tensors run through the fused kernels of
    :mod:`sksign.nn.activations._htaf_kernel` (one pass each way); everything
    else through torch ops.
    """

    @staticmethod
    def forward(ctx, x, alpha0, alpha1, fused):
        ctx.alpha0, ctx.alpha1, ctx.fused = alpha0, alpha1, fused
        ctx.save_for_backward(x)
        if fused:
            xc = _dense(x.detach())
            out = torch.empty_like(xc)  # same memory layout as xc
            _fused_kernel().htaf_forward_f32(
                _flat_numpy(xc),
                alpha0,
                alpha1,
                torch.get_num_threads(),
                out=_flat_numpy(out),
            )
            return out
        return torch.sigmoid(alpha1 * torch.tanh(alpha0 * x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        a0, a1 = ctx.alpha0, ctx.alpha1
        if torch.is_grad_enabled():
            # create_graph=True (gradient penalties, Hessians): the derivative
            # from x by tracked ops, so that it differentiates in turn.
            return grad_output * _htaf_derivative(x, a0, a1), None, None, None
        if ctx.fused and _fusable(grad_output):
            xc = _dense(x.detach())
            out = torch.empty_like(xc)
            gc = grad_output
            if gc.stride() != xc.stride() or gc.shape != xc.shape:
                gc = out.copy_(gc)  # grad_output in x's memory layout
            _fused_kernel().htaf_backward_f32(
                _flat_numpy(xc),
                _flat_numpy(gc),
                a0,
                a1,
                torch.get_num_threads(),
                out=_flat_numpy(out),
            )
            return out, None, None, None
        # dHTAF/dx = a0 * a1 * s * (1 - s) * (1 - t**2) with u = a1 t, written
        # so the heavy tail survives in float32: 1 - s is sigmoid(-u) (1 - s
        # rounds to 0 once u > 17) and 1 - t**2 = sech(a0 x)**2 =
        # 4 e / (1 + e)**2 with e = exp(-2 a0 |x|) (1 - t * t rounds to 0 once
        # a0 |x| > 9). Every factor is bounded: no overflow for any x or a1.
        u = torch.tanh(a0 * x).mul_(a1)
        e = x.abs().mul_(-2.0 * a0).exp_()
        den = e.add(1.0).square_()
        grad = torch.sigmoid(u).mul_(u.neg_().sigmoid_()).mul_(e).div_(den)
        grad = grad.mul_(grad_output).mul_(4.0 * a0 * a1)
        return grad, None, None, None


def htaf(
    x: torch.Tensor,
    alpha0: float = 2.0,
    alpha1: float = 11.0,
    *,
    kernel: str = "auto",
) -> torch.Tensor:
    """Heavy-tailed activation ``sigmoid(alpha1 * tanh(alpha0 * x))``.

    Differentiable in `x` with the closed-form derivative
    ``alpha0 * alpha1 * s * (1 - s) * (1 - t**2)`` where ``t = tanh(alpha0 * x)``
    and ``s = sigmoid(alpha1 * t)``. Numerically safe for any finite `x` and
    large `alpha1` (no NaN, no inf) in float32 and float64, and the gradient's
    heavy tail is kept in float32 (``1 - s`` and ``1 - t**2`` are evaluated
    as ``sigmoid(-alpha1 * t)`` and ``sech(alpha0 * x)**2``, which do not round
    to 0). Like ReLU, it saves one tensor for the backward pass (its input)
    and recomputes the rest there.

    Parameters
    ----------
    x : torch.Tensor
        Pre-activations.
    alpha0 : float, default=2.0
        Inner scale; sets the decay rate ``exp(-2 * alpha0 * |x|)`` of the tail.
    alpha1 : float, default=11.0
        Outer scale; the output range is ``(sigmoid(-alpha1), sigmoid(alpha1))``.
    kernel : {"auto", "fused", "eager"}, default="auto"
        "fused": one numba pass per direction over float32 CPU tensors
        (:mod:`sksign.nn.activations._htaf_kernel`); "eager": torch ops (any
        dtype and device); "auto" picks "fused" where it applies. Both keep
        the heavy tail and agree to a few float32 ulps.

    Returns
    -------
    torch.Tensor
        Same shape and dtype as `x`.

    Examples
    --------
    >>> import torch
    >>> y = htaf(torch.tensor([-1.0, 0.0, 1.0]))
    >>> [round(v, 4) for v in y.tolist()]
    [0.0, 0.5, 1.0]
    """
    check_option("kernel", kernel, _KERNELS, "htaf")
    fused = kernel != "eager" and _fusable(x) and _fused_kernel() is not None
    if kernel == "fused" and not fused:
        raise ValueError(
            "kernel='fused' needs a non-empty float32 CPU tensor (and numba); got "
            f"dtype={x.dtype}, device={x.device.type}. Use kernel='auto'."
        )
    return _HTAFFunction.apply(x, float(alpha0), float(alpha1), fused)


class HTAF(StepActivation):
    """HTAF module: smooth ``sigmoid(alpha1 * tanh(alpha0 * x))`` / exact step.

    Parameters
    ----------
    alpha0 : float, default=2.0
        Inner scale (tail decay rate).
    alpha1 : float, default=11.0
        Outer scale. Outputs are within `eps` of {0, 1} for ``|x| >= eps``
        when ``alpha0 >= htaf_alpha0_min(eps, alpha1)`` (Proposition 3.1);
        ``alpha1 * htaf_alpha0_min(eps, alpha1)`` falls to
        ``htaf_product_limit(eps)`` (21.97 for eps = 0.1) as `alpha1` grows
        (Theorem 3.2), hence the paper's ``alpha0 * alpha1 ~ 22``. The
        default (2, 11) is within 0.103 of {0, 1} for ``|x| >= 0.1``.
    mode : {"auto", "smooth", "hard"}, default="auto"
        See :class:`StepActivation`.

    Examples
    --------
    >>> import torch
    >>> act = HTAF(alpha0=2.0, alpha1=11.0)
    >>> act.eval()(torch.tensor([-0.5, 0.0, 0.5]))
    tensor([0., 1., 1.])
    """

    def __init__(self, alpha0: float = 2.0, alpha1: float = 11.0, mode: str = "auto"):
        super().__init__(mode)
        self.alpha0 = check_positive("alpha0", alpha0, "HTAF")
        self.alpha1 = check_positive("alpha1", alpha1, "HTAF")

    def smooth(self, x: torch.Tensor) -> torch.Tensor:
        return htaf(x, self.alpha0, self.alpha1)

    def extra_repr(self) -> str:
        return f"alpha0={self.alpha0:g}, alpha1={self.alpha1:g}, mode={self.mode!r}"


def _check_eps(eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, Real):
        raise TypeError(f"eps must be a real number in (0, 1/2); got {eps!r}.")
    eps = float(eps)
    if not 0.0 < eps < 0.5:
        raise ValueError(f"eps must lie in (0, 1/2); got {eps!r}.")
    return eps


def htaf_product_limit(eps: float = 0.1) -> float:
    """Limit of ``alpha1 * alpha0_min(alpha1)`` as ``alpha1 -> inf`` (Theorem 3.2).

    Equals ``(1 / eps) * log((1 - eps) / eps)``: about 21.97 for ``eps = 0.1``.

    Examples
    --------
    >>> round(htaf_product_limit(0.1), 2)
    21.97
    """
    eps = _check_eps(eps)
    return math.log((1.0 - eps) / eps) / eps


def htaf_alpha0_min(eps: float, alpha1):
    """Smallest alpha0 with ``|HTAF(x) - H(x)| <= eps`` for ``|x| >= eps``.

    Proposition 3.1: with ``L = log((1 - eps) / eps)`` and ``alpha1 > L``,
    ``alpha0_min = (1 / (2 eps)) * log((alpha1 + L) / (alpha1 - L))``. The
    bound is tight.

    Parameters
    ----------
    eps : float
        Tolerance in (0, 1/2).
    alpha1 : float or array-like of float
        Outer scale(s); each must exceed ``L``.

    Returns
    -------
    float or ndarray

    Examples
    --------
    >>> round(htaf_alpha0_min(0.1, 11.0), 3)
    2.025
    """
    eps = _check_eps(eps)
    L = math.log((1.0 - eps) / eps)
    a1 = np.asarray(alpha1, dtype=np.float64)
    if np.any(~(a1 > L)):
        raise ValueError(
            f"alpha1 must exceed L = log((1 - eps) / eps) = {L:.6g} for eps={eps}; "
            f"got {alpha1!r}."
        )
    out = np.log((a1 + L) / (a1 - L)) / (2.0 * eps)
    return float(out) if out.ndim == 0 else out


def htaf_grid(
    product: float = 22.0, alpha0: Sequence[float] = (0.5, 1.0, 2.0, 3.0)
) -> list[dict[str, list[float]]]:
    """A GridSearchCV ``param_grid`` on the manifold ``alpha0 * alpha1 = product``.

    Returns a list of one-point grids, so that each alpha0 is paired with
    ``alpha1 = product / alpha0`` only.

    Examples
    --------
    >>> htaf_grid(22.0, alpha0=(1.0, 2.0))
    [{'alpha0': [1.0], 'alpha1': [22.0]}, {'alpha0': [2.0], 'alpha1': [11.0]}]
    """
    product = check_positive("product", product, "htaf_grid")
    return [
        {"alpha0": [float(a0)], "alpha1": [product / float(a0)]}
        for a0 in (check_positive("alpha0", a, "htaf_grid") for a in alpha0)
    ]
