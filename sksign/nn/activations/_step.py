"""The exact step and the activations that become it at inference.

:class:`StepActivation` is the base of every step-like activation (HTAF, the
STE, the scaled sigmoid, the spiking neurons): its ``mode`` chooses between
the smooth training function and the exact step ``H(x) = 1[x >= 0]``, and
:func:`force_step_mode` switches the mode of all of them in a module for the
length of a ``with`` block.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from sksign.nn._validation import check_option

__all__ = ["StepActivation", "force_step_mode", "heaviside"]

#: The modes of a StepActivation.
_MODES = ("auto", "smooth", "hard")


def heaviside(x: torch.Tensor) -> torch.Tensor:
    """Exact Heaviside step ``1[x >= 0]`` in the dtype of `x` (no gradient).

    Examples
    --------
    >>> import torch
    >>> heaviside(torch.tensor([-1.0, 0.0, 2.0]))
    tensor([0., 1., 1.])
    """
    return (x >= 0).to(x.dtype)


class StepActivation(nn.Module):
    """Base of the activations that become the exact step at inference.

    Parameters
    ----------
    mode : {"auto", "smooth", "hard"}, default="auto"
        "auto" is the smooth (training) function in ``train()`` and the exact
        step ``1[x >= 0]`` in ``eval()``; "smooth" and "hard" force one.

    Attributes
    ----------
    straight_through : bool
        False by default. When True, the training function's forward value
        is the exact step and its gradient the smooth function's (``H(x) +
        s(x) - s(x).detach()``): a net trains on the function it runs at
        inference. The estimators' ``step_forward_from`` sets it for the last
        part of a fit (:class:`~sksign.estimators.StepForwardPhase`).

    Examples
    --------
    >>> import torch
    >>> class Clip(StepActivation):
    ...     def smooth(self, x):
    ...         return x.clamp(0, 1)
    >>> act = Clip()
    >>> act(torch.tensor([-0.5, 0.5])), act.eval()(torch.tensor([-0.5, 0.5]))
    (tensor([0.0000, 0.5000]), tensor([0., 1.]))
    """

    def __init__(self, mode: str = "auto") -> None:
        super().__init__()
        self.mode = check_option("mode", mode, _MODES, type(self).__name__)
        self.straight_through = False

    @property
    def is_hard(self) -> bool:
        """Whether the forward pass is the exact step right now."""
        return self.mode == "hard" or (self.mode == "auto" and not self.training)

    def smooth(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.is_hard:
            return heaviside(x)
        y = self.smooth(x)
        # nets pickled before the attribute existed have none
        if getattr(self, "straight_through", False):
            return heaviside(x).to(y.dtype) + (y - y.detach())
        return y


@contextmanager
def force_step_mode(module: nn.Module, mode: str) -> Iterator[nn.Module]:
    """Temporarily set the ``mode`` of every :class:`StepActivation` in `module`.

    The previous modes are restored on exit, also after an exception.

    Examples
    --------
    >>> from torch import nn
    >>> from sksign.nn import HTAF
    >>> net = nn.Sequential(nn.Linear(2, 2), HTAF())
    >>> with force_step_mode(net, "hard"):
    ...     net[1].mode
    'hard'
    >>> net[1].mode
    'auto'
    """
    check_option("mode", mode, _MODES, "force_step_mode")
    acts = [m for m in module.modules() if isinstance(m, StepActivation)]
    saved = [m.mode for m in acts]
    try:
        for m in acts:
            m.mode = mode
        yield module
    finally:
        for m, old in zip(acts, saved):
            m.mode = old
