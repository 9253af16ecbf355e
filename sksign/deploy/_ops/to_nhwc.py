"""``to_nhwc``: channels-first float maps laid out channels last."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._ops._common import same_maps


def prepare(layer, ctx):
    c, h, w = layer["attrs"]["shape"]

    def run(xs, n, n_threads):
        n = xs[0].shape[0]
        maps = xs[0].reshape(n, c, h, w).transpose(0, 2, 3, 1)
        out = empty(maps.shape, maps.dtype)
        np.copyto(out, maps)
        return out.reshape(n, -1)

    return run


SPEC = OpSpec(
    "float",
    "float",
    1,
    {"shape": list},
    {},
    layout="nhwc",
    geometry=same_maps,
    arithmetic="channels last",
    prepare=prepare,
)
