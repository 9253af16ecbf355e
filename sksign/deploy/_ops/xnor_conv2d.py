"""``xnor_conv2d``: binary weights on ``pixel_bits`` maps (XNOR-popcount).

A direct convolution (:func:`sksign.deploy._kernels.xnor_conv`): the taps
of each block of output rows are gathered into compact words (several taps
of a narrow pixel per word), counted against the weight words, what the
zero padding adds back (:func:`sksign.deploy._maps.conv_corrections`) is
added, then ``alpha * dot + beta``.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import xnor_conv
from sksign.deploy._maps import (
    MAP_CONV_ATTRS,
    compact_taps,
    conv_corrections,
    map_conv_geometry,
    map_geometry,
    tap_layout,
    words_per_pixel,
)
from sksign.deploy._ops._common import run_rows
from sksign.kernels import packed_to_words


def prepare(layer, ctx):
    """Word-major weight words and padding corrections of an XNOR conv."""
    attrs = layer["attrs"]
    c = attrs["shape"][0]
    k, s, p, oc = attrs["kernel"], attrs["stride"], attrs["padding"], attrs["channels"]
    group = 64 * words_per_pixel(c)
    raw = ctx.tensor(layer, "weight_bits")
    bits = np.unpackbits(raw, axis=1).reshape(oc, k, k, group)
    if bits[..., c:].any():
        raise ctx.error(layer, "the padding bits of its weights are not 0.")
    words = ctx.derive(
        "tap_words",
        layer,
        "weight_bits",
        lambda raw: compact_taps(packed_to_words(raw, k * k * group), c, k),
    )
    per_word, tap_bits, _ = tap_layout(c, k)
    signs = 2 * bits[..., :c].astype(np.int64) - 1
    corr = conv_corrections(signs, attrs["shape"], k, s, p)
    alpha, beta = ctx.tensor(layer, "alpha"), ctx.tensor(layer, "beta")
    g = map_geometry(attrs)
    pixels = int(g[6] * g[7])

    def run(xs, n, n_threads):
        n = xs[0].shape[0]
        out = empty((n * pixels, oc), np.float32)
        args = (xs[0].reshape(-1), words, k * k * c, g, per_word, tap_bits)
        args += (corr, alpha, beta, out)
        run_rows(xnor_conv, n * pixels, n_threads, *args)
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
