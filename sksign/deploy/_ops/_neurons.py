"""The checks the spiking ops share (``if_neuron`` and ``pixel_neuron``)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._format import schema_error

__all__ = ["MAX_TIME_STEPS", "RESETS", "check_neuron"]

#: Largest number of simulation steps a packed spiking layer may declare.
MAX_TIME_STEPS = 10_000
#: What a neuron does to its potential when it fires.
RESETS = ("subtract", "zero")


def check_neuron(name, attrs, per_sample):
    """Check the attributes of a layer of neurons; return its rows per sample.

    The input holds ``time_steps`` rows per sample (one current per step),
    or one row (``constant``: the same current at every step); the output
    holds ``time_steps``.
    """
    steps = attrs["time_steps"]
    if not 1 <= steps <= MAX_TIME_STEPS or attrs["reset"] not in RESETS:
        raise schema_error(f"layer {name!r} has invalid neuron attributes.")
    if not attrs["constant"] and per_sample != steps:
        raise schema_error(
            f"layer {name!r} simulates {steps} steps of an input "
            f"with {per_sample} rows per sample."
        )
    if not np.isfinite(attrs["threshold"]) or attrs["threshold"] <= 0:
        raise schema_error(f"layer {name!r} needs a positive threshold.")
    if attrs["constant"] and per_sample != 1:
        raise schema_error(f"layer {name!r}: 'constant' contradicts its input.")
    return steps
