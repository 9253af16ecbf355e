"""What the converters of pack() share: the graph builder and layer checks.

Imports torch (only :func:`sksign.deploy.pack` loads it): the converters read
the trained torch modules.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from sksign.nn.activations import StepActivation

__all__ = [
    "Builder",
    "as_f32",
    "as_f64",
    "bn_affine",
    "check_step",
    "image_step_check",
]


def as_f64(t):
    """A torch tensor as a float64 numpy array (on the CPU)."""
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()


def as_f32(a):
    """A C-contiguous float32 copy (or view) of `a`."""
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def check_step(name, module, where="hidden"):
    """Raise unless `module` is the exact step at inference."""
    if isinstance(module, StepActivation) and module.mode != "smooth":
        return
    if isinstance(module, StepActivation):
        why = "is forced to its smooth function (mode='smooth')"
    else:
        why = f"is {type(module).__name__}, not a step activation"
    raise ValueError(
        f"Cannot pack layer {name!r}: it {why}. Only {where} layers that are the "
        "exact step 1[x >= 0] at inference (activation 'htaf', 'ste' or "
        "'scaled_sigmoid') run on bits."
    )


def image_step_check(net_type):
    """_check_step whose message names the image net's type as well."""

    def check(name, module):
        try:
            check_step(name, module)
        except ValueError as exc:
            raise ValueError(f"Cannot pack a net of type {net_type}: {exc}") from None

    return check


class Builder:
    """Collects layers and tensors; tracks the current value and its kind."""

    def __init__(self, n_features):
        self.layers, self.tensors = [], {}
        self.value, self.kind, self.width = "input", "float", n_features

    def add(self, name, op, inputs, attrs=None, tensors=None, kind="float", width=None):
        names = {}
        for key, arr in (tensors or {}).items():
            names[key] = f"{name}.{key}"
            self.tensors[names[key]] = arr
        out = name
        self.layers.append(
            {
                "name": name,
                "op": op,
                "inputs": list(inputs),
                "output": out,
                "attrs": attrs or {},
                "tensors": names,
            }
        )
        self.value, self.kind = out, kind
        if width is not None:
            self.width = width
        return out

    def linear(self, name, layer, *, readout=False, then_step=False):
        """A Linear layer on the current value (float rows or bits)."""
        w = as_f64(layer.weight)
        b = as_f64(layer.bias) if layer.bias is not None else np.zeros(len(w))
        out_width = w.shape[0]
        if self.kind == "float":
            # float32 as in torch; a readout sums in float64 as Readout does
            return self.add(
                name,
                "dense",
                [self.value],
                {"out": out_width, "float64": readout},
                {"weight": as_f32(w), "bias": as_f32(b)},
                width=out_width,
            )
        if then_step:
            return self.add(
                name,
                "bit_dense_step",
                [self.value],
                {"out": out_width},
                {"weight_t": as_f32(w.T), "threshold": as_f32(-b)},
                kind="bits",
                width=out_width,
            )
        return self.add(
            name,
            "bit_dense",
            [self.value],
            {"out": out_width, "float64": readout},
            {"weight_t": as_f32(w.T), "bias": as_f32(b)},
            width=out_width,
        )

    def step(self, name):
        return self.add(name, "step", [self.value], kind="bits")

    def batch_norm(self, name, bn, inputs=None):
        scale, shift = bn_affine(name, bn)
        return self.add(
            name,
            "batch_norm",
            inputs or [self.value],
            tensors={"scale": as_f32(scale), "shift": as_f32(shift)},
        )


def bn_affine(name, bn, kind=nn.BatchNorm1d):
    """``(scale, shift)`` of an eval-mode BatchNorm of type `kind` (float64)."""
    if not isinstance(bn, kind) or bn.running_mean is None:
        raise ValueError(
            f"Cannot pack layer {name!r}: a {kind.__name__} with running "
            f"statistics is expected; got {bn!r}."
        )
    var = as_f64(bn.running_var)
    scale = 1.0 / np.sqrt(var + bn.eps)
    if bn.weight is not None:
        scale = scale * as_f64(bn.weight)
    shift = -as_f64(bn.running_mean) * scale
    if bn.bias is not None:
        shift = shift + as_f64(bn.bias)
    return scale, shift
