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
    channel_shares,
    count_bits,
    pack_affine_ge,
    pack_ge,
    unit_of_bit,
    unpack_words,
)
from sksign.deploy._kernels._conv import (
    float_conv,
    float_conv_step,
    mean_pool,
    xnor_conv,
)
from sksign.deploy._kernels._finite import all_finite
from sksign.deploy._kernels._lut import step_products
from sksign.deploy._kernels._lut_chain import block_sums
from sksign.deploy._kernels._madd import PAIRS_MIN_CHANNELS, patch_words
from sksign.deploy._kernels._pixels import affine_rows, fire_pixels
from sksign.deploy._kernels._step import step_certified, step_int16
from sksign.deploy._kernels._sums import (
    row_table_sums,
    sum_conv,
    sum_conv_step,
    sum_conv_to_step,
    table_sums,
)
from sksign.deploy._kernels._vectors import (
    FLOAT_LANES,
    LANES,
    UNROLL_FLOATS,
    padded_width,
)
from sksign.deploy._kernels._winners import clear_winners
from sksign.deploy._kernels._xnor import (
    sign_products,
    xnor_affine,
    xnor_kernel,
    xnor_weights,
)

__all__ = [
    "FLOAT_LANES",
    "LANES",
    "PAIRS_MIN_CHANNELS",
    "UNROLL_FLOATS",
    "affine_rows",
    "all_finite",
    "bit_accumulate",
    "block_sums",
    "channel_shares",
    "clear_winners",
    "count_bits",
    "fire_pixels",
    "float_conv",
    "float_conv_step",
    "mean_pool",
    "pack_affine_ge",
    "pack_ge",
    "padded_width",
    "patch_words",
    "row_table_sums",
    "sign_products",
    "step_certified",
    "step_int16",
    "step_products",
    "sum_conv",
    "sum_conv_step",
    "sum_conv_to_step",
    "table_sums",
    "unit_of_bit",
    "unpack_words",
    "xnor_affine",
    "xnor_conv",
    "xnor_kernel",
    "xnor_weights",
]
