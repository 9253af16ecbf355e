"""``relu``: ``max(x, 0)`` of float rows."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec


def prepare(layer, ctx):
    def run(xs, n, n_threads):
        return np.maximum(xs[0], np.float32(0), out=empty(xs[0].shape, xs[0].dtype))

    return run


SPEC = OpSpec("float", "float", 1, {}, {}, arithmetic="max(x, 0)", prepare=prepare)
