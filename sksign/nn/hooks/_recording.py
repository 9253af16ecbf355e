"""Sign recording: :func:`record_signs` and the :class:`SignRecorder` it yields.

The sign code of a hidden unit is the sign of its pre-activation ``z``
(the Sign Code paper): bit 1 iff ``z > 0``, else 0 (ReLU's zero outputs get
bit 0, sign -1). It is read as the INPUT of the activation module (a forward
pre-hook), which serves ReLU, tanh, GELU and the step-like HTAF family alike
(HTAF outputs lie in (0, 1)). Nets that call functional activations
(``F.relu(self.fc(x))``) have no activation module: name the Linear/Conv
layers instead, and the bit is the sign of that layer's OUTPUT (a forward
hook). The hooks are attached through :func:`forward_hooks`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from sksign.nn.hooks._capture import HookSpec, call_key, forward_hooks
from sksign.nn.hooks._kinds import activation_kind
from sksign.nn.hooks._layers import LayerSpec, resolve_layers, split_calls
from sksign.nn.hooks._pooling import (
    CONV_POOLS,
    TOKEN_POOLS,
    CodeLayout,
    layer_code,
    positive_bits,
)

__all__ = ["RESIDUAL_MODES", "SignRecorder", "record_signs"]

#: Which codes a residual block gives.
RESIDUAL_MODES = ("int", "out", "both")


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
        one forward pass gives ``name``, ``name#1``, ... (call `k` is
        ``name#k`` whichever calls are kept: with ``layers="last"`` the last
        call of a module called twice is ``name#1``); a residual block's
        S_out is keyed by the block's name and its S_int by the names of the
        activations inside it.
    layouts : dict of str to CodeLayout
        Shape of each layer's code (for :meth:`feature_names`; an internal
        ``CodeLayout``).
    attention_mask : torch.Tensor or None
        Padding mask (N, T) used by ``token_pool="majority"``; set it before
        each forward pass whose batch has padding.
    keep_tokens : bool
        Token activations (N, T, U) without a ``token_pool`` keep one code per
        token: :meth:`pop_matrix` is then (N, T, n_bits).
    error : BaseException or None
        The exception a hook of this recorder raised last (NaN, shapes, ...),
        so that callers can tell it from an error of the net's own forward.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    >>> with record_signs(net) as rec, torch.no_grad():
    ...     _ = net(torch.randn(4, 3))
    >>> rec.n_bits, rec.feature_names(), rec.pop()["1"].shape
    (2, ['1_0', '1_1'], torch.Size([4, 2]))
    """

    conv_pool: str = "quadrant"
    token_pool: str | None = None
    attention_mask: torch.Tensor | None = None
    to_cpu: bool = True
    keep_tokens: bool = False
    #: keep only the last call of each layer per forward pass (layers="last")
    last_call_only: bool = False
    #: layer name -> the calls to keep (layers=["name#1"]); others keep all
    only_calls: dict[str, frozenset[int]] = field(default_factory=dict)
    layers: list[str] = field(default_factory=list)
    layouts: dict[str, CodeLayout] = field(default_factory=dict)
    _store: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    _calls: dict[str, int] = field(default_factory=dict)
    # layers="last": name -> (spec, key, bits, layout, shape) of its last call
    _last: dict[str, tuple[Any, ...]] = field(default_factory=dict)
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

    @property
    def per_token(self) -> bool:
        """Whether the codes are per token (``keep_tokens`` and no
        ``token_pool``, on token layers); known after the first forward."""
        shapes = self._first_shapes
        return (
            self.keep_tokens
            and self.token_pool is None
            and bool(shapes)
            and all(len(shape) == 3 for _, shape in shapes)
        )

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

        Columns follow :attr:`layers`, then each layer's units. Per-token
        codes (:attr:`per_token`) are (N, T, n_bits).
        """
        parts = self.pop()
        if not parts:
            return torch.zeros((0, self.n_bits), dtype=torch.bool)
        if len(parts) == 1:
            return next(iter(parts.values()))
        return torch.cat([parts[k] for k in self.layers], dim=-1)

    # -- called by the hooks -------------------------------------------------
    def _start_forward(self) -> None:
        self._calls = {}
        self._last = {}
        self._emitted = []
        self._frames = {}
        self._spec_hits = dict.fromkeys(self._specs, 0)

    def _emit(self, spec: str, name: str, pos: torch.Tensor) -> None:
        """Record one call of a layer: `pos` is its pre-activation z, or the
        bool map ``z > 0`` when that had to be taken early (residual blocks).

        Call `k` of a layer in the forward pass is keyed ``call_key(name, k)``
        (``name``, ``name#1``, ...) whichever calls are kept, so that a code's
        names do not depend on `layers`.
        """
        k = self._calls.get(name, 0)
        self._calls[name] = k + 1
        only = self.only_calls.get(name)
        if only is not None and k not in only:
            return  # a call not asked for (layers=["name#1"]): counted only
        key = call_key(name, k)
        bits, layout = layer_code(
            pos,
            key,
            conv_pool=self.conv_pool,
            # token_pool pools the layers with a token axis; the others of a
            # token model (a pooler's (N, U) output) keep their units
            token_pool=self.token_pool if pos.dim() == 3 else None,
            attention_mask=self.attention_mask,
            keep_tokens=self.keep_tokens,
        )
        if self.to_cpu:
            bits = bits.cpu()
        if self.last_call_only:
            # a module called again in this forward pass (one ReLU module used
            # twice per residual block, a neuron over time steps): its last
            # call is the code, kept when the forward pass ends
            self._last.pop(name, None)
            self._last[name] = (spec, key, bits, layout, tuple(pos.shape))
            return
        self._keep(spec, key, bits, layout, tuple(pos.shape))

    def _keep(
        self,
        spec: str,
        key: str,
        bits: torch.Tensor,
        layout: CodeLayout,
        shape: tuple[int, ...],
    ) -> None:
        """Store the bits of one call, checked against the first forward."""
        if self._n_forward == 0:
            self._first_shapes.append((key, shape))
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
        self._store.setdefault(key, []).append(bits)
        self._emitted.append(key)
        self._spec_hits[spec] = self._spec_hits.get(spec, 0) + 1

    def _end_forward(self) -> None:
        for entry in self._last.values():  # layers="last": the last calls
            self._keep(*entry)
        self._last = {}
        for name, only in self.only_calls.items():
            n_calls = self._calls.get(name, 0)
            if max(only) >= n_calls:
                raise ValueError(
                    f"layer {call_key(name, max(only))!r} was asked for, but "
                    f"{name!r} was called {n_calls} time(s) in the forward pass "
                    f"(its calls are {[call_key(name, i) for i in range(n_calls)]})."
                )
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
        if self._n_forward == 0 and self.keep_tokens and self.token_pool is None:
            self._check_token_shapes()
        if self._n_forward > 0 and sorted(self._emitted) != sorted(self.layers):
            lost = sorted(set(self.layers) - set(self._emitted))
            raise RuntimeError(
                f"layer(s) {lost} were recorded in the first forward pass but "
                "not in this one; sign codes need the same layers every pass."
            )
        self._n_forward += 1

    def _check_token_shapes(self) -> None:
        """Per-token codes need every layer to have the same token axis."""
        shapes = self._first_shapes
        tokens = [(k, s) for k, s in shapes if len(s) == 3]
        if not tokens:
            return
        flat = [(k, s) for k, s in shapes if len(s) != 3]
        if flat:
            (key, shape), (tkey, _) = flat[0], tokens[0]
            raise ValueError(
                f"token-level codes (token_pool=None) need every selected layer "
                f"to have a token axis, but layer {key!r} gives a {len(shape)}-D "
                f"activation of shape {shape} beside the token layer {tkey!r}; "
                "select only token layers, or pool the tokens with "
                "token_pool='first' or token_pool='majority'."
            )
        lengths = {s[:2] for _, s in tokens}
        if len(lengths) > 1:
            raise ValueError(
                "token-level codes need the same (batch, tokens) in every "
                f"selected layer; got {sorted(lengths)} from "
                f"{[k for k, _ in tokens]}."
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
                _Pending(
                    act_name, positive_bits(_first_tensor(args, act_name), act_name)
                )
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
    keep_tokens: bool = False,
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
        See :func:`resolve_layers`. A name with a call suffix (``"act#1"``,
        as :attr:`SignRecorder.layers` names the calls of a module called
        several times) keeps only that call; ``recorder.layers`` passed back
        as `layers` gives the same code.
    conv_pool : {"quadrant", "flatten"}, default="quadrant"
        Pooling of conv maps; see :func:`pool_signs`.
    token_pool : {"first", "majority"} or None, default=None
        Pooling of token activations (N, T, U); see :func:`pool_signs`. The
        other selected layers of a token model (a pooler's (N, U) output)
        keep their units, but at least one selected layer must have a token
        axis (a ValueError after the first forward pass otherwise). Without
        it, a 3-D activation is an error, unless `keep_tokens`.
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
    keep_tokens : bool, default=False
        With ``token_pool=None``, keep one code per token of the token
        activations (N, T, U): ``pop_matrix()`` is then (N, T, n_bits) and
        :attr:`SignRecorder.per_token` is True. Every selected layer must then
        have the same token axis (a ValueError after the first forward pass
        otherwise). Padding tokens are kept: drop them with the mask.

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
    layers, only_calls = split_calls(module, layers)
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
        keep_tokens=keep_tokens,
        last_call_only=isinstance(layers, str) and layers == "last",
        only_calls=only_calls,
    )
    rec._specs = [name for _, name, _, _ in plan]
    pre: list[HookSpec] = []
    post: list[HookSpec] = []

    def guard(hook):
        """`hook`, noting any exception it raises in ``rec.error``."""

        def guarded(*args):
            try:
                return hook(*args)
            except Exception as exc:
                rec.error = exc
                raise

        return guarded

    pre.append((module, guard(lambda m, a: rec._start_forward())))
    for kind, name, layer, inner in plan:
        if kind == "input":
            pre.append((layer, guard(_make_input_hook(rec, name, name))))
        elif kind == "output":
            post.append((layer, guard(_make_output_hook(rec, name, name))))
        else:
            block_pre, block_post, act_pre, act_post = _make_block_hooks(
                rec, name, residual
            )
            pre.append((layer, guard(block_pre)))
            post.append((layer, guard(block_post)))
            for act_name, act in inner.items():
                pre.append((act, guard(act_pre(act_name))))
                post.append((act, guard(act_post)))
    post.append((module, guard(lambda m, a, o: rec._end_forward())))
    with forward_hooks(pre, post, eval_mode=module):
        yield rec
