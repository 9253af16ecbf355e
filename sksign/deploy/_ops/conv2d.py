"""``conv2d``: a float convolution of channels-last float maps.

A direct convolution (:func:`sksign.deploy._kernels.float_conv`): no im2col,
the weight rows of each tap and input channel scaled and added in vectors
with the sums in registers, or, on maps sparse enough (the spike counts of a
SEW-ResNet's "add" maps, often nearly all zero), each nonzero input alone. A
BatchNorm after it and a residual add can run in its pass
(``MAP_CONV_EPILOGUES``); so can a BatchNorm and the step after it
(:func:`sksign.deploy._kernels.float_conv_step`: the stem of a WRN-10-2,
whose float maps go to its first step alone), writing bits and no float
maps.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec, words_per_pixel
from sksign.deploy._kernels import float_conv, float_conv_step, padded_width
from sksign.deploy._maps import MAP_CONV_ATTRS, map_conv_geometry, map_geometry
from sksign.deploy._ops._common import (
    MAP_CONV_EPILOGUES,
    map_conv_epilogue,
    run_rows,
)

#: Maps with fewer nonzero inputs than ``(width / SPARSE_WIDTH) ** 2`` (width:
#: the outputs, padded) skip the zeros one by one; denser maps run every
#: input in registers (measured on an AMD EPYC, AVX2, one thread: the
#: crossover lies near 0.3%, 1-2%, 5% and 15-20% nonzero at 16, 32, 64 and
#: 128 outputs, where the dense path's cost does not depend on the maps).
SPARSE_WIDTH = 320
#: Every this-many-th input is read to estimate the share of nonzero inputs
#: (either path gives the same sums: the estimate only picks the faster).
DENSITY_SAMPLE = 17
#: The chain to a step this op takes over besides ``MAP_CONV_EPILOGUES``.
TO_STEP = ("channel_affine", "pixel_step")


def prepare(layer, ctx, epilogue=()):
    attrs = layer["attrs"]
    c, oc = attrs["shape"][0], attrs["channels"]
    bias = ctx.tensor(layer, "bias")

    def pad(weight):  # (oc, k * k * C) -> one row per patch unit, padded
        out = np.zeros((weight.shape[1], padded_width(oc)), np.float32)
        out[:, :oc] = weight.T
        return out

    weights = ctx.derive("padded_t", layer, "weight", pad)
    g = map_geometry(attrs)
    g[2] = c  # floats per pixel
    pixels = int(g[6] * g[7])
    sparse_below = (weights.shape[1] / SPARSE_WIDTH) ** 2

    def is_sparse(x):
        sample = x[::DENSITY_SAMPLE]
        return np.count_nonzero(sample) < sparse_below * len(sample)

    if tuple(e["op"] for e in epilogue) == TO_STEP:
        scale, shift = (ctx.tensor(epilogue[0], key) for key in ("scale", "shift"))

        def run_step(xs, n, n_threads):
            rows = xs[0].shape[0] * pixels
            out = empty((rows, words_per_pixel(oc)), np.uint64)
            x = xs[0].reshape(-1)
            args = (x, weights, is_sparse(x), g, bias, scale, shift, out)
            run_rows(float_conv_step, rows, n_threads, *args)
            return out.reshape(xs[0].shape[0], -1)

        return run_step
    finish = map_conv_epilogue(epilogue, ctx, oc)

    def run(xs, n, n_threads):
        rows = xs[0].shape[0] * pixels
        out = empty((rows, oc), np.float32)
        x = xs[0].reshape(-1)
        args = (x, weights, is_sparse(x), g, bias, *finish(xs, rows), out)
        run_rows(float_conv, rows, n_threads, *args)
        return out.reshape(xs[0].shape[0], -1)

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
    epilogues=(*MAP_CONV_EPILOGUES, TO_STEP),
)
