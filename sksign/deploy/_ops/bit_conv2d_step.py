"""``bit_conv2d_step``: real weights on ``pixel_bits`` maps, then a step.

Exact as :mod:`sksign.deploy._ops.bit_dense_step`: the float32 sums of
:mod:`sksign.deploy._ops.bit_conv2d` (by tables or by weight rows,
:func:`sksign.deploy._kernels.sum_conv_step`) decide the bit where they are
far enough from the threshold, float64 sums elsewhere; the output is
``pixel_bits`` again. Where the CPU has AVX2, a layer of
:data:`~sksign.deploy._kernels._madd.PAIRS_MIN_CHANNELS` output channels
or more (128) multiplies its patches' bits by its
16-bit weights with ``vpmaddwd`` instead, exactly in int32, and certifies
the step from those sums (:mod:`sksign.deploy._kernels._madd`); where the
CPU has table look-ups (AVX-512 VBMI and VNNI, or AVX2 without AVX-512 BW:
:func:`~sksign.deploy._kernels._lut.lut_available`), the layer has
:data:`~sksign.deploy._kernels._lut.LUT_MIN_CHANNELS` output channels or
more and its input channels fill whole bytes, it gathers its patches as
rows of words (:func:`~sksign.deploy._kernels.patch_words`) and adds by
table look-up from 32 rows (:mod:`sksign.deploy._kernels._lut`). The bits
are the same.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import PAIRS_MIN_CHANNELS, patch_words, sum_conv_step
from sksign.deploy._kernels._lut import LUT_MIN_CHANNELS
from sksign.deploy._maps import MAP_CONV_ATTRS, map_conv_geometry, map_geometry
from sksign.deploy._ops._common import (
    LUT_STEP_MIN_ROWS,
    quantise,
    run_rows,
    step_by_lut_tiles,
    step_by_pairs,
)
from sksign.deploy._ops._tables import SumConv


def prepare(layer, ctx):
    attrs = layer["attrs"]
    oc = attrs["channels"]
    threshold = ctx.tensor(layer, "threshold")
    sums = SumConv(layer, ctx)
    w_rows = ctx.derive("rows", layer, "weight_t", lambda w: np.ascontiguousarray(w.T))
    g = map_geometry(attrs)
    pixels = int(g[6] * g[7])

    pairs = ctx.derive("steps", layer, "weight_t", quantise)

    channels = attrs["shape"][0]
    width = w_rows.shape[1]

    def run(xs, n, n_threads):
        rows = xs[0].shape[0] * pixels
        out = empty((rows, -(-oc // 64)), np.uint64)
        lut = pairs[5]
        by_lut = oc >= LUT_MIN_CHANNELS and lut is not None and channels % 8 == 0
        if by_lut and rows >= LUT_STEP_MIN_ROWS:
            patches = empty((rows, -(-width // 64)), np.uint64)
            flat = xs[0].reshape(-1)
            run_rows(patch_words, rows, n_threads, flat, g, channels, patches)
            step_by_lut_tiles(lut, threshold, patches, width, w_rows, out, n_threads)
            return out.reshape(xs[0].shape[0], -1)
        if oc >= PAIRS_MIN_CHANNELS and pairs[4] is not None:
            _, scale, _, rows_w, w32, _ = pairs
            args = (xs[0].reshape(-1), g, channels, w32, scale, threshold)
            step_by_pairs(args, rows_w, out, n_threads)
            return out.reshape(xs[0].shape[0], -1)
        sparse = sums.sparse(xs[0])
        tables, bound = sums.args(rows, sparse), sums.bound(rows, sparse)
        args = (xs[0].reshape(-1), *tables, g, threshold, bound)
        run_rows(sum_conv_step, rows, n_threads, *args, w_rows, out)
        return out.reshape(xs[0].shape[0], -1)

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
