"""``if_neuron``: integrate-and-fire neurons on float rows, spikes as bits.

Time is folded into the rows of the output (row ``n * T + t``). A row is
one pixel of ``n_units`` channels to the neurons of the maps
(:func:`sksign.deploy._kernels.fire_pixels`: the same equations, the reset a
select rather than a branch on each spike).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import fire_pixels
from sksign.deploy._ops._common import run_rows
from sksign.deploy._ops._neurons import check_neuron


def prepare(layer, ctx):
    attrs = layer["attrs"]
    t = attrs["time_steps"]

    def run(xs, n, n_threads):
        x = xs[0]
        out = empty((n * t, -(-x.shape[1] // 64)), np.uint64)
        run_rows(
            fire_pixels,
            n,
            n_threads,
            x,
            t,
            attrs["constant"],
            x.dtype.type(attrs["threshold"]),
            x.dtype.type(1),  # tau: not read (no leak)
            False,
            attrs["reset"] == "zero",
            x.shape[1],
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
