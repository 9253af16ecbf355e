"""``pixel_step``: ``1[x >= 0]`` of channels-last float maps, as ``pixel_bits``."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.deploy._format import OpSpec
from sksign.deploy._maps import pack_pixels
from sksign.deploy._ops._common import row_runner, same_maps


def prepare(layer, ctx):
    c = layer["attrs"]["shape"][0]

    def run(xs, n, n_threads):
        return pack_pixels(xs[0], c, row_runner(n_threads))

    return run


SPEC = OpSpec(
    "float",
    "pixel_bits",
    1,
    {"shape": list},
    {},
    layout="nhwc",
    geometry=same_maps,
    arithmetic="1[x >= 0]",
    prepare=prepare,
)
