"""Model summary of binary nets: bits, firing rates and deployment bytes."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from sksign.nn.activations import StepActivation
from sksign.nn.hooks import forward_hooks
from sksign.nn.layers.binary import BinaryLinear

__all__ = ["binary_summary"]

_COLUMNS = (
    "layer",
    "type",
    "binary_units",
    "firing_rate",
    "weight_bytes_float32",
    "weight_bytes_packed",
    "act_bytes_float32",
    "act_bytes_packed",
)


def _weight_row(name: str, m: nn.Module) -> dict[str, Any]:
    n_weights = m.weight.numel()
    n_bias = m.bias.numel() if getattr(m, "bias", None) is not None else 0
    dense = 4 * (n_weights + n_bias)
    if isinstance(m, BinaryLinear) and m.binary:
        # 1 bit per weight (rows padded to whole bytes), a float32 scale per
        # output unit, and the real bias.
        rows, cols = m.weight.shape
        packed = rows * math.ceil(cols / 8) + 4 * rows + 4 * n_bias
    else:
        packed = dense
    return {
        "layer": name,
        "type": type(m).__name__,
        "binary_units": 0,
        "firing_rate": float("nan"),
        "weight_params": n_weights + n_bias,
        "binary_weights": isinstance(m, BinaryLinear) and m.binary,
        "weight_bytes_float32": dense,
        "weight_bytes_packed": packed,
        "act_bytes_float32": 0,
        "act_bytes_packed": 0,
    }


def _format(rows: list[dict[str, Any]], total: dict[str, Any]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.3f}"
        return str(v)

    body = [[cell(r[c]) for c in _COLUMNS] for r in [*rows, total]]
    widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(_COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(_COLUMNS, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for i, b in enumerate(body):
        if i == len(body) - 1:
            lines.append("  ".join("-" * w for w in widths))
        lines.append(
            "  ".join(
                v.ljust(w) if j < 2 else v.rjust(w)
                for j, (v, w) in enumerate(zip(b, widths))
            )
        )
    lines.append(
        "weights: whole model; activations: per sample (spiking layers: units x "
        "time steps); packed = 1 bit per binary weight/unit (+ float32 scales), "
        "real layers stay float32."
    )
    return "\n".join(line.rstrip() for line in lines)


def binary_summary(module: nn.Module, X_sample) -> tuple[list[dict[str, Any]], str]:
    """Per-layer bits, firing rates and bit-packed vs float32 bytes.

    The module runs once on `X_sample` in ``eval()`` mode (so every step-like
    activation is the exact step; the previous train/eval mode is restored).
    Two kinds of rows, in ``named_modules()`` order:

    - binary activations (every
      :class:`~sksign.nn.activations.StepActivation`: HTAF, STE,
      scaled-sigmoid, IF neurons, the ICBM concept layer): ``binary_units``
      is the number of bits one sample produces there (units x time steps for
      spiking layers), ``firing_rate`` the share of those bits that are 1 on
      the sample, ``act_bytes_float32 = 4 * binary_units`` and
      ``act_bytes_packed = ceil(binary_units / 8)`` (per sample);
    - weight layers (``nn.Linear``, ``nn.Conv*`` and
      :class:`~sksign.nn.layers.binary.BinaryLinear`): ``weight_bytes_float32`` is
      4 bytes per weight and bias; ``weight_bytes_packed`` is, for binary
      weights, 1 bit per weight (each output row padded to whole bytes) plus
      a float32 scale per output unit and the float32 bias, and for real
      layers the same as float32 (they are not binarised).

    Parameters
    ----------
    module : nn.Module
        The net (for a fitted estimator, ``est.module_``).
    X_sample : array-like or torch.Tensor of shape (n_samples, ...)
        Input batch for the firing rates (flat rows, as the estimators feed
        the module).

    Returns
    -------
    rows : list of dict
        One dict per layer with the keys ``layer``, ``type``,
        ``binary_units``, ``firing_rate``, ``weight_params``,
        ``binary_weights``, ``weight_bytes_float32``, ``weight_bytes_packed``,
        ``act_bytes_float32``, ``act_bytes_packed``.
    table : str
        The rows and a total as a fixed-width table.

    Examples
    --------
    >>> import torch
    >>> from sksign.nn.layers.binary import BinaryMLP
    >>> net = BinaryMLP(8, 2, hidden_layer_sizes=(16,))
    >>> rows, table = binary_summary(net, torch.randn(4, 8))
    >>> [(r["layer"], r["binary_units"]) for r in rows if r["binary_units"]]
    [('act0', 16)]
    >>> table.splitlines()[0].split()[:3]
    ['layer', 'type', 'binary_units']
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch nn.Module; got {type(module)!r}.")
    param = next(module.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = param.dtype if param is not None and param.is_floating_point() else None
    if not torch.is_tensor(X_sample):
        X_sample = np.asarray(X_sample)
    x = torch.as_tensor(X_sample)
    x = x.to(device=device, dtype=dtype or torch.float32)
    if x.dim() < 1 or len(x) == 0:
        raise ValueError("X_sample must hold at least one sample.")
    n = len(x)

    stats: dict[str, list[float]] = {}
    hooks: list[tuple[nn.Module, Any]] = []

    def make_hook(name: str):
        def _forward_hook(_m: nn.Module, _args: Any, out: torch.Tensor) -> None:
            o = out.detach()
            stats[name] = [float((o != 0).sum()), o.numel() / n]

        return _forward_hook

    rows: list[dict[str, Any]] = []
    kinds: list[tuple[str, nn.Module]] = []
    for name, m in module.named_modules():
        if isinstance(m, StepActivation):
            kinds.append((name, m))
            hooks.append((m, make_hook(name)))
        elif isinstance(m, nn.Linear | nn.modules.conv._ConvNd):
            kinds.append((name, m))
    with forward_hooks(post=hooks, eval_mode=module), torch.no_grad():
        module(x)

    for name, m in kinds:
        if isinstance(m, StepActivation):
            fired, units = stats.get(name, [0.0, 0])
            units = round(units)
            rows.append(
                {
                    "layer": name,
                    "type": type(m).__name__,
                    "binary_units": units,
                    "firing_rate": fired / (units * n) if units else float("nan"),
                    "weight_params": 0,
                    "binary_weights": False,
                    "weight_bytes_float32": 0,
                    "weight_bytes_packed": 0,
                    "act_bytes_float32": 4 * units,
                    "act_bytes_packed": math.ceil(units / 8),
                }
            )
        else:
            rows.append(_weight_row(name, m))
    total = {
        "layer": "total",
        "type": "",
        "binary_units": sum(r["binary_units"] for r in rows),
        "firing_rate": float("nan"),
    }
    for key in (
        "weight_bytes_float32",
        "weight_bytes_packed",
        "act_bytes_float32",
        "act_bytes_packed",
    ):
        total[key] = sum(r[key] for r in rows)
    return rows, _format(rows, total)
