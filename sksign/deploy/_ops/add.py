"""``add``: the sum of two float values (a residual connection)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec


def prepare(layer, ctx):
    def run(xs, n, n_threads):
        a, b = xs
        dtype = a.dtype if a.dtype == b.dtype else np.result_type(a, b)
        return np.add(a, b, empty(a.shape, dtype))

    return run


SPEC = OpSpec(
    "float",
    "float",
    2,
    {},
    {},
    keeps_shape=True,
    arithmetic="float add",
    prepare=prepare,
)
