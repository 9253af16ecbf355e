"""``bit_conv2d``: real weights on ``pixel_bits`` maps, plus a bias.

Read in place: float32 sums of the weights over the active bits of each
patch (:func:`sksign.deploy._kernels.sum_conv`), by table look-ups (one sum
of weights per nibble or byte, see :class:`~sksign.deploy._ops._common.SumConv`),
or by weight rows for a layer whose tables would be too large. A BatchNorm
after it and a residual add can run in its pass (``MAP_CONV_EPILOGUES``).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import sum_conv
from sksign.deploy._maps import MAP_CONV_ATTRS, map_conv_geometry, map_geometry
from sksign.deploy._ops._common import (
    MAP_CONV_EPILOGUES,
    SumConv,
    map_conv_epilogue,
    run_rows,
)


def prepare(layer, ctx, epilogue=()):
    oc = layer["attrs"]["channels"]
    bias = ctx.tensor(layer, "bias")
    sums = SumConv(layer, ctx)
    g = map_geometry(layer["attrs"])
    pixels = int(g[6] * g[7])
    finish = map_conv_epilogue(epilogue, ctx, oc)

    def run(xs, n, n_threads):
        rows = xs[0].shape[0] * pixels
        out = empty((rows, oc), np.float32)
        tables = sums.args(rows, sums.sparse(xs[0]))
        args = (xs[0].reshape(-1), *tables, g, bias, *finish(xs, rows), out)
        run_rows(sum_conv, rows, n_threads, *args)
        return out.reshape(xs[0].shape[0], -1)

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
    epilogues=MAP_CONV_EPILOGUES,
)
