"""``bit_conv2d_step``: real weights on ``pixel_bits`` maps, then a step.

Exact as :mod:`sksign.deploy._ops.bit_dense_step`, on an im2col of the 0/1
maps; the output is ``pixel_bits`` again.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.deploy._format import OpSpec
from sksign.deploy._maps import MAP_CONV_ATTRS, map_conv_geometry
from sksign.deploy._ops._common import bit_patches, pack_rows, quantise, step_rows


def prepare(layer, ctx):
    oc = layer["attrs"]["channels"]
    wt, threshold = ctx.tensor(layer, "weight_t"), ctx.tensor(layer, "threshold")
    steps = ctx.derive("steps", layer, "weight_t", quantise)

    def run(xs, n, n_threads):
        n = xs[0].shape[0]
        patches, _ = bit_patches(xs[0], layer["attrs"], n_threads, blas=False)
        words = pack_rows(patches)
        out = step_rows(
            wt, steps, threshold, words, patches.shape[1], oc, n_threads, patches
        )
        return out.reshape(n, -1)

    return run


SPEC = OpSpec(
    "pixel_bits",
    "pixel_bits",
    1,
    MAP_CONV_ATTRS,
    {"weight_t": ("float32", ("patch", "oc")), "threshold": ("float32", ("oc",))},
    layout="nhwc",
    geometry=map_conv_geometry,
    arithmetic="real x bits conv, threshold",
    prepare=prepare,
)
