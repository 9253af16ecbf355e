"""Argument checks shared by the torch building blocks (one error per mistake).

Every check raises a TypeError for a value of the wrong type (a float or a
bool where an int is needed, a number where a str is needed, something that
is not a sequence) and a ValueError for a value of the right type that is out
of range (0 or a negative size, an unknown option). The messages name the
parameter, in scikit-learn's form ("The 'x' parameter of Owner must be ...
Got ... instead.").

This module imports nothing from sksign: every module of :mod:`sksign.nn`
may use it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

__all__ = [
    "check_fraction",
    "check_n_concepts",
    "check_option",
    "check_positive",
    "check_sizes",
    "check_step_activation",
    "check_time_steps",
]


def _param(name: str, owner: str | None) -> str:
    return f"The {name!r} parameter" + (f" of {owner}" if owner else "")


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def check_positive(name: str, value: Any, owner: str | None = None) -> float:
    """A finite real number > 0, as a float.

    Examples
    --------
    >>> check_positive("k", 4, "ScaledSigmoid")
    4.0
    """
    what = f"{_param(name, owner)} must be a positive real number."
    if not _is_real(value):
        raise TypeError(f"{what} Got {value!r} instead.")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} Got {value!r} instead.")
    return value


def check_fraction(name: str, value: Any, owner: str | None = None) -> float:
    """A real number in [0, 1], as a float.

    Examples
    --------
    >>> check_fraction("alpha", 0.25, "sign_flip")
    0.25
    """
    what = f"{_param(name, owner)} must be a float in the range [0.0, 1.0]."
    if not _is_real(value):
        raise TypeError(f"{what} Got {value!r} instead.")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{what} Got {value!r} instead.")
    return float(value)


def check_option(
    name: str, value: Any, options: tuple[str, ...], owner: str | None = None
) -> str:
    """One of the strings `options`.

    Examples
    --------
    >>> check_option("reset", "zero", ("subtract", "zero"), "IFNeuron")
    'zero'
    """
    what = f"{_param(name, owner)} must be a str among {options}."
    if not isinstance(value, str):
        raise TypeError(f"{what} Got {value!r} instead.")
    if value not in options:
        raise ValueError(f"{what} Got {value!r} instead.")
    return value


def _check_count(name: str, value: Any) -> int:
    what = f"{_param(name, None)} must be an int >= 1."
    if not _is_int(value):
        raise TypeError(f"{what} Got {value!r} instead.")
    if value < 1:
        raise ValueError(f"{what} Got {value!r} instead.")
    return int(value)


def check_time_steps(time_steps: Any) -> int:
    """Validate ``time_steps`` (an int >= 1) and return it as an int.

    Examples
    --------
    >>> check_time_steps(4)
    4
    """
    return _check_count("time_steps", time_steps)


def check_n_concepts(n_concepts: Any) -> int:
    """Validate ``n_concepts`` (an int >= 1) and return it as an int.

    Examples
    --------
    >>> check_n_concepts(16)
    16
    """
    return _check_count("n_concepts", n_concepts)


def check_sizes(name: str, sizes: Any) -> tuple[int, ...]:
    """A sequence of ints >= 1 (or one int) as a tuple of ints.

    Examples
    --------
    >>> check_sizes("hidden_layer_sizes", [64, 32]), check_sizes("sizes", 8)
    ((64, 32), (8,))
    """
    if _is_int(sizes):
        sizes = (sizes,)
    what = f"{name} must be a sequence of ints"
    if isinstance(sizes, str | bytes):
        raise TypeError(f"{what}; got {sizes!r}.")
    try:
        items = tuple(sizes)
    except TypeError as exc:
        raise TypeError(f"{what}; got {sizes!r}.") from exc
    if not all(_is_int(s) for s in items):
        raise TypeError(f"{what}; got {sizes!r}.")
    if any(s < 1 for s in items):
        raise ValueError(f"{name} must hold positive ints; got {sizes!r}.")
    return tuple(int(s) for s in items)


def check_step_activation(
    activation: Any, architecture: str, step_activations: tuple[str, ...]
) -> str:
    """`activation` must be one of the step-like `step_activations`.

    Examples
    --------
    >>> check_step_activation("htaf", "bnn", ("htaf", "ste"))
    'htaf'
    """
    what = (
        f"architecture={architecture!r} needs a step-like activation, one of "
        f"{step_activations}."
    )
    if not isinstance(activation, str):
        raise TypeError(f"{what} Got activation={activation!r} instead.")
    if activation not in step_activations:
        raise ValueError(f"{what} Got activation={activation!r} instead.")
    return activation
