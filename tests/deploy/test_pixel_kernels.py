"""The one-pass kernels of channels-last float maps against their numpy passes."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest

from sksign.deploy._kernels import affine_rows, fire_pixels
from sksign.deploy._maps import pack_pixels, words_per_pixel


def _run(kernel, n_rows, *args):
    kernel(*args, 0, n_rows)


def test_affine_rows_equals_the_numpy_passes():
    """Check ``x * scale + shift`` bit for bit (a product, then a sum)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 48)).astype(np.float32)
    scale, shift = rng.standard_normal((2, 48)).astype(np.float32)
    out = np.empty_like(x)
    affine_rows(x, scale, shift, out, 0, 7)
    ref = x * scale
    ref += shift
    np.testing.assert_array_equal(out, ref)


def _fire_reference(current, channels, steps, constant, threshold, tau, leaky, zero):
    """The numpy passes of the neurons, one step at a time."""
    n = len(current) if constant else len(current) // steps
    cur = current.reshape(n, 1 if constant else steps, -1)
    v = np.zeros((n, cur.shape[2]), np.float32)
    out = []
    for t in range(steps):
        i = cur[:, 0 if constant else t]
        if leaky:
            u = i - v
            u /= tau
            v += u
        else:
            v += i
        u = v - threshold
        out.append(pack_pixels(u, channels, _run))
        fired = u >= 0
        if zero:
            v[fired] = 0
        else:
            np.copyto(v, u, where=fired)
    return np.stack(out, axis=1).reshape(n * steps, -1)


@pytest.mark.parametrize("channels", [1, 5, 64, 70])
@pytest.mark.parametrize("leaky", [False, True])
@pytest.mark.parametrize("zero", [False, True])
@pytest.mark.parametrize("constant", [False, True])
def test_fire_pixels_equals_the_numpy_neurons(channels, leaky, zero, constant):
    """Check IF and LIF neurons, both resets, spikes packed, bit for bit."""
    rng = np.random.default_rng(channels)
    n, steps, pixels = 3, 4, 5
    rows = n if constant else n * steps
    current = rng.standard_normal((rows, pixels * channels)).astype(np.float32)
    threshold, tau = np.float32(0.7), np.float32(2.0)
    out = np.empty((n * steps, pixels * words_per_pixel(channels)), np.uint64)
    args = (current, steps, constant, threshold, tau, leaky, zero, channels, out)
    fire_pixels(*args, 0, n)
    ref = _fire_reference(
        current, channels, steps, constant, threshold, tau, leaky, zero
    )
    np.testing.assert_array_equal(out, ref)
