"""Every activation of the estimators, built by name.

:func:`make_activation` builds any activation of :data:`ACTIVATIONS`; every
network builder of :mod:`sksign.nn` takes its activations from it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from torch import nn

from sksign.nn.activations._baselines import ScaledSigmoid, STEHeaviside
from sksign.nn.activations._htaf import HTAF

__all__ = ["ACTIVATIONS", "STEP_ACTIVATIONS", "make_activation"]

#: Activation names accepted by :func:`make_activation` and the estimators.
ACTIVATIONS = ("htaf", "ste", "scaled_sigmoid", "relu", "silu", "gelu", "tanh")
#: Step-like activations: exact Heaviside step at inference.
STEP_ACTIVATIONS = ("htaf", "ste", "scaled_sigmoid")


def make_activation(name: str, alpha0: float = 2.0, alpha1: float = 11.0) -> nn.Module:
    """Build the activation module called `name` (one of :data:`ACTIVATIONS`).

    "scaled_sigmoid" uses ``k = alpha0 * alpha1`` (the same slope at 0 as the
    HTAF with those parameters); "ste" uses the clipped-identity surrogate.

    Parameters
    ----------
    name : str
        One of :data:`ACTIVATIONS`.
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.

    Returns
    -------
    nn.Module

    Examples
    --------
    >>> make_activation("htaf", 1.0, 22.0)
    HTAF(alpha0=1, alpha1=22, mode='auto')
    >>> make_activation("scaled_sigmoid", 2.0, 11.0)
    ScaledSigmoid(k=22, mode='auto')
    """
    if name == "htaf":
        return HTAF(alpha0, alpha1)
    if name == "ste":
        return STEHeaviside()
    if name == "scaled_sigmoid":
        return ScaledSigmoid(k=float(alpha0) * float(alpha1))
    plain = {"relu": nn.ReLU, "silu": nn.SiLU, "gelu": nn.GELU, "tanh": nn.Tanh}
    if name in plain:
        return plain[name]()
    raise ValueError(
        f"The 'activation' parameter must be one of {ACTIVATIONS}. "
        f"Got {name!r} instead."
    )
