"""``bit_global_avg_pool``: the share of 1 bits of each channel of ``pixel_bits``."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import channel_shares
from sksign.deploy._maps import words_per_pixel
from sksign.deploy._ops._common import one_pixel, run_rows


def prepare(layer, ctx):
    c, h, w = layer["attrs"]["shape"]
    per_pixel = words_per_pixel(c)

    def run(xs, n, n_threads):
        n_samples = xs[0].shape[0]
        pixels = xs[0].reshape(-1, per_pixel)  # one row a pixel
        out = empty((n_samples, c), np.float32)
        run_rows(channel_shares, n_samples, n_threads, pixels, h * w, c, out)
        return out

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
