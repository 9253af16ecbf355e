"""What the op units share: splitting work over threads, tuning, bit helpers.

Numpy and numba only: no torch.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from functools import cached_property
from itertools import pairwise

import numpy as np

from sksign._threads import run_in_threads
from sksign.deploy._buffers import aligned_arrays, empty
from sksign.deploy._format import schema_error
from sksign.deploy._kernels import (
    count_bits,
    step_certified,
    step_int16,
    unpack_words,
)
from sksign.deploy._kernels._lut import (
    LUT_BLOCKS,
    LUT_KIND,
    LUT_ROWS,
    LUT_SPLIT_OUTPUTS,
    lut_available,
    lut_inputs,
    lut_weights,
    step_by_lut,
)
from sksign.deploy._kernels._madd import (
    BLOCK_ROWS,
    MAX_INPUTS,
    pair_weights,
)
from sksign.deploy._kernels._madd import conv_step_by_pairs as conv_pair_kernel
from sksign.deploy._kernels._madd import step_by_pairs as dense_kernel
from sksign.kernels import packed_to_words, target_has

__all__ = [
    "BLAS_MIN_ROWS",
    "LUT_STEP_MAX_BYTES",
    "LUT_STEP_MIN_ROWS",
    "MAP_CONV_EPILOGUES",
    "SPARSE_DENSITY",
    "Context",
    "LutSteps",
    "channels_first",
    "density",
    "lut_tile_buffers",
    "map_conv_epilogue",
    "one_pixel",
    "pack_rows",
    "quantise",
    "row_runner",
    "run_rows",
    "run_rows_cols",
    "same_maps",
    "split",
    "step_by_pairs",
    "step_rows",
    "unpack_rows",
]

#: From this many rows on, real weights on bits go through a BLAS matrix
#: product of the unpacked 0/1 rows; below it, the weight rows of the active
#: bits are summed (measured: the sum wins for a few rows, where the product
#: is bound by reading the weights, and loses once the product is compute
#: bound).
BLAS_MIN_ROWS = 8
#: Below this share of 1 bits (sparse spikes), summing the active weight rows
#: beats the matrix product at any batch size (it costs in proportion to the
#: active bits, the product does not).
SPARSE_DENSITY = 0.2
#: Rows (else columns) of one BLAS call of :func:`blas_product`, at least,
#: and its multiply-adds, at least (a hand-over to a thread costs about
#: 0.085 ms; 2**23 multiply-adds take about 0.2 ms). BLAS libraries round a
#: row's sums differently with the rows or columns of the call (OpenBLAS
#: does at 64 or 512 rows, not at 48 or 768), so the blocks are set by the
#: product's shape, never by the thread count; each call packs the other
#: operand again, about 5% of a call of 128 rows of 784 x 1024 (measured
#: with OpenBLAS 0.3.31 on an AMD EPYC, Zen 3).
BLAS_BLOCK_ROWS = 128
BLAS_BLOCK_COLS = 256
BLAS_BLOCK_WORK = 2**23
#: Largest look-up tables (bytes, per layer: 8 per input and output) of a
#: layer of real weights on bits before a step (:class:`LutSteps`); past
#: this, its products of many rows stay with ``vpmaddwd``.
LUT_STEP_MAX_BYTES = 2**28
#: Rows from which such a layer sums by its look-up tables: a call computes
#: whole tiles of :data:`~sksign.deploy._kernels._lut.LUT_ROWS` rows.
LUT_STEP_MIN_ROWS = 32
#: ... a dense layer (:func:`step_rows`) too, whose tables (8 bytes a weight,
#: 8 MB at 1024 x 1024) a call reads from memory where ``vpmaddwd`` reads 2
#: bytes a weight; ...
LUT_DENSE_MIN_ROWS = LUT_STEP_MIN_ROWS
#: ... and, with ``vpshufb`` (AVX2 without AVX-512 BW), from this many rows
#: per tile of :data:`~sksign.deploy._kernels._lut.LUT_ROWS` (64) rows: the
#: look-ups cost about the same for a tile whatever its rows, ``vpmaddwd``
#: in proportion to the rows. The hidden layer of a DHN, one thread, 64-row
#: tiles, look-ups against ``vpmaddwd`` (AVX2 paths forced on an Intel Xeon,
#: tables on cache lines): 1024 x 1024 at 32 / 48 / 64 / 80 / 96 / 112 / 128
#: rows 0.70 / 0.72 / 0.74 / 1.26 / 1.27 / 1.33 / 1.33 ms against 0.56 /
#: 0.79 / 1.03 / 1.24 / 1.55 / 1.76 / 2.05; 4096 x 4096 16.8 / 17.2 / 17.8 /
#: 26.0 / 26.3 / 26.0 / 26.2 against 11.6 / 16.0 / 20.4 / 24.2 / 29.0 / 30.7
#: / 34.2. On an AMD EPYC (Zen 4, AVX2 paths, tables then off the lines) a
#: DHN of two 1024-unit layers took 2.0 / 3.6-3.9 / 4.4-4.7 ms at 32 / 96 /
#: 128 rows against 1.5 / 3.4-3.8 / 4.6-4.9 by ``vpmaddwd`` (4096 units: 33
#: against 31 ms at 96 rows, 35 against 39 at 128): 56 rows a tile takes
#: the tables for full tiles (64 rows: 1.4x here) and leaves a tile and a
#: half (96 rows, a loss there) to ``vpmaddwd``. With ``vpermb`` the tables
#: win from 32 rows at 1024 x 1024 (0.38 against 0.42 ms; 4096 x 4096 breaks
#: even at 48 rows): no such rule.
LUT_DENSE_TILE_ROWS = 0 if LUT_KIND == "vbmi" else 56


class Context:
    """What an op's ``prepare`` sees of the net being loaded.

    Parameters
    ----------
    tensors : dict of str to ndarray
        The net's arrays, validated.
    widths : dict of str to int
        Number of units of each value, by name.
    """

    def __init__(self, tensors, widths):
        self.tensors = tensors
        self.widths = widths
        #: arrays derived from the tensors at load, by (kind, tensor name):
        #: layers that name the same tensor share them
        self.derived = {}

    def tensor(self, layer, role):
        """The array that `layer` names for `role`."""
        return self.tensors[layer["tensors"][role]]

    def width(self, layer):
        """Width of the (first) input of `layer`."""
        return self.widths[layer["inputs"][0]]

    def derive(self, kind, layer, role, make):
        """``make(array)`` of the tensor `role` of `layer`, made once per tensor,
        its arrays :func:`~sksign.deploy._buffers.aligned`."""
        key = (kind, layer["tensors"][role])
        got = self.derived.get(key)
        if got is None:
            # vector loads of tables and weight rows never straddle two lines
            got = self.derived[key] = aligned_arrays(make(self.tensors[key[1]]))
        return got

    def error(self, layer, message):
        """The ValueError of an invalid layer."""
        return schema_error(f"layer {layer['name']!r}: {message}")


def split(n, parts):
    """``parts`` contiguous ranges covering ``range(n)`` (none empty)."""
    parts = max(1, min(parts, n))
    bounds = [n * k // parts for k in range(parts + 1)]
    return [(a, b) for a, b in pairwise(bounds) if b > a]


def run_rows_cols(kernel, n_rows, n_cols, n_threads, *args):
    """Run ``kernel(*args, r0, r1, c0, c1)`` split over rows (or columns)."""
    if n_threads <= 1:
        kernel(*args, 0, n_rows, 0, n_cols)
        return
    if n_rows >= 4 * n_threads:
        tasks = [(*args, a, b, 0, n_cols) for a, b in split(n_rows, n_threads)]
    else:
        tasks = [(*args, 0, n_rows, a, b) for a, b in split(n_cols, n_threads)]
    run_in_threads(kernel, tasks, n_threads)


def run_rows(kernel, n_rows, n_threads, *args):
    """Run ``kernel(*args, r0, r1)`` split over rows."""
    if n_threads <= 1 or n_rows == 1:
        kernel(*args, 0, n_rows)
        return
    tasks = [(*args, a, b) for a, b in split(n_rows, n_threads)]
    run_in_threads(kernel, tasks, n_threads)


def blas_product(x, w, n_threads):
    """``x @ w`` as a new C-contiguous array, split over our `n_threads`.

    A forward holds the BLAS library's own threads at one
    (:func:`sksign.deploy._runtime.blas_on_one_thread`) and each of our
    threads runs BLAS on blocks of rows (of columns, for fewer rows): a
    BLAS library's threads spin for up to about 0.1 s after each call
    (OpenBLAS's ``THREAD_TIMEOUT``), so with them the bit kernels of the
    next layers had shared their cores with idle BLAS threads. The blocks
    follow from the shape alone (:data:`BLAS_BLOCK_ROWS`), so a row's sums
    are the same on any number of threads.
    """
    (rows, inner), cols = x.shape, w.shape[1]
    row_block = max(BLAS_BLOCK_ROWS, BLAS_BLOCK_WORK // max(1, inner * cols))
    col_block = max(BLAS_BLOCK_COLS, BLAS_BLOCK_WORK // max(1, rows * inner))
    out = empty((rows, cols), np.result_type(x, w))
    if rows >= 2 * row_block:
        tasks = [(a, b, 0, cols) for a, b in split(rows, rows // row_block)]
    elif cols >= 2 * col_block:
        tasks = [(0, rows, a, b) for a, b in split(cols, cols // col_block)]
    else:
        return np.matmul(x, w, out=out)  # one call (C-contiguous)

    def block(r0, r1, c0, c1):
        np.matmul(x[r0:r1], w[:, c0:c1], out=out[r0:r1, c0:c1])

    run_in_threads(block, tasks, n_threads)
    return out


def row_runner(n_threads):
    """``run(kernel, n_rows, *args)`` on `n_threads` (the callback of _maps)."""

    def run(kernel, n_rows, *args):
        run_rows(kernel, n_rows, n_threads, *args)

    return run


def density(words, width):
    """Share of 1 bits among the `width` units of each row of `words`."""
    return count_bits(words) / max(1, words.shape[0] * width)


def pack_rows(bits):
    """uint64 words of a 2-D array of 0/1 values (unit layout of the kernels)."""
    bits = np.ascontiguousarray(bits, dtype=np.uint8)
    return packed_to_words(np.packbits(bits, axis=1), bits.shape[1])


def unpack_rows(words, width):
    """0/1 uint8 rows of `width` units of packed `words` (one thread)."""
    out = empty((words.shape[0], width), np.uint8)
    unpack_words(words, width, out, 0, words.shape[0])
    return out


def channels_first(rows, n, h, w):
    """``(n * h * w, channels)`` rows as ``(n, channels * h * w)`` maps."""
    return np.ascontiguousarray(
        rows.reshape(n, h, w, -1).transpose(0, 3, 1, 2).reshape(n, -1)
    )


class LutSteps:
    """The look-up tables of a layer's weights (:mod:`sksign.deploy._kernels._lut`),
    made at their first use: ``tables`` is
    :func:`~sksign.deploy._kernels._lut.lut_weights` of them.

    Parameters
    ----------
    wt : ndarray of shape (n_in, n_out), dtype float32
    """

    def __init__(self, wt):
        self.wt = wt

    @cached_property
    def tables(self):
        return aligned_arrays(lut_weights(self.wt))

    @cached_property
    def steps(self):
        """Per output the step of its 14-bit weights (the tables' scale), 0
        where all its weights are 0 (its look-up sums are then exact)."""
        return np.where(np.abs(self.wt).max(axis=0) > 0, self.tables[1], 0.0)


def quantise(wt):
    """16-bit weights of a layer followed by a step, and what certifies them.

    Returns ``(q, scale, abs_sum, w_rows, pairs, lut)``: ``q = rint(wt / scale)``
    as int16 with ``scale = max |wt| / 32767`` per output (so
    ``|wt - q * scale| <= scale / 2``), ``sum |wt|`` per output, the float32
    weights one row per output (for the rare exact sums), and ``q`` laid
    out for the ``vpmaddwd`` products of many rows
    (:func:`~sksign.deploy._kernels._madd.pair_weights`; None where the CPU
    has no AVX2 or the layer more inputs than int32 sums exactly), and the
    layer's :class:`LutSteps` (None where the CPU has no table look-ups,
    :func:`~sksign.deploy._kernels._lut.lut_available`, or the tables would
    take more than :data:`LUT_STEP_MAX_BYTES`).
    """
    w64 = wt.astype(np.float64)
    top = np.abs(w64).max(axis=0) if len(w64) else np.zeros(wt.shape[1])
    scale = np.where(top > 0, top / 32767.0, 1.0)
    q = np.clip(np.rint(w64 / scale), -32767, 32767).astype(np.int16)
    abs_sum = np.abs(w64).sum(axis=0)
    pairs = None
    if target_has("avx2") and len(q) <= MAX_INPUTS:
        pairs = pair_weights(q)
    lut = None
    n_in, n_out = wt.shape
    lut_bytes = 8 * 64 * -(-n_in // 64) * n_out
    if lut_available() and n_in <= MAX_INPUTS and lut_bytes <= LUT_STEP_MAX_BYTES:
        lut = LutSteps(wt)
    w_rows = np.ascontiguousarray(wt.T)
    return np.ascontiguousarray(q), scale, abs_sum, w_rows, pairs, lut


def step_rows(wt, steps, threshold, x, width, n_out, n_threads, dense=None):
    """``1[bits . wt >= threshold]`` for each row of words `x`.

    `steps` is what :func:`quantise` made of the weights `wt`; `dense`, if
    given, holds the same bits as `x` as 0/1 values (one per unit). A few
    rows sum their int16 weights of the active bits
    (:func:`~sksign.deploy._kernels.step_int16`); more rows multiply the bits
    by the int16 weights with ``vpmaddwd`` where the CPU has AVX2
    (:mod:`sksign.deploy._kernels._madd`), else by a float32 BLAS product;
    from :data:`LUT_DENSE_MIN_ROWS` rows (and :data:`LUT_DENSE_TILE_ROWS` a
    tile) they sum by table look-ups where the CPU has them (AVX-512 VBMI and
    VNNI, or AVX2 without AVX-512 BW: :mod:`sksign.deploy._kernels._lut`);
    each step certified (exact whatever the path).
    """
    q, scale, abs_sum, w_rows, pairs, lut = steps
    rows = x.shape[0]
    out = empty((rows, -(-n_out // 64)), np.uint64)
    if rows < BLAS_MIN_ROWS:
        if n_threads <= 1:
            step_int16(x, q, scale, threshold, w_rows, out, 0, rows, 0, n_out)
        else:  # split the outputs on word boundaries
            args = (x, q, scale, threshold, w_rows, out, 0, rows)
            tasks = [
                (*args, 64 * a, min(64 * b, n_out))
                for a, b in split(out.shape[1], n_threads)
            ]
            run_in_threads(step_int16, tasks, n_threads)
        return out
    tiles = -(-rows // LUT_ROWS)
    if lut is not None and rows >= max(LUT_DENSE_MIN_ROWS, LUT_DENSE_TILE_ROWS * tiles):
        return step_by_lut_tiles(lut, threshold, x, width, w_rows, out, n_threads)
    if pairs is not None:
        args = (x, width, pairs, scale, threshold)
        return step_by_pairs(args, w_rows, out, n_threads, dense_kernel)
    if dense is None:
        dense = empty((rows, width), np.float32)
        run_rows(unpack_words, rows, n_threads, x, width, dense)
    z = blas_product(dense.astype(np.float32, copy=False), wt, n_threads)
    run_rows(step_certified, rows, n_threads, z, x, abs_sum, threshold, w_rows, out)
    return out


def lut_tile_buffers(lut, x, width):
    """``(tiles, idx, x32, sums)``: the tiles of rows of the words `x`
    (`width` units) and the arrays that the look-up kernels of `lut` (a
    :class:`LutSteps`) fill for them
    (:func:`~sksign.deploy._kernels._lut.step_by_lut`)."""
    tiles = -(-x.shape[0] // LUT_ROWS)
    idx = empty((tiles * LUT_BLOCKS, 64 * x.shape[1]), np.uint32)
    # every row read is written first (the pairs of a row fill it whole, and
    # no kernel reads the rows past `x` in the last tile): zeroing it took
    # 3% of a WRN-10-2's forward
    x32 = empty((tiles * LUT_ROWS, -(-width // 2)), np.int32)
    sums = empty((tiles * LUT_ROWS, lut.tables[0].shape[0]), np.int32)
    return tiles, idx, x32, sums


def step_by_lut_tiles(lut, threshold, x, width, w_rows, out, n_threads):
    """Fill `out` with the certified steps of the look-up sums of `lut`
    (a :class:`LutSteps`) on the rows of words `x`.

    Each thread takes whole tiles of rows, bits to step in one task; with
    fewer tiles than threads, the threads take ranges of outputs instead
    (whole words and tiles of outputs) of inputs made first.
    """
    n_out = threshold.shape[0]
    tiles, idx, x32, sums = lut_tile_buffers(lut, x, width)
    args = (x, width, lut.tables, threshold, w_rows, idx, x32, sums, out)
    parts = -(-n_out // LUT_SPLIT_OUTPUTS)
    if n_threads <= 1 or (tiles < n_threads and parts < 2):
        step_by_lut(*args, 0, tiles, 0, n_out)
    elif tiles >= n_threads:
        tasks = [(*args, a, b, 0, n_out) for a, b in split(tiles, n_threads)]
        run_in_threads(step_by_lut, tasks, n_threads)
    else:
        lut_inputs(x, width, idx, x32, 0, tiles)
        tasks = [
            (*args, 0, tiles, a * LUT_SPLIT_OUTPUTS, min(n_out, b * LUT_SPLIT_OUTPUTS))
            for a, b in split(parts, n_threads)
        ]
        run_in_threads(step_by_lut, tasks, n_threads)
    return out


def step_by_pairs(args, w_rows, out, n_threads, kernel=None):
    """Fill `out` with the certified steps of the ``vpmaddwd`` products.

    `kernel` is :func:`~sksign.deploy._kernels._madd.step_by_pairs` (dense
    rows, ``args = (x, n_in, pairs, scale, threshold)``) or, by default,
    :func:`~sksign.deploy._kernels._madd.conv_step_by_pairs` (a map
    convolution, ``args = (maps, g, channels, pairs, scale, threshold)``);
    each thread takes whole tiles of rows, bits to step in one task.
    """
    kernel = kernel or conv_pair_kernel
    pairs = args[-3]
    rows, n_in = out.shape[0], w_rows.shape[1]
    tiles = -(-rows // BLOCK_ROWS)
    # the kernels write every row of the input whole (patch_pairs, pair_bits);
    # the last tile's rows past it are summed, never read: zeroed alone
    x32 = empty((tiles * BLOCK_ROWS, -(-n_in // 2)), np.int32)
    x32[rows:] = 0
    n_blocks = len(pairs) // max(x32.shape[1], 1)
    sums = empty((len(x32), n_blocks * pairs.shape[1]), np.int32)
    args = (*args, w_rows, x32, sums, out)
    if n_threads <= 1:
        kernel(*args, 0, tiles)
    else:
        tasks = [(*args, a, b) for a, b in split(tiles, n_threads)]
        run_in_threads(kernel, tasks, n_threads)
    return out


#: What a map convolution takes over (see :mod:`sksign.deploy._fusion`): the
#: BatchNorm after it, the residual add, or both in that order.
MAP_CONV_EPILOGUES = (("channel_affine", "add"), ("add",))


def map_conv_epilogue(epilogue, ctx, oc):
    """``finish(xs, rows) -> (scale, shift, residual)`` for the convolution's
    epilogue kernels (:func:`~sksign.deploy._kernels._conv.epilogue_rows`):
    the ``channel_affine`` and ``add`` layers in `epilogue`, empty arrays for
    those absent; the residual is the run's second input."""
    scale = shift = np.zeros(0, np.float32)
    adds = False
    for layer in epilogue:
        if layer["op"] == "channel_affine":
            scale, shift = ctx.tensor(layer, "scale"), ctx.tensor(layer, "shift")
        else:  # "add": the other input, after the conv's own
            adds = True
    none = np.zeros((0, 0), np.float32)

    def finish(xs, rows):
        residual = xs[1].reshape(rows, oc) if adds else none
        return scale, shift, residual

    return finish


def same_maps(shape, attrs):
    """Geometry of a map op whose output has the shape of its input."""
    return tuple(shape)


def one_pixel(shape, attrs):
    """Geometry of a map op that pools each channel into one pixel."""
    return shape[0], 1, 1
