"""``step``: ``1[x >= 0]`` of float rows, packed into bits."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import pack_ge
from sksign.deploy._ops._common import run_rows


def prepare(layer, ctx):
    width = ctx.width(layer)
    zeros = np.zeros(width, dtype=np.float32)

    def run(xs, n, n_threads):
        x = xs[0]
        out = empty((x.shape[0], -(-width // 64)), np.uint64)
        run_rows(pack_ge, x.shape[0], n_threads, x, zeros, out)
        return out

    return run


SPEC = OpSpec("float", "bits", 1, {}, {}, arithmetic="1[x >= 0]", prepare=prepare)
