"""Step activations in the feed-forward blocks of a pretrained transformer.

The feed-forward network (FFN) of a transformer block is an up projection
(``d -> h``), an activation and a down projection (``h -> d``); a gated FFN
(LLaMA, Qwen, Mistral, Gemma, Phi-3) computes ``down(act(gate(x)) * up(x))``,
with two up projections or one fused ``d -> 2h`` one. Putting a step
activation there (HTAF in training, the exact Heaviside step at inference)
turns every FFN unit into a bit.

:func:`find_ffn_activations` finds the FFN activation of every block by
structure, not by attribute names: the stack of repeated blocks is the longest
``nn.ModuleList`` (or ``nn.Sequential``) of modules of one class, and in each
block the FFN activation is the activation module whose smallest enclosing
module also holds an up projection and the matching down projection.
:func:`~sksign.transformers.swap_ffn_activations` replaces the selected ones
with sksign's step activations.

``transformers`` itself is never imported here: its models are plain
``nn.Module`` objects, read through ``named_modules()`` (GPT-2's ``Conv1D`` is
recognised by its ``nf`` attribute and 2-D weight), so sksign imports
without it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from torch import nn

from sksign.nn import activation_kind

__all__ = ["FFNLayer", "find_ffn_activations"]

#: Activation modules that are not elementwise: never an FFN activation.
_NOT_ELEMENTWISE = (nn.Softmax, nn.Softmin, nn.LogSoftmax, nn.Softmax2d, nn.GLU)


@dataclass(frozen=True)
class FFNLayer:
    """The feed-forward activation of one transformer block.

    Attributes
    ----------
    name : str
        Name of the activation module in ``model.named_modules()``.
    module : nn.Module
        The activation module.
    block : str
        Name of the block (an entry of the stack of repeated blocks).
    index : int
        Position of the block among the FFN layers of the model (0 first).
    gated : bool
        Whether the FFN is gated, ``down(act(gate(x)) * up(x))``: two up
        projections ``d -> h``, or one fused ``d -> 2h`` one.
    up : tuple of str
        Names of the up projections (gate and up, in registration order; for
        a gated FFN the structure does not say which one is the gate).
    down : str
        Name of the down projection ``h -> d``.

    Examples
    --------
    >>> from torch import nn
    >>> from sksign.transformers import find_ffn_activations
    >>> block = lambda: nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.Linear(16, 4))
    >>> model = nn.Sequential(nn.Embedding(10, 4), nn.ModuleList([block(), block()]))
    >>> ffn = find_ffn_activations(model)["1.1.1"]
    >>> ffn.module, ffn.block, ffn.index, ffn.gated, ffn.up, ffn.down
    (GELU(approximate='none'), '1.1', 1, False, ('1.1.0',), '1.1.2')
    """

    name: str
    module: nn.Module
    block: str
    index: int
    gated: bool
    up: tuple[str, ...]
    down: str


def _linear_dims(module: nn.Module) -> tuple[int, int] | None:
    """``(in, out)`` of a linear layer (``nn.Linear`` or GPT-2's ``Conv1D``)."""
    if isinstance(module, nn.Linear):
        return int(module.in_features), int(module.out_features)
    weight = getattr(module, "weight", None)
    nf = getattr(module, "nf", None)
    if (
        isinstance(nf, int)
        and getattr(weight, "ndim", None) == 2
        and weight.shape[1] == nf
        and not list(module.children())
    ):  # transformers' Conv1D: y = x @ weight + bias, weight (in, out)
        return int(weight.shape[0]), nf
    return None


def _is_activation(module: nn.Module) -> bool:
    return (
        not list(module.children())
        and activation_kind(module) is not None
        and not isinstance(module, _NOT_ELEMENTWISE)
        and "softmax" not in type(module).__name__.lower()
    )


def _block_stacks(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The longest stacks of repeated blocks (several only when they tie)."""
    stacks: list[tuple[str, nn.Module]] = []
    for name, module in model.named_modules():
        if not isinstance(module, (nn.ModuleList, nn.Sequential)) or not len(module):
            continue
        if any(not s or name.startswith(f"{s}.") for s, _ in stacks):
            continue  # a list inside a block (MoE experts, T5's sublayers)
        blocks = list(module)
        if len({type(b) for b in blocks}) != 1 or not list(blocks[0].children()):
            continue
        if not any(_linear_dims(m) for m in blocks[0].modules()):
            continue
        stacks.append((name, module))
    if not stacks:
        return []
    longest = max(len(s) for _, s in stacks)
    return [(n, s) for n, s in stacks if len(s) == longest]


def _ffn_in(
    linears: dict[str, tuple[int, int]], width: int
) -> tuple[tuple[str, ...], str, bool] | None:
    """(up names, down name, gated) of the FFN among `linears`, or None."""
    downs = [(n, i) for n, (i, o) in linears.items() if o == width and i != width]
    for down, hidden in downs:
        ups = tuple(n for n, (i, o) in linears.items() if i == width and o == hidden)
        fused = tuple(
            n for n, (i, o) in linears.items() if i == width and o == 2 * hidden
        )
        if ups or fused:
            return ups + fused, down, len(ups) >= 2 or bool(fused)
    # an FFN as wide as the model (h == d): only a module of 2 or 3 square
    # projections and nothing else (an MLP module, not a whole block)
    if 2 <= len(linears) <= 3 and all(i == o == width for i, o in linears.values()):
        names = tuple(linears)
        return names[:-1], names[-1], len(names) == 3
    return None


def _block_ffn(block: nn.Module):
    """[(activation name, module, up, down, gated)] of one block; names relative."""
    linears = {n: d for n, m in block.named_modules() if (d := _linear_dims(m))}
    if not linears:
        return [], {}
    width = Counter(i for i, _ in linears.values()).most_common(1)[0][0]
    found = []
    for name, module in block.named_modules():
        if not name or not _is_activation(module):
            continue
        parts = name.split(".")[:-1]
        while True:  # the smallest enclosing module that holds an FFN
            prefix = ".".join(parts)
            inside = {
                n: d
                for n, d in linears.items()
                if not prefix or n.startswith(f"{prefix}.")
            }
            ffn = _ffn_in(inside, width) if inside else None
            if ffn is not None:
                found.append((name, module, *ffn))
                break
            if not parts:
                break
            parts.pop()
    return found, linears


def find_ffn_activations(model: nn.Module) -> dict[str, FFNLayer]:
    """The feed-forward activation of every transformer block, found by structure.

    The stack of repeated blocks is the longest ``nn.ModuleList`` (or
    ``nn.Sequential``) whose entries are all of one class and hold linear
    layers (all such stacks when several have that length, such as the
    encoder and the decoder of an encoder-decoder model; lists nested in a
    block, such as the experts of a mixture of experts, are not stacks). In
    each block, the FFN activation is the activation module (see
    :func:`~sksign.nn.activation_kind`; softmax excluded) whose smallest
    enclosing module also holds an up projection ``d -> h`` and a down
    projection ``h -> d``, where ``d`` is the block's width (the most common
    input width of its linear layers). A gated FFN, ``down(act(gate(x)) *
    up(x))``, has two up projections ``d -> h`` or one fused ``d -> 2h``.
    Linear layers are ``nn.Linear`` (and its subclasses) and GPT-2's
    ``Conv1D``.

    This finds, among others, ``transformer.h.*.mlp.act`` (GPT-2),
    ``encoder.layer.*.intermediate.intermediate_act_fn`` (BERT, MiniLM),
    ``model.layers.*.mlp.act_fn`` (LLaMA, Qwen2, Mistral, Gemma; gated),
    ``model.layers.*.mlp.activation_fn`` (Phi-3; gated, fused),
    ``gpt_neox.layers.*.mlp.act`` (GPT-NeoX),
    ``model.decoder.layers.*.activation_fn`` (OPT) and
    ``transformer.layer.*.ffn.activation`` (DistilBERT).

    Parameters
    ----------
    model : nn.Module
        A transformer, e.g. a Hugging Face model (``transformers`` is not
        needed: any module of that structure works).

    Returns
    -------
    dict of str to FFNLayer
        One entry per block, in block order, keyed by the name of the
        activation module in ``model.named_modules()``.

    Raises
    ------
    ValueError
        If `model` has no stack of repeated blocks, or a block has no
        activation module between an up and a down projection (an FFN that
        calls a functional activation, ``F.gelu(x)``) or several (a mixture
        of experts, an FFN of several hidden layers). The message names the
        model class, the block and what was found in it.
    TypeError
        If `model` is not an ``nn.Module``.

    See Also
    --------
    sksign.transformers.swap_ffn_activations : Put step activations in their place.

    Notes
    -----
    Not supported (refused with a ValueError): a mixture of experts (several
    FFNs per block, or expert weights fused into 3-D parameters), an FFN
    that calls a functional activation, blocks of different classes in one
    stack (hybrid models). An FFN as wide as the model (``h == d``) is found
    only when its projections are alone in one module (an MLP module), as
    they cannot be told from the attention's by their shapes otherwise.

    Examples
    --------
    A stand-in for a LLaMA-style model (any Hugging Face model works the same
    way): two blocks, each with a gated FFN.

    >>> import torch
    >>> from torch import nn
    >>> from sksign.transformers import find_ffn_activations
    >>> class MLP(nn.Module):
    ...     def __init__(self, d=8, h=16):
    ...         super().__init__()
    ...         self.gate_proj, self.up_proj = nn.Linear(d, h), nn.Linear(d, h)
    ...         self.down_proj, self.act_fn = nn.Linear(h, d), nn.SiLU()
    ...     def forward(self, x):
    ...         gate = self.act_fn(self.gate_proj(x))
    ...         return self.down_proj(gate * self.up_proj(x))
    >>> class Block(nn.Module):
    ...     def __init__(self, d=8):
    ...         super().__init__()
    ...         self.attn, self.mlp = nn.Linear(d, d), MLP(d)
    ...     def forward(self, x):
    ...         x = x + self.attn(x)
    ...         return x + self.mlp(x)
    >>> class TinyLM(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.layers = nn.ModuleList([Block(), Block()])
    ...     def forward(self, x):
    ...         for layer in self.layers:
    ...             x = layer(x)
    ...         return x
    >>> ffns = find_ffn_activations(TinyLM())
    >>> list(ffns)
    ['layers.0.mlp.act_fn', 'layers.1.mlp.act_fn']
    >>> ffn = ffns["layers.1.mlp.act_fn"]
    >>> ffn.gated, ffn.down
    (True, 'layers.1.mlp.down_proj')
    >>> ffn.up  # the gate and the up projection
    ('layers.1.mlp.gate_proj', 'layers.1.mlp.up_proj')
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            "find_ffn_activations expects a torch nn.Module (a transformer); got "
            f"{type(model).__name__}."
        )
    owner = type(model).__name__
    stacks = _block_stacks(model)
    if not stacks:
        lists = [
            f"{n or '(model)'} ({len(m)} x "
            f"{'/'.join(sorted({type(b).__name__ for b in m}))})"
            for n, m in model.named_modules()
            if isinstance(m, (nn.ModuleList, nn.Sequential)) and len(m)
        ]
        raise ValueError(
            f"{owner} has no stack of repeated blocks (an nn.ModuleList or "
            "nn.Sequential whose entries are all of one class and hold linear "
            "layers), so its FFN activations cannot be found; module lists "
            f"found: {', '.join(lists) if lists else '(none)'}."
        )
    out: dict[str, FFNLayer] = {}
    for stack_name, stack in stacks:
        for i, block in enumerate(stack):
            block_name = f"{stack_name}.{i}" if stack_name else str(i)
            found, linears = _block_ffn(block)
            if len(found) != 1:
                acts = [n for n, m in block.named_modules() if n and _is_activation(m)]
                what = (
                    "no activation module between an up projection and a down "
                    "projection"
                    if not found
                    else f"{len(found)} candidate FFN activations "
                    f"({', '.join(f'{block_name}.{f[0]}' for f in found)})"
                )
                if found:
                    hint = (
                        " (a mixture of experts or an FFN with several hidden "
                        "layers is not supported)"
                    )
                elif acts:
                    hint = (
                        " (an FFN whose weights are not linear layers, such as "
                        "the fused 3-D weights of a mixture of experts, is not "
                        "supported)"
                    )
                else:
                    hint = (
                        " (an FFN that calls a functional activation, F.gelu(x), "
                        "has no module to replace)"
                    )
                lin_txt = ", ".join(f"{n} {i}->{o}" for n, (i, o) in linears.items())
                raise ValueError(
                    f"block {block_name!r} ({type(block).__name__}) of {owner} has "
                    f"{what}{hint}; activation modules in it: "
                    f"{', '.join(acts) if acts else '(none)'}; linear layers: "
                    f"{lin_txt or '(none)'}."
                )
            name, module, up, down, gated = found[0]
            full = f"{block_name}.{name}"
            out[full] = FFNLayer(
                name=full,
                module=module,
                block=block_name,
                index=len(out),
                gated=gated,
                up=tuple(f"{block_name}.{u}" for u in up),
                down=f"{block_name}.{down}",
            )
    return out
