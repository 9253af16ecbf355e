"""``bit_conv2d``: real weights on ``pixel_bits`` maps, plus a bias.

An im2col of the 0/1 maps: many rows go through a BLAS product (as
float32), few through sums of the weight rows of the active bits.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import bit_accumulate
from sksign.deploy._maps import MAP_CONV_ATTRS, map_conv_geometry
from sksign.deploy._ops._common import bit_patches, pack_rows, run_rows_cols


def prepare(layer, ctx):
    oc = layer["attrs"]["channels"]
    wt, bias = ctx.tensor(layer, "weight_t"), ctx.tensor(layer, "bias")

    def run(xs, n, n_threads):
        n = xs[0].shape[0]
        patches, few = bit_patches(xs[0], layer["attrs"], n_threads, blas=True)
        if not few:
            out = patches @ wt
            out += bias
            return out.reshape(n, -1)
        acc = np.empty((patches.shape[0], oc), dtype=np.float32)
        acc[:] = bias
        run_rows_cols(
            bit_accumulate, patches.shape[0], oc, n_threads, pack_rows(patches), wt, acc
        )
        return acc.reshape(n, -1)

    return run


SPEC = OpSpec(
    "pixel_bits",
    "float",
    1,
    MAP_CONV_ATTRS,
    {"weight_t": ("float32", ("patch", "oc")), "bias": ("float32", ("oc",))},
    layout="nhwc",
    geometry=map_conv_geometry,
    arithmetic="real x bits conv",
    prepare=prepare,
)
