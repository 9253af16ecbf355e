"""Activation kinds: which modules are activations, and which keep the sign.

The sign code of a unit is the sign of its pre-activation, which the output
of a sign-preserving activation keeps (for ``z != 0``): ReLU, tanh, GELU, the
step-like HTAF family, ... The allow-list below decides what counts as one;
sigmoid, softplus and the like do not.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from typing import Literal

from torch import nn

from sksign.nn.activations import StepActivation

__all__ = [
    "activation_kind",
    "find_activations",
    "is_gate",
    "sign_breaking_setting",
]

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


def sign_breaking_setting(module: nn.Module) -> str | None:
    """The setting that keeps a usually sign-preserving module from being one.

    (Shared by this package's layer checks; not public.)

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

    Examples
    --------
    >>> from torch import nn
    >>> activation_kind(nn.ReLU()), activation_kind(nn.Sigmoid())
    ('sign', 'non_sign')
    >>> activation_kind(nn.LeakyReLU(-0.1)), activation_kind(nn.Linear(2, 2))
    ('non_sign', None)
    """
    if isinstance(module, _SIGN_PRESERVING_TYPES):
        return "non_sign" if sign_breaking_setting(module) else "sign"
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

    Examples
    --------
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1), nn.Sigmoid())
    >>> list(find_activations(net))
    ['1']
    >>> list(find_activations(net, include_non_sign_preserving=True))
    ['1', '3']
    """
    wanted = ("sign", "non_sign") if include_non_sign_preserving else ("sign",)
    return {
        name: m
        for name, m in module.named_modules()
        if name and activation_kind(m) in wanted
    }


def is_gate(module: nn.Module) -> bool:
    """An activation that "last", "all" and wildcards pass over: one that is not
    sign-preserving by kind (sigmoid, softmax, ...; an output or a gate). A
    ReLU-family module that only a setting breaks (a negative slope) is a
    hidden layer, kept so that the sign-preserving check refuses it."""
    return activation_kind(module) == "non_sign" and not isinstance(
        module, _SIGN_PRESERVING_TYPES
    )
