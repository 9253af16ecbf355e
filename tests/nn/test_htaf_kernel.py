"""Tests for the fused HTAF kernels and the one-tensor autograd function."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sksign.nn.activations import HTAF, _htaf_kernel, htaf

PARAMS = [(2.0, 11.0), (1.0, 22.0), (0.05, 500.0), (5.0, 4.4), (0.1, 220.0)]


def _reference(x, a0, a1):
    """float64 value and derivative, evaluated without cancellation."""
    x = np.asarray(x, np.float64)
    t = np.tanh(a0 * np.abs(x))
    q = np.exp(-a1 * t)
    s = np.where(x >= 0, 1.0 / (1.0 + q), q / (1.0 + q))
    e = np.exp(-2.0 * a0 * np.abs(x))
    d = 4.0 * a0 * a1 * q * e / ((1.0 + q) * (1.0 + e)) ** 2
    return s, d


def _previous(x, a0, a1):
    """The previous implementation's forward and backward (three saved tensors)."""
    u = a1 * torch.tanh(a0 * x)
    s = torch.sigmoid(u)
    e = torch.exp(-2.0 * a0 * x.abs())
    d = 4.0 * a0 * a1 * s * torch.sigmoid(-u) * e / (1.0 + e) ** 2
    return s, d


def _value_and_grad(x, a0, a1, kernel):
    x = x.detach().clone().requires_grad_(True)
    y = htaf(x, a0, a1, kernel=kernel)
    (g,) = torch.autograd.grad(y.sum(), x)
    return y.detach(), g


def _inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate(
        [
            rng.standard_normal(n) * 3.0,
            np.linspace(-60.0, 60.0, 1201),
            [0.0, -0.0, 1e-7, -1e-7, 1e-30, 3e-3, -3e-3, 1e4, -1e4],
        ]
    )
    return torch.from_numpy(x.astype(np.float32))


@pytest.mark.parametrize(("a0", "a1"), PARAMS)
@pytest.mark.parametrize("kernel", ["fused", "eager"])
def test_float32_matches_float64_reference(a0, a1, kernel):
    """Check float32 value and gradient match float64, heavy tail included."""
    x = _inputs(3001)
    y, g = _value_and_grad(x, a0, a1, kernel)
    s_ref, d_ref = _reference(x.numpy(), np.float32(a0), np.float32(a1))
    # relative accuracy is limited by the conditioning of exp(-a1 |t|):
    # about a1 float32 ulps
    rtol = 5e-7 * max(a1, 8.0)
    for got, ref in ((y, s_ref), (g, d_ref)):
        normal = ref > np.finfo(np.float32).tiny * 1e3
        assert normal.sum() > 1000
        np.testing.assert_allclose(got.numpy()[normal], ref[normal], rtol=rtol)
        assert np.isfinite(got.numpy()).all()
    assert (y >= 0).all()
    assert (y <= 1).all()


@pytest.mark.parametrize(("a0", "a1"), PARAMS)
def test_fused_matches_previous_implementation(a0, a1):
    """Check the fused kernel against the previous three-tensor implementation."""
    x = torch.randn(4099) * 2.0
    y, g = _value_and_grad(x, a0, a1, "fused")
    s_prev, d_prev = _previous(x.double(), a0, a1)
    tiny = torch.finfo(torch.float32).tiny * 1e3
    rtol = 5e-7 * max(a1, 8.0)
    for got, ref in ((y, s_prev), (g, d_prev)):
        keep = ref > tiny  # float32 normal range
        torch.testing.assert_close(got.double()[keep], ref[keep], rtol=rtol, atol=0)
        assert (got[~keep] < tiny * 2).all()


@pytest.mark.parametrize("n", [1, 7, 33, 65537, 200003])
def test_fused_awkward_sizes_and_threads(n):
    """Check sizes that are not vector multiples, and chunked threads, agree."""
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32) * 4
    g = np.random.default_rng(n + 1).standard_normal(n).astype(np.float32)
    one = _htaf_kernel.htaf_forward_f32(x, 2.0, 11.0, n_threads=1)
    many = _htaf_kernel.htaf_forward_f32(x, 2.0, 11.0, n_threads=4)
    assert np.array_equal(one, many)
    b1 = _htaf_kernel.htaf_backward_f32(x, g, 2.0, 11.0, n_threads=1)
    b4 = _htaf_kernel.htaf_backward_f32(x, g, 2.0, 11.0, n_threads=4)
    assert np.array_equal(b1, b4)
    s_ref, d_ref = _reference(x, np.float32(2.0), np.float32(11.0))
    np.testing.assert_allclose(one, s_ref, rtol=1e-5, atol=1e-37)
    np.testing.assert_allclose(b1, g * d_ref, rtol=1e-5, atol=1e-37)


def _ulp_error(got, ref):
    """|got - ref| in float32 ulps of ref (subnormal refs: ulps of the smallest
    normal, 2**-149)."""
    tiny = np.finfo(np.float32).tiny
    ulp = np.spacing(np.maximum(np.abs(ref), tiny).astype(np.float32))
    return np.abs(got.astype(np.float64) - ref) / ulp.astype(np.float64)


def _whole_range(seed=0):
    """float32 inputs over the whole range: both tails, tiny and huge |x|."""
    rng = np.random.default_rng(seed)
    big = np.finfo(np.float32).max
    x = np.concatenate(
        [
            rng.standard_normal(20000) * 3.0,
            np.linspace(-60.0, 60.0, 20001),
            np.sign(rng.standard_normal(20000)) * np.exp(rng.uniform(-103, 88, 20000)),
            [0.0, -0.0, 1e-45, -1e-45, 1e-38, 1e-7, -1e-7, 1e4, -1e4, big, -big],
        ]
    )
    return x.astype(np.float32)


@pytest.mark.parametrize(
    ("a0", "a1"), [*PARAMS, (3.0, 7.3), (10.0, 0.5), (0.5, 2.0), (2.0, 500.0)]
)
def test_fused_error_in_ulps_over_whole_range(a0, a1):
    """Check the error in float32 ulps against float64, tails and subnormal
    results included, is within the conditioning of the formula.

    ``q = exp(-a1 t)`` turns the rounding of ``t`` into ``a1`` ulps, and
    ``e = exp(-2 a0 |x|)`` that of ``2 a0 |x|`` into ``2 a0 |x|`` ulps; the
    kernels stay within 3 (forward) and 4.3 (backward) times that.
    """
    x = _whole_range()
    g = np.ones_like(x)
    s_ref, d_ref = _reference(x, np.float32(a0), np.float32(a1))
    s = _htaf_kernel.htaf_forward_f32(x, a0, a1)
    d = _htaf_kernel.htaf_backward_f32(x, g, a0, a1)
    a0f, a1f = float(np.float32(a0)), float(np.float32(a1))
    assert (_ulp_error(s, s_ref) <= 4.0 * (1.0 + a1f)).all()
    cond = 1.0 + a1f + 2.0 * a0f * np.abs(x.astype(np.float64))
    assert (_ulp_error(d, d_ref) <= 6.0 * cond).all()
    # the heavy tail: slopes far below float32's normal range are still there
    tail = (d_ref > 0) & (d_ref < np.finfo(np.float32).tiny)
    if tail.any():
        assert (d[tail] > 0).any()


def test_fused_out_may_alias_inputs():
    """Check ``out=x`` (forward) and ``out=g`` (backward) give the same values
    as separate outputs, across blocks."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(5000) * 3).astype(np.float32)
    g = rng.standard_normal(5000).astype(np.float32)
    s = _htaf_kernel.htaf_forward_f32(x, 2.0, 11.0)
    d = _htaf_kernel.htaf_backward_f32(x, g, 2.0, 11.0)
    x2 = x.copy()
    assert _htaf_kernel.htaf_forward_f32(x2, 2.0, 11.0, out=x2) is x2
    assert np.array_equal(x2, s)
    g2 = g.copy()
    _htaf_kernel.htaf_backward_f32(x, g2, 2.0, 11.0, out=g2)
    assert np.array_equal(g2, d)


@pytest.mark.parametrize("n", [1023, 1024, 1025, 2 * 1024 + 5])
def test_fused_values_do_not_depend_on_position(n):
    """Check block edges: each element's value is the same at any offset."""
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    s = _htaf_kernel.htaf_forward_f32(x, 1.0, 22.0)
    d = _htaf_kernel.htaf_backward_f32(x, g, 1.0, 22.0)
    for off in (1, 7, 8, n // 2, n - 1):
        assert np.array_equal(
            _htaf_kernel.htaf_forward_f32(x[off:], 1.0, 22.0), s[off:]
        )
        b = _htaf_kernel.htaf_backward_f32(x[off:], g[off:], 1.0, 22.0)
        assert np.array_equal(b, d[off:])


@pytest.mark.parametrize(("a0", "a1"), [(10.0, 500.0), (0.05, 0.5), (2.0, 11.0)])
def test_fused_zero_slope_and_limits_far_out(a0, a1):
    """Check infinite and huge inputs: exact limits and a slope of exactly 0."""
    big = np.finfo(np.float32).max
    x = np.array([np.inf, -np.inf, big, -big, 1e30, -1e30], np.float32)
    s = _htaf_kernel.htaf_forward_f32(x, a0, a1)
    d = _htaf_kernel.htaf_backward_f32(x, np.full_like(x, 1e30), a0, a1)
    assert np.array_equal(d, np.zeros_like(x))
    a1f = float(np.float32(a1))
    hi, lo = 1.0 / (1.0 + np.exp(-a1f)), np.exp(-a1f) / (1.0 + np.exp(-a1f))
    np.testing.assert_allclose(s[::2], hi, rtol=4e-7 * (1 + a1f))
    np.testing.assert_allclose(s[1::2], np.float32(lo), rtol=4e-7 * (1 + a1f))


@settings(max_examples=40, deadline=None)
@given(
    x=arrays(
        np.float32,
        st.integers(1, 300),
        elements=st.floats(-1e4, 1e4, width=32, allow_nan=False),
    ),
    a0=st.floats(0.05, 10.0),
    a1=st.floats(0.5, 500.0),
)
def test_fused_property_finite_and_bounded(x, a0, a1):
    """Check no NaN/inf and values in [0, 1] for any |x| <= 1e4, alpha1 <= 500."""
    s = _htaf_kernel.htaf_forward_f32(x, a0, a1)
    d = _htaf_kernel.htaf_backward_f32(x, np.ones_like(x), a0, a1)
    assert np.isfinite(s).all()
    assert np.isfinite(d).all()
    assert ((s >= 0) & (s <= 1)).all()
    assert (d >= 0).all()
    assert (d <= np.float32(a0) * np.float32(a1) / 4 * 1.0001).all()


def test_fused_nan_and_inf():
    """Check NaN propagates and infinities give the limits with zero slope."""
    x = torch.tensor([float("nan"), float("inf"), -float("inf")])
    y, g = _value_and_grad(x, 2.0, 11.0, "fused")
    assert torch.isnan(y[0])
    assert torch.isnan(g[0])
    assert y[1] == pytest.approx(1 / (1 + np.exp(-11.0)), rel=1e-6)
    assert y[2] == pytest.approx(1 / (1 + np.exp(11.0)), rel=1e-5)
    assert torch.equal(g[1:], torch.zeros(2))


@pytest.mark.parametrize("kernel", ["fused", "eager"])
def test_one_tensor_saved_for_backward(kernel):
    """Check one call saves one tensor of x's size (ReLU saves one too)."""
    saved = []
    x = torch.randn(4, 5, 6, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(
        lambda t: saved.append(t) or t, lambda t: t
    ):
        y = htaf(x, 2.0, 11.0, kernel=kernel)
    assert len(saved) == 1
    assert saved[0].shape == x.shape
    y.sum().backward()
    assert x.grad is not None


@pytest.mark.parametrize(("a0", "a1"), [(2.0, 11.0), (0.1, 220.0)])
def test_gradcheck_float64_and_double_backward(a0, a1):
    """Check the closed-form backward with gradcheck / gradgradcheck (float64)."""
    x = torch.randn(50, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: htaf(t, a0, a1), (x,))
    assert torch.autograd.gradgradcheck(lambda t: htaf(t, a0, a1), (x,))


def test_double_backward_float32_fused_is_tracked():
    """Check create_graph through the fused path gives the second derivative."""
    x = torch.randn(64, requires_grad=True)
    (g,) = torch.autograd.grad(htaf(x, 2.0, 11.0).sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    x64 = x.detach().double().requires_grad_(True)
    y64 = torch.sigmoid(11.0 * torch.tanh(2.0 * x64))
    (g64,) = torch.autograd.grad(y64.sum(), x64, create_graph=True)
    (h64,) = torch.autograd.grad(g64.sum(), x64)
    torch.testing.assert_close(h.double(), h64, rtol=1e-3, atol=1e-4)


def test_non_contiguous_and_module():
    """Check non-contiguous input and the HTAF module use the same function."""
    x = torch.randn(16, 8).t()
    assert not x.is_contiguous()
    y, g = _value_and_grad(x, 1.0, 22.0, "fused")
    y2, g2 = _value_and_grad(x.contiguous(), 1.0, 22.0, "fused")
    assert torch.equal(y, y2)
    assert torch.equal(g, g2)
    assert torch.equal(HTAF(1.0, 22.0).train()(x), y)


def test_channels_last_keeps_layout_and_values():
    """Check channels-last input keeps its layout and matches contiguous input."""
    x = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    x.requires_grad_(True)
    y = htaf(x, 2.0, 11.0, kernel="fused")
    assert y.is_contiguous(memory_format=torch.channels_last)
    g = torch.randn(2, 3, 4, 5)  # contiguous: another layout than y
    (gx,) = torch.autograd.grad(y, x, g)
    y2, _ = _value_and_grad(x.contiguous(), 2.0, 11.0, "eager")
    x2 = x.detach().contiguous().requires_grad_(True)
    (gx2,) = torch.autograd.grad(htaf(x2, 2.0, 11.0, kernel="eager"), x2, g)
    torch.testing.assert_close(y.detach(), y2, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(gx, gx2, rtol=1e-5, atol=1e-7)
    # a sliced (offset) view and a broadcast incoming gradient
    base = torch.randn(10, 8)
    view = base[3:7].requires_grad_(False).clone().requires_grad_(True)
    y3 = htaf(view[1:], 2.0, 11.0)
    y3.sum().backward()
    ref = htaf(view.detach()[1:].clone().requires_grad_(True), 2.0, 11.0)
    torch.testing.assert_close(y3.detach(), ref.detach())


def test_kernel_argument_errors():
    """Check a bad kernel name and an unfusable tensor raise clear errors."""
    with pytest.raises(ValueError, match="kernel"):
        htaf(torch.zeros(2), kernel="triton")
    with pytest.raises(ValueError, match="float32 CPU"):
        htaf(torch.zeros(2, dtype=torch.float64), kernel="fused")
    assert htaf(torch.zeros(0)).shape == (0,)
