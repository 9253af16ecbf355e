"""``pixel_gate``: a bit function of two spike maps (SEW-ResNet connections)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.deploy._format import OpSpec, schema_error
from sksign.deploy._maps import GATES, gate_pixels
from sksign.deploy._ops._common import same_maps


def check(name, attrs, per_sample):
    if attrs["connect"] not in GATES:
        raise schema_error(
            f"layer {name!r}: connect {attrs['connect']!r} is not one of {GATES}."
        )
    return per_sample


def prepare(layer, ctx):
    connect = layer["attrs"]["connect"]

    def run(xs, n, n_threads):
        return gate_pixels(xs[0], xs[1], connect)

    return run


SPEC = OpSpec(
    "pixel_bits",
    "pixel_bits",
    2,
    {"shape": list, "connect": str},
    {},
    layout="nhwc",
    geometry=same_maps,
    check=check,
    arithmetic="AND of bits",
    prepare=prepare,
)
