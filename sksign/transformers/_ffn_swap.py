"""Swap the FFN activations of a pretrained transformer for step activations.

:func:`swap_ffn_activations` replaces the FFN activations that
:func:`~sksign.transformers.find_ffn_activations` finds, in the blocks a user
selects, with sksign's step activations (:func:`~sksign.nn.make_activation`).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import copy as copy_module
from collections.abc import Iterable, Mapping
from numbers import Integral

from torch import nn

from sksign.nn import ACTIVATIONS, make_activation, resolve_layers
from sksign.transformers._ffn import FFNLayer, find_ffn_activations

__all__ = ["swap_ffn_activations"]

#: Activations that take ``alpha0`` and ``alpha1``.
_ALPHA_ACTIVATIONS = ("htaf", "scaled_sigmoid")


def _is_int(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _select(model: nn.Module, ffns: dict[str, FFNLayer], layers) -> list[FFNLayer]:
    """The FFN layers that `layers` designates, in block order."""
    owner = type(model).__name__
    order = list(ffns.values())
    n = len(order)
    listing = ", ".join(ffns)
    if isinstance(layers, str) and layers == "all":
        return order
    if isinstance(layers, str) and layers == "last":
        return order[-1:]
    if isinstance(layers, bool):
        raise TypeError(
            "The 'layers' parameter of swap_ffn_activations must be 'all', an int, "
            f"a list of block indices or a list of names; got {layers!r}."
        )
    if _is_int(layers):
        if not 1 <= layers <= n:
            raise ValueError(
                f"layers={layers} asks for the last {layers} FFN blocks, but "
                f"{owner} has {n}: pass an int from 1 to {n}. Its FFN "
                f"activations: {listing}."
            )
        return order[n - int(layers) :]
    if isinstance(layers, (str, type)):
        items = [layers]
    elif isinstance(layers, Iterable) and not isinstance(layers, (nn.Module, Mapping)):
        items = list(layers)
        if not items:
            raise ValueError("layers must not be an empty list.")
    else:
        raise TypeError(
            "The 'layers' parameter of swap_ffn_activations must be 'all', 'last', "
            "an int (the last k blocks), a list of block indices, or a name, "
            f"wildcard or module type (or a list of them); got {layers!r}."
        )
    chosen: set[str] = set()
    for item in items:
        if isinstance(item, bool):
            raise TypeError(f"a block index must be an int; got {item!r}.")
        if _is_int(item):
            if not -n <= item < n:
                raise ValueError(
                    f"block index {item} is out of range: {owner} has {n} FFN "
                    f"blocks (indices {-n} to {n - 1}); its FFN activations: "
                    f"{listing}."
                )
            chosen.add(order[int(item)].name)
            continue
        if not isinstance(item, (str, type, tuple)):
            raise TypeError(
                "each entry of layers must be a block index, a module name, a "
                f"wildcard or a module type; got {item!r}."
            )
        try:
            resolved = resolve_layers(model, item, allow_non_sign_preserving=True)
        except ValueError as exc:
            raise ValueError(
                f"layers entry {item!r} does not designate an FFN activation of "
                f"{owner}: {exc} Its FFN activations: {listing}."
            ) from exc
        hits = {
            f.name
            for r in resolved
            for f in order
            if f.name == r or f.name.startswith(f"{r}.")
        }
        if not hits:
            raise ValueError(
                f"layers entry {item!r} matches {', '.join(resolved)} in {owner}, "
                "which is not an FFN activation nor holds one; its FFN "
                f"activations: {listing}."
            )
        chosen |= hits
    return [f for f in order if f.name in chosen]


def _new_activation(activation, alpha0, alpha1) -> nn.Module:
    if isinstance(activation, nn.Module):
        if alpha0 is not None or alpha1 is not None:
            raise ValueError(
                "alpha0 and alpha1 are the parameters of the activations built by "
                "name ('htaf', 'scaled_sigmoid'); set them on the module instead."
            )
        return copy_module.deepcopy(activation)
    if not isinstance(activation, str):
        raise TypeError(
            "The 'activation' parameter of swap_ffn_activations must be one of "
            f"{ACTIVATIONS} or an nn.Module; got {activation!r}."
        )
    if (
        activation in ACTIVATIONS
        and activation not in _ALPHA_ACTIVATIONS
        and (alpha0 is not None or alpha1 is not None)
    ):
        raise ValueError(
            f"alpha0 and alpha1 apply to {_ALPHA_ACTIVATIONS} only; "
            f"activation={activation!r} does not use them."
        )
    kwargs = {}
    if alpha0 is not None:
        kwargs["alpha0"] = alpha0
    if alpha1 is not None:
        kwargs["alpha1"] = alpha1
    return make_activation(activation, **kwargs)


def swap_ffn_activations(
    model: nn.Module,
    activation="htaf",
    layers="all",
    *,
    alpha0=None,
    alpha1=None,
    copy=True,
):
    """Replace the FFN activations of chosen blocks by sksign's step activations.

    The FFN activations are those :func:`find_ffn_activations` finds. Each
    selected one is replaced by a new module from
    :func:`~sksign.nn.make_activation`, in the train/eval mode of the module
    it replaces. A step activation (:data:`~sksign.nn.STEP_ACTIVATIONS`:
    "htaf", "ste", "scaled_sigmoid") follows ``model.train()`` and
    ``model.eval()``: its smooth function in training, the exact Heaviside
    step ``1[x >= 0]`` in eval, where every FFN unit is a bit (in a gated FFN
    the bit gates the up projection: ``down(H(gate(x)) * up(x))``). Only step
    activations give bits; "relu", "silu", "gelu" and "tanh" are accepted as
    baselines ("relu" is the ReLU-fication of an FFN).

    Parameters
    ----------
    model : nn.Module
        A transformer, e.g. a Hugging Face model.
    activation : str or nn.Module, default="htaf"
        One of :data:`~sksign.nn.ACTIVATIONS`, or a module (deep-copied into
        each selected block).
    layers : "all", "last", int, str, module type or list, default="all"
        The blocks whose FFN activation is replaced:

        - "all": every block; "last": the last one;
        - an int ``k``: the last ``k`` blocks;
        - a list of block indices, counted over the FFN layers in block
          order; negative ones count from the end (``[-1]`` is the last);
        - names of ``model.named_modules()`` or fnmatch wildcards, as
          :class:`~sksign.transformers.SignCodeTransformer` takes them
          (resolved by :func:`~sksign.nn.resolve_layers`): the FFN
          activation itself or a module that holds it (the block, its MLP),
          e.g. ``"transformer.h.1.mlp.act"``, ``"transformer.h.1"``,
          ``"transformer.h.*.mlp"``; a module type (every FFN activation of
          that type). A list may mix indices, names and types.
    alpha0, alpha1 : float, default=None
        The HTAF parameters (``k = alpha0 * alpha1`` for "scaled_sigmoid");
        None uses those of :func:`~sksign.nn.make_activation`. Only for
        "htaf" and "scaled_sigmoid".
    copy : bool, default=True
        Work on a deep copy of `model` (the model is left unchanged); with
        False the model is changed in place and returned.

    Returns
    -------
    model : nn.Module
        The model with the selected FFN activations replaced (a copy unless
        ``copy=False``).

    Raises
    ------
    ValueError
        For a model whose FFN activations cannot be found (see
        :func:`find_ffn_activations`), an out-of-range block index or count,
        an unknown name, a wildcard that matches no FFN activation (the
        message lists the FFN activations), an unknown activation, or
        `alpha0`/`alpha1` given for an activation that has none.
    TypeError
        For a `layers` or `activation` of the wrong type.

    See Also
    --------
    find_ffn_activations : The FFN activations, found by structure.
    sksign.nn.force_step_mode : Force the step (or the smooth function).

    Notes
    -----
    The step is ``1[z >= 0]`` and a sign code (``SignCodeTransformer``) is
    ``1[z > 0]`` of the same input: in eval the code of a swapped unit is its
    output, except where ``z`` is exactly 0. In half precision HTAF's smooth
    values near 0 and 1 round to exactly 0 or 1 (``sigmoid(11)`` is 1.0 in
    bfloat16). With ``copy=True`` the model is held twice in memory.

    Examples
    --------
    A stand-in for a GPT-2-style model (a Hugging Face model works the same
    way): three blocks with an FFN ``d -> 4d -> d``; HTAF goes into the last
    two.

    >>> import torch
    >>> from torch import nn
    >>> from sksign.transformers import swap_ffn_activations
    >>> class Block(nn.Module):
    ...     def __init__(self, d=8):
    ...         super().__init__()
    ...         self.c_fc, self.c_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
    ...         self.act = nn.GELU()
    ...     def forward(self, x):
    ...         return x + self.c_proj(self.act(self.c_fc(x)))
    >>> class TinyGPT(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.h = nn.ModuleList([Block() for _ in range(3)])
    ...     def forward(self, x):
    ...         for block in self.h:
    ...             x = block(x)
    ...         return x
    >>> _ = torch.manual_seed(0)
    >>> model = TinyGPT().eval()
    >>> binary = swap_ffn_activations(model, "htaf", layers=2, alpha0=2.0, alpha1=11.0)
    >>> [type(block.act).__name__ for block in binary.h]
    ['GELU', 'HTAF', 'HTAF']
    >>> type(model.h[2].act).__name__  # the model itself is unchanged
    'GELU'
    >>> out = []
    >>> hook = binary.h[2].act.register_forward_hook(lambda m, i, o: out.append(o))
    >>> _ = binary(torch.randn(2, 5, 8))  # in eval: the exact step
    >>> _ = binary.train()(torch.randn(2, 5, 8))  # in training: smooth HTAF
    >>> hook.remove()
    >>> out[0].unique().tolist(), bool(((out[1] > 0) & (out[1] < 1)).all())
    ([0.0, 1.0], True)
    """
    if not isinstance(copy, bool):
        raise TypeError(f"copy must be True or False; got {copy!r}.")
    # check the activation before copying a possibly large model
    _new_activation(activation, alpha0, alpha1)
    ffns = find_ffn_activations(model)
    selected = _select(model, ffns, layers)
    if copy:
        model = copy_module.deepcopy(model)
    for ffn in selected:
        parent_name, _, attr = ffn.name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        old = getattr(parent, attr)
        new = _new_activation(activation, alpha0, alpha1)
        new.train(old.training)
        setattr(parent, attr, new)
    return model
