"""The IR of the look-up sums by ``vpshufb`` (AVX2).

:mod:`sksign.deploy._kernels._lut` sums real weights on bits by look-ups
in its byte tables; where the CPU has AVX2 but no AVX-512 BW its tile
kernel emits this: 16-byte tables, one per 128-bit lane, looked up 32
bytes at a time, and the bytes added as int16 words.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from llvmlite import ir

from sksign.kernels import counted_loop, llvm_function, load_vector, splat

__all__ = ["shuffle_tile"]


def shuffle_tile(builder, pointers, at, n_outputs, add=True):
    """The IR of :func:`~sksign.deploy._kernels._lut._lut_tile` with
    ``vpshufb`` (AVX2), block by block, for `n_outputs` outputs (the sums
    added to the old ones, or stored where `add` is False).

    A 32-byte half of a quad's index (groups 0 and 1, or 2 and 3, of the
    block's 16 rows: one group per 128-bit lane, as ``vpshufb`` looks up)
    and the matching half of a byte plane's table give the 32 bytes of 16
    rows x 2 groups at once. Read as 16 int16 words, word ``m`` of a lane
    is ``e + 256 * o`` (``e``, ``o``: the bytes of rows ``2 m`` and ``2 m +
    1``); the words are added, and their high bytes (``o``) apart, in int16.
    After a run of ``n`` quads each word has added ``2 n`` bytes, so ``sum(e)
    = sum(words) - 256 * sum(o)`` exactly (mod 2**16) while ``2 n * 255 <
    2**16``: runs of at most 128 quads (the callers' runs are
    :data:`~sksign.deploy._kernels._lut.LUT_QUADS`, 64). The high plane's
    bytes are signed: :func:`~sksign.deploy._kernels._lut.lut_weights`
    stores them with the sign bit flipped there (``h + 128``, unsigned), and
    ``128`` per byte added is taken off at the end. The two lanes' sums of
    a row then add up.
    """
    out, ix, tb, n_out = pointers
    idx_rows, tab_rows, b0, o0, k0, k1 = at
    i8, i16, i32, i64 = (ir.IntType(b) for b in (8, 16, 32, 64))
    bytes32, words, ints = (
        ir.VectorType(i8, 32),
        ir.VectorType(i16, 16),
        ir.VectorType(i32, 16),
    )
    pshufb = llvm_function(
        builder, "llvm.x86.avx2.pshuf.b", bytes32, [bytes32, bytes32]
    )
    eight_w, eight_i = ir.Constant(words, [8] * 16), ir.Constant(ints, [8] * 16)
    keys = [(t, p) for t in range(n_outputs) for p in (0, 1)]

    def const(value):
        return ir.Constant(i64, value)

    n = builder.sub(k1, k0)
    # 128 a byte added, 2 n bytes a word: taken off the high plane's sums
    biases = splat(builder, builder.trunc(builder.mul(n, const(256)), i32), ints)
    zero = ir.Constant(words, [0] * 16)
    for j, row in enumerate(idx_rows):

        def add_quad(step, values, row=row):
            k = builder.add(k0, step)
            at_k = builder.add(row, builder.mul(k, const(16)))
            halves = [
                load_vector(builder, ix, builder.add(at_k, const(8 * h)), bytes32)
                for h in (0, 1)
            ]
            sums = dict(
                zip(keys, zip(values[::2], values[1::2], strict=True), strict=True)
            )
            for t, p in keys:
                at_t = builder.add(tab_rows[t], builder.mul(k, const(128)))
                total, high = sums[t, p]
                for h, x in enumerate(halves):
                    at_p = builder.add(at_t, const(64 * p + 32 * h))
                    table = load_vector(builder, tb, at_p, bytes32)
                    w = builder.bitcast(builder.call(pshufb, [table, x]), words)
                    total = builder.add(total, w)
                    high = builder.add(high, builder.lshr(w, eight_w))
                sums[t, p] = total, high
            return [v for key in keys for v in sums[key]]

        totals = counted_loop(builder, n, [zero] * (2 * len(keys)), add_quad, "quads")
        row0 = builder.mul(builder.add(b0, const(j)), const(16))
        for t in range(n_outputs):
            parts = []
            for p in (0, 1):
                total, high = totals[4 * t + 2 * p], totals[4 * t + 2 * p + 1]
                even = builder.sub(total, builder.shl(high, eight_w))
                pair = [builder.zext(v, ints) for v in (even, high)]
                if p:
                    pair = [builder.sub(v, biases) for v in pair]
                parts.append(pair)
            (even_lo, odd_lo), (even_hi, odd_hi) = parts
            even = builder.add(even_lo, builder.shl(even_hi, eight_i))
            odd = builder.add(odd_lo, builder.shl(odd_hi, eight_i))
            col = builder.add(o0, const(t))
            for m in range(16):
                half = even if m % 2 == 0 else odd
                lane = [
                    builder.extract_element(half, ir.Constant(i32, m // 2 + 8 * h))
                    for h in (0, 1)
                ]
                value = builder.add(*lane)
                at_r = builder.add(builder.mul(builder.add(row0, const(m)), n_out), col)
                ptr = builder.gep(out, [at_r])
                if add:
                    value = builder.add(builder.load(ptr), value)
                builder.store(value, ptr)
