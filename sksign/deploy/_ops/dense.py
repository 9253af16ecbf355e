"""``dense``: float rows times a float32 weight matrix, plus a bias.

With ``float64``, in float64 (the copies are made once, at load).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import OpSpec
from sksign.deploy._ops._common import blas_product


def prepare(layer, ctx):
    w, b = ctx.tensor(layer, "weight"), ctx.tensor(layer, "bias")
    if layer["attrs"]["float64"]:
        w64 = np.ascontiguousarray(w.T, dtype=np.float64)
        b64 = b.astype(np.float64)

        def run(xs, n, n_threads):
            out = blas_product(xs[0].astype(np.float64), w64, n_threads)
            out += b64
            return out.astype(np.float32)

        return run

    def run(xs, n, n_threads):
        out = blas_product(xs[0], w.T, n_threads)
        out += b
        return out

    return run


SPEC = OpSpec(
    "float",
    "float",
    1,
    {"out": int, "float64": bool},
    {"weight": ("float32", ("out", "in")), "bias": ("float32", ("out",))},
    arithmetic="float x float",
    prepare=prepare,
)
