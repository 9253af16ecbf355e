"""``bit_conv2d``: real weights on ``pixel_bits`` maps, plus a bias.

Read in place: float32 sums of the weights over the active bits of each
patch (:func:`sksign.deploy._kernels.sum_conv`), by table look-ups (one sum
of weights per nibble or byte, see :class:`~sksign.deploy._ops._tables.SumConv`),
or by weight rows for a layer whose tables would be too large. A BatchNorm
after it and a residual add can run in its pass (``MAP_CONV_EPILOGUES``).

A residual add followed by a BatchNorm and a step (the sum of a wide
ResNet's block, whose float maps go to the next block's step alone) runs
as one chain to the step's bits: where the CPU has table look-ups
(:func:`~sksign.deploy._kernels._lut.lut_available`), the channels fill
whole bytes and the maps are summed by tables, from the look-up sums of
the 14-bit weights (:mod:`sksign.deploy._kernels._lut_chain`: the float32
sums only for the outputs near their step, so the bits are the layers' one
after the other); elsewhere by the float32 table sums, the add, affine
map and step of each block of rows in one pass, without float maps
(:func:`~sksign.deploy._kernels.sum_conv_to_step`).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign._threads import run_in_threads
from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import patch_words, sum_conv, sum_conv_to_step
from sksign.deploy._kernels._lut import lut_available
from sksign.deploy._kernels._lut_chain import chain_by_lut
from sksign.deploy._maps import MAP_CONV_ATTRS, map_conv_geometry, map_geometry
from sksign.deploy._ops import channel_affine
from sksign.deploy._ops._common import (
    LUT_STEP_MIN_ROWS,
    MAP_CONV_EPILOGUES,
    lut_tile_buffers,
    map_conv_epilogue,
    quantise,
    run_rows,
    split,
)
from sksign.deploy._ops._tables import SumConv

#: The chain to a step this op takes over besides ``MAP_CONV_EPILOGUES``.
TO_STEP = ("add", "channel_affine", "pixel_step")
#: Output channels from which that chain decides its bits from look-up sums
#: (measured on an AMD EPYC, Zen 4, WRN-10-2 of width 16: with its 128-channel
#: block so, 0.78 -> 0.72 ms at batch 1 and 44 -> 41 ms at batch 64; with
#: its 64-channel block too, 0.77 and 45 ms: the tables' float sums win
#: there).
LUT_CHAIN_MIN_CHANNELS = 128


def prepare(layer, ctx, epilogue=()):
    if tuple(e["op"] for e in epilogue[:2]) == TO_STEP[:2]:
        return _to_step(layer, ctx, epilogue)
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
    epilogues=(*MAP_CONV_EPILOGUES, TO_STEP),
)


def _to_step(layer, ctx, epilogue):
    """``run`` of the layer, its ``add``, a ``channel_affine`` and, if
    `epilogue` goes on to it, a ``pixel_step`` (see the module docstring)."""
    if len(epilogue) < len(TO_STEP):
        conv_add = prepare(layer, ctx, epilogue[:1])
        then = channel_affine.prepare(epilogue[1], ctx, ())

        def layer_by_layer(xs, n, n_threads):
            return then([conv_add(xs, n, n_threads)], n, n_threads)

        return layer_by_layer
    by_sums = _sums_to_step(layer, ctx, epilogue)
    attrs = layer["attrs"]
    channels, oc = attrs["shape"][0], attrs["channels"]
    if not lut_available() or channels % 8 or oc < LUT_CHAIN_MIN_CHANNELS:
        return by_sums
    lut = ctx.derive("steps", layer, "weight_t", quantise)[5]
    if lut is None:  # tables too large
        return by_sums
    sums, bias, scale, shift, g, pixels = _chain_parts(layer, ctx, epilogue)
    width = sums.wt.shape[0]

    def run(xs, n, n_threads):
        rows = xs[0].shape[0] * pixels
        sparse = sums.sparse(xs[0])
        table, nib_word, nib_shift, _, by_table = sums.args(rows, sparse)
        if rows < LUT_STEP_MIN_ROWS or not by_table:
            return by_sums(xs, n, n_threads, sparse)
        maps = xs[0].reshape(-1)
        patches = empty((rows, -(-width // 64)), np.uint64)
        run_rows(patch_words, rows, n_threads, maps, g, channels, patches)
        floats = (
            maps,
            g,
            table.reshape(-1, table.shape[-1]),
            nib_word,
            nib_shift,
            sums.bound(rows, sparse),
            lut.steps,
        )
        chain = (bias, xs[1].reshape(rows, oc), scale, shift)
        tiles, idx, x32, lut_sums = lut_tile_buffers(lut, patches, width)
        out = empty((rows, -(-oc // 64)), np.uint64)
        args = (patches, width, lut.tables, floats, chain, idx, x32, lut_sums, out)
        n_threads = min(n_threads, tiles)
        tasks = [(*args, a, b) for a, b in split(tiles, n_threads)]
        run_in_threads(chain_by_lut, tasks, n_threads)
        return out.reshape(xs[0].shape[0], -1)

    return run


def _sums_to_step(layer, ctx, epilogue):
    """``run`` of the whole chain to the step by the float32 sums of the
    convolution, the add, affine map and step in the same pass
    (:func:`~sksign.deploy._kernels.sum_conv_to_step`): the bits of the
    layers one after the other, without their float maps."""
    oc = layer["attrs"]["channels"]
    sums, bias, scale, shift, g, pixels = _chain_parts(layer, ctx, epilogue)

    def run(xs, n, n_threads, sparse=None):
        """`sparse`: :meth:`SumConv.sparse` of the maps, if known already."""
        rows = xs[0].shape[0] * pixels
        out = empty((rows, -(-oc // 64)), np.uint64)
        if sparse is None:
            sparse = sums.sparse(xs[0])
        tables = sums.args(rows, sparse)
        chain = (bias, xs[1].reshape(rows, oc), scale, shift)
        args = (xs[0].reshape(-1), tables, g, chain, out)
        run_rows(sum_conv_to_step, rows, n_threads, *args)
        return out.reshape(xs[0].shape[0], -1)

    return run


def _chain_parts(layer, ctx, epilogue):
    """``(sums, bias, scale, shift, g, pixels)`` of the chain to a step: the
    convolution's :class:`SumConv` and bias, the affine map, the geometry and
    the output pixels of a sample."""
    g = map_geometry(layer["attrs"])
    return (
        SumConv(layer, ctx),
        ctx.tensor(layer, "bias"),
        ctx.tensor(epilogue[1], "scale"),
        ctx.tensor(epilogue[1], "shift"),
        g,
        int(g[6] * g[7]),
    )
