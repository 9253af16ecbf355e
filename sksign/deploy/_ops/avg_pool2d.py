"""``avg_pool2d``: ``k x k`` average pooling (stride ``k``) of channels-last maps."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import mean_pool
from sksign.deploy._ops._common import run_rows


def geometry(shape, attrs):
    c, h, w = shape
    k = attrs["kernel"]
    if k < 1 or h < k or w < k:
        raise ValueError("invalid pooling size")
    return c, h // k, w // k


def prepare(layer, ctx):
    c, h, w = layer["attrs"]["shape"]
    k = layer["attrs"]["kernel"]
    pixels = (h // k) * (w // k)

    def run(xs, n, n_threads):
        rows = xs[0].shape[0] * pixels
        out = empty((rows, c), np.float32)
        run_rows(mean_pool, rows, n_threads, xs[0].reshape(-1), h, w, c, k, out)
        return out.reshape(xs[0].shape[0], -1)

    return run


SPEC = OpSpec(
    "float",
    "float",
    1,
    {"shape": list, "kernel": int, "out": int},
    {},
    layout="nhwc",
    geometry=geometry,
    arithmetic="average",
    prepare=prepare,
)
