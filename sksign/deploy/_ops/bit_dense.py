"""``bit_dense``: real weights on bits, summed over one or more inputs.

Few rows or sparse bits: the weight rows of the active bits are summed;
many dense rows: a BLAS product of the unpacked 0/1 rows.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import bit_accumulate, unpack_words
from sksign.deploy._ops._common import (
    BLAS_MIN_ROWS,
    SPARSE_DENSITY,
    blas_product,
    density,
    run_rows,
    run_rows_cols,
)


def prepare(layer, ctx):
    n_out, width = layer["attrs"]["out"], ctx.width(layer)
    dtype = np.float64 if layer["attrs"]["float64"] else np.float32
    wt, bias = ctx.tensor(layer, "weight_t"), ctx.tensor(layer, "bias")
    wide = []  # the weights in float64, made on first use

    def weights():
        if wt.dtype == dtype:
            return wt
        if not wide:
            wide.append(ctx.derive("float64", layer, "weight_t", np.float64))
        return wide[0]

    def run(xs, n, n_threads):
        rows = xs[0].shape[0]
        acc = empty((rows, n_out), dtype)
        acc[:] = bias
        for bits in xs:
            if rows < BLAS_MIN_ROWS or density(bits, width) < SPARSE_DENSITY:
                run_rows_cols(bit_accumulate, rows, n_out, n_threads, bits, wt, acc)
            else:
                # many rows: a matrix product of the 0/1 rows (BLAS)
                dense = empty((rows, width), acc.dtype)
                run_rows(unpack_words, rows, n_threads, bits, width, dense)
                acc += blas_product(dense, weights(), n_threads)
        return acc.astype(np.float32, copy=False)

    return run


SPEC = OpSpec(
    "bits",
    "float",
    None,
    {"out": int, "float64": bool},
    {"weight_t": ("float32", ("in", "out")), "bias": ("float32", ("out",))},
    arithmetic="real x bits",
    prepare=prepare,
)
