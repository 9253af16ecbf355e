"""Tests for sksign.nn.hooks._quadrant: the one-pass quadrant majority of conv
maps."""

import copy

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from sksign.nn.hooks import _quadrant, pool_signs, quadrant_bounds, record_signs
from sksign.nn.hooks._quadrant import quadrant_majority, supports_quadrant_majority


def _brute_force(z: np.ndarray) -> np.ndarray:
    """Majority of z > 0 per channel and quadrant, counted pixel by pixel."""
    n, c, h, w = z.shape
    out = np.zeros((n, c, 4), dtype=bool)
    for q, ((r0, r1), (c0, c1)) in enumerate(
        [(r, k) for r in quadrant_bounds(h) for k in quadrant_bounds(w)]
    ):
        for i in range(n):
            for j in range(c):
                block = z[i, j, r0:r1, c0:c1]
                out[i, j, q] = 2 * int((block > 0).sum()) >= block.size
    return out.reshape(n, 4 * c)


@given(
    n=st.integers(1, 3),
    c=st.integers(1, 3),
    h=st.integers(1, 9),
    w=st.integers(1, 70),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    ties=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_quadrant_majority_matches_brute_force(n, c, h, w, dtype, ties, seed):
    """Check the kernel against a pixel count, odd sizes and ties included."""
    gen = torch.Generator().manual_seed(seed)
    if ties:  # values in {-1, 0, 1}: zeros are not positive, many exact ties
        z = torch.randint(-1, 2, (n, c, h, w), generator=gen).to(dtype)
    else:
        z = torch.randn((n, c, h, w), generator=gen, dtype=dtype)
    assert supports_quadrant_majority(z)
    bits = quadrant_majority(z)
    assert bits.dtype == torch.bool
    assert bits.shape == (n, 4 * c)
    np.testing.assert_array_equal(bits.numpy(), _brute_force(z.numpy()))
    reference, _ = pool_signs(z > 0)
    assert torch.equal(bits, reference)


def test_hand_made_ties_go_to_plus_one():
    """Check a 2x2 map with 2 of 4 positive in a 4x4 quadrant (tie -> 1)."""
    z = -torch.ones(1, 1, 4, 4)
    z[0, 0, 0, :2] = 1.0  # top-left: 2 of 4 positive -> tie -> 1
    z[0, 0, 0, 2] = 1.0  # top-right: 1 of 4 -> 0
    z[0, 0, 2:, 2:] = 0.0  # bottom-right: zeros are not positive -> 0
    z[0, 0, 2:, :2] = 5.0  # bottom-left: all positive -> 1
    np.testing.assert_array_equal(quadrant_majority(z).numpy(), [[1, 0, 1, 0]])


def test_unsupported_tensors_take_the_torch_path(monkeypatch):
    """Check which tensors the kernel declines, and that both paths agree."""
    z = torch.randn(2, 3, 5, 6)
    assert supports_quadrant_majority(z)
    assert supports_quadrant_majority(z.double())
    assert not supports_quadrant_majority(z.half())
    assert not supports_quadrant_majority(z.to(torch.bfloat16))
    assert not supports_quadrant_majority(z.to(memory_format=torch.channels_last))
    assert not supports_quadrant_majority(z[:, :, :, ::2])
    assert not supports_quadrant_majority(z.reshape(6, 5, 6))
    assert not supports_quadrant_majority(torch.zeros(0, 3, 5, 6))

    calls = []
    real = _quadrant.quadrant_majority
    monkeypatch.setattr(
        _quadrant, "quadrant_majority", lambda t: calls.append(t.shape) or real(t)
    )
    torch.manual_seed(0)
    conv = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU())
    x = torch.randn(5, 2, 9, 7)
    with torch.no_grad():
        expected = _brute_force(conv[0](x).numpy())

    def codes(module, xb):
        with record_signs(module, "all") as rec, torch.no_grad():
            module(xb)
        return rec.pop_matrix().numpy()

    np.testing.assert_array_equal(codes(conv, x), expected)
    assert calls == [(5, 4, 7, 5)]  # the kernel ran
    calls.clear()
    last = copy.deepcopy(conv).to(memory_format=torch.channels_last)
    x_last = x.contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(codes(last, x_last), expected)
    assert calls == []  # a channels-last map takes the torch ops
    np.testing.assert_array_equal(
        codes(copy.deepcopy(conv).half(), x.half()).shape, expected.shape
    )
    assert calls == []


def test_nan_conv_map_still_refused():
    """Check the kernel path keeps refusing NaN pre-activations."""
    conv = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU())
    x = torch.randn(3, 1, 6, 6)
    x[1, 0, 2, 2] = float("nan")
    with pytest.raises(ValueError, match="'0' produced NaN pre-activations"):
        with record_signs(conv, "0") as _, torch.no_grad():
            conv(x)
    with pytest.raises(ValueError, match="'1' produced NaN pre-activations"):
        with record_signs(conv, "all") as _, torch.no_grad():
            conv(x)
