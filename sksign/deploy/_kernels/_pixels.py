"""Numba kernels of channels-last float maps: per-channel affine maps, neurons.

Element-wise work that numpy does in several passes (a temporary per
operation, each a full read and write of the maps) done in one. The float32
operations, their order and their rounding are those of the numpy code they
replace (no fused multiply-add). Serial over a range of rows ``[r0, r1)``,
GIL released.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from numba import njit

from sksign.deploy._kernels._bits import flag_buffers, pack_flags

__all__ = ["affine_rows", "fire_pixels"]


@njit(cache=True, nogil=True, fastmath=False)
def affine_rows(x, scale, shift, out, r0, r1):
    """``out[i] = x[i] * scale + shift`` (float32, product then sum), rows ``r0:r1``.

    Parameters
    ----------
    x : ndarray of shape (n_rows, width), dtype float32
        Maps cut into rows of whole pixels.
    scale, shift : ndarray of shape (width,), dtype float32
        The per-channel values tiled over the pixels of a row (a long row
        vectorises where one pixel of a few channels would not).
    out : ndarray of shape (n_rows, width), dtype float32
    r0, r1 : int
        Row range.
    """
    width = x.shape[1]
    for i in range(r0, r1):
        src = x[i]
        dst = out[i]
        for j in range(width):
            dst[j] = src[j] * scale[j] + shift[j]


@njit(cache=True, nogil=True, fastmath=False)
def fire_pixels(
    current, steps, constant, threshold, tau, leaky, reset_zero, channels, out, r0, r1
):
    """Spiking neurons on channels-last maps of currents, spikes as ``pixel_bits``.

    Per sample, unit and step ``t``, from ``v = 0`` (float32, in the order of
    :func:`sksign.deploy._maps.fire_maps`)::

        v = v + I[t]                     (integrate-and-fire)
        v = v + (I[t] - v) / tau         (leaky)
        u = v - threshold;  s = 1[u >= 0]
        v = u where s                    (reset by subtraction)
        v = 0 where s                    (reset to zero)

    Parameters
    ----------
    current : ndarray of shape (n * T, H * W * C) or (n, H * W * C), float32
        Currents, row ``n * T + t``; with `constant`, one row per sample.
        (float64 too: the potentials are then float64; ``if_neuron`` on
        rows is one pixel of ``C`` units.)
    steps : int
        T.
    constant : bool
        One row of current per sample, the same at every step.
    threshold, tau : float32 (or float64, with the current)
    leaky, reset_zero : bool
    channels : int
        C.
    out : ndarray of shape (n * T, H * W * ceil(C / 64)), dtype uint64
        Receives the spikes, row ``n * T + t``.
    r0, r1 : int
        Sample range.
    """
    n_units = current.shape[1]
    wpp = (channels + 63) // 64
    n_pix = n_units // channels
    zero = current.dtype.type(0)
    v = np.empty(n_units, current.dtype)
    u = np.empty(n_units, current.dtype)
    flag_words, flags = flag_buffers(wpp)  # a pixel's spikes
    for n in range(r0, r1):
        for k in range(n_units):
            v[k] = zero
        for t in range(steps):
            cur = current[n if constant else n * steps + t]
            # the potentials, in vectors (the reset a select, not a branch)
            if leaky:
                for k in range(n_units):
                    vk = v[k] + (cur[k] - v[k]) / tau
                    uk = vk - threshold
                    u[k] = uk
                    v[k] = (zero if reset_zero else uk) if uk >= zero else vk
            else:
                for k in range(n_units):
                    vk = v[k] + cur[k]
                    uk = vk - threshold
                    u[k] = uk
                    v[k] = (zero if reset_zero else uk) if uk >= zero else vk
            # then the spikes, packed a pixel at a time
            spikes = out[n * steps + t].reshape(n_pix, wpp)
            for p in range(n_pix):
                base = p * channels
                for j in range(channels):
                    flags[j] = u[base + j] >= zero
                pack_flags(flag_words, spikes, p)
