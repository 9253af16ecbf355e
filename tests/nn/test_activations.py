"""Tests for the HTAF family and the epsilon bound (PAPERS.md part A)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from sksign.nn.activations import (
    HTAF,
    ScaledSigmoid,
    STEHeaviside,
    force_step_mode,
    heaviside,
    htaf,
    htaf_alpha0_min,
    htaf_grid,
    htaf_product_limit,
)


def _htaf_np(x, a0, a1):
    """float64 reference: sigmoid(a1 * tanh(a0 * x))."""
    return 0.5 * (1.0 + np.tanh(0.5 * a1 * np.tanh(a0 * x)))


def test_htaf_matches_reference():
    """Check that htaf equals the float64 formula."""
    x = torch.linspace(-5, 5, 1001, dtype=torch.float64)
    out = htaf(x, 1.5, 7.3).numpy()
    np.testing.assert_allclose(out, _htaf_np(x.numpy(), 1.5, 7.3), rtol=1e-12)


@pytest.mark.parametrize(("a0", "a1"), [(2.0, 11.0), (0.1, 220.0), (5.0, 4.4)])
def test_htaf_gradcheck(a0, a1):
    """Check the closed-form backward with torch.autograd.gradcheck (float64)."""
    x = torch.randn(64, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: htaf(t, a0, a1), (x,))


@pytest.mark.parametrize(("a0", "a1"), [(2.0, 11.0), (0.1, 220.0), (5.0, 4.4)])
def test_htaf_second_derivative(a0, a1):
    """Check double backward (create_graph=True) against the composed formula."""
    x = (3 * torch.randn(64, dtype=torch.float64)).requires_grad_(True)
    assert torch.autograd.gradgradcheck(lambda t: htaf(t, a0, a1), (x,))

    def first_and_second(f):
        (g,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), x)
        return g.detach(), h

    g, h = first_and_second(lambda t: htaf(t, a0, a1))
    g_ref, h_ref = first_and_second(lambda t: torch.sigmoid(a1 * torch.tanh(a0 * t)))
    torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(h, h_ref, rtol=1e-9, atol=1e-10)
    # a gradient penalty trains through the activation
    w = torch.ones(1, dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(htaf(w * x, a0, a1).sum(), x, create_graph=True)
    gx.pow(2).sum().backward()
    assert w.grad is not None
    assert w.grad.abs().item() > 0


@pytest.mark.parametrize(("a0", "a1"), [(2.0, 11.0), (1.0, 22.0), (0.5, 44.0)])
def test_htaf_slope_at_zero(a0, a1):
    """Check that the slope at 0 is alpha0 * alpha1 / 4."""
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    htaf(x, a0, a1).sum().backward()
    assert x.grad.item() == pytest.approx(a0 * a1 / 4, rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("a1", [1.0, 11.0, 500.0])
def test_htaf_finite_on_extreme_inputs(dtype, a1):
    """Check no NaN/inf in value or gradient for |x| up to 1e4 and alpha1 to 500."""
    x = torch.tensor([-1e4, -1e2, -1.0, -1e-7, 0.0, 1e-7, 1.0, 1e2, 1e4], dtype=dtype)
    x.requires_grad_(True)
    for a0 in (0.05, 2.0, 50.0):
        y = htaf(x, a0, a1)
        (g,) = torch.autograd.grad(y.sum(), x)
        assert torch.isfinite(y).all()
        assert torch.isfinite(g).all()
        assert ((y >= 0) & (y <= 1)).all()


@pytest.mark.parametrize(("a0", "a1"), [(1.0, 22.0), (0.5, 44.0), (2.0, 11.0)])
def test_htaf_float32_gradient_keeps_heavy_tail(a0, a1):
    """Check float32 gradients match float64 in the tail instead of rounding to 0."""
    x64 = torch.linspace(-30, 30, 601, dtype=torch.float64, requires_grad=True)
    (g64,) = torch.autograd.grad(htaf(x64, a0, a1).sum(), x64)
    x32 = x64.detach().float().requires_grad_(True)
    (g32,) = torch.autograd.grad(htaf(x32, a0, a1).sum(), x32)
    normal = g64 > torch.finfo(torch.float32).tiny * 1e3
    assert normal.sum() > 100
    torch.testing.assert_close(g32[normal].double(), g64[normal], rtol=1e-4, atol=0)
    # e.g. a0=1, a1=22, x=1: 1 - s would round to 0 in float32
    assert (g32[normal] > 0).all()


def test_htaf_tail_decay_rate_set_by_alpha0():
    """Check that the derivative decays like exp(-2 alpha0 |x|) in the tail."""
    a0, a1 = 1.0, 22.0
    x = torch.tensor([8.0, 9.0], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(htaf(x, a0, a1).sum(), x)
    assert g[1] / g[0] == pytest.approx(math.exp(-2 * a0), rel=1e-3)


def test_modes_and_exact_step():
    """Check that eval() gives exactly 0/1 and train() the smooth function."""
    act = HTAF(2.0, 11.0)
    x = torch.randn(1000)
    act.train()
    smooth = act(x)
    assert not torch.all((smooth == 0) | (smooth == 1))
    act.eval()
    hard = act(x)
    assert torch.equal(hard, (x >= 0).float())
    assert torch.equal(HTAF(mode="smooth").eval()(x), htaf(x, 2.0, 11.0))
    assert torch.equal(HTAF(mode="hard").train()(x), heaviside(x))
    assert heaviside(torch.tensor([0.0])).item() == 1.0


@pytest.mark.parametrize("act", [HTAF(), STEHeaviside(), ScaledSigmoid()])
def test_baselines_share_interface(act):
    """Check every step-like activation is the exact step in eval mode."""
    x = torch.randn(50)
    assert torch.equal(act.eval()(x), (x >= 0).float())
    assert "mode='auto'" in repr(act)


def test_ste_forward_step_backward_surrogate():
    """Check STE: forward is the step in training, backward the surrogate."""
    x = torch.tensor([-2.0, -0.5, 0.5, 2.0], requires_grad=True)
    y = STEHeaviside("clip").train()(x)
    assert torch.equal(y.detach(), torch.tensor([0.0, 0.0, 1.0, 1.0]))
    y.sum().backward()
    assert torch.equal(x.grad, torch.tensor([0.0, 1.0, 1.0, 0.0]))
    x.grad = None
    STEHeaviside("sigmoid", k=4.0).train()(x).sum().backward()
    s = torch.sigmoid(4.0 * x.detach())
    torch.testing.assert_close(x.grad, 4.0 * s * (1 - s))


def test_scaled_sigmoid_training_function():
    """Check ScaledSigmoid is sigmoid(k x) in training."""
    x = torch.randn(20)
    torch.testing.assert_close(ScaledSigmoid(k=3.0).train()(x), torch.sigmoid(3 * x))


def test_force_step_mode_restores_on_error():
    """Check force_step_mode restores the previous modes, also after an error."""
    net = torch.nn.Sequential(HTAF(), torch.nn.Linear(2, 2), HTAF(mode="hard"))
    seen = []

    def fail_inside():
        with force_step_mode(net, "smooth"):
            seen.append([m.mode for m in (net[0], net[2])])
            raise RuntimeError

    with pytest.raises(RuntimeError):
        fail_inside()
    assert seen == [["smooth", "smooth"]]
    assert [net[0].mode, net[2].mode] == ["auto", "hard"]


@pytest.mark.parametrize(
    ("kwargs", "err"),
    [
        ({"alpha0": 0.0}, ValueError),
        ({"alpha1": -1.0}, ValueError),
        ({"alpha0": "2"}, TypeError),
        ({"alpha0": float("nan")}, ValueError),
        ({"mode": "soft"}, ValueError),
    ],
)
def test_htaf_bad_parameters(kwargs, err):
    """Check HTAF refuses invalid parameters with a message naming them."""
    with pytest.raises(err, match=next(iter(kwargs))):
        HTAF(**kwargs)


# -- Proposition 3.1 and Theorem 3.2 -------------------------------------------------
eps_strategy = st.floats(min_value=1e-3, max_value=0.49)


@given(eps=eps_strategy, ratio=st.floats(min_value=1.001, max_value=1e3))
def test_prop31_bound_holds_at_and_above_alpha0_min(eps, ratio):
    """Check |HTAF - H| <= eps on |x| >= eps when alpha0 >= alpha0_min."""
    L = math.log((1 - eps) / eps)
    a1 = L * ratio
    a0 = htaf_alpha0_min(eps, a1)
    x = np.concatenate([np.linspace(eps, eps + 10.0, 200), [eps, 1e4]])
    for scale in (1.0, 1.5):
        y_pos = _htaf_np(x, a0 * scale, a1)
        y_neg = _htaf_np(-x, a0 * scale, a1)
        assert np.all(1.0 - y_pos <= eps * (1 + 1e-9))
        assert np.all(y_neg <= eps * (1 + 1e-9))


@given(eps=eps_strategy, ratio=st.floats(min_value=1.001, max_value=1e3))
def test_prop31_bound_is_tight(eps, ratio):
    """Check that just below alpha0_min the error at x = eps exceeds eps."""
    L = math.log((1 - eps) / eps)
    a1 = L * ratio
    a0 = htaf_alpha0_min(eps, a1) * (1 - 1e-3)
    assert 1.0 - _htaf_np(eps, a0, a1) > eps
    assert _htaf_np(-eps, a0, a1) > eps


@given(eps=eps_strategy)
def test_thm32_product_limit(eps):
    """Check alpha1 * alpha0_min(alpha1) decreases to (1/eps) log((1-eps)/eps)."""
    L = math.log((1 - eps) / eps)
    limit = htaf_product_limit(eps)
    assert limit == pytest.approx(L / eps)
    products = [a1 * htaf_alpha0_min(eps, a1) for a1 in L * np.array([1.5, 10, 1e3])]
    assert products[0] >= products[1] >= products[2] >= limit * (1 - 1e-12)
    assert products[-1] == pytest.approx(limit, rel=1e-5)


def test_product_limit_is_about_22_for_eps_01():
    """Check the 22-manifold constant: 10 log 9."""
    assert htaf_product_limit(0.1) == pytest.approx(10 * math.log(9))
    assert round(htaf_product_limit(0.1), 2) == 21.97


def test_alpha0_min_errors_and_vectorised():
    """Check alpha0_min validates eps and alpha1 and accepts arrays."""
    with pytest.raises(ValueError, match="eps"):
        htaf_alpha0_min(0.5, 100.0)
    with pytest.raises(ValueError, match="alpha1 must exceed"):
        htaf_alpha0_min(0.1, 2.0)
    out = htaf_alpha0_min(0.1, [5.0, 50.0])
    assert out.shape == (2,)
    assert out[0] > out[1]


def test_htaf_grid_on_manifold():
    """Check htaf_grid pairs each alpha0 with product / alpha0."""
    grid = htaf_grid(22.0, alpha0=(0.5, 2.0))
    assert grid == [
        {"alpha0": [0.5], "alpha1": [44.0]},
        {"alpha0": [2.0], "alpha1": [11.0]},
    ]


@pytest.mark.parametrize("name", ["htaf", "scaled_sigmoid"])
def test_straight_through_forwards_the_step_with_the_smooth_gradient(name):
    """Check ``straight_through``: the training forward is the exact step, the
    gradient the smooth function's; eval is the step either way; a module
    pickled before the attribute existed still runs."""
    from sksign.nn import make_activation

    x = torch.linspace(-1.0, 1.0, 21, dtype=torch.float64)
    act = make_activation(name).double()
    x1 = x.clone().requires_grad_(True)
    act(x1).sum().backward()
    act.straight_through = True
    x2 = x.clone().requires_grad_(True)
    y = act(x2)
    y.sum().backward()
    torch.testing.assert_close(y.detach(), (x >= 0).double())
    torch.testing.assert_close(x2.grad, x1.grad)
    assert torch.equal(act.eval()(x), (x >= 0).double())
    del act.straight_through
    smooth = act.train()(x)
    assert ((smooth > 0) & (smooth < 1)).any()
