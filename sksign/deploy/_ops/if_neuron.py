"""``if_neuron``: integrate-and-fire neurons on float rows, spikes as bits.

Time is folded into the rows of the output (row ``n * T + t``).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import if_neuron_pack
from sksign.deploy._ops._common import run_rows
from sksign.deploy._ops._neurons import check_neuron


def prepare(layer, ctx):
    attrs = layer["attrs"]
    t = attrs["time_steps"]

    def run(xs, n, n_threads):
        x = xs[0]
        out = np.empty((n * t, -(-x.shape[1] // 64)), dtype=np.uint64)
        run_rows(
            if_neuron_pack,
            n,
            n_threads,
            x,
            t,
            attrs["constant"],
            x.dtype.type(attrs["threshold"]),
            attrs["reset"] == "zero",
            out,
        )
        return out

    return run


SPEC = OpSpec(
    "float",
    "bits",
    1,
    {"time_steps": int, "threshold": float, "reset": str, "constant": bool},
    {},
    check=check_neuron,
    arithmetic="integrate, fire",
    prepare=prepare,
)
