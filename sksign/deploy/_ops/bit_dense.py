"""``bit_dense``: real weights on bits, summed over one or more inputs.

Few rows or sparse bits: the weight rows of the active bits are summed;
many dense rows: by table look-ups where the layer's nibble tables are
small (a row of words is a map of one pixel: the sums of a 1 x 1 map
convolution, :class:`~sksign.deploy._ops._tables.SumConv`), else a BLAS
product of the unpacked 0/1 rows.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import bit_accumulate, sum_conv, unpack_words
from sksign.deploy._maps import map_geometry
from sksign.deploy._ops._common import (
    BLAS_MIN_ROWS,
    SPARSE_DENSITY,
    blas_product,
    density,
    map_conv_epilogue,
    run_rows,
    run_rows_cols,
)
from sksign.deploy._ops._tables import SumConv

#: Largest nibble tables (bytes) of a layer whose many dense rows sum by
#: table look-ups rather than a BLAS product. Measured on a 2-core Intel Xeon,
#: one thread, 256 rows half set, tables against OpenBLAS: 256 -> 10 units
#: 22 against 36 us, 1024 -> 64 (1 MB) 204 against 346 us, 256 -> 256 (1
#: MB) 151 against 289 us; 1024 -> 128 (2 MB) 604 against 595, 512 -> 512
#: (4 MB) 1327 against 1091. With AVX2 (forced) 15 against 44, 166 against
#: 420, 206 against 376, and 586 against 729 at 2 MB.
DENSE_TABLE_MAX_BYTES = 2**20
#: Below this share of 1 bits, a layer whose dense rows sum by those tables,
#: or a float64 readout, sums the weight rows of the active bits instead
#: (``SPARSE_DENSITY``, 0.2, is for the BLAS product of wider layers). The
#: two paths cross at 8-12% (Intel Xeon, one thread): 256 -> 10 float64 on
#: 64 / 1024 rows at about 10% / 8%, 256 -> 256 by tables on 16 / 64 / 1024
#: rows at 12% / 10% / 9%; by BLAS, 512 -> 512 on 256 rows at 20%, 1024 ->
#: 1024 on 1024 rows at 14%.
TABLE_SPARSE_DENSITY = 0.1


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

    # many dense rows by tables (float32 only): a row of words is the map of
    # one pixel, the layer a 1 x 1 convolution
    by_tables = None
    if (
        dtype == np.float32
        and SumConv.nibble_bytes(width, 1, n_out) <= DENSE_TABLE_MAX_BYTES
    ):
        one_pixel = {"shape": [width, 1, 1], "kernel": 1, "stride": 1, "padding": 0}
        as_conv = {**layer, "attrs": {**one_pixel, "channels": n_out}}
        sums = SumConv(as_conv, ctx)
        g = map_geometry(as_conv["attrs"])
        no_epilogue = map_conv_epilogue((), ctx, n_out)

        def by_tables(bits, rows, n_threads):
            out = empty((rows, n_out), np.float32)
            args = (*sums.args(rows), g, bias, *no_epilogue([bits], rows), out)
            run_rows(sum_conv, rows, n_threads, bits.reshape(-1), *args)
            return out

    narrow = by_tables is not None or dtype == np.float64
    sparse_below = TABLE_SPARSE_DENSITY if narrow else SPARSE_DENSITY

    def run(xs, n, n_threads):
        rows = xs[0].shape[0]
        # per input, whether it sums the weight rows of its active bits (few
        # rows or sparse bits), each input's share of bits counted once
        few = [
            rows < BLAS_MIN_ROWS or density(bits, width) < sparse_below for bits in xs
        ]
        if by_tables is not None and len(xs) == 1 and not few[0]:
            return by_tables(xs[0], rows, n_threads)
        acc = empty((rows, n_out), dtype)
        acc[:] = bias
        for bits, by_active in zip(xs, few, strict=True):
            if by_active:
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
