"""Layer resolution: turn a layer specification into ``{name: module}``."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import Any

from torch import nn

from sksign.nn.hooks._kinds import (
    activation_kind,
    find_activations,
    is_gate,
    sign_breaking_setting,
)

__all__ = ["resolve_layers", "split_call", "split_calls"]

#: What :func:`resolve_layers` takes.
LayerSpec = str | type | tuple | Sequence[str | type]


_CALL = re.compile(r"^(?P<name>.+)#(?P<call>\d+)$")


def split_call(item: str, names: Iterable[str]) -> tuple[str, int | None]:
    """``"name#k"`` -> ``("name", k)``: a module name with a call suffix.

    Sign-code keys name call `k` of a module called several times per forward
    pass ``name#k`` (:func:`~sksign.nn.hooks.call_key`); `item` is returned
    as ``(item, None)`` when it is a module name itself or has no suffix.

    Parameters
    ----------
    item : str
        A layer name, as ``SignCodeTransformer.layers_`` lists them.
    names : iterable of str
        The module names of the net.

    Returns
    -------
    name : str
    call : int or None

    Examples
    --------
    >>> split_call("block.relu#1", ["block", "block.relu"])
    ('block.relu', 1)
    >>> split_call("block.relu", ["block", "block.relu"])
    ('block.relu', None)
    """
    names = set(names)
    match = _CALL.match(item)
    if item in names or match is None or match["name"] not in names:
        return item, None
    return match["name"], int(match["call"])


def _is_pattern(name: str) -> bool:
    return any(ch in name for ch in "*?[")


def _describe_available(module: nn.Module, limit: int = 40) -> str:
    acts = list(find_activations(module, include_non_sign_preserving=True))
    others = [n for n, _ in module.named_modules() if n and n not in acts]
    more = f", ... ({len(others) - limit} more)" if len(others) > limit else ""
    acts_txt = ", ".join(acts) if acts else "(none)"
    others_txt = ", ".join(others[:limit]) if others else "(none)"
    return f"activation layers: {acts_txt}; other modules: {others_txt}{more}"


def _check_sign_preserving(
    name: str, layer: nn.Module, allow_non_sign_preserving: bool
) -> None:
    if allow_non_sign_preserving or activation_kind(layer) != "non_sign":
        return
    setting = sign_breaking_setting(layer)
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
          (an output or gate) is passed over. :func:`record_signs` records
          only that module's last call of each forward pass (the S_out of a
          residual block whose one ReLU module is called twice), keyed by its
          call as in "all" (``"block.relu#1"``).
        - "all": every sign-preserving activation module.

          With ``allow_non_sign_preserving=True`` both also consider sigmoid,
          softplus and the like. Without it, a LeakyReLU/PReLU/RReLU with a
          negative slope (or an ELU with a negative alpha) that "all" would
          cover, or that comes last, raises rather than being passed over.
        - a name of ``named_modules()`` or a list of names (for
          :func:`record_signs`, a name may end with a call suffix ``#k``, as
          sign-code keys do for a module called several times per forward
          pass: ``"block.relu#1"`` keeps only that call). Names may hold
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
    TypeError
        For a `layers` that is neither a name, a type nor a list of them.

    Examples
    --------
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 3), nn.Tanh())
    >>> list(resolve_layers(net)), list(resolve_layers(net, "all"))
    (['3'], ['1', '3'])
    >>> list(resolve_layers(net, nn.Linear))
    ['0', '2']
    """
    named = {name: m for name, m in module.named_modules() if name}
    owner = type(module).__name__
    if isinstance(layers, str) and layers in ("last", "all"):
        acts = {
            name: m
            for name, m in find_activations(
                module, include_non_sign_preserving=True
            ).items()
            if allow_non_sign_preserving or not is_gate(m)
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
            sign_acts = [n for n in any_acts if not is_gate(named[n])]
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


def split_calls(
    module: nn.Module, layers: LayerSpec
) -> tuple[LayerSpec, dict[str, frozenset[int]]]:
    """`layers` without call suffixes, and the calls it asks for by key.

    What :func:`record_signs` and the interventions read a layer
    specification with: the stripped specification goes to
    :func:`resolve_layers`, the calls select which calls of a module (per
    forward pass, 0 first) are recorded or intervened on; a module absent
    from the mapping has all its calls selected.

    ``["act", "act#2"]`` -> ``(["act", "act"], {"act": {0, 2}})``. A module
    named only without a call suffix keeps all its calls; named with
    suffixes, its plain name is the key of its first call (as
    ``SignRecorder.layers`` lists them, so that they round-trip).
    """
    if isinstance(layers, str):
        if layers in ("last", "all"):
            return layers, {}
        items = [layers]
    elif isinstance(layers, Sequence) and not (
        isinstance(layers, tuple) and all(isinstance(t, type) for t in layers)
    ):
        items = list(layers)
    else:  # a type or a tuple of types
        return layers, {}
    names = [name for name, _ in module.named_modules() if name]
    wanted: dict[str, set[int]] = {}
    plain: set[str] = set()
    stripped: list[Any] = []
    for item in items:
        if not isinstance(item, str):
            stripped.append(item)
            continue
        name, call = split_call(item, names)
        stripped.append(name)
        if call is None:
            plain.add(name)
        else:
            wanted.setdefault(name, set()).add(call)
    if not wanted:
        return layers, {}
    only = {
        name: frozenset(calls | ({0} if name in plain else set()))
        for name, calls in wanted.items()
    }
    return stripped, only
