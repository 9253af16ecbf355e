"""``bit_dense_step``: real weights on bits, then the step of the exact sum."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign.deploy._format import OpSpec
from sksign.deploy._ops._common import quantise, step_rows


def prepare(layer, ctx):
    width, n_out = ctx.width(layer), layer["attrs"]["out"]
    wt, threshold = ctx.tensor(layer, "weight_t"), ctx.tensor(layer, "threshold")
    steps = ctx.derive("steps", layer, "weight_t", quantise)

    def run(xs, n, n_threads):
        return step_rows(wt, steps, threshold, xs[0], width, n_out, n_threads)

    return run


SPEC = OpSpec(
    "bits",
    "bits",
    1,
    {"out": int},
    {"weight_t": ("float32", ("in", "out")), "threshold": ("float32", ("out",))},
    arithmetic="real x bits, threshold",
    prepare=prepare,
)
