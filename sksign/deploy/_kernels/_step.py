"""Real weights on bits followed by a step: the exact threshold decision.

Bits in the unit layout of :mod:`sksign.deploy._kernels._bits`; serial over a
range of rows (and output columns), GIL released (the caller splits the work).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from numba import njit

from sksign.deploy._kernels._bits import (
    ROW_BLOCK,
    flag_buffers,
    pack_flags,
    unit_of_bit,
    word_bit,
)
from sksign.kernels import popcount64

__all__ = ["exact_sum", "step_certified", "step_int16"]


@njit(cache=True, nogil=True, inline="always")
def exact_sum(xw, i, w_rows, o):
    """``sum(w_rows[o, u])`` over the set bits u of row i, in float64."""
    s = 0.0
    n_in = w_rows.shape[1]
    for w in range(xw.shape[1]):
        bits = xw[i, w]
        while bits:
            low = bits & (~bits + np.uint64(1))
            pos = popcount64(low - np.uint64(1))
            bits ^= low
            u = unit_of_bit(w, pos)
            if u < n_in:
                s += np.float64(w_rows[o, u])
    return s


@njit(cache=True, nogil=True, fastmath=False)
def step_int16(xw, q, scale, threshold, w_rows, out, r0, r1, c0, c1):
    """Real weights x bits, then the step: ``1[sum of active w >= threshold]``.

    Reads 16-bit weights ``q`` (``w ~ q * scale`` per output, so
    ``|w - q * scale| <= scale / 2``) and sums them exactly in int32. With
    ``k`` active bits the true sum lies within ``k * scale / 2`` of
    ``scale * sum(q)``; where that interval does not contain the threshold
    the bit is certain, elsewhere (rarely) the float32 weights of the output
    are summed in float64 (``w_rows``, one row per output). The bit is thus
    the step of the exact sum, whatever the batch, at half the weight bytes
    of float32.

    Parameters
    ----------
    xw : ndarray of shape (n_rows, n_words), dtype uint64
        Packed input bits.
    q : ndarray of shape (n_in, n_out), dtype int16
        Quantised weights, one row per input unit.
    scale : ndarray of shape (n_out,), dtype float64
        Quantisation step per output.
    threshold : ndarray of shape (n_out,), dtype float32
        Per-output threshold (minus the bias).
    w_rows : ndarray of shape (n_out, n_in), dtype float32
        The exact weights, one row per output.
    out : ndarray of shape (n_rows, ceil(n_out / 64)), dtype uint64
        Receives the packed bits of outputs ``c0:c1``; `c0` must be a
        multiple of 64 (words are not shared between column ranges).
    r0, r1, c0, c1 : int
        Row and output-column ranges.
    """
    n_words = xw.shape[1]
    n_in = q.shape[0]
    n = c1 - c0
    acc = np.zeros((ROW_BLOCK, n), dtype=np.int32)
    for b0 in range(r0, r1, ROW_BLOCK):
        b1 = min(b0 + ROW_BLOCK, r1)
        for r in range(b1 - b0):
            a = acc[r]
            for c in range(n):
                a[c] = 0
        for w in range(n_words):
            any_bits = np.uint64(0)
            for i in range(b0, b1):
                any_bits |= xw[i, w]
            while any_bits:
                low = any_bits & (~any_bits + np.uint64(1))
                pos = popcount64(low - np.uint64(1))
                any_bits ^= low
                u = unit_of_bit(w, pos)
                if u >= n_in:
                    continue
                row = q[u, c0:c1]
                for i in range(b0, b1):
                    if xw[i, w] & low:
                        a = acc[i - b0]
                        for c in range(n):
                            a[c] += row[c]
        for i in range(b0, b1):
            k = 0
            for w in range(n_words):
                k += popcount64(xw[i, w])
            for w in range(c0 // 64, (c1 + 63) // 64):
                out[i, w] = 0
            a = acc[i - b0]
            for c in range(n):
                o = c0 + c
                t = np.float64(threshold[o])
                v = scale[o] * a[c] - t
                bound = k * scale[o] * (0.5 + 1e-9) + 1e-300
                if abs(v) > bound:
                    fire = v > 0  # no branch on the bit
                else:  # rare: too close to tell from the int16 sums
                    fire = exact_sum(xw, i, w_rows, o) >= t
                out[i, o // 64] |= np.uint64(fire) * word_bit(o)


@njit(cache=True, nogil=True, fastmath=False)
def step_certified(z, xw, abs_sum, threshold, w_rows, out, r0, r1):
    """The step of float32 sums ``z`` made exact: ``1[sum of active w >= threshold]``.

    ``z[i, o]`` is a float32 sum of the active weights in any order (a BLAS
    product of 0/1 rows); its error is at most ``gamma_k * abs_sum[o]``
    with ``gamma_k = k u / (1 - k u)``, ``u = 2**-24``, for ``k`` active
    bits. Where that interval leaves no doubt the bit is set from ``z``;
    elsewhere the weights are summed in float64 (`w_rows`).

    Parameters
    ----------
    z : ndarray of shape (n_rows, n_out), dtype float32
        Approximate sums.
    xw : ndarray of shape (n_rows, n_words), dtype uint64
        The packed input bits `z` was summed over.
    abs_sum : ndarray of shape (n_out,), dtype float64
        ``sum(|w|)`` over all inputs, per output.
    threshold : ndarray of shape (n_out,), dtype float32
        Per-output threshold.
    w_rows : ndarray of shape (n_out, n_in), dtype float32
        The exact weights, one row per output.
    out : ndarray of shape (n_rows, ceil(n_out / 64)), dtype uint64
        Receives the packed bits.
    r0, r1 : int
        Row range.
    """
    n_out = z.shape[1]
    unit = 2.0**-24
    flag_words, flags = flag_buffers(out.shape[1])
    for i in range(r0, r1):
        k = 0
        for w in range(xw.shape[1]):
            k += popcount64(xw[i, w])
        ku = (k + 2) * unit
        gamma = 2.0 * ku / (1.0 - ku)
        # the bits from z, flags set with no branch (each bit is a coin
        # toss) and packed into words, counting the units too close to tell
        # in float32 ...
        unsure = 0
        for o in range(n_out):
            v = np.float64(z[i, o]) - np.float64(threshold[o])
            unsure += abs(v) <= gamma * abs_sum[o] + 1e-300
            flags[o] = v > 0
        pack_flags(flag_words, out, i)
        if unsure == 0:
            continue
        # ... then (rare) their exact sums
        for o in range(n_out):
            t = np.float64(threshold[o])
            v = np.float64(z[i, o]) - t
            if abs(v) <= gamma * abs_sum[o] + 1e-300:
                bit = word_bit(o)
                fire = exact_sum(xw, i, w_rows, o) >= t
                out[i, o // 64] = (out[i, o // 64] & ~bit) | (np.uint64(fire) * bit)
