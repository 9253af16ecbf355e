"""Feature maps of the packed image nets: layout, geometry and im2col.

The image nets (ResNet-18, WideResNet, Bi-Real ResNet-18) run on maps laid
out channels last (``(n, H * W * C)``, pixel by pixel), so that the channels
of one pixel are contiguous: as float rows (``float``) or as packed bits
(``pixel_bits``: the ``C`` bits of each pixel packed into ``ceil(C / 64)``
uint64 words, in the unit layout of :mod:`sksign.deploy._kernels`, so a
row holds ``H * W * ceil(C / 64)`` words). The image nets' convolutions
read these maps in place (:mod:`sksign.deploy._kernels`), from the geometry
and the tables built here; :func:`im2col` serves the small CNN's channels-first
maps. Spiking maps
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

from sksign.deploy._buffers import empty
from sksign.deploy._format import (
    conv_geometry,
    conv_output_size,
    words_per_pixel,
)
from sksign.deploy._kernels import fire_pixels, pack_ge, unpack_words

__all__ = [
    "GATES",
    "NEURONS",
    "compact_taps",
    "conv_corrections",
    "fire_maps",
    "gate_pixels",
    "im2col",
    "map_conv_geometry",
    "map_geometry",
    "nibble_tables",
    "pack_pixels",
    "tap_layout",
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


def map_geometry(attrs):
    """``(H, W, wpp, k, stride, padding, Ho, Wo)`` of a map convolution, int64.

    The geometry the kernels of :mod:`sksign.deploy._kernels._conv` read.
    """
    c, h, w = attrs["shape"]
    k, s, p = attrs["kernel"], attrs["stride"], attrs["padding"]
    ho, wo = conv_output_size(h, k, s, p), conv_output_size(w, k, s, p)
    return np.array([h, w, words_per_pixel(c), k, s, p, ho, wo], dtype=np.int64)


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
    out = empty((rows.shape[0], words_per_pixel(channels)), np.uint64)
    zeros = np.zeros(channels, dtype=z.dtype)
    run(pack_ge, rows.shape[0], rows, zeros, out)
    return out.reshape(z.shape[0], -1)


def unpack_pixels(words, channels, run, dtype=np.uint8):
    """0/1 maps ``(n, H * W * C)`` (channels last) of ``pixel_bits`` words."""
    n = words.shape[0]
    rows = words.reshape(-1, words_per_pixel(channels))
    out = empty((rows.shape[0], channels), dtype)
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


def tap_layout(channels, kernel):
    """How a patch of ``kernel x kernel`` pixels packs into whole words.

    A pixel of ``C <= 64`` channels holds its bits in the low
    ``tap_bits = 8 * ceil(C / 8)`` bits of its word (bytes in channel order),
    so ``64 // tap_bits`` taps share a compact word; wider pixels keep their
    ``ceil(C / 64)`` words per tap.

    Returns
    -------
    taps_per_word, tap_bits, n_words : int
    """
    wpp = words_per_pixel(channels)
    if wpp > 1:
        return 1, 64, kernel * kernel * wpp
    tap_bits = 8 * -(-channels // 8)
    per_word = 64 // tap_bits
    return per_word, tap_bits, -(-kernel * kernel // per_word)


def compact_taps(tap_words, channels, kernel):
    """Weight words of a patch in the compact layout of :func:`tap_layout`.

    Parameters
    ----------
    tap_words : ndarray of shape (oc, k * k * wpp), dtype uint64
        The words of each tap, in patch order (padding bits zero).

    Returns
    -------
    words : ndarray of shape (n_words, oc), dtype uint64
        Word-major (one row per compact word).
    """
    per_word, tap_bits, n_words = tap_layout(channels, kernel)
    if words_per_pixel(channels) > 1:
        return np.ascontiguousarray(tap_words.T)
    out = np.zeros((len(tap_words), n_words), dtype=np.uint64)
    for t in range(kernel * kernel):
        shift = np.uint64((t % per_word) * tap_bits)
        out[:, t // per_word] |= tap_words[:, t] << shift
    return np.ascontiguousarray(out.T)


def nibble_tables(weight_t, channels, kernel, lanes=8, bits=4, dtype=np.float32):
    """Sums of the real weights of every group of `bits` bits of a pixel's words.

    The group at bits ``b j .. b j + b - 1`` of a pixel's word (a nibble for
    ``b = 4``, a byte for ``b = 8``) holds ``b`` channels (or padding); for
    each tap, group and value ``v`` of those bits, the table holds the sum
    of the weights of the set bits, per output: the convolution of a bit
    map is then a sum of one table row per tap and nonzero group
    (:func:`~sksign.deploy._kernels.sum_conv`). Groups of padding alone are
    left out.

    Parameters
    ----------
    weight_t : ndarray of shape (k * k * C, oc), dtype float32
        Weights, one row per patch unit in the order ``(ky, kx, c)``.
    channels, kernel : int
    lanes : int, default=8
        The outputs are padded with zeros to a multiple of `lanes`.
    bits : {4, 8}, default=4
        Bits per group (the table has ``2**bits`` rows per group).
    dtype : {np.float32, np.float64}, default=np.float32
        Of the table.

    Returns
    -------
    table : ndarray of shape (k * k, n_groups, 2**bits, width), dtype `dtype`
        Sums made in float64, rounded once to float32 (each within
        ``2**-24`` of the sum of its absolute weights) unless `dtype` is
        float64; ``width`` is ``oc`` rounded up to a multiple of `lanes`.
    group_word : ndarray of shape (n_groups,), dtype int64
        Word of the pixel that holds each group.
    group_shift : ndarray of shape (n_groups,), dtype uint64
        Its lowest bit in that word.
    """
    units = []  # channel of each bit of each group kept
    words, shifts = [], []
    for wd in range(words_per_pixel(channels)):
        for j in range(64 // bits):
            pos = bits * j + np.arange(bits)
            unit = 64 * wd + 8 * (pos // 8) + 7 - pos % 8
            if unit.min() < channels:
                units.append(np.where(unit < channels, unit, channels))
                words.append(wd)
                shifts.append(bits * j)
    kk, oc = kernel * kernel, weight_t.shape[1]
    w = weight_t.astype(np.float64).reshape(kk, channels, oc)
    w = np.concatenate([w, np.zeros((kk, 1, oc))], axis=1)  # the padding unit
    per_bit = w[:, np.array(units)]  # (k * k, n_groups, bits, oc)
    values = (np.arange(2**bits)[:, None] >> np.arange(bits)) & 1
    table = np.einsum("vi,tmio->tmvo", values.astype(np.float64), per_bit)
    padded = np.zeros((*table.shape[:3], -(-oc // lanes) * lanes), dtype)
    padded[..., :oc] = table
    return (
        padded,
        np.array(words, dtype=np.int64),
        np.array(shifts, dtype=np.uint64),
    )


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
    n_words = current.shape[1] // channels * words_per_pixel(channels)
    out = empty((n * steps, n_words), np.uint64)
    run(
        fire_pixels,
        n,
        current,
        steps,
        attrs["constant"],
        np.float32(attrs["threshold"]),
        np.float32(attrs["tau"]),
        attrs["neuron"] == "lif",
        attrs["reset"] == "zero",
        channels,
        out,
    )
    return out


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
