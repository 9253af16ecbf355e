"""``channel_affine``: a per-channel affine map of channels-last float maps."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.deploy._format import OpSpec
from sksign.deploy._ops._common import same_maps


def prepare(layer, ctx):
    c = layer["attrs"]["shape"][0]
    scale, shift = ctx.tensor(layer, "scale"), ctx.tensor(layer, "shift")

    def run(xs, n, n_threads):
        out = xs[0].reshape(-1, c) * scale
        out += shift
        return out.reshape(xs[0].shape[0], -1)

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
)
