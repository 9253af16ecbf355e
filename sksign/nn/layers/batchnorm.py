"""Re-estimate BatchNorm statistics for the activations used at inference.

A step net trains with smooth activations (HTAF, the scaled sigmoid) but
infers with the exact step ``1[x >= 0]``. Its BatchNorm running statistics
are collected in training, on the smooth features, while in ``eval()`` every
BatchNorm after a step sees bits: the statistics no longer match the
features, and accuracy drops from train to eval mode.
:func:`recalibrate_batchnorm` resets the running statistics and estimates
them again from forward passes with the activations of inference.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from sksign.nn._validation import check_option
from sksign.nn.activations import force_step_mode
from sksign.nn.hooks._capture import temporary_mode

__all__ = ["batchnorm_layers", "recalibrate_batchnorm"]

_MODES = ("hard", "smooth")


def batchnorm_layers(module: nn.Module) -> dict[str, _BatchNorm]:
    """The BatchNorm layers of `module` that keep running statistics.

    Parameters
    ----------
    module : nn.Module
        The net.

    Returns
    -------
    dict of str to nn.Module
        The layers (``BatchNorm1d``, ``BatchNorm2d``, ``BatchNorm3d``,
        ``SyncBatchNorm``) with ``track_running_stats=True``,
        by name, in registration order.

    Examples
    --------
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU())
    >>> list(batchnorm_layers(net))
    ['1']
    """
    return {
        name: m
        for name, m in module.named_modules()
        if isinstance(m, _BatchNorm) and m.track_running_stats
    }


def _select(module: nn.Module, layers) -> list[_BatchNorm]:
    found = batchnorm_layers(module)
    if layers is None:
        return list(found.values())
    if isinstance(layers, str | nn.Module) or not isinstance(layers, Iterable):
        raise TypeError(
            "layers must be None or a list of BatchNorm layers (names or "
            f"modules) of the net; got {layers!r}."
        )
    by_id = {id(m): m for m in found.values()}
    selected: list[_BatchNorm] = []
    for layer in layers:
        if isinstance(layer, str):
            if layer not in found:
                raise ValueError(
                    f"{layer!r} is not a BatchNorm layer with running statistics "
                    f"of the net; valid names: {list(found)}."
                )
            layer = found[layer]
        elif not (isinstance(layer, nn.Module) and id(layer) in by_id):
            raise ValueError(
                f"{layer!r} is not a BatchNorm layer with running statistics of "
                f"the net; valid names: {list(found)}."
            )
        if all(layer is not s for s in selected):
            selected.append(layer)
    return selected


def _inputs(batch) -> torch.Tensor:
    """The input tensor of a batch: the batch itself or its first element."""
    if isinstance(batch, Sequence) and not isinstance(batch, torch.Tensor):
        if not batch:
            raise ValueError("a batch must be a tensor or a non-empty (X, ...) tuple.")
        batch = batch[0]
    if not isinstance(batch, torch.Tensor):
        raise TypeError(
            "batches must yield tensors, or tuples whose first element is the "
            f"input tensor; got {type(batch).__name__}."
        )
    return batch


def recalibrate_batchnorm(
    module: nn.Module,
    batches: Iterable,
    *,
    mode: str = "hard",
    layers: Sequence[str | nn.Module] | None = None,
) -> nn.Module:
    """Reset and re-estimate the BatchNorm running statistics of `module`.

    Runs `module` over `batches` without gradients, with every
    :class:`~sksign.nn.StepActivation` forced to `mode` (the exact step by
    default, what the net computes in ``eval()``), the BatchNorm layers in
    train mode (they normalise with the batch statistics and accumulate
    them) and every other submodule in eval mode (no dropout). Each
    BatchNorm's running mean and variance become the cumulative average of
    the batch statistics of its input over the pass (``momentum=None``): with
    one batch, exactly that batch's mean and unbiased variance. Afterwards
    every submodule's train/eval flag and every BatchNorm's momentum are as
    before, also after an exception, which also gives back the previous
    statistics. A selected layer that the pass never reaches keeps its
    statistics.

    Parameters
    ----------
    module : nn.Module
        The net; changed in place.
    batches : iterable of torch.Tensor or of tuples
        Inputs of the forward passes, on the net's device and dtype; a tuple
        (for example a DataLoader's ``(X, y)``) contributes its first element.
        Large batches give the best estimates.
    mode : {"hard", "smooth"}, default="hard"
        What the step-like activations compute during the pass (see
        :func:`~sksign.nn.force_step_mode`): "hard" is the exact step of
        inference, "smooth" the training function.
    layers : list of str or nn.Module, default=None
        The BatchNorm layers to re-estimate (names as in
        ``module.named_modules()``, or the modules); the others keep their
        statistics and normalise with them during the pass. None takes every
        BatchNorm layer that tracks running statistics.

    Returns
    -------
    nn.Module
        `module`, with the new statistics.

    Notes
    -----
    During the pass the re-estimated layers normalise each batch with its
    own statistics, as in training; later layers therefore see features
    normalised by batch statistics rather than by the final running ones.
    With batches of a few hundred samples the two agree closely.
    Batches of unequal size weigh equally in the average (PyTorch's
    cumulative moving average).

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from sksign.nn import HTAF
    >>> net = nn.Sequential(nn.Linear(3, 4), HTAF(), nn.BatchNorm1d(4))
    >>> x = torch.randn(64, 3)
    >>> _ = recalibrate_batchnorm(net, [x])
    >>> bits = (net[0](x) >= 0).float()
    >>> torch.allclose(net[2].running_mean, bits.mean(0))
    True
    >>> net[2].momentum, net.training
    (0.1, True)
    """
    mode = check_option("mode", mode, _MODES, "recalibrate_batchnorm")
    norms = _select(module, layers)
    if not norms:
        return module
    saved = [
        (bn, bn.momentum, bn.running_mean.clone(), bn.running_var.clone(),
         bn.num_batches_tracked.clone())
        for bn in norms
    ]  # fmt: skip
    try:
        with temporary_mode(module, training=False):
            for bn in norms:
                bn.reset_running_stats()
                bn.momentum = None
                bn.train()
            n_batches = 0
            with force_step_mode(module, mode), torch.no_grad():
                for batch in batches:
                    module(_inputs(batch))
                    n_batches += 1
        if n_batches == 0:
            raise ValueError("batches is empty: there is nothing to estimate from.")
    except BaseException:
        for bn, _, mean, var, count in saved:
            bn.running_mean.copy_(mean)
            bn.running_var.copy_(var)
            bn.num_batches_tracked.copy_(count)
        raise
    finally:
        for bn, momentum, *_ in saved:
            bn.momentum = momentum
    for bn, _, mean, var, count in saved:
        if int(bn.num_batches_tracked) == 0:  # never reached by the pass
            bn.running_mean.copy_(mean)
            bn.running_var.copy_(var)
            bn.num_batches_tracked.copy_(count)
    return module
