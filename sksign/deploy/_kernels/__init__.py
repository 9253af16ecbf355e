"""The numba kernels of the packed nets (deploy only; shared kernels live in
:mod:`sksign.kernels`).

Every kernel is serial over a range of rows ``[r0, r1)`` (and of output
columns ``[c0, c1)``) and releases the GIL: the op units of
:mod:`sksign.deploy._ops` split the work over :func:`sksign._threads.run_in_threads`.
Bits are in the unit layout described in :mod:`sksign.deploy._kernels._bits`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign.deploy._kernels._bits import (
    bit_accumulate,
    count_bits,
    if_neuron_pack,
    pack_ge,
    unit_of_bit,
    unpack_words,
)
from sksign.deploy._kernels._step import step_certified, step_int16
from sksign.deploy._kernels._xnor import xnor_affine

__all__ = [
    "bit_accumulate",
    "count_bits",
    "if_neuron_pack",
    "pack_ge",
    "step_certified",
    "step_int16",
    "unit_of_bit",
    "unpack_words",
    "xnor_affine",
]
