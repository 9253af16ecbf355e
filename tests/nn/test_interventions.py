"""Tests for sksign.nn.interventions (sign flip, projected magnitude noise)."""

import math
from collections import OrderedDict

import pytest
import torch
from torch import nn

from sksign.nn.activations import HTAF
from sksign.nn.interventions import (
    magnitude_randomization,
    reference_magnitudes,
    sign_flip,
)


def _identity_net(act, width=2):
    """Linear(identity) -> act -> Linear(identity): the output is the hidden h."""
    fc = nn.Linear(width, width)
    out = nn.Linear(width, width)
    with torch.no_grad():
        for lin in (fc, out):
            lin.weight.copy_(torch.eye(width))
            lin.bias.zero_()
    return nn.Sequential(OrderedDict([("fc0", fc), ("act0", act), ("out", out)]))


def _mlp(act=nn.ReLU, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(
        OrderedDict(
            [
                ("fc0", nn.Linear(5, 16)),
                ("act0", act()),
                ("fc1", nn.Linear(16, 16)),
                ("act1", act()),
                ("out", nn.Linear(16, 3)),
            ]
        )
    )


def _n_hooks(module):
    return sum(
        len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules()
    )


X2 = torch.tensor([[2.0, -3.0]])


def test_literal_and_gate_flip_differ_on_relu():
    """Check literal h -> -h and gate h -> relu(-z) on a hand ReLU case."""
    net = _identity_net(nn.ReLU())
    assert torch.equal(net(X2), torch.tensor([[2.0, 0.0]]))
    with torch.no_grad(), sign_flip(net, "all", alpha=1.0, flip="literal"):
        literal = net(X2)
    with torch.no_grad(), sign_flip(net, "all", alpha=1.0, flip="gate"):
        gate = net(X2)
    # literal: the active unit becomes -2, the inactive one stays 0
    assert torch.equal(literal, torch.tensor([[-2.0, 0.0]]))
    # gate: relu(-z) closes the active unit and opens the inactive one with |z|
    assert torch.equal(gate, torch.tensor([[0.0, 3.0]]))


def test_gate_flip_inplace_relu():
    """Check the gate flip reads z before an in-place ReLU overwrites it."""
    net = _identity_net(nn.ReLU(inplace=True))
    with torch.no_grad(), sign_flip(net, "all", alpha=1.0, flip="gate"):
        assert torch.equal(net(X2), torch.tensor([[0.0, 3.0]]))


def test_flips_agree_on_tanh_and_gate_on_step():
    """Check tanh (odd) gives the same flips; a step unit gates to H(-z)."""
    net = _identity_net(nn.Tanh())
    with torch.no_grad(), sign_flip(net, "all", alpha=1.0, flip="literal"):
        a = net(X2)
    with torch.no_grad(), sign_flip(net, "all", alpha=1.0, flip="gate"):
        b = net(X2)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, -torch.tanh(X2))
    step = _identity_net(HTAF()).eval()
    with torch.no_grad(), sign_flip(step, "all", alpha=1.0, flip="gate"):
        assert torch.equal(step(X2), torch.tensor([[0.0, 1.0]]))


@pytest.mark.parametrize(
    ("ctx", "kw"),
    [
        (sign_flip, {"flip": "literal"}),
        (sign_flip, {"flip": "gate"}),
        (magnitude_randomization, {"noise": "standard"}),
    ],
)
def test_alpha_zero_is_exact_noop(ctx, kw):
    """Check alpha=0 leaves the output bit for bit unchanged."""
    net = _mlp(nn.SiLU)
    x = torch.randn(20, 5)
    with torch.no_grad():
        clean = net(x)
        with ctx(net, "all", alpha=0.0, **kw):
            assert torch.equal(net(x), clean)


@pytest.mark.parametrize("ctx", [sign_flip, magnitude_randomization])
def test_same_generator_seed_same_output(ctx):
    """Check the corruption depends only on the generator's seed."""
    net = _mlp()
    x = torch.randn(30, 5)
    outs = []
    state = torch.random.get_rng_state()
    for seed in (3, 3, 4):
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad(), ctx(net, "all", alpha=0.5, generator=gen):
            outs.append(net(x))
    assert torch.equal(outs[0], outs[1])
    assert not torch.equal(outs[0], outs[2])
    # the global torch RNG is never used
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize("ctx", [sign_flip, magnitude_randomization])
def test_hooks_removed_after_exception(ctx):
    """Check every hook is gone after the context, also after an exception."""
    net = _mlp()
    inside = []

    def fail_inside():
        with ctx(net, "all", alpha=0.5):
            inside.append(_n_hooks(net))
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert inside[0] > 0
    assert _n_hooks(net) == 0
    with ctx(net, "all", alpha=0.5):
        net(torch.randn(2, 5))
    assert _n_hooks(net) == 0


def test_magnitude_projection_keeps_clean_signs():
    """Check h = S_clean * M: signs follow the clean pass, magnitudes are noise."""
    net = _mlp(nn.ReLU)
    x = torch.randn(50, 5)
    clean_z, seen = {}, {}

    def grab(store, name):
        def hook(_m, inp, out):
            store[name] = (inp[0].detach().clone(), out.detach().clone())

        return hook

    handles = [
        net.get_submodule(n).register_forward_hook(grab(clean_z, n))
        for n in ("act0", "act1")
    ]
    with torch.no_grad():
        net(x)
    for h in handles:
        h.remove()
    gen = torch.Generator().manual_seed(0)
    with (
        torch.no_grad(),
        magnitude_randomization(net, "all", alpha=1.0, generator=gen),
    ):
        # registered after the intervention's hooks: sees the replaced output
        handles = [
            net.get_submodule(n).register_forward_hook(grab(seen, n))
            for n in ("act0", "act1")
        ]
        net(x)
    for h in handles:
        h.remove()
    for name in ("act0", "act1"):
        z_clean = clean_z[name][0]
        h = seen[name][1]
        # every magnitude is a fresh |eta| > 0, with the clean sign
        assert torch.equal(h > 0, z_clean > 0)
        assert torch.all(h != 0)
    # the second layer's pre-activation was recomputed from the corrupted first
    assert not torch.equal(seen["act1"][0], clean_z["act1"][0])


def test_magnitude_on_step_net_changes_nothing():
    """Check step units (no magnitude) keep their clean output."""
    net = _mlp(lambda: HTAF(2.0, 11.0)).eval()
    x = torch.randn(40, 5)
    with torch.no_grad():
        clean = net(x)
        for noise, mu in (("standard", None), ("matched", None)):
            if noise == "matched":
                mu, _ = reference_magnitudes(net, "all", [x])
            with magnitude_randomization(net, "all", alpha=1.0, noise=noise, mu=mu):
                assert torch.equal(net(x), clean)


def test_matched_noise_has_mean_mu():
    """Check matched |eta| has mean mu_j(S) per unit and per sign."""
    net = _identity_net(nn.ReLU())
    x = torch.tensor([[1.0, -1.0]]).repeat(20000, 1)
    mu = {"act0": torch.tensor([[0.0, 0.5], [3.0, 0.0]])}  # rows: S=-1, S=+1
    seen = {}
    gen = torch.Generator().manual_seed(0)
    with (
        torch.no_grad(),
        magnitude_randomization(
            net, "all", alpha=1.0, noise="matched", mu=mu, generator=gen
        ),
    ):
        out = net(x)
    seen = out.abs().mean(0)
    # unit 0 has S = +1 -> mean 3.0; unit 1 has S = -1 -> mean 0.5 (sign -)
    torch.testing.assert_close(seen, torch.tensor([3.0, 0.5]), rtol=0.03, atol=0)
    assert torch.all(out[:, 0] > 0)
    assert torch.all(out[:, 1] < 0)
    # standard noise: mean sqrt(2/pi)
    with torch.no_grad(), magnitude_randomization(net, "all", alpha=1.0):
        out = net(x)
    torch.testing.assert_close(
        out.abs().mean(0), torch.full((2,), math.sqrt(2 / math.pi)), rtol=0.03, atol=0
    )


def test_reference_magnitudes_counts_and_empty_sign():
    """Check mu_j(s) = E[M | S = s], and 0 for a sign a unit never takes."""
    net = _identity_net(nn.ReLU())
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0], [-2.0, 4.0]])
    mu, counts = reference_magnitudes(net, "all", [x[:2], x[2:]])
    # unit 0: +1 for 1, 3 (mean 2); -1 for -2 (relu 0). unit 1: +1 for 2, 4.
    torch.testing.assert_close(
        mu["act0"], torch.tensor([[0.0, 0.0], [2.0, 3.0]], dtype=torch.float64)
    )
    assert counts["act0"].tolist() == [[1, 1], [2, 2]]
    tanh = _identity_net(nn.Tanh())
    mu, counts = reference_magnitudes(tanh, "all", [torch.tensor([[1.0, 2.0]])])
    assert counts["act0"].tolist() == [[0, 0], [1, 1]]
    assert mu["act0"][0].tolist() == [0.0, 0.0]


def test_bad_parameters_raise():
    """Check alpha, flip, noise, layers and missing mu give clear errors."""
    net = _mlp()
    with pytest.raises(ValueError, match="'alpha' parameter of sign_flip"):
        with sign_flip(net, alpha=1.5):
            pass
    with pytest.raises(ValueError, match="'flip' parameter"):
        with sign_flip(net, flip="sideways"):
            pass
    with pytest.raises(ValueError, match="'noise' parameter"):
        with magnitude_randomization(net, noise="loud"):
            pass
    with pytest.raises(ValueError, match="needs reference magnitudes"):
        with magnitude_randomization(net, noise="matched"):
            pass
    with pytest.raises(ValueError, match="is a Linear"):
        with sign_flip(net, ["fc0"]):
            pass
    sig = nn.Sequential(nn.Linear(3, 4), nn.Sigmoid(), nn.Linear(4, 2))
    with pytest.raises(ValueError, match="no sign-preserving activation module"):
        with sign_flip(sig, "all"):
            pass
    assert _n_hooks(net) == 0


class _CalledTwice(nn.Module):
    """One ReLU module used for two layers of very different scale."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 6), nn.Linear(6, 6)
        self.act, self.head = nn.ReLU(), nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.act(100 * self.b(self.act(self.a(x)))))


def test_reference_magnitudes_per_call_of_a_reused_module():
    """Check a module called twice gets mu per call (keys as in the sign code)."""
    torch.manual_seed(0)
    net = _CalledTwice().double().eval()
    X = torch.randn(40, 4, dtype=torch.float64)
    mu, counts = reference_magnitudes(net, "all", [X[:25], X[25:]])
    assert sorted(mu) == ["act", "act#1"]
    for key in mu:  # every reference sample counted once per call
        assert (counts[key].sum(0) == len(X)).all()
    with torch.no_grad():
        z0 = net.a(X)
        z1 = 100 * net.b(torch.relu(z0))
    for key, z in (("act", z0), ("act#1", z1)):
        pos = z > 0
        expected = torch.stack(
            [
                torch.zeros(z.shape[1], dtype=torch.float64),  # ReLU: M = 0 if z <= 0
                (z * pos).sum(0) / pos.sum(0).clamp(min=1),
            ]
        )
        torch.testing.assert_close(mu[key], expected)
    # matched noise needs the entry of every call
    partial = {"act": mu["act"]}
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match=r"call 2 of layer 'act'.*'act#1'"):
        with (
            magnitude_randomization(
                net, "all", alpha=1.0, noise="matched", mu=partial, generator=gen
            ),
            torch.no_grad(),
        ):
            net(X)


@pytest.mark.parametrize("flip", ["literal", "gate"])
def test_sign_flip_call_key_flips_that_call_only(flip):
    """Check ``"act#1"`` flips the second call of a reused module and leaves
    the first as it is; ``"act"`` with ``"act#1"`` flips both, and every
    forward pass counts its calls afresh."""
    torch.manual_seed(0)
    net = _CalledTwice().double().eval()
    X = torch.randn(8, 4, dtype=torch.float64)
    with torch.no_grad():
        h0 = torch.relu(net.a(X))
        z1 = 100 * net.b(h0)
        only_second = net.head(
            -torch.relu(z1) if flip == "literal" else torch.relu(-z1)
        )
        h0_flipped = -h0 if flip == "literal" else torch.relu(-net.a(X))
        z1_both = 100 * net.b(h0_flipped)
        both = net.head(
            -torch.relu(z1_both) if flip == "literal" else torch.relu(-z1_both)
        )
        for layers, expected in ((["act#1"], only_second), (["act", "act#1"], both)):
            with sign_flip(net, layers, alpha=1.0, flip=flip):
                for _ in range(2):  # a second pass: the calls count from 0 again
                    torch.testing.assert_close(net(X), expected)
    assert _n_hooks(net) == 0


def test_magnitude_call_key_randomises_that_call_only():
    """Check magnitude randomisation with ``"act#0"`` replaces the first call's
    magnitudes and leaves the second call's pass as computed (from the
    corrupted first call)."""
    torch.manual_seed(0)
    net = _CalledTwice().double().eval()
    X = torch.randn(8, 4, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    with (
        torch.no_grad(),
        magnitude_randomization(net, ["act#0"], alpha=1.0, generator=gen),
    ):
        out = net(X)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        z0 = net.a(X)
        eta = torch.randn(z0.shape, generator=gen).abs().double()  # float32 draw
        h0 = torch.where(z0 > 0, eta, -eta)  # signs kept, magnitudes noise
        expected = net.head(torch.relu(100 * net.b(h0)))
    torch.testing.assert_close(out, expected)


def test_a_call_key_of_no_call_raises():
    net = _CalledTwice()
    with pytest.raises(ValueError, match="act#x"):
        with sign_flip(net, ["act#x"]):
            pass
