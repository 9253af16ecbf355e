"""Feature maps of the packed image nets: layout, geometry and im2col.

The image nets (ResNet-18, WideResNet, Bi-Real ResNet-18) run on maps laid
out channels last (``(n, H * W * C)``, pixel by pixel), so that the channels
of one pixel are contiguous: as float rows (``float``) or as packed bits
(``pixel_bits``: the ``C`` bits of each pixel packed into ``ceil(C / 64)``
uint64 words, in the unit layout of :mod:`sksign.deploy._kernels`, so a
row holds ``H * W * ceil(C / 64)`` words). A convolution is an im2col of
these pixels, of floats or of whole words, followed by a matrix product, an
XNOR-popcount or a sum of weight rows over the active bits. Spiking maps
(SEW-ResNet) fold time into the rows (row ``n * T + t``): the neurons of
:func:`fire_maps` integrate float maps of input currents into ``pixel_bits``
spikes, and :func:`gate_pixels` combines two spike maps bit by bit. Numpy
and numba only: no torch.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from sksign.deploy._format import (
    conv_geometry,
    conv_output_size,
    words_per_pixel,
)
from sksign.deploy._kernels import pack_ge, unpack_words

__all__ = [
    "GATES",
    "NEURONS",
    "conv_corrections",
    "fire_maps",
    "gate_pixels",
    "im2col",
    "map_conv_geometry",
    "pack_pixels",
    "unpack_pixels",
    "words_per_pixel",
]

#: Neuron models of ``pixel_neuron``: integrate-and-fire, leaky (``tau``).
NEURONS = ("if", "lif")
#: Element-wise functions of two spike maps ``a`` and ``s`` (``pixel_gate``):
#: ``(1 - a) * s`` and ``a * s``.
GATES = ("iand", "and")


#: The attributes of a convolution on channels-last maps (what
#: :func:`map_conv_geometry` reads). Read-only: several op specs share it.
MAP_CONV_ATTRS = MappingProxyType(
    {
        "shape": list,
        "channels": int,
        "kernel": int,
        "stride": int,
        "padding": int,
        "out": int,
    }
)


def map_conv_geometry(shape, attrs):
    """Output ``(C, H, W)`` of a convolution on channels-last maps.

    :func:`~sksign.deploy._format.conv_geometry`, with a padding of at most
    the kernel (what :func:`conv_corrections` assumes).
    """
    if not 0 <= attrs["padding"] <= attrs["kernel"]:
        raise ValueError("invalid kernel, stride, padding or channels")
    return conv_geometry(shape, attrs)


def im2col(maps, kernel, stride=1, padding=0, *, channels_first=False):
    """Rows of patches of maps, zero padded: the one im2col of the packed nets.

    Parameters
    ----------
    maps : ndarray of shape (n, H, W, C), or (n, C, H, W) if `channels_first`
        Any dtype (floats, 0/1 bytes or packed words, one per channel group).
    kernel, stride, padding : int
        Square convolution geometry (padding with zeros).
    channels_first : bool, default=False
        Maps laid out ``(n, C, H, W)``; patches then come in the order
        ``(c, ky, kx)`` of torch's weights, else ``(ky, kx, c)``.

    Returns
    -------
    patches : ndarray of shape (n * Ho * Wo, k * k * C)
        One row per sample and output pixel (row-major).
    (Ho, Wo) : tuple of int
    """
    k, s, p = kernel, stride, padding
    axes = (2, 3) if channels_first else (1, 2)
    if p:
        pad = [(0, 0)] * 4
        pad[axes[0]] = pad[axes[1]] = (p, p)
        maps = np.pad(maps, pad)
    win = np.lib.stride_tricks.sliding_window_view(maps, (k, k), axis=axes)
    if channels_first:  # (n, C, Ho, Wo, k, k) -> (n, Ho, Wo, C, k, k)
        win = win[:, :, ::s, ::s].transpose(0, 2, 3, 1, 4, 5)
    else:  # (n, Ho, Wo, C, k, k) -> (n, Ho, Wo, k, k, C)
        win = win[:, ::s, ::s].transpose(0, 1, 2, 4, 5, 3)
    n, ho, wo = win.shape[:3]
    patches = win.reshape(n * ho * wo, -1)
    return np.ascontiguousarray(patches), (ho, wo)


def pack_pixels(z, channels, run):
    """``pixel_bits`` of ``1[z >= 0]`` for float maps `z` ``(n, H * W * C)``.

    ``run(kernel, n_rows, *args)`` runs a row kernel (on threads or not).
    """
    rows = z.reshape(-1, channels)
    out = np.empty((rows.shape[0], words_per_pixel(channels)), dtype=np.uint64)
    zeros = np.zeros(channels, dtype=z.dtype)
    run(pack_ge, rows.shape[0], rows, zeros, out)
    return out.reshape(z.shape[0], -1)


def unpack_pixels(words, channels, run, dtype=np.uint8):
    """0/1 maps ``(n, H * W * C)`` (channels last) of ``pixel_bits`` words."""
    n = words.shape[0]
    rows = words.reshape(-1, words_per_pixel(channels))
    out = np.empty((rows.shape[0], channels), dtype=dtype)
    run(unpack_words, rows.shape[0], rows, channels, out)
    return out.reshape(n, -1)


def conv_corrections(signs, shape, kernel, stride, padding):
    """What zero padding adds back to an XNOR-popcount convolution.

    The padded pixels of a packed map are words of zeros, that is activations
    ``-1`` to the XNOR-popcount, where torch's zero padding of ``2 a - 1``
    gives ``0``. Each padded tap therefore contributed ``-s`` for each weight
    sign ``s`` it met; this returns, per output pixel and channel, the sum of
    those signs, to add to the popcount's dot product (0 inside the map).

    Parameters
    ----------
    signs : ndarray of shape (oc, k, k, C)
        Weight signs, +1 or -1.
    shape : tuple of int
        Input ``(C, H, W)``.
    kernel, stride, padding : int
        Convolution geometry.

    Returns
    -------
    corr : ndarray of shape (Ho * Wo, oc), dtype int32
    """
    _, h, w = shape
    k, s, p = kernel, stride, padding
    ho, wo = conv_output_size(h, k, s, p), conv_output_size(w, k, s, p)
    iy = np.arange(ho)[:, None] * s - p + np.arange(k)[None, :]  # (Ho, k)
    ix = np.arange(wo)[:, None] * s - p + np.arange(k)[None, :]  # (Wo, k)
    out_y = (iy < 0) | (iy >= h)
    out_x = (ix < 0) | (ix >= w)
    # padded[oy, ox, ky, kx]: the tap falls outside the map
    padded = out_y[:, None, :, None] | out_x[None, :, None, :]
    taps = signs.sum(axis=3).reshape(len(signs), k * k)  # (oc, k * k)
    corr = padded.reshape(ho * wo, k * k).astype(np.int64) @ taps.T.astype(np.int64)
    return np.ascontiguousarray(corr, dtype=np.int32)


def fire_maps(current, channels, attrs, run):
    """Spikes of a layer of neurons fed float maps of currents, as ``pixel_bits``.

    The operations, their order and their float32 rounding are those of
    :class:`~sksign.nn.spiking.IFNeuron` and
    :class:`~sksign.nn.sew_resnet.LIFNeuron` in ``eval()``; per step ``t``,
    from ``v = 0``::

        v = v + I[t]                        (neuron "if")
        v = v + (I[t] - v) / tau            (neuron "lif")
        s = 1[v - threshold >= 0]
        v = v - threshold * s               (reset "subtract")
        v = v * (1 - s)                     (reset "zero")

    Parameters
    ----------
    current : ndarray of shape (n * T, H * W * C) or (n, H * W * C), float32
        Channels-last maps of input currents, row ``n * T + t``; with
        ``attrs["constant"]``, one row per sample, the current of every step.
    channels : int
        C.
    attrs : dict
        ``time_steps``, ``threshold``, ``reset`` ("subtract" or "zero"),
        ``constant``, ``neuron`` ("if" or "lif") and ``tau``.
    run : callable
        ``run(kernel, n_rows, *args)`` runs a row kernel.

    Returns
    -------
    spikes : ndarray of shape (n * T, H * W * ceil(C / 64)), dtype uint64
        ``pixel_bits``, row ``n * T + t``.
    """
    steps = attrs["time_steps"]
    n = current.shape[0] if attrs["constant"] else current.shape[0] // steps
    cur = current.reshape(n, 1 if attrs["constant"] else steps, -1)
    threshold = np.float32(attrs["threshold"])
    tau = np.float32(attrs["tau"])
    leaky = attrs["neuron"] == "lif"
    v = np.zeros((n, cur.shape[2]), dtype=np.float32)
    u = np.empty_like(v)
    fired = np.empty(v.shape, dtype=bool)
    n_words = cur.shape[2] // channels * words_per_pixel(channels)
    out = np.empty((n, steps, n_words), dtype=np.uint64)
    for t in range(steps):
        i = cur[:, 0 if attrs["constant"] else t]
        if leaky:
            np.subtract(i, v, out=u)
            u /= tau
            v += u
        else:
            v += i
        np.subtract(v, threshold, out=u)
        out[:, t] = pack_pixels(u, channels, run)
        if t + 1 < steps:
            np.greater_equal(u, 0, out=fired)
            if attrs["reset"] == "zero":
                v[fired] = 0  # v * (1 - 1) of a v >= threshold > 0
            else:
                np.copyto(v, u, where=fired)  # v - threshold * 1
    return out.reshape(n * steps, -1)


def gate_pixels(a, s, connect):
    """``(1 - a) * s`` ("iand") or ``a * s`` ("and") of two ``pixel_bits`` maps.

    Both are bit operations on the words: ``s & ~a`` and ``a & s`` (the
    padding bits of `s` and `a` are 0, so are those of the result).

    Examples
    --------
    >>> import numpy as np
    >>> a, s = np.array([[0b1100]], np.uint64), np.array([[0b1010]], np.uint64)
    >>> int(gate_pixels(a, s, "iand")[0, 0]), int(gate_pixels(a, s, "and")[0, 0])
    (2, 8)
    """
    if connect == "iand":
        return s & ~a
    return a & s
