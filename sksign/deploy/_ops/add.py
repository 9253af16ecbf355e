"""``add``: the sum of two float values (a residual connection)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.deploy._format import OpSpec


def prepare(layer, ctx):
    def run(xs, n, n_threads):
        return xs[0] + xs[1]

    return run


SPEC = OpSpec(
    "float",
    "float",
    2,
    {},
    {},
    keeps_shape=True,
    arithmetic="float add",
    prepare=prepare,
)
