"""Numba kernels of packed bit layers: sign packing, XNOR-popcount, bit sums.

The layer kernels of :mod:`sksign.deploy`. Bits travel as C-contiguous
``uint64`` words laid out as :func:`~sksign.kernels.packed_to_words` lays out
:func:`~sksign.kernels.pack_bits` codes: unit ``u`` of a row is bit
``8 * ((u % 64) // 8) + 7 - u % 8`` of word ``u // 64`` (bytes most
significant bit first, read as little-endian words), padding bits zero. So
weights packed with :func:`~sksign.kernels.pack_bits` and activations packed
here meet bit for bit, and ``popcount(a ^ w)`` (:func:`popcount64`) counts
their disagreements.

Every kernel is serial, works on a range of rows ``[r0, r1)`` and of output
columns ``[c0, c1)`` and releases the GIL, so the caller splits the work over
threads (rows for batches, columns for a single row) with results that never
depend on the split.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from numba import njit

from sksign.kernels._popcount import popcount64

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

#: Rows of a block in :func:`bit_accumulate` (they share each weight row read).
ROW_BLOCK = 4

#: Output columns of a tile in :func:`xnor_affine` (its weights and counters
#: stay in L1).
XNOR_TILE = 128
#: Input words per carry-save group in :func:`xnor_affine` (one popcount each).
XNOR_GROUP = 8
#: Rows from which :func:`xnor_affine` goes by tiles (fewer rows read the
#: weights in place: copying a tile would cost more than it saves).
XNOR_TILE_MIN_ROWS = 4


@njit(cache=True, nogil=True, inline="always")
def unit_of_bit(word, pos):
    """Unit index of bit `pos` (0 = least significant) of word `word`."""
    return 64 * word + 8 * (pos // 8) + 7 - pos % 8


@njit(cache=True, nogil=True, fastmath=False)
def count_bits(words):
    """Number of 1 bits in a 2-D array of uint64 words."""
    s = 0
    for i in range(words.shape[0]):
        for w in range(words.shape[1]):
            s += popcount64(words[i, w])
    return s


@njit(cache=True, nogil=True, fastmath=False)
def pack_ge(z, threshold, out, r0, r1):
    """``out[i]`` = the packed bits ``z[i, u] >= threshold[u]``, rows ``r0:r1``.

    Parameters
    ----------
    z : ndarray of shape (n_rows, n_units), float32 or float64
        Pre-activations.
    threshold : ndarray of shape (n_units,)
        Per-unit threshold (0 for the step ``1[z >= 0]``); NaN never fires.
    out : ndarray of shape (n_rows, ceil(n_units / 64)), dtype uint64
        Receives the words; padding bits are zero.
    r0, r1 : int
        Row range.
    """
    n_units = z.shape[1]
    n_words = out.shape[1]
    for i in range(r0, r1):
        for w in range(n_words):
            word = np.uint64(0)
            base = 64 * w
            stop = min(64, n_units - base)
            for j in range(stop):
                u = base + j
                if z[i, u] >= threshold[u]:
                    pos = 8 * (j // 8) + 7 - j % 8
                    word |= np.uint64(1) << np.uint64(pos)
            out[i, w] = word


@njit(cache=True, nogil=True, fastmath=False)
def unpack_words(words, n_units, out, r0, r1):
    """``out[i, u]`` = bit ``u`` of row ``i`` (0 or 1), rows ``r0:r1``."""
    for i in range(r0, r1):
        for u in range(n_units):
            w = u // 64
            j = u % 64
            pos = 8 * (j // 8) + 7 - j % 8
            out[i, u] = (words[i, w] >> np.uint64(pos)) & np.uint64(1)


@njit(cache=True, nogil=True, inline="always")
def _csa(a, b, c):
    """Carry-save adder of three words, bit by bit: ``(carry, sum)``."""
    u = a ^ b
    return (a & b) | (u & c), u ^ c


@njit(cache=True, nogil=True, inline="always")
def _csa8(s1, s2, s4, d0, d1, d2, d3, d4, d5, d6, d7):
    """Add eight words to the bit-sliced counters ``s1, s2, s4`` (Harley-Seal).

    Returns the new counters and the carry word of weight 8: per bit,
    ``s1 + 2 s2 + 4 s4 + 8 carry`` grows by the eight input bits.
    """
    c2a, s1 = _csa(s1, d0, d1)
    c2b, s1 = _csa(s1, d2, d3)
    c4a, s2 = _csa(s2, c2a, c2b)
    c2a, s1 = _csa(s1, d4, d5)
    c2b, s1 = _csa(s1, d6, d7)
    c4b, s2 = _csa(s2, c2a, c2b)
    c8, s4 = _csa(s4, c4a, c4b)
    return s1, s2, s4, c8


@njit(cache=True, nogil=True, inline="always")
def _affine_store(acc, n_bits, a, b, o, n):
    """``o[c] = (n_bits - 2 acc[c]) * a[c] + b[c]`` for ``c < n``."""
    if n_bits < 2**31:
        # the dot product fits in int32, which converts to float in vectors
        for c in range(n):
            o[c] = np.int32(n_bits - 2 * np.int64(acc[c])) * a[c] + b[c]
    else:  # pragma: no cover - over 2**31 input bits
        for c in range(n):
            o[c] = (n_bits - 2 * np.int64(acc[c])) * a[c] + b[c]


@njit(cache=True, nogil=True, fastmath=False)
def _xnor_rows_direct(xw, wt, n_bits, alpha, beta, out, r0, r1, c0, c1):
    """:func:`xnor_affine` with the weights read in place, one popcount a word.

    For few rows or words; four rows share each weight row read.
    """
    n_words = xw.shape[1]
    n = c1 - c0
    acc0 = np.empty(n, np.uint64)
    acc1 = np.empty(n, np.uint64)
    acc2 = np.empty(n, np.uint64)
    acc3 = np.empty(n, np.uint64)
    a = alpha[c0:c1]
    b = beta[c0:c1]
    i = r0
    while i + 4 <= r1:
        for c in range(n):
            acc0[c] = 0
            acc1[c] = 0
            acc2[c] = 0
            acc3[c] = 0
        for w in range(n_words):
            x0 = xw[i, w]
            x1 = xw[i + 1, w]
            x2 = xw[i + 2, w]
            x3 = xw[i + 3, w]
            row = wt[w, c0:c1]
            for c in range(n):
                t = row[c]
                acc0[c] += popcount64(x0 ^ t)
                acc1[c] += popcount64(x1 ^ t)
                acc2[c] += popcount64(x2 ^ t)
                acc3[c] += popcount64(x3 ^ t)
        _affine_store(acc0, n_bits, a, b, out[i, c0:c1], n)
        _affine_store(acc1, n_bits, a, b, out[i + 1, c0:c1], n)
        _affine_store(acc2, n_bits, a, b, out[i + 2, c0:c1], n)
        _affine_store(acc3, n_bits, a, b, out[i + 3, c0:c1], n)
        i += 4
    while i < r1:
        for c in range(n):
            acc0[c] = 0
        for w in range(n_words):
            x0 = xw[i, w]
            row = wt[w, c0:c1]
            for c in range(n):
                acc0[c] += popcount64(x0 ^ row[c])
        _affine_store(acc0, n_bits, a, b, out[i, c0:c1], n)
        i += 1


@njit(cache=True, nogil=True, inline="always")
def _xnor_groups2(xw, i, wb, st, n, n_groups):
    """Carry-save counts of rows ``i, i + 1`` over the full groups of 8 words."""
    a1, a2, a4, a8 = st[0, 0], st[0, 1], st[0, 2], st[0, 3]
    b1, b2, b4, b8 = st[1, 0], st[1, 1], st[1, 2], st[1, 3]
    for g in range(n_groups):
        w = XNOR_GROUP * g
        w0, w1, w2, w3 = wb[w], wb[w + 1], wb[w + 2], wb[w + 3]
        w4, w5, w6, w7 = wb[w + 4], wb[w + 5], wb[w + 6], wb[w + 7]
        x0, x1, x2, x3 = xw[i, w], xw[i, w + 1], xw[i, w + 2], xw[i, w + 3]
        x4, x5, x6, x7 = xw[i, w + 4], xw[i, w + 5], xw[i, w + 6], xw[i, w + 7]
        y0, y1, y2, y3 = (
            xw[i + 1, w],
            xw[i + 1, w + 1],
            xw[i + 1, w + 2],
            xw[i + 1, w + 3],
        )
        y4, y5, y6, y7 = (
            xw[i + 1, w + 4],
            xw[i + 1, w + 5],
            xw[i + 1, w + 6],
            xw[i + 1, w + 7],
        )
        for c in range(n):
            q0, q1, q2, q3 = w0[c], w1[c], w2[c], w3[c]
            q4, q5, q6, q7 = w4[c], w5[c], w6[c], w7[c]
            s1, s2, s4, c8 = _csa8(
                a1[c], a2[c], a4[c],
                x0 ^ q0, x1 ^ q1, x2 ^ q2, x3 ^ q3,
                x4 ^ q4, x5 ^ q5, x6 ^ q6, x7 ^ q7,
            )  # fmt: skip
            a1[c], a2[c], a4[c] = s1, s2, s4
            a8[c] += popcount64(c8)
            s1, s2, s4, c8 = _csa8(
                b1[c], b2[c], b4[c],
                y0 ^ q0, y1 ^ q1, y2 ^ q2, y3 ^ q3,
                y4 ^ q4, y5 ^ q5, y6 ^ q6, y7 ^ q7,
            )  # fmt: skip
            b1[c], b2[c], b4[c] = s1, s2, s4
            b8[c] += popcount64(c8)


@njit(cache=True, nogil=True, inline="always")
def _xnor_groups1(xw, i, wb, st, n, n_groups):
    """Carry-save counts of row ``i`` over the full groups of 8 words."""
    a1, a2, a4, a8 = st[0, 0], st[0, 1], st[0, 2], st[0, 3]
    for g in range(n_groups):
        w = XNOR_GROUP * g
        w0, w1, w2, w3 = wb[w], wb[w + 1], wb[w + 2], wb[w + 3]
        w4, w5, w6, w7 = wb[w + 4], wb[w + 5], wb[w + 6], wb[w + 7]
        x0, x1, x2, x3 = xw[i, w], xw[i, w + 1], xw[i, w + 2], xw[i, w + 3]
        x4, x5, x6, x7 = xw[i, w + 4], xw[i, w + 5], xw[i, w + 6], xw[i, w + 7]
        for c in range(n):
            s1, s2, s4, c8 = _csa8(
                a1[c], a2[c], a4[c],
                x0 ^ w0[c], x1 ^ w1[c], x2 ^ w2[c], x3 ^ w3[c],
                x4 ^ w4[c], x5 ^ w5[c], x6 ^ w6[c], x7 ^ w7[c],
            )  # fmt: skip
            a1[c], a2[c], a4[c] = s1, s2, s4
            a8[c] += popcount64(c8)


@njit(cache=True, nogil=True, inline="always")
def _xnor_finish(xw, i, wb, sr, n, n_groups, n_bits, a, b, o):
    """Total the counters ``sr`` of row ``i``, add the last words, store the outputs."""
    acc = sr[3]
    for c in range(n):
        acc[c] = (
            XNOR_GROUP * acc[c]
            + popcount64(sr[0, c])
            + 2 * popcount64(sr[1, c])
            + 4 * popcount64(sr[2, c])
        )
    for w in range(XNOR_GROUP * n_groups, xw.shape[1]):
        x = xw[i, w]
        row = wb[w]
        for c in range(n):
            acc[c] += popcount64(x ^ row[c])
    _affine_store(acc, n_bits, a, b, o, n)


@njit(cache=True, nogil=True, fastmath=False)
def _xnor_rows_tiled(xw, wt, n_bits, alpha, beta, out, r0, r1, c0, c1):
    """:func:`xnor_affine` by tiles of columns, carry-save counts (many rows)."""
    n_words = xw.shape[1]
    n_groups = n_words // XNOR_GROUP
    # the padded stride keeps the rows of a tile off the same cache sets
    stride = XNOR_TILE + 8
    wb = np.empty((n_words, stride), np.uint64)
    st = np.empty((2, 4, stride), np.uint64)
    for t0 in range(c0, c1, XNOR_TILE):
        t1 = min(t0 + XNOR_TILE, c1)
        n = t1 - t0
        for w in range(n_words):
            src = wt[w, t0:t1]
            dst = wb[w]
            for c in range(n):
                dst[c] = src[c]
        a, b = alpha[t0:t1], beta[t0:t1]
        i = r0
        while i < r1:
            k = min(2, r1 - i)
            for r in range(k):
                for level in range(4):
                    s = st[r, level]
                    for c in range(n):
                        s[c] = 0
            if k == 2:
                _xnor_groups2(xw, i, wb, st, n, n_groups)
            else:
                _xnor_groups1(xw, i, wb, st, n, n_groups)
            for r in range(k):
                _xnor_finish(
                    xw, i + r, wb, st[r], n, n_groups, n_bits, a, b, out[i + r, t0:t1]
                )
            i += k


@njit(cache=True, nogil=True, fastmath=False)
def xnor_affine(xw, wt, n_bits, alpha, beta, out, r0, r1, c0, c1):
    """Sign x sign layer: ``out = (n_bits - 2 popcount(x ^ w)) * alpha + beta``.

    With ``a = 2 x - 1`` and ``s = 2 w - 1`` in {-1, +1}, the integer
    ``n_bits - 2 * popcount(x ^ w)`` is exactly ``a . s``. The weights are
    stored word-major (one row per input word, one column per output), so the
    counts of one input word against a row of outputs vectorise over the
    outputs without a horizontal sum. From :data:`XNOR_TILE_MIN_ROWS` rows on,
    the outputs go by tiles of :data:`XNOR_TILE` columns (copied to an
    L1-resident buffer), two rows share each weight read, and the words of
    a group of :data:`XNOR_GROUP` go through carry-save adders (Harley-Seal:
    bitwise operations only) into bit-sliced counters, so one popcount
    serves eight words. Fewer rows (or fewer than eight words) read the
    weights in place, one popcount per word, four rows sharing each weight
    row read.

    Parameters
    ----------
    xw : ndarray of shape (n_rows, n_words), dtype uint64
        Packed input bits.
    wt : ndarray of shape (n_words, n_out), dtype uint64
        Packed weight signs (bit 1 = +1), the transpose of the output-major
        words of :func:`~sksign.kernels.packed_to_words`.
    n_bits : int
        Input bits per row (the padding is zero in both).
    alpha, beta : ndarray of shape (n_out,)
        Per-output scale and shift (binary weight scale, BatchNorm, bias).
    out : ndarray of shape (n_rows, n_out)
        Receives the outputs (float) or, with ``alpha = 1, beta = 0`` and an
        integer `out`, the exact dot products.
    r0, r1, c0, c1 : int
        Row and output-column ranges.
    """
    if r1 - r0 >= XNOR_TILE_MIN_ROWS and xw.shape[1] >= XNOR_GROUP:
        _xnor_rows_tiled(xw, wt, n_bits, alpha, beta, out, r0, r1, c0, c1)
    else:
        _xnor_rows_direct(xw, wt, n_bits, alpha, beta, out, r0, r1, c0, c1)


@njit(cache=True, nogil=True, fastmath=False)
def bit_accumulate(xw, wt, out, r0, r1, c0, c1):
    """Real weights x bits: ``out[i] += sum of wt[u] over the set bits u of row i``.

    The weight rows of the active units are added in increasing unit order,
    in the dtype of `out` (float32, or float64 for a readout). The rows of a
    block share each weight row they use, so a weight row is read once per
    block. Best for a few rows: a weight row costs one vector add per active
    bit, against a multiply-add per bit, active or not, for a matrix product.

    Parameters
    ----------
    xw : ndarray of shape (n_rows, n_words), dtype uint64
        Packed input bits.
    wt : ndarray of shape (n_in, n_out)
        Weights, one row per input unit (the transpose of a torch weight).
    out : ndarray of shape (n_rows, n_out)
        Accumulated into (initialise it with the bias).
    r0, r1, c0, c1 : int
        Row and output-column ranges.
    """
    n_words = xw.shape[1]
    n_in = wt.shape[0]
    n = c1 - c0
    for b0 in range(r0, r1, ROW_BLOCK):
        b1 = min(b0 + ROW_BLOCK, r1)
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
                # zero-based loops over 1-D slices: LLVM vectorises them
                row = wt[u, c0:c1]
                for i in range(b0, b1):
                    if xw[i, w] & low:
                        acc = out[i, c0:c1]
                        for c in range(n):
                            acc[c] += row[c]


@njit(cache=True, nogil=True, fastmath=False)
def if_neuron_pack(current, time_steps, constant, threshold, reset_zero, out, r0, r1):
    """Integrate-and-fire neurons over `time_steps` steps, spikes packed.

    For each sample and unit, in the dtype of `current` (float32, as the torch
    neuron)::

        v = v + I[t];  s = (v - threshold) >= 0
        v = v - threshold * s        (reset by subtraction)
        v = v * (1 - s)              (reset to zero)

    Parameters
    ----------
    current : ndarray of shape (n_samples, n_units) or (n_samples * T, n_units)
        Input current: one row per sample (`constant`: the same current at
        every step) or one row per sample and step (row ``n * T + t``).
    time_steps : int
        Number of steps T.
    constant : bool
        Whether `current` has one row per sample.
    threshold : float
        Firing threshold, in the dtype of `current`.
    reset_zero : bool
        Reset to zero (True) or by subtraction (False).
    out : ndarray of shape (n_samples * T, ceil(n_units / 64)), dtype uint64
        Receives the spikes, row ``n * T + t``.
    r0, r1 : int
        Sample range.
    """
    n_units = current.shape[1]
    n_words = out.shape[1]
    zero = current.dtype.type(0)
    v = np.empty(n_units, dtype=current.dtype)
    for n in range(r0, r1):
        for w in range(n_words):
            for t in range(time_steps):
                out[n * time_steps + t, w] = 0
        for u in range(n_units):
            v[u] = zero
        for t in range(time_steps):
            src = n if constant else n * time_steps + t
            row = n * time_steps + t
            for u in range(n_units):
                vu = v[u] + current[src, u]
                if vu - threshold >= zero:
                    j = u % 64
                    pos = 8 * (j // 8) + 7 - j % 8
                    out[row, u // 64] |= np.uint64(1) << np.uint64(pos)
                    vu = zero if reset_zero else vu - threshold
                v[u] = vu


@njit(cache=True, nogil=True, inline="always")
def _exact_sum(xw, i, w_rows, o):
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
                if v > bound:
                    fire = True
                elif v < -bound:
                    fire = False
                else:
                    fire = _exact_sum(xw, i, w_rows, o) >= t
                if fire:
                    j = o % 64
                    out[i, o // 64] |= np.uint64(1) << np.uint64(
                        8 * (j // 8) + 7 - j % 8
                    )


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
    for i in range(r0, r1):
        k = 0
        for w in range(xw.shape[1]):
            k += popcount64(xw[i, w])
        ku = (k + 2) * unit
        gamma = 2.0 * ku / (1.0 - ku)
        for w in range(out.shape[1]):
            out[i, w] = 0
        for o in range(n_out):
            t = np.float64(threshold[o])
            v = np.float64(z[i, o]) - t
            bound = gamma * abs_sum[o] + 1e-300
            if v > bound:
                fire = True
            elif v < -bound:
                fire = False
            else:
                fire = _exact_sum(xw, i, w_rows, o) >= t
            if fire:
                j = o % 64
                out[i, o // 64] |= np.uint64(1) << np.uint64(8 * (j // 8) + 7 - j % 8)
