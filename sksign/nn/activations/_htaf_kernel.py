"""Fused float32 CPU kernels of HTAF's forward and backward pass (numba).

HTAF needs two exponentials per element in each direction, one for
``t = |tanh(a0 x)|`` and one for the sigmoid of ``a1 t``; both are written out
as a vectorisable polynomial (LLVM vectorises a loop only when it calls no
library function), so each loop runs on eight float32 lanes (AVX2):

- ``e = exp(-2 a0 |x|)`` gives ``t = -expm1(-2 a0 |x|) / (2 + expm1(-2 a0
  |x|))`` (expm1 comes from the same polynomial, so ``t`` keeps full relative
  precision near 0) and ``sech(a0 x)**2 = 4 e / (1 + e)**2 = e (1 + t)**2``;
- ``q = exp(-a1 t)`` gives ``sigmoid(a1 t) = 1 / (1 + q)`` and
  ``sigmoid(-a1 t) = q / (1 + q)``, so ``s`` and ``1 - s`` are both exact in
  the tails (no ``1 - s`` rounding to 0).

The derivative ``a0 a1 s (1 - s) (1 - t**2)`` is then
``a0 a1 q e ((1 + t) / (1 + q))**2``: every factor is bounded, so nothing
overflows for any finite or infinite ``x`` and any ``a1``; NaN stays NaN.

The exponential is ``exp(z) = 2**n exp(r)`` with ``n = round(z / ln 2)``
(the round-to-nearest of adding ``1.5 * 2**23``), ``exp(r) - 1 = r + r**2
P(r)`` with a degree-4 minimax ``P`` on ``|r| <= ln(2) / 2`` (0.05 ulp) and
``2**n`` added to the exponent bits. Where a result may leave the normal
float32 range it is carried scaled (``e 2**64``, ``q 2**32``) and the scale
is taken off in the last multiplication, so the tails are exact down into the
subnormals; arguments are clamped where the result is 0 in float32 anyway.

Each loop runs over blocks of ``_BLOCK`` elements in two passes (``t`` of the
block into a scratch array, then the result from ``t``): two short dependency
chains keep the vector units busier than one long one. The float constants
reach the
loops as an array argument (``_K``) rather than as literals: LLVM would
otherwise reload each literal inside the loop from the constant pool (an
address and a broadcast per use, a third of the loop's instructions), and the
exponent arithmetic is int32 in LLVM (numba widens integer arithmetic to
int64, which LLVM does not always narrow back); together these save about a
fifth of the run time. This module needs numpy and numba only.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from sksign._threads import run_in_threads

__all__ = ["htaf_backward_f32", "htaf_forward_f32"]

_F = np.float32
# Degree-4 minimax P with exp(r) = 1 + r + r**2 P(r) on |r| <= ln(2) / 2.
_P = (
    0.4999999403953552,
    0.1666652113199234,
    0.04166838899254799,
    0.008368710987269878,
    0.0013814604608342052,
)
# Clamps of the exponent argument: the forward e stays normal (2**n with
# n >= -126); below the others (e 2**64 and q 2**32 normal) the results are 0.
_LOW_T, _LOW_E, _LOW_Q = -87.0, -131.0, -109.0
_K = np.array(
    [
        1.4426950408889634,  # 0 log2(e)
        12582912.0,  # 1 1.5 * 2**23: adding it rounds to an integer
        0.6931471805599453,  # 2 ln 2 (one-constant reduction)
        0.693145751953125,  # 3 ln 2, high part (two-constant reduction)
        1.4286067653301870e-06,  # 4 ln 2, low part
        *_P,  # 5-9
        _LOW_T,  # 10
        _LOW_E,  # 11
        _LOW_Q,  # 12
        1.0,  # 13
        2.0,  # 14
        2.0**32,  # 15
        2.0**-32,  # 16
        2.0**-64,  # 17
        2.0**-96,  # 18
        0.0,  # 19
    ],
    dtype=np.float32,
)
# Exponent offsets (scale << 23) of the scaled results.
_S0, _S32, _S64 = 0, 32 << 23, 64 << 23
# Work split: one parallel chunk per this many elements at least.
_GRAIN = 1 << 15
# Elements per block of the two-pass loops (three float32 blocks fit in L1).
_BLOCK = 1024


@intrinsic
def _exponent_bits(typingctx, kf):  # pragma: no cover - compiled
    """``n << 23`` (int32) from ``kf = n + 1.5 * 2**23``: the low bits of ``kf``
    hold ``n`` and the bits of ``1.5 * 2**23`` shift out."""
    sig = types.int32(types.float32)

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        return builder.shl(builder.bitcast(args[0], i32), ir.Constant(i32, 23))

    return sig, codegen


@intrinsic
def _add_exponent(typingctx, value, nb, bias):  # pragma: no cover - compiled
    """``value * 2**(n + scale)`` for a normal result: ``nb + bias`` (``n << 23``
    and ``scale << 23``) added to the bits of ``value`` in int32."""
    sig = types.float32(types.float32, types.int32, types.int32)

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        bits = builder.add(builder.bitcast(args[0], i32), builder.add(args[1], args[2]))
        return builder.bitcast(bits, ir.FloatType())

    return sig, codegen


_JIT = {"fastmath": {"contract"}, "nogil": True, "error_model": "numpy"}
_INLINE = {"inline": "always", **_JIT}


@njit(**_INLINE)
def _exp_parts(z, k, two_step):  # pragma: no cover - compiled
    """``(n << 23, exp(r) - 1)`` with ``exp(z) = 2**n exp(r)``, ``z <= 0``.

    ``two_step`` reduces with ln 2 in two parts (exact ``r`` for any ``n``);
    one part costs ``|n| 2e-9`` in ``r``, well below the rounding error that
    ``z`` carries where it is a product of rounded float32 numbers.
    """
    kf = z * k[0] + k[1]
    n = kf - k[1]
    if two_step:
        r = z - n * k[3]
        r = r - n * k[4]
    else:
        r = z - n * k[2]
    p = k[9] * r + k[8]
    p = p * r + k[7]
    p = p * r + k[6]
    p = p * r + k[5]
    return _exponent_bits(kf), p * (r * r) + r


@njit(**_INLINE)
def _tanh_forward(x, m2a0, k):  # pragma: no cover - compiled
    """``|tanh(a0 x)|`` (``m2a0 = -2 a0``); ``e`` stays normal here."""
    nb, em1 = _exp_parts(max(m2a0 * abs(x), k[10]), k, False)
    sc = _add_exponent(k[13], nb, _S0)  # 2**n
    em1 = em1 * sc + (sc - k[13])  # expm1(-2 a0 |x|)
    return em1 / (-k[14] - em1)


@njit(**_INLINE)
def _htaf_from_tanh(x, t, ma1, k):  # pragma: no cover - compiled
    """``sigmoid(a1 t)`` for ``x >= 0``, ``sigmoid(-a1 t)`` else (``ma1 = -a1``)."""
    nb, pm1 = _exp_parts(max(t * ma1, k[12]), k, False)
    qs = _add_exponent(pm1 + k[13], nb, _S32)  # q * 2**32
    num = k[15] if x >= k[19] else qs
    s = num / (qs * k[16] + k[13]) * k[16]
    return x if x != x else s


@njit(**_INLINE)
def _tanh_and_e(x, m2a0, k):  # pragma: no cover - compiled
    """``(|tanh(a0 x)|, exp(-2 a0 |x|) * 2**64)``."""
    nb, em1 = _exp_parts(max(m2a0 * abs(x), k[11]), k, True)
    es = _add_exponent(em1 + k[13], nb, _S64)
    sc = _add_exponent(k[13], nb, _S64) * k[17]  # 2**n, 0 below 2**-149
    em1 = em1 * sc + (sc - k[13])
    return em1 / (-k[14] - em1), es


@njit(**_INLINE)
def _grad_from_tanh(t, es, g, ma1, ks, k):  # pragma: no cover - compiled
    """``g * dHTAF/dx`` from ``t``, ``e 2**64`` (``ks = a0 a1 2**-96``).

    NaN in ``x`` reaches the result through ``t``.
    """
    nb, pm1 = _exp_parts(max(t * ma1, k[12]), k, False)
    qs = _add_exponent(pm1 + k[13], nb, _S32)  # q * 2**32
    ratio = (k[13] + t) / (qs * k[16] + k[13])  # (1 + t) / (1 + q)
    return g * ((es * qs) * ks * (ratio * ratio))


@njit(**_INLINE)
def _unpack(karr):  # pragma: no cover - compiled
    """``_K`` as a tuple of scalars, read once before the loops (values in an
    array the loops write could alias would be reloaded every iteration)."""
    return (
        karr[0], karr[1], karr[2], karr[3], karr[4], karr[5], karr[6],
        karr[7], karr[8], karr[9], karr[10], karr[11], karr[12], karr[13],
        karr[14], karr[15], karr[16], karr[17], karr[18], karr[19],
    )  # fmt: skip


# Both loops keep t (and e) of a block in scratch arrays and write ``out`` only
# in the last pass, element by element after reading the inputs there: ``out``
# may be ``x`` or ``g`` (the autograd function passes g in out's memory).


@njit(**_JIT, cache=True)
def _forward_loop(x, out, a0, a1, karr):  # pragma: no cover - compiled
    k = _unpack(karr)
    m2a0 = -k[14] * a0
    ma1 = -a1
    n = x.shape[0]
    tb = np.empty(min(n, _BLOCK), np.float32)
    for lo in range(0, n, _BLOCK):
        hi = min(lo + _BLOCK, n)
        xb = x[lo:hi]
        ob = out[lo:hi]
        for i in range(hi - lo):
            tb[i] = _tanh_forward(xb[i], m2a0, k)
        for i in range(hi - lo):
            ob[i] = _htaf_from_tanh(xb[i], tb[i], ma1, k)


@njit(**_JIT, cache=True)
def _backward_loop(x, g, out, a0, a1, karr):  # pragma: no cover - compiled
    k = _unpack(karr)
    m2a0 = -k[14] * a0
    ma1 = -a1
    ks = a0 * a1 * k[18]
    n = x.shape[0]
    tb = np.empty(min(n, _BLOCK), np.float32)
    eb = np.empty(min(n, _BLOCK), np.float32)
    for lo in range(0, n, _BLOCK):
        hi = min(lo + _BLOCK, n)
        xb = x[lo:hi]
        gb = g[lo:hi]
        ob = out[lo:hi]
        for i in range(hi - lo):
            tb[i], eb[i] = _tanh_and_e(xb[i], m2a0, k)
        for i in range(hi - lo):
            ob[i] = _grad_from_tanh(tb[i], eb[i], gb[i], ma1, ks, k)


def _n_chunks(size: int, n_threads: int) -> int:
    """Chunks of at least ``_GRAIN`` elements, up to four per thread."""
    return max(1, min(4 * n_threads, size // _GRAIN)) if n_threads > 1 else 1


def _run_chunked(loop, arrays, out, a0, a1, n_threads: int) -> None:
    """Run ``loop(*arrays, out, a0, a1, _K)`` over contiguous chunks in threads.

    The loops release the GIL (``nogil``), so plain threads of the process's
    one pool (:func:`sksign._threads.run_in_threads`) run them in parallel;
    unlike numba's parallel backends this is safe to call from several Python
    threads at once, and after a ``fork()``.
    """
    size = out.shape[0]
    chunks = _n_chunks(size, n_threads)
    if chunks == 1:
        loop(*arrays, out, a0, a1, _K)
        return
    step = -(-size // chunks)

    def work(lo):
        sl = slice(lo, lo + step)
        loop(*(a[sl] for a in arrays), out[sl], a0, a1, _K)

    run_in_threads(work, [(lo,) for lo in range(0, size, step)], n_threads)


def htaf_forward_f32(
    x: np.ndarray,
    alpha0: float,
    alpha1: float,
    n_threads: int = 1,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """HTAF of a contiguous 1-D float32 array in one fused pass.

    Parameters
    ----------
    x : ndarray of float32, 1-D, contiguous
        Pre-activations.
    alpha0, alpha1 : float
        HTAF parameters (positive).
    n_threads : int, default=1
        Threads for large arrays (chunks of at least 32768 elements, taken in
        turn).
    out : ndarray of float32, default=None
        Where to write the result (a new array when None).

    Returns
    -------
    ndarray of float32
        ``sigmoid(alpha1 * tanh(alpha0 * x))``.

    Examples
    --------
    >>> import numpy as np
    >>> htaf_forward_f32(np.array([-1.0, 0.0, 1.0], np.float32), 2.0, 11.0).round(4)
    array([0. , 0.5, 1. ], dtype=float32)
    """
    if out is None:
        out = np.empty_like(x)
    _run_chunked(_forward_loop, (x,), out, _F(alpha0), _F(alpha1), n_threads)
    return out


def htaf_backward_f32(
    x: np.ndarray,
    grad_output: np.ndarray,
    alpha0: float,
    alpha1: float,
    n_threads: int = 1,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``grad_output * dHTAF/dx`` from the pre-activations, in one fused pass.

    Parameters
    ----------
    x, grad_output : ndarray of float32, 1-D, contiguous, same size
        Pre-activations and the incoming gradient.
    alpha0, alpha1 : float
        HTAF parameters (positive).
    n_threads : int, default=1
        Threads for large arrays (chunks of at least 32768 elements, taken in
        turn).
    out : ndarray of float32, default=None
        Where to write the result (a new array when None).

    Returns
    -------
    ndarray of float32

    Examples
    --------
    >>> import numpy as np
    >>> x = np.zeros(1, np.float32)
    >>> htaf_backward_f32(x, np.ones(1, np.float32), 2.0, 11.0)  # a0 * a1 / 4
    array([5.5], dtype=float32)
    """
    if out is None:
        out = np.empty_like(x)
    _run_chunked(
        _backward_loop, (x, grad_output), out, _F(alpha0), _F(alpha1), n_threads
    )
    return out
