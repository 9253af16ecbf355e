"""Tests for the HTAF binary-net family: BNN (Bi-Real), SNN (IF neurons), summary."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from sksign.estimators import HTAFNetClassifier
from sksign.nn.activations import HTAF, StepActivation, force_step_mode
from sksign.nn.architectures.factory import ARCHITECTURES, build_network
from sksign.nn.layers.binary import BinaryLinear, BinaryMLP, binary_sign
from sksign.nn.layers.spiking import IFNeuron, SpikingMLP
from sksign.nn.summary import binary_summary


def _step_outputs(module, x):
    """Eval-mode outputs of every StepActivation of `module` on `x`."""
    outs = {}
    handles = [
        m.register_forward_hook(
            lambda _m, _i, o, name=name: outs.__setitem__(name, o.detach())
        )
        for name, m in module.named_modules()
        if isinstance(m, StepActivation)
    ]
    try:
        module.eval()
        with torch.no_grad():
            module(x)
    finally:
        for h in handles:
            h.remove()
    return outs


# -- build_network ------------------------------------------------------------


def test_architectures_list_bnn_and_snn():
    """Check that build_network knows "bnn" and "snn"."""
    assert {"bnn", "snn"} <= set(ARCHITECTURES)
    assert isinstance(build_network("bnn", 8, 3, hidden_layer_sizes=(4,)), BinaryMLP)
    net = build_network("snn", 8, 3, hidden_layer_sizes=(4,), time_steps=2)
    assert isinstance(net, SpikingMLP)
    assert net.time_steps == 2


@pytest.mark.parametrize("time_steps", [0, -1])
def test_build_network_rejects_bad_time_steps(time_steps):
    """Check that time_steps < 1 raises a ValueError naming time_steps."""
    with pytest.raises(ValueError, match="time_steps"):
        build_network("snn", 8, 3, time_steps=time_steps)
    with pytest.raises(ValueError, match="time_steps"):
        build_network("mlp", 8, 3, time_steps=time_steps)
    with pytest.raises(TypeError, match="time_steps"):
        build_network("snn", 8, 3, time_steps=2.5)


def test_estimator_rejects_bad_time_steps():
    """Check that HTAFNetClassifier(architecture="snn", time_steps=0) fails clearly."""
    X = np.random.default_rng(0).random((20, 4), dtype=np.float32)
    y = np.arange(20) % 2
    clf = HTAFNetClassifier((4,), architecture="snn", time_steps=0, max_epochs=1)
    with pytest.raises(ValueError, match="time_steps"):
        clf.fit(X, y)


@pytest.mark.parametrize("arch", ["bnn", "snn"])
def test_binary_nets_need_step_activation(arch):
    """Check that bnn/snn with a non-step activation raise a ValueError."""
    with pytest.raises(ValueError, match="step-like activation"):
        build_network(arch, 8, 3, activation="relu")


@pytest.mark.parametrize("arch", ["bnn", "snn"])
def test_binary_nets_reject_empty_hidden(arch):
    """Check that bnn/snn without hidden layers raise a ValueError."""
    with pytest.raises(ValueError, match="at least one hidden layer"):
        build_network(arch, 8, 3, hidden_layer_sizes=())


def test_bnn_children_names():
    """Check the named children of the BNN (hooks find act{i})."""
    net = build_network("bnn", 10, 3, hidden_layer_sizes=(6, 6, 4))
    names = [n for n, _ in net.named_children()]
    assert names == [
        "stem",
        "stem_bn",
        "act0",
        "fc0",
        "bn0",
        "short0",
        "act1",
        "fc1",
        "bn1",
        "short1",
        "act2",
        "fc2",
        "bn2",
        "short2",
        "out",
    ]
    assert isinstance(net.short0, nn.Identity)
    assert isinstance(net.short2, nn.Linear)  # projection 6 -> 4
    assert all(isinstance(a, HTAF) for a in net.binary_activations())
    no_bn = build_network("bnn", 10, 3, hidden_layer_sizes=(6,), batch_norm=False)
    assert not any(isinstance(m, nn.BatchNorm1d) for m in no_bn.modules())


def test_snn_children_names():
    """Check the named children of the SNN: spike{i} are StepActivations."""
    net = build_network("snn", 10, 3, hidden_layer_sizes=(6, 6))
    names = [n for n, _ in net.named_children()]
    assert names == ["fc0", "spike0", "fc1", "spike1", "out"]
    steps = [n for n, m in net.named_modules() if isinstance(m, StepActivation)]
    assert steps == ["spike0", "spike1"]


# -- binary weights -------------------------------------------------------------


def test_binary_sign_forward_and_gradient():
    """Check sign(0) = +1 and the clipped straight-through gradient."""
    w = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], requires_grad=True)
    out = binary_sign(w)
    assert out.tolist() == [-1.0, -1.0, 1.0, 1.0, 1.0]
    out.sum().backward()
    assert w.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize("weight_grad", ["scaled", "ste"])
def test_binary_linear_uses_scaled_sign(weight_grad):
    """Check the forward weights are mean|W| * sign(W) per output unit."""
    layer = BinaryLinear(5, 3, weight_grad=weight_grad)
    wb = layer.binary_weight().detach()
    w = layer.weight.detach()
    expected = w.abs().mean(1, keepdim=True) * torch.where(w >= 0, 1.0, -1.0)
    torch.testing.assert_close(wb, expected)
    # Exactly two values per row: +/- the scale.
    for row in wb:
        assert len(torch.unique(row.abs())) == 1
    x = torch.randn(4, 5)
    torch.testing.assert_close(layer(x), x @ expected.T)
    layer(x).sum().backward()
    assert layer.weight.grad is not None
    assert layer.weight.grad.abs().sum() > 0


def test_binary_linear_can_stay_real():
    """Check binary=False keeps the real weights."""
    layer = BinaryLinear(5, 3, binary=False)
    assert layer.binary_weight() is layer.weight
    with pytest.raises(ValueError, match="weight_grad"):
        BinaryLinear(5, 3, weight_grad="nope")


def test_bnn_feeds_pm1_to_binary_layers():
    """Check that the binary layers see +/-1 inputs at inference (2H - 1)."""
    net = build_network("bnn", 10, 3, hidden_layer_sizes=(6, 6)).eval()
    seen = []
    h = net.fc1.register_forward_pre_hook(lambda _m, inp: seen.append(inp[0]))
    with torch.no_grad():
        net(torch.randn(7, 10))
    h.remove()
    assert set(torch.unique(seen[0]).tolist()) <= {-1.0, 1.0}


# -- IF neurons -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reset", "current", "expected"),
    [
        ("subtract", 0.7, [0, 1, 1, 0]),  # v: .7, 1.4->.4, 1.1->.1, .8
        ("zero", 0.7, [0, 1, 0, 1]),  # v: .7, 1.4->0, .7, 1.4->0
        ("subtract", 1.0, [1, 1, 1, 1]),  # H(0) = 1: v = threshold fires
    ],
)
def test_if_neuron_dynamics(reset, current, expected):
    """Check the integrate-and-fire dynamics with the exact step by hand."""
    neuron = IFNeuron(threshold=1.0, reset=reset).eval()
    x = torch.full((1, 4, 1), current)
    assert neuron(x).flatten().tolist() == expected


def test_if_neuron_smooth_in_train_and_gradient():
    """Check the training spikes are the smooth HTAF and carry gradients."""
    neuron = IFNeuron().train()
    x = torch.full((2, 3, 4), 0.9, requires_grad=True)
    s = neuron(x)
    assert ((s > 0) & (s < 1)).all()
    s.sum().backward()
    assert x.grad.abs().sum() > 0


def test_if_neuron_bad_params():
    """Check bad IFNeuron parameters raise."""
    with pytest.raises(ValueError, match="reset"):
        IFNeuron(reset="nope")
    with pytest.raises(ValueError, match="threshold"):
        IFNeuron(threshold=0.0)
    with pytest.raises(ValueError, match="batch, time"):
        IFNeuron()(torch.zeros(3))


def test_snn_time_steps_change_forward():
    """Check that the same weights give different outputs with T=1 and T=4."""
    torch.manual_seed(0)
    net4 = build_network("snn", 16, 5, hidden_layer_sizes=(32, 32), time_steps=4)
    net1 = build_network("snn", 16, 5, hidden_layer_sizes=(32, 32), time_steps=1)
    net1.load_state_dict(net4.state_dict())
    x = torch.rand(8, 16) * 4
    with torch.no_grad():
        out4, out1 = net4.eval()(x), net1.eval()(x)
    assert not torch.allclose(out4, out1)


@pytest.mark.parametrize("arch", ["snn", "bnn"])
def test_no_state_leaks_between_batches(arch):
    """Check a sample gives the same output alone, in a batch and when repeated."""
    torch.manual_seed(0)
    net = build_network(arch, 16, 5, hidden_layer_sizes=(32, 32)).eval()
    x = torch.rand(10, 16) * 3
    with torch.no_grad():
        batch = net(x)
        alone = torch.cat([net(x[i : i + 1]) for i in range(len(x))])
        again = net(x)
    torch.testing.assert_close(alone, batch, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(again, batch, rtol=0, atol=0)


def test_snn_force_step_mode_reaches_spikes():
    """Check force_step_mode switches IF neurons (hard spikes in train())."""
    net = build_network("snn", 8, 3, hidden_layer_sizes=(6,)).train()
    x = torch.rand(4, 8)
    with force_step_mode(net, "hard"):
        outs = {}
        h = net.spike0.register_forward_hook(lambda _m, _i, o: outs.setdefault("s", o))
        net(x)
        h.remove()
    assert set(torch.unique(outs["s"]).tolist()) <= {0.0, 1.0}
    assert net.spike0.mode == "auto"


# -- training on digits -------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch", "activation"),
    [
        ("bnn", "htaf"),
        ("snn", "htaf"),
        ("mlp", "htaf"),
        ("bnn", "ste"),
        ("snn", "scaled_sigmoid"),
    ],
)
def test_binary_nets_learn_digits(digits, arch, activation):
    """Check bnn/snn/dhn learn digits well above chance with the exact step."""
    Xtr, Xte, ytr, yte = digits
    clf = HTAFNetClassifier(
        (64, 64),
        architecture=arch,
        activation=activation,
        max_epochs=10,
        lr=3e-3,
        random_state=0,
    ).fit(Xtr, ytr)
    assert clf.score(Xte, yte) > 0.8  # chance is 0.1
    outs = _step_outputs(clf.module_, torch.as_tensor(Xte))
    assert outs  # every net here has step activations
    for name, o in outs.items():
        assert set(torch.unique(o).tolist()) <= {0.0, 1.0}, name


# -- binary_summary -------------------------------------------------------------------


def test_binary_summary_bnn():
    """Check the summary's units, firing rates and bytes for a BNN."""
    torch.manual_seed(0)
    net = build_network("bnn", 10, 3, hidden_layer_sizes=(16, 8)).train()
    x = torch.randn(12, 10)
    rows, table = binary_summary(net, x)
    assert net.training  # mode restored
    by_name = {r["layer"]: r for r in rows}
    outs = _step_outputs(net, x)
    net.train()
    for name in ("act0", "act1"):
        assert by_name[name]["binary_units"] == 16
        assert by_name[name]["firing_rate"] == pytest.approx(float(outs[name].mean()))
        assert by_name[name]["act_bytes_packed"] == 2
        assert by_name[name]["act_bytes_float32"] == 64
    fc1 = by_name["fc1"]  # binary 16 -> 8, no bias
    assert fc1["binary_weights"]
    assert fc1["weight_bytes_float32"] == 4 * 16 * 8
    assert fc1["weight_bytes_packed"] == 8 * 2 + 4 * 8
    stem = by_name["stem"]  # real layer: not packed
    assert stem["weight_bytes_packed"] == stem["weight_bytes_float32"] == 4 * 176
    assert "total" in table
    assert "act0" in table


def test_binary_summary_snn_counts_time_steps():
    """Check spiking layers count units x time steps bits per sample."""
    net = build_network("snn", 10, 3, hidden_layer_sizes=(8,), time_steps=3)
    rows, _ = binary_summary(
        net, np.random.default_rng(0).random((5, 10), dtype=np.float32)
    )
    spike = next(r for r in rows if r["layer"] == "spike0")
    assert spike["binary_units"] == 24
    assert spike["act_bytes_packed"] == math.ceil(24 / 8)
    assert 0.0 <= spike["firing_rate"] <= 1.0


def test_binary_summary_bad_input():
    """Check binary_summary rejects non-modules and empty samples."""
    with pytest.raises(TypeError, match=r"nn\.Module"):
        binary_summary("net", np.zeros((2, 3)))
    with pytest.raises(ValueError, match="at least one sample"):
        binary_summary(nn.Linear(3, 2), np.zeros((0, 3), dtype=np.float32))
