"""``pack_ffn``: a transformer's binary feed-forward block on packed bits.

Where a step replaces the activation of a GPT-2- or BERT-style FFN
(:func:`sksign.transformers.swap_ffn_activations`), its hidden vector is
bits and the down projection is a sum of the weight rows of the active
units: the ``bit_dense`` op of the packed runtime.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from sksign.deploy._convert_base import Builder, check_step
from sksign.deploy._estimators import PackedRegressor
from sksign.deploy._format import FORMAT, VERSION
from sksign.deploy._runtime import PackedNet

__all__ = ["pack_ffn"]


class _AsLinear:
    """``weight`` (out, in) and ``bias`` of a linear map for ``Builder.linear``."""

    def __init__(self, weight, bias):
        self.weight, self.bias = weight, bias


def _as_linear(name, module):
    """`module` as a linear map ``x @ W.T + b``: an ``nn.Linear``, or a module
    with a 2-D ``weight`` of shape (in, out) and an ``nf`` attribute, as
    Hugging Face's ``Conv1D`` of GPT-2 (``x @ W + b``)."""
    if isinstance(module, nn.Linear):
        weight, bias = module.weight, module.bias
    elif (
        isinstance(module, nn.Module)
        and isinstance(getattr(module, "weight", None), torch.Tensor)
        and module.weight.ndim == 2
        and getattr(module, "nf", None) == module.weight.shape[1]
    ):
        weight, bias = module.weight.T, getattr(module, "bias", None)
    else:
        raise TypeError(
            f"pack_ffn: {name} must be an nn.Linear or a Conv1D (weight of shape "
            f"(in, out) and nf == out); got {type(module).__name__}."
        )
    if weight.dtype != torch.float32:
        raise ValueError(
            f"pack_ffn needs float32 weights; {name} is {weight.dtype}: call "
            "model.float() first."
        )
    return _AsLinear(weight.detach(), None if bias is None else bias.detach())


def pack_ffn(up, activation, down, *, n_jobs=None):
    """Pack a feed-forward block ``down(step(up(x)))`` to run on bits.

    The block of a GPT-2- or BERT-style transformer whose activation is a
    step activation (see :func:`sksign.transformers.swap_ffn_activations`):
    the up projection runs in float32, the exact step ``1[z >= 0]`` packs
    the hidden units into bits, and the down projection sums the weight
    rows of the active units (for a batch of at least 8 rows with dense
    bits, a float32 matrix product of the 0/1 rows, as for any
    ``bit_dense`` layer of :mod:`sksign.deploy`). A gated FFN
    (``down(step(gate(x)) * up(x))``: LLaMA, Qwen) has a real hidden vector
    and is not packed.

    Parameters
    ----------
    up : nn.Linear or Conv1D
        The up projection ``d -> h`` (Hugging Face's ``Conv1D`` of GPT-2,
        weight of shape (in, out), is read as its transpose).
    activation : nn.Module
        The block's activation: a step activation (HTAF, STE or the scaled
        sigmoid) not forced to its smooth function.
    down : nn.Linear or Conv1D
        The down projection ``h -> d``.
    n_jobs : int, default=None
        Threads of the packed kernels, as :class:`PackedRegressor` takes it.

    Returns
    -------
    packed : PackedRegressor
        Fitted: ``predict(X)`` maps rows of ``d`` inputs (tokens) to the
        ``d`` outputs of the block, float32 values as float64 (its
        ``net_.forward(X)`` gives them in float32); it saves and loads as
        any packed net.

    Raises
    ------
    TypeError
        If `up` or `down` is not a linear map.
    ValueError
        If `activation` is not a step at inference, the weights are not
        float32, or the widths of `up` and `down` do not chain.

    See Also
    --------
    sksign.transformers.swap_ffn_activations : Put a step into the FFNs.
    sksign.transformers.find_ffn_activations : The FFN of each block.

    Notes
    -----
    Torch computes the same block as a float32 product of the 0/1 hidden
    vector: the two agree to float32 rounding of the down projection's
    sums. A hidden unit whose pre-activation lies within rounding of 0 may
    fire on one side and not the other, as between any two float32
    matrix products.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from torch import nn
    >>> from sksign.deploy import pack_ffn
    >>> from sksign.nn import make_activation
    >>> _ = torch.manual_seed(0)
    >>> up, down = nn.Linear(8, 32), nn.Linear(32, 8)
    >>> step = make_activation("htaf").eval()
    >>> ffn = pack_ffn(up, step, down)
    >>> x = np.random.default_rng(0).normal(size=(5, 8)).astype(np.float32)
    >>> with torch.no_grad():
    ...     y = down(step(up(torch.from_numpy(x)))).numpy()
    >>> bool(np.allclose(ffn.predict(x), y, atol=1e-5))
    True
    """
    check_step("activation", activation)
    up_map, down_map = _as_linear("up", up), _as_linear("down", down)
    d, h = up_map.weight.shape[1], up_map.weight.shape[0]
    if down_map.weight.shape[1] != h:
        raise ValueError(
            f"pack_ffn: up has {h} outputs but down takes "
            f"{down_map.weight.shape[1]} inputs."
        )
    builder = Builder(d)
    builder.linear("up", up_map)
    builder.step("step")
    builder.linear("down", down_map)
    n_out = down_map.weight.shape[0]
    graph = {
        "format": FORMAT,
        "version": VERSION,
        "estimator": "regressor",
        "architecture": "ffn",
        "n_features_in": d,
        "layers": builder.layers,
        "output": builder.value,
        "y_ndim": 2,
    }
    tensors = dict(builder.tensors)
    tensors["target_mean"] = np.zeros(n_out)
    tensors["target_scale"] = np.ones(n_out)
    return PackedRegressor(PackedNet(graph, tensors), n_jobs=n_jobs).fit()
