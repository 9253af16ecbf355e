"""Causal interventions on sign and magnitude as context managers over any module.

Implements the two interventions of the Sign Code paper on
the activation modules of any ``nn.Module``. Every hidden unit of a
sign-preserving activation splits as ``h = phi(z) = S * M`` with
``S = +1 iff z > 0`` (else -1) and ``M = |h|``.

- :func:`sign_flip` (destroy routing, keep magnitude): with probability
  ``alpha`` per unit and per sample, ``"literal"`` replaces ``h`` by ``-h``
  and ``"gate"`` replaces it by ``phi(-z)`` (what the unit would output had its
  pre-activation the other sign). The corruption propagates forward.
- :func:`magnitude_randomization` (destroy magnitude, keep routing): every
  forward pass of the module runs twice: a clean pass caches each hooked
  layer's sign ``S_clean``; the second pass recomputes each pre-activation
  from the (corrupted) previous layer, replaces the magnitude ``|phi(z)|``
  with probability ``alpha`` by ``|eta|`` and outputs ``h = S_clean * M``.
  ``eta ~ N(0, 1)`` ("standard") or ``|eta|`` rescaled per unit and per sign
  to have mean ``mu_j(S)`` ("matched", see :func:`reference_magnitudes`).

Step-like units (:class:`~sksign.nn.activations.StepActivation`: HTAF, STE,
scaled sigmoid) output a function of their sign alone, so they carry no
magnitude: the magnitude intervention forces them back to their clean output
(the projection) and draws no noise for them.

Randomness comes only from the ``torch.Generator`` passed in (the global torch
RNG is never used), so the same seed gives the same corruption. Hooks are
removed in ``finally``, also after an exception. These context managers do not
change train/eval mode or gradient mode; callers choose them.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import nn

from sksign.nn._validation import check_fraction, check_option
from sksign.nn.activations import StepActivation
from sksign.nn.hooks import (
    activation_kind,
    call_key,
    forward_hooks,
    resolve_layers,
    split_calls,
)

__all__ = [
    "FLIPS",
    "NOISES",
    "magnitude_randomization",
    "reference_magnitudes",
    "sign_flip",
]

#: Sign-flip definitions accepted by :func:`sign_flip`.
FLIPS = ("literal", "gate")
#: Noise definitions accepted by :func:`magnitude_randomization`.
NOISES = ("standard", "matched")

# Mean of |N(0, 1)|.
_HALF_NORMAL_MEAN = math.sqrt(2.0 / math.pi)


def _layer_dict(module: nn.Module, layers) -> tuple[dict[str, nn.Module], dict]:
    """Name -> activation module (a mapping as is, else ``resolve_layers``),
    and the calls per forward pass chosen by call keys (``"act#1"``; a module
    absent from it has all its calls chosen).

    Interventions act on activation modules only (they need both the input z
    and the output phi(z)); a Linear or a block raises.
    """
    if isinstance(layers, Mapping):
        named, only = dict(layers), {}
    else:
        layers, only = split_calls(module, layers)
        named = resolve_layers(module, layers)
    if not named:
        raise ValueError(
            f"No activation layer to intervene on in {type(module).__name__}."
        )
    for name, layer in named.items():
        kind = activation_kind(layer)
        if kind != "sign":
            what = "not sign-preserving" if kind == "non_sign" else "no activation"
            raise ValueError(
                f"layer {name!r} is a {type(layer).__name__}, which is {what}; "
                "interventions act on sign-preserving activation modules (ReLU, "
                "SiLU, GELU, tanh, HTAF, ...): they need the activation's input "
                "z and output phi(z)."
            )
    return named, only


class _PassCalls:
    """How many times each layer was called in the current forward pass of
    `module` (its pre-hook ``root_hook`` starts every pass at 0)."""

    def __init__(self, module: nn.Module, names) -> None:
        self.calls = dict.fromkeys(names, 0)
        self.root_hook = (module, self._reset)

    def _reset(self, _mod, _args) -> None:
        for name in self.calls:
            self.calls[name] = 0

    def next(self, name: str) -> int:
        """The index (0 first) of this call of layer `name`, counted."""
        i = self.calls[name]
        self.calls[name] += 1
        return i


def _default_generator(device=None) -> torch.Generator:
    gen = torch.Generator(device=device) if device is not None else torch.Generator()
    gen.seed()
    return gen


def _uniform(shape, generator: torch.Generator, device) -> torch.Tensor:
    return torch.rand(shape, generator=generator, device=generator.device).to(device)


def _normal(shape, generator: torch.Generator, device) -> torch.Tensor:
    return torch.randn(shape, generator=generator, device=generator.device).to(device)


def _mask(shape, alpha: float, generator: torch.Generator, device):
    """Bernoulli(alpha) mask, or None for alpha == 0 (no draw, exact no-op)."""
    if alpha <= 0.0:
        return None
    if alpha >= 1.0:
        return torch.ones(shape, dtype=torch.bool, device=device)
    return _uniform(shape, generator, device) < alpha


@contextmanager
def sign_flip(
    module: nn.Module,
    layers="all",
    *,
    alpha: float = 0.2,
    flip: str = "literal",
    generator: torch.Generator | None = None,
) -> Iterator[dict[str, nn.Module]]:
    """Flip hidden units' signs with probability `alpha` during every forward.

    Parameters
    ----------
    module : nn.Module
        Any network.
    layers : "last", "all", list of str, type or mapping, default="all"
        Activation modules to intervene on: a mapping name -> module, or a
        spec resolved by :func:`sksign.nn.hooks.resolve_layers`. A name with
        a call suffix (``"act#1"``, as sign-code keys name the calls of a
        module called several times per forward pass) intervenes on that
        call only; a plain name on every call.
    alpha : float in [0, 1], default=0.2
        Probability of a flip, independently per unit and per sample.
    flip : {"literal", "gate"}, default="literal"
        "literal": ``h -> -h`` (keeps ``M = |h|``; an inactive ReLU unit stays
        0). "gate": ``h -> phi(-z)``, the activation of the negated
        pre-activation (an inactive ReLU unit opens with ``|z|``; a step unit
        gives ``H(-z)``, essentially ``1 - H(z)``).
    generator : torch.Generator, default=None
        Source of the flips; a fresh, randomly seeded one when None.

    Yields
    ------
    layers : dict of str to nn.Module
        The hooked activation modules.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    >>> x = torch.randn(5, 3)
    >>> with sign_flip(net, alpha=1.0) as hooked, torch.no_grad():
    ...     flipped = net[1](net[0](x))
    >>> list(hooked), torch.equal(flipped, -torch.tanh(net[0](x)))
    (['1'], True)
    """
    alpha = check_fraction("alpha", alpha, "sign_flip")
    flip = check_option("flip", flip, FLIPS, "sign_flip")
    named, only = _layer_dict(module, layers)
    gen = generator if generator is not None else _default_generator()
    # the calls of the layers named with call keys (none: every call)
    counter = _PassCalls(module, only)
    root_hooks = [counter.root_hook] if only else []

    def _make_hooks(name: str, act: nn.Module):
        saved: list[torch.Tensor] = []
        inplace = bool(getattr(act, "inplace", False))

        def _pre_hook(_m, inp):
            if flip == "gate":
                z = inp[0]
                saved.append(z.clone() if inplace else z)

        def _forward_hook(m, _inp, out):
            z = saved.pop() if flip == "gate" else None
            if name in only and counter.next(name) not in only[name]:
                return None
            mask = _mask(out.shape, alpha, gen, out.device)
            if mask is None:
                return None
            alt = -out if flip == "literal" else m.forward(-z)
            return torch.where(mask, alt, out)

        return _pre_hook, _forward_hook

    hooks = [(act, _make_hooks(name, act)) for name, act in named.items()]
    with forward_hooks(
        pre=[*root_hooks, *((act, fn) for act, (fn, _) in hooks)],
        post=[(act, fn) for act, (_, fn) in hooks],
    ):
        yield named


@contextmanager
def magnitude_randomization(
    module: nn.Module,
    layers="all",
    *,
    alpha: float = 0.2,
    noise: str = "standard",
    mu: Mapping[str, torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
) -> Iterator[dict[str, nn.Module]]:
    """Projected magnitude randomisation during every forward of `module`.

    Each call ``module(x)`` inside the context costs two forward passes: a
    clean one that caches the sign ``S_clean = (z > 0)`` of every hooked unit,
    then the intervened one, whose output is returned. In the second pass
    each hooked layer recomputes ``z`` from the corrupted previous layer,
    takes ``M = |phi(z)|``, replaces it with probability `alpha` by noise and
    outputs ``h = S_clean * M`` (``+M`` where the clean sign is +1, ``-M``
    where it is -1: for a ReLU unit with ``S = -1`` this gives ``-M``, the
    paper's literal projection). Step-like units output their clean value.

    Parameters
    ----------
    module : nn.Module
        Any network whose forward may be called twice on the same input.
    layers : "last", "all", list of str, type or mapping, default="all"
        Activation modules to intervene on (see :func:`sign_flip`).
    alpha : float in [0, 1], default=0.2
        Probability of replacing a magnitude, per unit and per sample.
    noise : {"standard", "matched"}, default="standard"
        "standard": ``|eta|``, ``eta ~ N(0, 1)``. "matched": ``|eta|`` times
        ``mu_j(S) / sqrt(2 / pi)`` so its mean is ``mu_j(S)``, the unit's mean
        magnitude given its clean sign.
    mu : mapping of str to torch.Tensor, default=None
        Needed for ``noise="matched"``: per layer name, a tensor of shape
        ``(2, *unit_shape)`` with ``mu[0] = mu_j(-1)`` and ``mu[1] = mu_j(+1)``
        (see :func:`reference_magnitudes`).
    generator : torch.Generator, default=None
        Source of the mask and the noise; fresh and randomly seeded when None.

    Yields
    ------
    layers : dict of str to nn.Module
        The hooked activation modules.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    >>> x = torch.randn(5, 3)
    >>> gen = torch.Generator().manual_seed(0)
    >>> with torch.no_grad():
    ...     clean = net(x)
    ...     with magnitude_randomization(net, alpha=0.0, generator=gen):
    ...         same = net(x)
    >>> torch.allclose(clean, same)
    True
    """
    alpha = check_fraction("alpha", alpha, "magnitude_randomization")
    noise = check_option("noise", noise, NOISES, "magnitude_randomization")
    named, only = _layer_dict(module, layers)
    if noise == "matched":
        missing = [name for name in named if mu is None or name not in mu]
        if missing:
            raise ValueError(
                "noise='matched' needs reference magnitudes mu for every hooked "
                f"layer; missing {missing}. Compute them with reference_magnitudes."
            )
    gen = generator if generator is not None else _default_generator()
    # phase: None (idle), "clean" (first pass), "project" (second pass).
    state: dict = {"phase": None}
    signs: dict[str, list[torch.Tensor]] = {name: [] for name in named}
    clean_out: dict[str, list[torch.Tensor]] = {name: [] for name in named}
    calls: dict[str, int] = dict.fromkeys(named, 0)

    def _reset():
        for name in named:
            signs[name].clear()
            clean_out[name].clear()
            calls[name] = 0

    def _root_pre_hook(mod, args, kwargs):
        if state["phase"] == "clean":
            return None  # the nested clean call below
        _reset()
        state["phase"] = "clean"
        try:
            mod(*args, **kwargs)
        finally:
            state["phase"] = "project"
        return None

    def _root_hook(_mod, _args, _kwargs, _out):
        if state["phase"] == "project":
            state["phase"] = None
            _reset()

    scales: dict[str, torch.Tensor] = {}

    def _scale(name: str, i: int) -> torch.Tensor:
        """mu / sqrt(2/pi) of call `i` of layer `name` (keys as in the code)."""
        key = call_key(name, i)
        if key not in scales:
            if key not in mu:
                raise ValueError(
                    f"noise='matched' needs reference magnitudes for call {i + 1} "
                    f"of layer {name!r} in one forward pass (key {key!r}); compute "
                    "mu with reference_magnitudes on the same net."
                )
            scales[key] = torch.as_tensor(mu[key]) / _HALF_NORMAL_MEAN
        return scales[key]

    def _make_hooks(name: str, act: nn.Module):
        step_like = isinstance(act, StepActivation)

        def _pre_hook(_m, inp):
            if state["phase"] == "clean":
                signs[name].append((inp[0] > 0).detach())

        def _forward_hook(_m, _inp, out):
            phase = state["phase"]
            if phase == "clean":
                if step_like:
                    clean_out[name].append(out.detach().clone())
                return None
            if phase != "project":
                return None
            i = calls[name]
            calls[name] += 1
            if name in only and i not in only[name]:
                return None  # a call the layer's call keys leave out
            if step_like:
                return clean_out[name][i]
            s = signs[name][i]
            if s.shape != out.shape:
                raise RuntimeError(
                    f"Layer {name!r} gave shape {tuple(out.shape)} in the "
                    f"intervened pass but {tuple(s.shape)} in the clean pass."
                )
            mag = out.abs()
            mask = _mask(out.shape, alpha, gen, out.device)
            if mask is not None:
                eta = _normal(out.shape, gen, out.device).abs()
                if noise == "matched":
                    sc = _scale(name, i).to(device=out.device, dtype=out.dtype)
                    eta = eta * torch.where(s, sc[1], sc[0])
                mag = torch.where(mask, eta.to(out.dtype), mag)
            return torch.where(s, mag, -mag)

        return _pre_hook, _forward_hook

    hooks = [(act, _make_hooks(name, act)) for name, act in named.items()]
    try:
        with forward_hooks(
            pre=[(act, fn) for act, (fn, _) in hooks],
            post=[(act, fn) for act, (_, fn) in hooks],
            pre_with_kwargs=[(module, _root_pre_hook)],
            post_with_kwargs=[(module, _root_hook)],
        ):
            yield named
    finally:
        _reset()


def reference_magnitudes(
    module: nn.Module,
    layers,
    batches: Iterable,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Per-unit mean magnitude given the sign, ``mu_j(s) = E[M_j | S_j = s]``.

    Runs `module` on every batch (under ``torch.no_grad``; the caller sets the
    mode, usually eval) and averages ``M = |phi(z)|`` separately over the
    samples where ``z > 0`` (``S = +1``) and where ``z <= 0`` (``S = -1``).

    Parameters
    ----------
    module : nn.Module
        The network.
    layers : "last", "all", list of str, type or mapping
        Activation modules (see :func:`sign_flip`).
    batches : iterable of torch.Tensor or tuple
        Reference inputs; a tuple is unpacked as positional arguments.

    Returns
    -------
    mu : dict of str to torch.Tensor of shape ``(2, *unit_shape)``, float64
        ``mu[name][0]`` is ``mu_j(-1)``, ``mu[name][1]`` is ``mu_j(+1)``. A
        unit that never takes sign ``s`` on the reference data gets
        ``mu_j(s) = 0`` (so "matched" noise for it is 0). A module called
        several times in one forward pass gets one entry per call, keyed
        ``name``, ``name#1``, ... as in the sign code.
    counts : dict of str to torch.Tensor of shape ``(2, *unit_shape)``, int64
        How many reference samples had each sign (per call).

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> act = nn.Sequential(nn.ReLU())
    >>> mu, counts = reference_magnitudes(act, "all", [torch.tensor([[2.0, -1.0]])])
    >>> mu["0"].tolist(), counts["0"].tolist()
    ([[0.0, 0.0], [2.0, 0.0]], [[0, 1], [1, 0]])
    """
    named, _ = _layer_dict(module, layers)  # every call of each module
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, torch.Tensor] = {}
    saved: dict[str, list[torch.Tensor]] = {name: [] for name in named}
    counter = _PassCalls(module, named)

    def _make_hooks(name: str):
        def _pre_hook(_m, inp):
            saved[name].append((inp[0] > 0).detach())

        def _forward_hook(_m, _inp, out):
            pos = saved[name].pop()
            key = call_key(name, counter.next(name))
            mag = out.detach().abs().to(torch.float64)
            stack_s = torch.stack([(~pos).sum(0), pos.sum(0)]).to(torch.int64)
            stack_m = torch.stack([(mag * ~pos).sum(0), (mag * pos).sum(0)])
            if key in sums:
                sums[key] += stack_m
                counts[key] += stack_s
            else:
                sums[key], counts[key] = stack_m, stack_s

        return _pre_hook, _forward_hook

    hooks = [(act, _make_hooks(name)) for name, act in named.items()]
    pre_hooks = [counter.root_hook] + [(act, fn) for act, (fn, _) in hooks]
    post_hooks = [(act, fn) for act, (_, fn) in hooks]
    with forward_hooks(pre_hooks, post_hooks), torch.no_grad():
        for batch in batches:
            if isinstance(batch, tuple | list):
                module(*batch)
            else:
                module(batch)
    if not sums:
        raise ValueError("reference_magnitudes got no reference batch.")
    mu = {
        key: torch.where(
            counts[key] > 0,
            sums[key] / counts[key].clamp(min=1),
            torch.zeros_like(sums[key]),
        )
        for key in sums
    }
    return mu, counts
