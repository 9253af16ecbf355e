"""``bit_dense``: real weights on bits, summed over one or more inputs.

Few rows or sparse bits: the weight rows of the active bits are summed;
many dense rows: by table look-ups where the layer's nibble tables are
small (a row of words is a map of one pixel: the sums of a 1 x 1 map
convolution, :class:`~sksign.deploy._ops._tables.SumConv`; a float64
readout of up to 64 outputs reads float64 tables,
:func:`~sksign.deploy._kernels.row_table_sums`), else a BLAS product of
the unpacked 0/1 rows.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import (
    LANES,
    UNROLL_FLOATS,
    bit_accumulate,
    row_table_sums,
    sum_conv,
    unpack_words,
)
from sksign.deploy._maps import map_geometry, nibble_tables
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
#: Largest float64 tables (bytes) of a float64 readout of up to 64 outputs
#: whose many dense rows sum by them rather than a float64 BLAS product.
#: Measured alike, rows half set, tables against OpenBLAS at 16 / 64 / 1024
#: rows: 256 -> 10 units (0.12 MB) 5.7 / 9.6 / 88 against 9.0 / 15 / 307
#: us; 1024 -> 32 (1 MB) 13 / 32 / 457 against 23 / 109 / 1916; 1024 -> 64
#: (2 MB) 27 / 92 / 944 against 72 / 183 / 3042; 2048 -> 64 (4 MB) 108 /
#: 219 / 1793 against 138 / 383 / 6225. With AVX2 (forced) 6.1 / 11 / 110
#: against 10 / 23 / 323, ..., 118 / 258 / 2559 against 142 / 439 / 7258.
READOUT_TABLE_MAX_BYTES = 2**22
#: Below this share of 1 bits, a layer whose dense rows sum by those tables,
#: or a float64 readout, sums the weight rows of the active bits instead
#: (``SPARSE_DENSITY``, 0.2, is for the BLAS product of wider layers). The
#: two paths cross at 8-12% (Intel Xeon, one thread): 256 -> 10 float64 on
#: 64 / 1024 rows at about 10% / 8%, 256 -> 256 by tables on 16 / 64 / 1024
#: rows at 12% / 10% / 9%; by BLAS, 512 -> 512 on 256 rows at 20%, 1024 ->
#: 1024 on 1024 rows at 14%.
TABLE_SPARSE_DENSITY = 0.1
#: ... and a float64 readout that sums by its float64 tables, below this
#: share. Measured alike, against the tables: 256 -> 10 units on 16 / 64 /
#: 1024 rows at about 9% / 6% / 3%, 1024 -> 10 at 5% / 4% / under 2%, 256
#: -> 64 at 9% / 8% / 5%.
READOUT_SPARSE_DENSITY = 0.05


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

    # many dense rows by tables: a row of words is the map of one pixel, the
    # layer a 1 x 1 convolution
    one_pixel = {"shape": [width, 1, 1], "kernel": 1, "stride": 1, "padding": 0}
    g = map_geometry(one_pixel)
    by_tables = None
    if (
        dtype == np.float32
        and SumConv.nibble_bytes(width, 1, n_out) <= DENSE_TABLE_MAX_BYTES
    ):
        as_conv = {**layer, "attrs": {**one_pixel, "channels": n_out}}
        sums = SumConv(as_conv, ctx)
        no_epilogue = map_conv_epilogue((), ctx, n_out)

        def by_tables(bits, rows, n_threads):
            out = empty((rows, n_out), np.float32)
            args = (*sums.args(rows), g, bias, *no_epilogue([bits], rows), out)
            run_rows(sum_conv, rows, n_threads, bits.reshape(-1), *args)
            return out

    elif (
        dtype == np.float64
        and n_out <= UNROLL_FLOATS
        and 2 * SumConv.nibble_bytes(width, 1, n_out) <= READOUT_TABLE_MAX_BYTES
    ):
        # a float64 readout: tables of float64 sums, read row by row
        tables = ctx.derive(
            "tables64",
            layer,
            "weight_t",
            lambda wt: nibble_tables(wt, width, 1, LANES, 4, np.float64),
        )

        def by_tables(bits, rows, n_threads):
            sums = empty((rows, tables[0].shape[3]), np.float64)
            out = empty((rows, n_out), np.float32)
            args = (bits, *tables, g, bias, sums, out)
            run_rows(row_table_sums, rows, n_threads, *args)
            return out

    if by_tables is not None and dtype == np.float64:
        sparse_below = READOUT_SPARSE_DENSITY
    elif by_tables is not None or dtype == np.float64:
        sparse_below = TABLE_SPARSE_DENSITY
    else:
        sparse_below = SPARSE_DENSITY

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
