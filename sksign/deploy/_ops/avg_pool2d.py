"""``avg_pool2d``: ``k x k`` average pooling (stride ``k``) of channels-last maps."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import OpSpec


def geometry(shape, attrs):
    c, h, w = shape
    k = attrs["kernel"]
    if k < 1 or h < k or w < k:
        raise ValueError("invalid pooling size")
    return c, h // k, w // k


def prepare(layer, ctx):
    c, h, w = layer["attrs"]["shape"]
    k = layer["attrs"]["kernel"]
    ho, wo = h // k, w // k

    def run(xs, n, n_threads):
        n = xs[0].shape[0]
        maps = xs[0].reshape(n, h, w, c)[:, : ho * k, : wo * k]
        sums = maps.reshape(n, ho, k, wo, k, c).sum(axis=(2, 4), dtype=np.float64)
        return (sums / (k * k)).astype(np.float32).reshape(n, -1)

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
