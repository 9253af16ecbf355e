"""Sign recording over any nn.Module: layer resolution and forward hooks.

The sign code of a hidden unit is the sign of its pre-activation ``z``
(the Sign Code paper): bit 1 iff ``z > 0``, else 0 (ReLU's zero outputs get
bit 0, sign -1). It is read as the INPUT of the activation module (a forward
pre-hook), which serves ReLU, tanh, GELU and the step-like HTAF family alike
(HTAF outputs lie in (0, 1)). Nets that call functional activations
(``F.relu(self.fc(x))``) have no activation module: name the Linear/Conv
layers instead, and the bit is the sign of that layer's OUTPUT (a forward
hook).

This module is torch only (no scikit-learn); the transformers, scorers and
interventions of sksign reuse it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from sksign.nn._capture import temporarily_eval
from sksign.nn.activations import StepActivation

__all__ = [
    "CONV_POOLS",
    "RESIDUAL_MODES",
    "TOKEN_POOLS",
    "SignRecorder",
    "activation_kind",
    "find_activations",
    "pool_signs",
    "quadrant_bounds",
    "record_signs",
    "resolve_layers",
    "temporarily_eval",
]

#: Ways to pool a conv map (N, C, H, W) into bits.
CONV_POOLS = ("quadrant", "flatten")
#: Ways to pool token activations (N, T, U) into bits.
TOKEN_POOLS = ("first", "majority")
#: Which codes a residual block gives.
RESIDUAL_MODES = ("int", "out", "both")

LayerSpec = str | type | tuple | Sequence[str | type]

# Activations whose output sign follows the sign of their input (for z != 0),
# or that are exact steps at inference (the HTAF family).
_SIGN_PRESERVING_TYPES: tuple[type, ...] = (
    nn.ReLU,
    nn.ReLU6,
    nn.LeakyReLU,
    nn.PReLU,
    nn.RReLU,
    nn.ELU,
    nn.CELU,
    nn.SELU,
    nn.GELU,
    nn.SiLU,
    nn.Mish,
    nn.Hardswish,
    nn.Tanh,
    nn.Hardtanh,
    nn.Softsign,
    nn.Tanhshrink,
    nn.Softshrink,
    nn.Hardshrink,
    StepActivation,
)
# Activations whose output is always positive (or that are not elementwise).
_NON_SIGN_PRESERVING_TYPES: tuple[type, ...] = (
    nn.Sigmoid,
    nn.LogSigmoid,
    nn.Hardsigmoid,
    nn.Softplus,
    nn.Softmax,
    nn.Softmax2d,
    nn.LogSoftmax,
    nn.Softmin,
    nn.GLU,
    nn.Threshold,
)
# Class-name fragments for activations defined by other libraries
# (transformers' GELUActivation, NewGELUActivation, QuickGELUActivation,
# timm's Swish, GELUTanh, ...). Lower case; checked on the class name.
_NON_SIGN_NAME_TOKENS = (
    "sigmoid",
    "softplus",
    "softmax",
    "softmin",
    "laplace",
    "glu",
    "threshold",
)
_SIGN_NAME_TOKENS = ("relu", "gelu", "silu", "swish", "mish", "tanh", "elu")
_SIGN_NAMES = {"linearactivation", "identityactivation"}


def _sign_breaking_setting(module: nn.Module) -> str | None:
    """The setting that keeps a usually sign-preserving module from being one.

    A negative slope on the negative side (LeakyReLU, PReLU, RReLU) or a
    negative ELU alpha makes ``phi(z) > 0`` for ``z < 0`` (CELU keeps the
    sign for any alpha); a Hardtanh
    whose range excludes 0 has one output sign. None when the module is fine.
    """
    if isinstance(module, nn.LeakyReLU) and module.negative_slope < 0:
        return f"negative_slope={module.negative_slope:g}"
    if isinstance(module, nn.PReLU):
        low = float(module.weight.detach().min())
        if low < 0:
            return f"a learned slope of {low:g}"
    if isinstance(module, nn.RReLU) and min(module.lower, module.upper) < 0:
        return f"lower={module.lower:g}, upper={module.upper:g}"
    if isinstance(module, nn.ELU) and module.alpha < 0:
        return f"alpha={module.alpha:g}"
    if isinstance(module, nn.Hardtanh) and not (module.min_val <= 0 <= module.max_val):
        return f"min_val={module.min_val:g}, max_val={module.max_val:g}"
    return None


def activation_kind(module: nn.Module) -> Literal["sign", "non_sign"] | None:
    """Classify `module` as an activation.

    Parameters
    ----------
    module : nn.Module
        Any module.

    Returns
    -------
    {"sign", "non_sign"} or None
        "sign" for a sign-preserving activation (ReLU, LeakyReLU, SiLU, GELU,
        tanh, hardtanh, ELU, ..., every :class:`StepActivation`, and classes
        of other libraries whose name says GELU/SiLU/Swish/Mish/ReLU/tanh/ELU,
        such as ``GELUActivation``); "non_sign" for sigmoid, softplus,
        softmax, GLU and the like, and for a LeakyReLU/PReLU/RReLU with a
        negative slope (or an ELU with a negative alpha), whose negative
        inputs give positive outputs; None when `module` is not an activation.
    """
    if isinstance(module, _SIGN_PRESERVING_TYPES):
        return "non_sign" if _sign_breaking_setting(module) else "sign"
    if isinstance(module, _NON_SIGN_PRESERVING_TYPES):
        return "non_sign"
    if list(module.children()):
        return None
    for klass in type(module).__mro__:
        if klass in (nn.Module, object):
            break
        name = klass.__name__.lower()
        is_named_act = name.endswith("activation") or any(
            name == tok or name.startswith(tok) or name.endswith(tok)
            for tok in (*_SIGN_NAME_TOKENS, *_NON_SIGN_NAME_TOKENS)
        )
        if not is_named_act:
            continue
        if any(tok in name for tok in _NON_SIGN_NAME_TOKENS):
            return "non_sign"
        if name in _SIGN_NAMES or any(tok in name for tok in _SIGN_NAME_TOKENS):
            return "sign"
    return None


def find_activations(
    module: nn.Module, *, include_non_sign_preserving: bool = False
) -> dict[str, nn.Module]:
    """Activation modules of `module`, by name, in ``named_modules()`` order.

    Parameters
    ----------
    module : nn.Module
        The net.
    include_non_sign_preserving : bool, default=False
        Also list sigmoid, softplus and the like.

    Returns
    -------
    dict of str to nn.Module
    """
    wanted = ("sign", "non_sign") if include_non_sign_preserving else ("sign",)
    return {
        name: m
        for name, m in module.named_modules()
        if name and activation_kind(m) in wanted
    }


def _is_pattern(name: str) -> bool:
    return any(ch in name for ch in "*?[")


def _describe_available(module: nn.Module, limit: int = 40) -> str:
    acts = list(find_activations(module, include_non_sign_preserving=True))
    others = [n for n, _ in module.named_modules() if n and n not in acts]
    more = f", ... ({len(others) - limit} more)" if len(others) > limit else ""
    acts_txt = ", ".join(acts) if acts else "(none)"
    others_txt = ", ".join(others[:limit]) if others else "(none)"
    return f"activation layers: {acts_txt}; other modules: {others_txt}{more}"


def _is_gate(module: nn.Module) -> bool:
    """An activation that "last", "all" and wildcards pass over: one that is not
    sign-preserving by kind (sigmoid, softmax, ...; an output or a gate). A
    ReLU-family module that only a setting breaks (a negative slope) is a
    hidden layer, kept so that the sign-preserving check refuses it."""
    return activation_kind(module) == "non_sign" and not isinstance(
        module, _SIGN_PRESERVING_TYPES
    )


def _check_sign_preserving(
    name: str, layer: nn.Module, allow_non_sign_preserving: bool
) -> None:
    if allow_non_sign_preserving or activation_kind(layer) != "non_sign":
        return
    setting = _sign_breaking_setting(layer)
    what = f"a {type(layer).__name__}" + (f" with {setting}" if setting else "")
    raise ValueError(
        f"layer {name!r} is {what}, which is not "
        "sign-preserving (its output sign does not follow the sign of its "
        "input), so it has no sign code. Pick a sign-preserving activation "
        "(ReLU, SiLU, GELU, tanh, HTAF, ...) or pass "
        "allow_non_sign_preserving=True to record the sign of its input anyway."
    )


def resolve_layers(
    module: nn.Module,
    layers: LayerSpec = "last",
    *,
    allow_non_sign_preserving: bool = False,
) -> dict[str, nn.Module]:
    """Turn a layer specification into ``{name: module}``.

    Parameters
    ----------
    module : nn.Module
        The net.
    layers : "last", "all", str, type, tuple of types or list, default="last"
        - "last": the last sign-preserving activation module in
          ``named_modules()`` order (registration order; for an
          ``nn.Sequential`` the forward order); a sigmoid or softmax after it
          (an output or gate) is passed over.
        - "all": every sign-preserving activation module.

          With ``allow_non_sign_preserving=True`` both also consider sigmoid,
          softplus and the like. Without it, a LeakyReLU/PReLU/RReLU with a
          negative slope (or an ELU with a negative alpha) that "all" would
          cover, or that comes last, raises rather than being passed over.
        - a name of ``named_modules()`` or a list of names. Names may hold
          fnmatch wildcards (``"encoder.layer.*.intermediate.*"``); a
          wildcard keeps only the sign-preserving activation modules it
          matches when it matches any (so it does not also pick the Linear
          layer feeding them, nor a sigmoid gate), else every module it
          matches.
        - a module type or tuple of types (``nn.ReLU``, a residual block
          class): every module of that type. A list may mix names and types.
    allow_non_sign_preserving : bool, default=False
        Accept activations that are not sign-preserving (sigmoid, softplus,
        negative slopes; their input sign is recorded), by name and in
        "last"/"all".

    Returns
    -------
    dict of str to nn.Module
        In ``named_modules()`` order.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones), a wildcard or
        type that matches nothing, a net without activation modules for
        "last"/"all", or a non-sign-preserving activation.
    """
    named = {name: m for name, m in module.named_modules() if name}
    owner = type(module).__name__
    if isinstance(layers, str) and layers in ("last", "all"):
        acts = {
            name: m
            for name, m in find_activations(
                module, include_non_sign_preserving=True
            ).items()
            if allow_non_sign_preserving or not _is_gate(m)
        }
        if not acts:
            others = find_activations(module, include_non_sign_preserving=True)
            if others:
                raise ValueError(
                    f"layers={layers!r} found no sign-preserving activation module "
                    f"in {owner}; its activations {list(others)} are not "
                    "sign-preserving (sigmoid, softplus, ...). Pass "
                    "allow_non_sign_preserving=True to record the sign of their "
                    "input anyway."
                )
            raise ValueError(
                f"layers={layers!r} found no activation module in {owner}. Nets "
                "that call functional activations (F.relu(self.fc(x))) must name "
                "the Linear/Conv layers whose outputs are the pre-activations, "
                "e.g. layers=['fc1', 'fc2']; available: "
                f"{_describe_available(module)}."
            )
        if layers == "last":
            name = list(acts)[-1]
            acts = {name: acts[name]}
        # a negative-slope activation among them raises below
        for name, m in acts.items():
            _check_sign_preserving(name, m, allow_non_sign_preserving)
        return acts
    if isinstance(layers, str) or isinstance(layers, type):
        items: list[Any] = [layers]
    elif (
        isinstance(layers, tuple)
        and layers
        and all(isinstance(t, type) for t in layers)
    ):
        items = [layers]
    else:
        try:
            items = list(layers)
        except TypeError as exc:
            raise TypeError(
                "layers must be 'last', 'all', a module name, a list of names, a "
                f"module type or a tuple of types. Got {layers!r} instead."
            ) from exc
        if not items:
            raise ValueError("layers must not be an empty list.")
    chosen: set[str] = set()
    for item in items:
        if isinstance(item, type) or (
            isinstance(item, tuple) and all(isinstance(t, type) for t in item)
        ):
            found = [n for n, m in named.items() if isinstance(m, item)]
            if not found:
                raise ValueError(
                    f"no module of type {item!r} was found in {owner}; available: "
                    f"{_describe_available(module)}."
                )
        elif isinstance(item, str) and _is_pattern(item):
            found = [n for n in named if fnmatch.fnmatchcase(n, item)]
            if not found:
                raise ValueError(
                    f"layer pattern {item!r} matched no module of {owner}; "
                    f"available: {_describe_available(module)}."
                )
            kinds = {n: activation_kind(named[n]) for n in found}
            any_acts = [n for n in found if kinds[n] is not None]
            sign_acts = [n for n in any_acts if not _is_gate(named[n])]
            if allow_non_sign_preserving:
                found = any_acts or found
            else:  # skip a sigmoid the wildcard also matches
                found = sign_acts or any_acts or found
        elif isinstance(item, str):
            if item not in named:
                close = difflib.get_close_matches(item, list(named), n=3)
                hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
                raise ValueError(
                    f"layer {item!r} was not found in {owner}; available: "
                    f"{_describe_available(module)}.{hint}"
                )
            found = [item]
        else:
            raise TypeError(
                "each entry of layers must be a module name or a module type. "
                f"Got {item!r} instead."
            )
        chosen.update(found)
    out = {name: m for name, m in named.items() if name in chosen}
    for name, m in out.items():
        _check_sign_preserving(name, m, allow_non_sign_preserving)
    return out


def quadrant_bounds(size: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Row (or column) ranges of the two halves of a map of `size` pixels.

    The split follows PyTorch's adaptive pooling to 2 bins: half ``i`` covers
    ``[floor(i * size / 2), ceil((i + 1) * size / 2))``. An even size splits
    into two disjoint halves; for an odd size the middle row belongs to both
    halves (so a 1-pixel map gives two equal halves and no quadrant is empty).

    Examples
    --------
    >>> quadrant_bounds(4), quadrant_bounds(5), quadrant_bounds(1)
    (((0, 2), (2, 4)), ((0, 3), (2, 5)), ((0, 1), (0, 1)))
    """
    return ((0, -(-size // 2)), (size // 2, size))


def _halves_sum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Sums of `x` over the two halves of `dim`, stacked in a new last axis.

    Counts of at most 255 are summed in uint8 (no widening copy of `x`).
    """
    size = x.shape[dim]
    acc = torch.uint8 if x.dtype == torch.uint8 and size <= 510 else torch.int32
    if size % 2 == 0:
        shape = (*x.shape[:dim], 2, size // 2, *x.shape[dim + 1 :])
        return x.reshape(shape).sum(dim + 1, dtype=acc).movedim(dim, -1)
    (a0, a1), (b0, b1) = quadrant_bounds(size)
    return torch.stack(
        [
            x.narrow(dim, a0, a1 - a0).sum(dim, dtype=acc),
            x.narrow(dim, b0, b1 - b0).sum(dim, dtype=acc),
        ],
        dim=-1,
    )


def _quadrant_pool(pos: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) bool -> (N, 4C) bool: per channel and quadrant majority."""
    n, c, h, w = pos.shape
    # column halves over the (contiguous) last axis first, then row halves over
    # the small (N, C, H, 2) result
    cols = _halves_sum(pos.view(torch.uint8), 3).to(torch.int32)  # (N, C, H, 2)
    quads = _halves_sum(cols, 2)  # (N, C, 2[col half], 2[row half])
    n_pix = -(-h // 2) * -(-w // 2)  # every quadrant has ceil(H/2) * ceil(W/2)
    # majority sign, ties to +1: 2 * (#positive) >= #pixels
    return (2 * quads.transpose(2, 3) >= n_pix).reshape(n, 4 * c)


@dataclass(frozen=True)
class _Layout:
    """How one layer's bits are laid out, for naming them."""

    kind: str  # "unit" | "quadrant" | "flat"
    shape: tuple[int, ...]

    @property
    def n_bits(self) -> int:
        if self.kind == "quadrant":
            return 4 * self.shape[0]
        total = 1
        for s in self.shape:
            total *= s
        return total

    def names(self, key: str) -> list[str]:
        if self.kind == "quadrant":
            return [f"{key}_c{c}q{q}" for c in range(self.shape[0]) for q in range(4)]
        return [f"{key}_{j}" for j in range(self.n_bits)]


def pool_signs(
    pos: torch.Tensor,
    *,
    name: str = "layer",
    conv_pool: str = "quadrant",
    token_pool: str | None = None,
    attention_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, _Layout]:
    """Pool a boolean map ``z > 0`` of one layer into a (N, n_bits) bool matrix.

    Parameters
    ----------
    pos : torch.Tensor of bool
        ``z > 0`` for a batch: (N,), (N, U), (N, T, U) or (N, C, H, W).
    name : str, default="layer"
        Layer name, for error messages.
    conv_pool : {"quadrant", "flatten"}, default="quadrant"
        For (N, C, H, W): "quadrant" gives the majority sign per channel and
        quadrant (ties to +1; 4C bits, channel-major, quadrants 0..3 =
        top-left, top-right, bottom-left, bottom-right, halves as in
        :func:`quadrant_bounds`); "flatten" keeps all C*H*W bits.
    token_pool : {"first", "majority"} or None, default=None
        For (N, T, U): "first" keeps token 0 (a CLS token); "majority" takes
        the majority sign over the tokens (ties to +1), over the non-padding
        tokens when `attention_mask` is given. Required for 3-D activations
        and an error for 2-D ones.
    attention_mask : torch.Tensor of shape (N, T), default=None
        Nonzero for real tokens, 0 for padding.

    Returns
    -------
    bits : torch.Tensor of bool, shape (N, n_bits)
    layout : _Layout
    """
    if pos.dim() == 1:
        pos = pos[:, None]
    if pos.dim() == 2:
        if token_pool is not None:
            raise ValueError(
                f"token_pool={token_pool!r} was given, but layer {name!r} gives a "
                f"2-D activation of shape {tuple(pos.shape)}; token pooling needs "
                "(batch, tokens, units). Use token_pool=None for this layer or "
                "select only token layers."
            )
        return pos, _Layout("unit", (pos.shape[1],))
    if pos.dim() == 3:
        if token_pool is None:
            raise ValueError(
                f"layer {name!r} gives a 3-D activation of shape "
                f"{tuple(pos.shape)}, read as (batch, tokens, units); pass "
                "token_pool='first' or token_pool='majority'."
            )
        if token_pool == "first":
            # a copy, not a view: the stored bits must not pin the (N, T, U) map
            return pos[:, 0, :].contiguous(), _Layout("unit", (pos.shape[2],))
        if token_pool != "majority":
            raise ValueError(
                f"token_pool must be one of {TOKEN_POOLS} or None. Got "
                f"{token_pool!r} instead."
            )
        if attention_mask is None:
            count = pos.sum(1, dtype=torch.int32)
            bits = 2 * count >= pos.shape[1]
        else:
            mask = attention_mask.to(device=pos.device) != 0
            if mask.shape != pos.shape[:2]:
                raise ValueError(
                    f"attention_mask has shape {tuple(mask.shape)}, but layer "
                    f"{name!r} has (batch, tokens) = {tuple(pos.shape[:2])}."
                )
            count = (pos & mask[:, :, None]).sum(1, dtype=torch.int32)
            n_valid = mask.sum(1, keepdim=True, dtype=torch.int32)
            bits = 2 * count >= n_valid
        return bits, _Layout("unit", (pos.shape[2],))
    if pos.dim() == 4:
        if conv_pool == "quadrant":
            return _quadrant_pool(pos), _Layout("quadrant", (pos.shape[1],))
        if conv_pool == "flatten":
            return pos.flatten(1), _Layout("flat", tuple(pos.shape[1:]))
        raise ValueError(
            f"conv_pool must be one of {CONV_POOLS}. Got {conv_pool!r} instead."
        )
    raise ValueError(
        f"layer {name!r} gives an activation of shape {tuple(pos.shape)}; sign "
        "codes support (batch, units), (batch, tokens, units) and "
        "(batch, channels, height, width)."
    )


def _first_tensor(value: Any, name: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if (
        isinstance(value, (tuple, list))
        and value
        and isinstance(value[0], torch.Tensor)
    ):
        return value[0]
    raise TypeError(
        f"layer {name!r} did not produce a tensor (got {type(value).__name__}); "
        "select a module whose input/output is a tensor."
    )


@dataclass
class _Pending:
    name: str
    pos: torch.Tensor
    output: torch.Tensor | None = None


@dataclass
class SignRecorder:
    """Bits gathered by :func:`record_signs` (the object it yields).

    Attributes
    ----------
    layers : list of str
        Keys of the recorded codes, in forward order, fixed by the first
        forward pass. A key is a layer name; a module called several times in
        one forward pass gives ``name``, ``name#1``, ...; a residual block's
        S_out is keyed by the block's name and its S_int by the names of the
        activations inside it.
    layouts : dict of str to _Layout
        Shape of each layer's code (for :meth:`feature_names`).
    attention_mask : torch.Tensor or None
        Padding mask (N, T) used by ``token_pool="majority"``; set it before
        each forward pass whose batch has padding.
    """

    conv_pool: str = "quadrant"
    token_pool: str | None = None
    attention_mask: torch.Tensor | None = None
    to_cpu: bool = True
    layers: list[str] = field(default_factory=list)
    layouts: dict[str, _Layout] = field(default_factory=dict)
    _store: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    _calls: dict[str, int] = field(default_factory=dict)
    _emitted: list[str] = field(default_factory=list)
    _frames: dict[str, list[_Pending]] = field(default_factory=dict)
    _specs: list[str] = field(default_factory=list)
    _spec_hits: dict[str, int] = field(default_factory=dict)
    _n_forward: int = 0
    # (key, shape) of each layer of the first forward, to explain a token_pool
    # that found no token axis
    _first_shapes: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    #: the exception a hook of this recorder raised last (NaN, shapes, ...), so
    #: that callers can tell it from an error of the net's own forward
    error: BaseException | None = None

    @property
    def n_bits(self) -> int:
        """Total number of bits per sample."""
        return sum(self.layouts[k].n_bits for k in self.layers)

    def feature_names(self) -> list[str]:
        """One name per bit: ``<layer>_<unit>`` (``<layer>_c{c}q{q}`` for conv)."""
        return [n for k in self.layers for n in self.layouts[k].names(k)]

    def pop(self) -> dict[str, torch.Tensor]:
        """Bits recorded since the last pop, per layer (N, n_bits_layer) bool."""
        out = {
            key: chunks[0] if len(chunks) == 1 else torch.cat(chunks)
            for key in self.layers
            if (chunks := self._store.get(key))
        }
        self._store = {}
        return out

    def pop_matrix(self) -> torch.Tensor:
        """Bits since the last pop as one (N, n_bits) bool matrix.

        Columns follow :attr:`layers`, then each layer's units.
        """
        parts = self.pop()
        if not parts:
            return torch.zeros((0, self.n_bits), dtype=torch.bool)
        if len(parts) == 1:
            return next(iter(parts.values()))
        return torch.cat([parts[k] for k in self.layers], dim=1)

    # -- called by the hooks -------------------------------------------------
    def _start_forward(self) -> None:
        self._calls = {}
        self._emitted = []
        self._frames = {}
        self._spec_hits = dict.fromkeys(self._specs, 0)

    def _emit(self, spec: str, name: str, pos: torch.Tensor) -> None:
        """Record one call of a layer: `pos` is its pre-activation z, or the
        bool map ``z > 0`` when that had to be taken early (residual blocks)."""
        k = self._calls.get(name, 0)
        self._calls[name] = k + 1
        key = _call_key(name, k)
        if self._n_forward == 0:
            self._first_shapes.append((key, tuple(pos.shape)))
        bits, layout = _layer_code(
            pos,
            key,
            conv_pool=self.conv_pool,
            # token_pool pools the layers with a token axis; the others of a
            # token model (a pooler's (N, U) output) keep their units
            token_pool=self.token_pool if pos.dim() == 3 else None,
            attention_mask=self.attention_mask,
        )
        known = self.layouts.get(key)
        if known is None:
            if self._n_forward > 0:
                raise RuntimeError(
                    f"layer {key!r} was called in this forward pass but not in "
                    "the first one; sign codes need the same layers every pass."
                )
            self.layouts[key] = layout
            self.layers.append(key)
        elif known != layout:
            raise RuntimeError(
                f"layer {key!r} gave a code of layout {layout} but {known} before; "
                "sign codes need the same shapes every pass."
            )
        if self.to_cpu:
            bits = bits.cpu()
        self._store.setdefault(key, []).append(bits)
        self._emitted.append(key)
        self._spec_hits[spec] = self._spec_hits.get(spec, 0) + 1

    def _end_forward(self) -> None:
        missing = [s for s, hits in self._spec_hits.items() if hits == 0]
        if missing:
            raise ValueError(
                f"layer(s) {missing} gave no sign bits in the forward pass: they "
                "were never called (nets that call functional activations such "
                "as F.relu need the Linear/Conv layer names instead), or a "
                "residual block has no inner activation for residual='int'."
            )
        shapes = self._first_shapes
        if (
            self._n_forward == 0
            and self.token_pool is not None
            and shapes
            and not any(len(shape) == 3 for _, shape in shapes)
        ):
            key, shape = shapes[0]
            raise ValueError(
                f"token_pool={self.token_pool!r} was given, but no selected layer "
                f"has a token axis: layer {key!r} gives a {len(shape)}-D "
                f"activation of shape {shape}; token pooling needs (batch, "
                "tokens, units). Use token_pool=None or select token layers."
            )
        if self._n_forward > 0 and sorted(self._emitted) != sorted(self.layers):
            lost = sorted(set(self.layers) - set(self._emitted))
            raise RuntimeError(
                f"layer(s) {lost} were recorded in the first forward pass but "
                "not in this one; sign codes need the same layers every pass."
            )
        self._n_forward += 1


def _call_key(name: str, i: int) -> str:
    """Key of call `i` of a layer in one forward pass: ``name``, ``name#1``, ...

    The sign code names a module called several times per forward this way;
    the interventions key their per-call magnitudes alike.
    """
    return name if i == 0 else f"{name}#{i}"


def _check_no_nan(z: torch.Tensor, name: str) -> None:
    """Refuse NaN pre-activations (which ``z > 0`` would silently read as 0)."""
    # One vectorised sum (NaN propagates) is 20x cheaper than isnan().any();
    # the exact test runs only when the sum is not finite (NaN, or infs).
    if z.is_floating_point() and not torch.isfinite(z.sum()) and torch.isnan(z).any():
        raise ValueError(
            f"layer {name!r} produced NaN pre-activations, so its sign bits are "
            "undefined; check the input and the weights of the net (a diverged "
            "training run gives NaN weights)."
        )


def _signs(z: torch.Tensor, name: str) -> torch.Tensor:
    """``z > 0``, refusing NaN."""
    z = z.detach()
    _check_no_nan(z, name)
    return z > 0


def _layer_code(
    z: torch.Tensor,
    name: str,
    *,
    conv_pool: str,
    token_pool: str | None,
    attention_mask: torch.Tensor | None,
) -> tuple[torch.Tensor, _Layout]:
    """Code of one layer call from its pre-activation `z` (or ``z > 0``).

    Conv maps on the CPU go through the one-pass numba kernel
    (:mod:`sksign.nn._quadrant`); everything else is ``z > 0``, then
    :func:`pool_signs`. Both give the same bits.
    """
    if z.dtype != torch.bool:
        z = z.detach()
        _check_no_nan(z, name)
        if z.dim() == 4 and conv_pool == "quadrant" and z.device.type == "cpu":
            from sksign.nn._quadrant import (
                quadrant_majority,
                supports_quadrant_majority,
            )

            if supports_quadrant_majority(z):
                return quadrant_majority(z), _Layout("quadrant", (z.shape[1],))
        z = z > 0
    return pool_signs(
        z,
        name=name,
        conv_pool=conv_pool,
        token_pool=token_pool,
        attention_mask=attention_mask,
    )


def _make_input_hook(rec: SignRecorder, spec: str, name: str) -> Any:
    def _forward_pre_hook(module: nn.Module, args: tuple[Any, ...]) -> None:
        rec._emit(spec, name, _first_tensor(args, name))

    return _forward_pre_hook


def _make_output_hook(rec: SignRecorder, spec: str, name: str) -> Any:
    def _forward_hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        rec._emit(spec, name, _first_tensor(output, name))

    return _forward_hook


def _make_block_hooks(
    rec: SignRecorder, block: str, residual: str
) -> tuple[Any, Any, Any, Any]:
    """Hooks for a residual block: (block pre, block post, act pre, act post)."""

    def _block_pre_hook(module: nn.Module, args: tuple[Any, ...]) -> None:
        rec._frames[block] = []

    def _act_pre_hook_factory(act_name: str) -> Any:
        def _forward_pre_hook(module: nn.Module, args: tuple[Any, ...]) -> None:
            frame = rec._frames.get(block)
            if frame is None:  # the activation runs outside the block's forward
                return
            # computed now: an in-place activation overwrites its input
            frame.append(
                _Pending(act_name, _signs(_first_tensor(args, act_name), act_name))
            )

        return _forward_pre_hook

    def _act_post_hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        frame = rec._frames.get(block)
        if frame:
            frame[-1].output = output if isinstance(output, torch.Tensor) else None

    def _block_hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        frame = rec._frames.pop(block, [])
        out = _first_tensor(output, block)
        if frame and frame[-1].output is out:
            # the block ends with its activation: S_out is that activation's
            # input sign (the sum after the residual addition)
            final: torch.Tensor | None = frame[-1].pos
            inner = frame[:-1]
        else:
            final, inner = None, frame
        if residual in ("int", "both"):
            for entry in inner:
                rec._emit(block, entry.name, entry.pos)
        if residual in ("out", "both"):
            rec._emit(block, block, final if final is not None else out)

    return _block_pre_hook, _block_hook, _act_pre_hook_factory, _act_post_hook


@contextmanager
def record_signs(
    module: nn.Module,
    layers: LayerSpec = "last",
    *,
    conv_pool: str = "quadrant",
    token_pool: str | None = None,
    attention_mask: torch.Tensor | None = None,
    residual: str = "out",
    allow_non_sign_preserving: bool = False,
    to_cpu: bool = True,
) -> Iterator[SignRecorder]:
    """Record the sign bits of `layers` during forward passes of `module`.

    Inside the ``with`` block `module` is in ``eval()`` mode; call it as
    usual (``module(x)``, under ``torch.no_grad()`` if you like) and read
    the bits from the yielded :class:`SignRecorder` (``pop()`` or
    ``pop_matrix()``). On exit, also after an exception, every hook is
    removed and each submodule's train/eval mode is restored.

    What is recorded, per selected module:

    - an activation module: bit 1 iff its INPUT ``z > 0`` (forward pre-hook;
      computed before the call, so in-place activations are safe);
    - a module with activation modules inside (a residual block, designated
      by name or type): S_out, the sign of the block output after the
      residual addition and its activation (the input of the block's final
      activation when the block returns that activation's output, else the
      sign of the block output), and/or S_int, the signs of the inputs of
      the other activation calls inside the block, as `residual` says;
    - any other module (Linear, Conv, ...): the sign of its OUTPUT (forward
      hook). Use this for nets that call functional activations
      (``F.relu(self.fc(x))``): the output of ``fc`` is the pre-activation.

    Bits are computed in the hook right away (``z > 0``, then pooling) and
    only bits are kept: no float copy of any layer is stored. Conv maps
    (N, C, H, W) and token activations (N, T, U) are pooled as
    :func:`pool_signs` says.

    Parameters
    ----------
    module : nn.Module
        The net; its own forward must be called (the recorder counts calls
        per forward pass from it).
    layers : "last", "all", str, type, tuple or list, default="last"
        See :func:`resolve_layers`.
    conv_pool : {"quadrant", "flatten"}, default="quadrant"
        Pooling of conv maps; see :func:`pool_signs`.
    token_pool : {"first", "majority"} or None, default=None
        Pooling of token activations (N, T, U); see :func:`pool_signs`. The
        other selected layers of a token model (a pooler's (N, U) output)
        keep their units, but at least one selected layer must have a token
        axis (a ValueError after the first forward pass otherwise). Without
        it, a 3-D activation is an error.
    attention_mask : torch.Tensor of shape (N, T), default=None
        Padding mask for ``token_pool="majority"``; change it per batch with
        ``recorder.attention_mask = mask``.
    residual : {"int", "out", "both"}, default="out"
        Codes of the selected modules that contain activation modules.
    allow_non_sign_preserving : bool, default=False
        Accept activations that are not sign-preserving; see
        :func:`resolve_layers`.
    to_cpu : bool, default=True
        Move the bits to the CPU in the hook. False keeps them on the net's
        device until you pop them (one transfer per batch instead of one per
        layer).

    Yields
    ------
    SignRecorder

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> with record_signs(net, "all") as rec, torch.no_grad():
    ...     _ = net(torch.randn(5, 3))
    >>> rec.layers, rec.pop_matrix().shape
    (['1'], torch.Size([5, 4]))
    """
    if residual not in RESIDUAL_MODES:
        raise ValueError(
            f"residual must be one of {RESIDUAL_MODES}. Got {residual!r} instead."
        )
    if conv_pool not in CONV_POOLS:
        raise ValueError(
            f"conv_pool must be one of {CONV_POOLS}. Got {conv_pool!r} instead."
        )
    if token_pool is not None and token_pool not in TOKEN_POOLS:
        raise ValueError(
            f"token_pool must be one of {TOKEN_POOLS} or None. Got {token_pool!r} "
            "instead."
        )
    selected = resolve_layers(
        module, layers, allow_non_sign_preserving=allow_non_sign_preserving
    )
    act_wanted = ("sign", "non_sign") if allow_non_sign_preserving else ("sign",)
    plan: list[tuple[str, str, nn.Module, dict[str, nn.Module]]] = []
    for name, layer in selected.items():
        if activation_kind(layer) is not None or isinstance(layer, nn.Identity):
            plan.append(("input", name, layer, {}))
            continue
        inner = {
            f"{name}.{sub}": m
            for sub, m in layer.named_modules()
            if sub and activation_kind(m) in act_wanted
        }
        plan.append(("block" if inner else "output", name, layer, inner))
    if residual in ("int", "both"):
        blocks = [name for kind, name, _, _ in plan if kind == "block"]
        for block in blocks:
            nested = [n for n in selected if n.startswith(block + ".")]
            if nested:
                raise ValueError(
                    f"layers {nested} lie inside the residual block {block!r}, "
                    f"whose S_int (residual={residual!r}) already records the "
                    "activations inside it; select either the block or its parts."
                )
    rec = SignRecorder(
        conv_pool=conv_pool,
        token_pool=token_pool,
        attention_mask=attention_mask,
        to_cpu=to_cpu,
    )
    rec._specs = [name for _, name, _, _ in plan]
    handles: list[RemovableHandle] = []

    def guard(hook):
        """`hook`, noting any exception it raises in ``rec.error``."""

        def guarded(*args):
            try:
                return hook(*args)
            except Exception as exc:
                rec.error = exc
                raise

        return guarded

    def pre_hook(target, hook):
        handles.append(target.register_forward_pre_hook(guard(hook)))

    def post_hook(target, hook):
        handles.append(target.register_forward_hook(guard(hook)))

    try:
        pre_hook(module, lambda m, a: rec._start_forward())
        for kind, name, layer, inner in plan:
            if kind == "input":
                pre_hook(layer, _make_input_hook(rec, name, name))
            elif kind == "output":
                post_hook(layer, _make_output_hook(rec, name, name))
            else:
                pre, post, act_pre, act_post = _make_block_hooks(rec, name, residual)
                pre_hook(layer, pre)
                post_hook(layer, post)
                for act_name, act in inner.items():
                    pre_hook(act, act_pre(act_name))
                    post_hook(act, act_post)
        post_hook(module, lambda m, a, o: rec._end_forward())
        with temporarily_eval(module):
            yield rec
    finally:
        for handle in handles:
            handle.remove()
