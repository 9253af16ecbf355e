"""``xnor_conv2d``: binary weights on ``pixel_bits`` maps (XNOR-popcount).

An im2col of whole words, the popcount dot products, what the zero padding
adds back (:func:`sksign.deploy._maps.conv_corrections`), then
``alpha * dot + beta``.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import xnor_affine
from sksign.deploy._maps import (
    MAP_CONV_ATTRS,
    conv_corrections,
    im2col,
    map_conv_geometry,
    words_per_pixel,
)
from sksign.deploy._ops._common import run_rows_cols
from sksign.kernels import packed_to_words


def prepare(layer, ctx):
    """Word-major weight words and padding corrections of an XNOR conv."""
    attrs = layer["attrs"]
    c, h, w = attrs["shape"]
    k, s, p, oc = attrs["kernel"], attrs["stride"], attrs["padding"], attrs["channels"]
    group = 64 * words_per_pixel(c)
    raw = ctx.tensor(layer, "weight_bits")
    bits = np.unpackbits(raw, axis=1).reshape(oc, k, k, group)
    if bits[..., c:].any():
        raise ctx.error(layer, "the padding bits of its weights are not 0.")
    words = ctx.derive(
        "words",
        layer,
        "weight_bits",
        lambda raw: np.ascontiguousarray(packed_to_words(raw, k * k * group).T),
    )
    signs = 2 * bits[..., :c].astype(np.int64) - 1
    corr = conv_corrections(signs, attrs["shape"], k, s, p)
    alpha, beta = ctx.tensor(layer, "alpha"), ctx.tensor(layer, "beta")
    ones, zeros = np.ones(oc, np.int64), np.zeros(oc, np.int64)

    def run(xs, n, n_threads):
        n = xs[0].shape[0]
        maps = xs[0].reshape(n, h, w, words_per_pixel(c))
        patches, (ho, wo) = im2col(maps, k, s, p)
        dots = np.empty((patches.shape[0], oc), dtype=np.int32)
        run_rows_cols(
            xnor_affine,
            patches.shape[0],
            oc,
            n_threads,
            patches,
            words,
            k * k * c,
            ones,
            zeros,
            dots,
        )
        dots = dots.reshape(n, ho * wo, oc)
        dots += corr
        out = dots.astype(np.float32) * alpha
        out += beta
        return out.reshape(n, -1)

    return run


def _n_weights(layer, n_in, n_out):
    """One bit per weight (the stored rows are padded to whole words)."""
    attrs = layer["attrs"]
    return attrs["channels"] * attrs["kernel"] ** 2 * attrs["shape"][0]


SPEC = OpSpec(
    "pixel_bits",
    "float",
    1,
    MAP_CONV_ATTRS,
    {
        "weight_bits": ("uint8", ("oc", "patch_bytes")),
        "alpha": ("float32", ("oc",)),
        "beta": ("float32", ("oc",)),
    },
    layout="nhwc",
    geometry=map_conv_geometry,
    arithmetic="xnor-popcount conv",
    n_weights=_n_weights,
    prepare=prepare,
)
