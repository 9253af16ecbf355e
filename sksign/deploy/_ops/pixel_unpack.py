"""``pixel_unpack``: ``pixel_bits`` maps as channels-last 0/1 float maps."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import OpSpec
from sksign.deploy._maps import unpack_pixels
from sksign.deploy._ops._common import row_runner, same_maps


def prepare(layer, ctx):
    c = layer["attrs"]["shape"][0]

    def run(xs, n, n_threads):
        return unpack_pixels(xs[0], c, row_runner(n_threads), np.float32)

    return run


SPEC = OpSpec(
    "pixel_bits",
    "float",
    1,
    {"shape": list},
    {},
    layout="nhwc",
    geometry=same_maps,
    arithmetic="bits to float",
    prepare=prepare,
)
