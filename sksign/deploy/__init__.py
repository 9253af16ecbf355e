"""Packed bit inference of trained Heaviside, binary and spiking nets.

:func:`pack` turns a fitted step net (``HTAFNetClassifier``,
``HTAFNetRegressor`` or ``ICBMClassifier``) into a
:class:`PackedClassifier` or :class:`PackedRegressor` that runs on packed
bits: XNOR-popcount for binary weights on binary activations, sums of weight
rows over the active bits for real weights, biases and BatchNorm folded into
per-unit thresholds and scales. :func:`save` writes it to one small file
(safetensors layout, JSON layer graph) and :func:`load` reads it back with
numpy and numba alone: importing this package, loading and predicting never
import torch (only :func:`pack` does, to read the trained net).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import importlib

from sksign._public import public_names
from sksign.deploy._estimators import PackedClassifier, PackedRegressor
from sksign.deploy._persist import load, save
from sksign.deploy._runtime import PackedNet
from sksign.deploy._summary import packed_summary

__all__ = public_names("sksign.deploy")


def __getattr__(name):
    # pack and pack_ffn read torch modules: their modules (and torch) load on
    # first use only
    if name == "pack":
        return importlib.import_module("sksign.deploy._convert").pack
    if name == "pack_ffn":
        return importlib.import_module("sksign.deploy._convert_ffn").pack_ffn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
