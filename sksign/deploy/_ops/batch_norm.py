"""``batch_norm``: a per-unit affine map of float rows (BatchNorm folded)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec


def prepare(layer, ctx):
    scale, shift = ctx.tensor(layer, "scale"), ctx.tensor(layer, "shift")

    def run(xs, n, n_threads):
        out = np.multiply(
            xs[0], scale, out=empty(xs[0].shape, np.result_type(xs[0], scale))
        )
        out += shift
        return out

    return run


SPEC = OpSpec(
    "float",
    "float",
    1,
    {},
    {"scale": ("float32", ("in",)), "shift": ("float32", ("in",))},
    arithmetic="scale, shift",
    prepare=prepare,
)
