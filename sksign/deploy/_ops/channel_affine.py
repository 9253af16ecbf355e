"""``channel_affine``: a per-channel affine map of channels-last float maps.

One pass (:func:`sksign.deploy._kernels.affine_rows`) over rows of whole
pixels, the scale and shift tiled over a row at load. A step after it runs in
the same pass (:func:`sksign.deploy._kernels.pack_affine_ge`), writing the
bits and no float maps.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec, words_per_pixel
from sksign.deploy._kernels import affine_rows, pack_affine_ge
from sksign.deploy._ops._common import run_rows, same_maps

#: Most floats of a row of :func:`~sksign.deploy._kernels.affine_rows`.
ROW_FLOATS = 1024


def prepare(layer, ctx, epilogue=()):
    c, h, w = layer["attrs"]["shape"]
    scale, shift = ctx.tensor(layer, "scale"), ctx.tensor(layer, "shift")
    if epilogue:  # a pixel_step: the bits of each pixel

        def run_step(xs, n, n_threads):
            x = xs[0].reshape(-1, c)
            out = empty((len(x), words_per_pixel(c)), np.uint64)
            run_rows(pack_affine_ge, len(x), n_threads, x, scale, shift, out)
            return out.reshape(xs[0].shape[0], -1)

        return run_step
    # the most pixels of a sample's map that divide it and fit a row
    pixels = max(
        m
        for m in range(1, h * w + 1)
        if (h * w) % m == 0 and m * c <= max(c, ROW_FLOATS)
    )
    scale, shift = np.tile(scale, pixels), np.tile(shift, pixels)

    def run(xs, n, n_threads):
        x = xs[0].reshape(-1, len(scale))
        out = empty(x.shape, x.dtype)
        run_rows(affine_rows, len(x), n_threads, x, scale, shift, out)
        return out.reshape(xs[0].shape)

    return run


SPEC = OpSpec(
    "float",
    "float",
    1,
    {"shape": list},
    {"scale": ("float32", ("c_in",)), "shift": ("float32", ("c_in",))},
    layout="nhwc",
    geometry=same_maps,
    arithmetic="scale, shift",
    prepare=prepare,
    epilogues=(("pixel_step",),),
)
