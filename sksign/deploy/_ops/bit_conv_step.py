"""``bit_conv_step``: real weights on channels-first bit maps, then a step.

A convolution of stride 1 (see :mod:`sksign.deploy._ops.conv`), exact
as :mod:`sksign.deploy._ops.bit_dense_step`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import CONV_ATTRS, OpSpec, conv_geometry
from sksign.deploy._kernels import unpack_words
from sksign.deploy._maps import im2col
from sksign.deploy._ops._common import (
    channels_first,
    pack_rows,
    quantise,
    run_rows,
    step_rows,
    unpack_rows,
)


def prepare(layer, ctx):
    attrs = layer["attrs"]
    c, h, w = attrs["shape"]
    k, p, oc = attrs["kernel"], attrs["padding"], attrs["channels"]
    width = ctx.width(layer)
    wt, threshold = ctx.tensor(layer, "weight_t"), ctx.tensor(layer, "threshold")
    steps = ctx.derive("steps", layer, "weight_t", quantise)

    def run(xs, n, n_threads):
        maps = unpack_rows(xs[0], width).reshape(-1, c, h, w)
        patches, (ho, wo) = im2col(maps, k, 1, p, channels_first=True)
        words = pack_rows(patches)
        bits = step_rows(wt, steps, threshold, words, patches.shape[1], oc, n_threads)
        rows = empty((bits.shape[0], oc), np.uint8)
        run_rows(unpack_words, bits.shape[0], n_threads, bits, oc, rows)
        return pack_rows(channels_first(rows, n, ho, wo))

    return run


SPEC = OpSpec(
    "bits",
    "bits",
    1,
    CONV_ATTRS,
    {"weight_t": ("float32", ("patch", "oc")), "threshold": ("float32", ("oc",))},
    layout="nchw",
    geometry=conv_geometry,
    arithmetic="real x bits conv, threshold",
    prepare=prepare,
)
