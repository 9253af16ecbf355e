"""``conv``: a float convolution (stride 1) of channels-first maps.

Values hold ``(C, H, W)`` maps flattened in that order (as torch's
``Flatten``); ``shape`` is the input's ``(C, H, W)``.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.deploy._format import CONV_ATTRS, OpSpec, conv_geometry
from sksign.deploy._maps import im2col
from sksign.deploy._ops._common import blas_product, channels_first


def prepare(layer, ctx):
    attrs = layer["attrs"]
    c, h, w = attrs["shape"]
    k, p = attrs["kernel"], attrs["padding"]
    weight, bias = ctx.tensor(layer, "weight"), ctx.tensor(layer, "bias")

    def run(xs, n, n_threads):
        maps = xs[0].reshape(-1, c, h, w)
        patches, (ho, wo) = im2col(maps, k, 1, p, channels_first=True)
        out = blas_product(patches, weight.T, n_threads)
        out += bias
        return channels_first(out, n, ho, wo)

    return run


SPEC = OpSpec(
    "float",
    "float",
    1,
    CONV_ATTRS,
    {"weight": ("float32", ("oc", "patch")), "bias": ("float32", ("oc",))},
    layout="nchw",
    geometry=conv_geometry,
    arithmetic="float conv",
    prepare=prepare,
)
