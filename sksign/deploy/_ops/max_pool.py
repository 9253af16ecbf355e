"""``max_pool``: 2 x 2 max pooling of channels-first bit maps."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.deploy._format import OpSpec
from sksign.deploy._ops._common import pack_rows, unpack_rows


def geometry(shape, attrs):
    c, h, w = shape
    return c, h // 2, w // 2


def prepare(layer, ctx):
    c, h, w = layer["attrs"]["shape"]
    width = ctx.width(layer)

    def run(xs, n, n_threads):
        maps = unpack_rows(xs[0], width).reshape(n, c, h, w)
        maps = maps[:, :, : h - h % 2, : w - w % 2]
        pooled = maps.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))
        return pack_rows(pooled.reshape(n, -1))

    return run


SPEC = OpSpec(
    "bits",
    "bits",
    1,
    {"shape": list, "out": int},
    {},
    layout="nchw",
    geometry=geometry,
    arithmetic="OR of bits",
    prepare=prepare,
)
