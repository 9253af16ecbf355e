"""``bit_global_avg_pool``: the share of 1 bits of each channel of ``pixel_bits``."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import OpSpec
from sksign.deploy._maps import unpack_pixels
from sksign.deploy._ops._common import one_pixel, row_runner


def prepare(layer, ctx):
    c, h, w = layer["attrs"]["shape"]

    def run(xs, n, n_threads):
        bits = unpack_pixels(xs[0], c, row_runner(n_threads))
        counts = bits.reshape(xs[0].shape[0], h * w, c).sum(axis=1)
        return counts.astype(np.float32) / np.float32(h * w)

    return run


SPEC = OpSpec(
    "pixel_bits",
    "float",
    1,
    {"shape": list, "out": int},
    {},
    layout="nhwc",
    geometry=one_pixel,
    arithmetic="count of bits",
    prepare=prepare,
)
