"""``pixel_neuron``: spiking neurons (IF or LIF) on channels-last float maps.

See :func:`sksign.deploy._maps.fire_maps`; time is folded into the rows of
the output (row ``n * T + t``).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import OpSpec, schema_error
from sksign.deploy._maps import NEURONS, fire_maps
from sksign.deploy._ops._common import row_runner, same_maps
from sksign.deploy._ops._neurons import check_neuron


def check(name, attrs, per_sample):
    tau = attrs["tau"]
    if attrs["neuron"] not in NEURONS or not np.isfinite(tau) or tau <= 0:
        raise schema_error(f"layer {name!r} has invalid neuron attributes.")
    return check_neuron(name, attrs, per_sample)


def prepare(layer, ctx):
    attrs = layer["attrs"]
    c = attrs["shape"][0]

    def run(xs, n, n_threads):
        return fire_maps(xs[0], c, attrs, row_runner(n_threads))

    return run


SPEC = OpSpec(
    "float",
    "pixel_bits",
    1,
    {
        "shape": list,
        "time_steps": int,
        "threshold": float,
        "reset": str,
        "constant": bool,
        "neuron": str,
        "tau": float,
    },
    {},
    layout="nhwc",
    geometry=same_maps,
    check=check,
    arithmetic="integrate, fire",
    prepare=prepare,
)
