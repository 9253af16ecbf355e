"""The float readout of the built-in nets, batch-independent at inference.

A matrix product sums in an order that depends on the batch's shape (one
row goes through a matrix-vector kernel, many rows through blocked
matrix-matrix kernels), so a float32 ``nn.Linear`` can give one row two
outputs one ulp apart depending on the rows it is batched with. The hidden
units of a step net are exact bits, so its readout is the only place where
that happens: :class:`Readout` sums in float64 in ``eval()`` and rounds back
to the input's dtype, which makes a step net's predictions for a row the
same whatever batch it is predicted in.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["Readout"]

#: Dtypes whose eval-mode readout is summed in float64.
_WIDENED = (torch.float32, torch.float16, torch.bfloat16)


class Readout(nn.Linear):
    """``nn.Linear`` that sums in float64 in ``eval()``.

    In ``train()`` it is ``nn.Linear`` (float32 speed for the backward). In
    ``eval()`` a float32 (or half) input is multiplied in float64 and the
    result rounded back to the input's dtype: the output of each row then no
    longer depends on the other rows of the batch (float64 sums in different
    orders agree far below float32's rounding step). Parameters, state dict
    and ``repr`` are those of ``nn.Linear``.

    Parameters
    ----------
    in_features, out_features : int
        As in :class:`torch.nn.Linear`.
    bias : bool, default=True
        As in :class:`torch.nn.Linear`.

    Examples
    --------
    >>> import torch
    >>> head = Readout(300, 3).eval()
    >>> x = (torch.rand(64, 300) > 0.5).float()
    >>> bool((head(x)[5:6] == head(x[5:6])).all())
    True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training or x.dtype not in _WIDENED:
            return super().forward(x)
        bias = None if self.bias is None else self.bias.double()
        return F.linear(x.double(), self.weight.double(), bias).to(x.dtype)
