"""``time_mean``: the mean over the time steps folded into the rows."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import OpSpec, schema_error


def check(name, attrs, per_sample):
    if attrs["time_steps"] != per_sample:
        raise schema_error(f"layer {name!r} averages the wrong number of steps.")
    return 1


def prepare(layer, ctx):
    t = layer["attrs"]["time_steps"]

    def run(xs, n, n_threads):
        return xs[0].reshape(n, t, -1).mean(axis=1, dtype=np.float32)

    return run


SPEC = OpSpec(
    "float",
    "float",
    1,
    {"time_steps": int},
    {},
    check=check,
    arithmetic="mean over T",
    prepare=prepare,
)
