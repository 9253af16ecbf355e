"""The float32 tables of real weights on bit maps: when a layer makes them,
when a call reads them, and the bound of the sums they give.

A real-weights convolution on ``pixel_bits`` maps (and a ``bit_dense``
layer, a convolution of one-pixel maps) sums its weights over the active
bits by table look-ups (:func:`~sksign.deploy._kernels.sum_conv`): one
precomputed sum per group of 4 or 8 bits (:func:`~sksign.deploy._maps.nibble_tables`).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._kernels import FLOAT_LANES, padded_width
from sksign.deploy._maps import nibble_tables, words_per_pixel
from sksign.deploy._ops._common import density

__all__ = [
    "BYTE_TABLE_MAX_BYTES",
    "BYTE_TABLE_ROW_BYTES",
    "LUT_MAX_BYTES",
    "NIBBLE_TABLE_ROW_BYTES",
    "SPARSE_MAP_CHANNELS",
    "SumConv",
    "sum_bound",
]

#: Largest nibble tables (bytes, per layer) of a real-weights convolution on
#: bit maps (they take 4 times the float32 weights); past this, the layer
#: always sums by weight rows.
LUT_MAX_BYTES = 2**25
#: Largest byte tables (bytes, per layer, counted as for whole words of
#: groups): 8 times the nibble tables, made for the narrow layers only. With
#: AVX-512 the byte tables of layers wider than 16-to-16 channels (3 x 3:
#: 1.2 MB counted so) lose to their nibbles at any batch (register blocks
#: of 16 floats, Intel Xeon: 16-to-32 channels 8% slower at batch 1,
#: 32-to-32 27-32% slower at batches 1 and 16).
BYTE_TABLE_MAX_BYTES = 2**22 if FLOAT_LANES == 8 else 2**21
#: A call sums by the byte tables when they take at most this many bytes per
#: output row (measured on an AMD EPYC, AVX2: batches of 64 of the first
#: stages of a ResNet-18 of width 16 gain 10-40%; since the table sums were
#: vectorised, a batch of one gains too: whole WRN-10-2 and ResNet-18 nets
#: 4-6% faster at batch 1 than with 128 bytes, the same at batches 8 and 64).
#: With AVX-512, the 16-channel layer's bytes gain from about 16 maps of
#: 32 x 32 on (19% at 16) and lose at one (20%): 64 bytes a row.
BYTE_TABLE_ROW_BYTES = 4096 if FLOAT_LANES == 8 else 64
#: ... and by the nibble tables when they take at most this many bytes per
#: output row, else by weight rows (measured alike on maps half set: the
#: tables take about half the time of the weight rows, even for 4 output
#: rows of a 9.4 MB table; whole nets at batches 1 and 8 run 5-12% faster
#: (WRN-10-2, ResNet-18) than with the former 4096 bytes; the limit keeps a
#: table of tens of MB from being read for a row or two).
NIBBLE_TABLE_ROW_BYTES = 2**18
#: A real-weights convolution sums by weight rows, whatever its tables, on
#: maps of C channels with fewer than C / SPARSE_MAP_CHANNELS of their bits
#: set (measured alike on batches of 64: weight rows win below about 2%, 4%,
#: 20% and 30% set bits at 16, 32, 64 and 128 channels; at none set they
#: take 2-15x less time than the tables).
SPARSE_MAP_CHANNELS = 800


class SumConv:
    """What :func:`~sksign.deploy._kernels.sum_conv` reads of a real-weights map conv.

    Made once per layer at load: the weights padded to whole vectors, and
    the tables of :func:`~sksign.deploy._maps.nibble_tables` by nibbles
    (unless past :data:`LUT_MAX_BYTES`: then the layer sums by weight rows)
    and by bytes (if at most :data:`BYTE_TABLE_MAX_BYTES`), shared by the
    layers that name the same tensor. A call sums by bytes when their table
    takes at most :data:`BYTE_TABLE_ROW_BYTES` per output row (half the
    look-ups; fewer rows would spend more on reading the larger table), by
    nibbles when theirs takes at most :data:`NIBBLE_TABLE_ROW_BYTES`, else
    by weight rows (a quarter of the bytes of the nibble tables: a row or
    two of a layer whose tables take MBs, where reading the tables from
    memory costs more than the sums they save). Maps with fewer than
    ``C / SPARSE_MAP_CHANNELS`` of their bits set (spikes, mostly) sum by
    weight rows too: their cost follows the active bits, the tables' does
    not.

    Parameters
    ----------
    layer : dict
        A layer with the attributes of a map convolution and ``weight_t``.
    ctx : Context
    """

    def __init__(self, layer, ctx):
        attrs = layer["attrs"]
        c, k, oc = attrs["shape"][0], attrs["kernel"], attrs["channels"]
        width = padded_width(oc)
        self.channels = c
        self.wt = ctx.tensor(layer, "weight_t")

        def pad(wt):
            out = np.zeros((len(wt), width), np.float32)
            out[:, :oc] = wt
            return out

        self.weights = ctx.derive("padded", layer, "weight_t", pad)
        nibbles = self.nibble_bytes(c, k, oc)
        self.tables = {}
        for bits, size, most in (
            (4, nibbles, LUT_MAX_BYTES),
            (8, 8 * nibbles, BYTE_TABLE_MAX_BYTES),
        ):
            if size <= most:
                self.tables[bits] = ctx.derive(
                    f"tables{bits}",
                    layer,
                    "weight_t",
                    lambda wt, bits=bits: nibble_tables(wt, c, k, width, bits),
                )

    @staticmethod
    def nibble_bytes(channels, kernel, oc):
        """Bytes of the nibble tables of a `kernel` x `kernel` convolution of
        `channels` to `oc` channels."""
        return (
            kernel * kernel * 16 * words_per_pixel(channels) * 16 * padded_width(oc) * 4
        )

    def sparse(self, maps):
        """Whether the bit maps `maps` (a call's input words) are sparse enough
        to sum by weight rows."""
        c = self.channels
        pixels = maps.reshape(-1, words_per_pixel(c))
        return density(pixels, c) * SPARSE_MAP_CHANNELS < c

    def _tables(self, rows, sparse):
        """The tables a call of `rows` output rows reads (None: weight rows)."""
        if sparse:
            return None
        byte, nibble = self.tables.get(8), self.tables.get(4)
        if byte is not None and byte[0].nbytes <= rows * BYTE_TABLE_ROW_BYTES:
            return byte
        if nibble is not None and nibble[0].nbytes <= rows * NIBBLE_TABLE_ROW_BYTES:
            return nibble
        return None

    def args(self, rows, sparse=False):
        """``(table, group_word, group_shift, weights, by_table)`` for `rows`
        rows (of :meth:`sparse` maps)."""
        tables = self._tables(rows, sparse)
        if tables is None:
            width = self.weights.shape[1]
            no_table = np.zeros((0, 0, 16, width), np.float32)
            return (
                no_table,
                np.zeros(0, np.int64),
                np.zeros(0, np.uint64),
                self.weights,
                False,
            )
        return (*tables, self.weights, True)

    def bound(self, rows, sparse=False):
        """:func:`sum_bound` of the sums a call of `rows` rows makes."""
        tables = self._tables(rows, sparse)
        # at most one term per tap and group of bits, or per active bit
        n_terms = (
            len(self.wt) if tables is None else tables[0].shape[0] * tables[0].shape[1]
        )
        key = ("bound", n_terms)
        if key not in self.__dict__:
            self.__dict__[key] = sum_bound(self.wt, n_terms)
        return self.__dict__[key]


def sum_bound(wt, n_terms):
    """Per output, how far a float32 sum may be from the exact sum of active weights.

    A float32 sum of at most `n_terms` terms, each a weight or a table entry
    within ``u = 2**-24`` of the sum of its absolute weights
    (:func:`~sksign.deploy._maps.nibble_tables`), lies within
    ``gamma_(n + 1) sum |w|`` of the exact sum; this returns twice
    ``gamma_(n + 2) sum |w|`` (``gamma_m = m u / (1 - m u)``), in float64.
    """
    m = (n_terms + 2) * 2.0**-24
    abs_sum = np.abs(wt.astype(np.float64)).sum(axis=0)
    return 2.0 * m / (1.0 - m) * abs_sum + 1e-300
