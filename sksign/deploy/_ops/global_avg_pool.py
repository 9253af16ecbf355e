"""``global_avg_pool``: the mean over the pixels of channels-last float maps."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import OpSpec
from sksign.deploy._ops._common import one_pixel


def prepare(layer, ctx):
    c, h, w = layer["attrs"]["shape"]

    def run(xs, n, n_threads):
        sums = xs[0].reshape(xs[0].shape[0], h * w, c).sum(axis=1, dtype=np.float64)
        return (sums / (h * w)).astype(np.float32)

    return run


SPEC = OpSpec(
    "float",
    "float",
    1,
    {"shape": list, "out": int},
    {},
    layout="nhwc",
    geometry=one_pixel,
    arithmetic="average",
    prepare=prepare,
)
