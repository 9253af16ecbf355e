"""``conv2d``: a float convolution of channels-last float maps."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.deploy._format import OpSpec
from sksign.deploy._maps import MAP_CONV_ATTRS, im2col, map_conv_geometry


def prepare(layer, ctx):
    attrs = layer["attrs"]
    c, h, w = attrs["shape"]
    k, s, p = attrs["kernel"], attrs["stride"], attrs["padding"]
    weight, bias = ctx.tensor(layer, "weight"), ctx.tensor(layer, "bias")

    def run(xs, n, n_threads):
        n = xs[0].shape[0]
        patches, _ = im2col(xs[0].reshape(n, h, w, c), k, s, p)
        out = patches @ weight.T
        out += bias
        return out.reshape(n, -1)

    return run


SPEC = OpSpec(
    "float",
    "float",
    1,
    MAP_CONV_ATTRS,
    {"weight": ("float32", ("oc", "patch")), "bias": ("float32", ("oc",))},
    layout="nhwc",
    geometry=map_conv_geometry,
    arithmetic="float conv",
    prepare=prepare,
)
