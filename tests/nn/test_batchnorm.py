"""BatchNorm re-estimation with the exact step (sksign.nn.layers.batchnorm)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from sksign.nn import HTAF, ResNet18, StepActivation, WideResNet
from sksign.nn.architectures.resnet import BasicBlock, WideBlock
from sksign.nn.layers.batchnorm import batchnorm_layers, recalibrate_batchnorm


def _dense(seed=0, dropout=0.5):
    """Linear -> BN -> HTAF -> Linear -> HTAF -> Dropout -> BN -> Linear (float64)."""
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Linear(5, 7),
        nn.BatchNorm1d(7),
        HTAF(),
        nn.Linear(7, 6),
        HTAF(),
        nn.Dropout(dropout),
        nn.BatchNorm1d(6),
        nn.Linear(6, 3),
    ).double()
    # statistics and affine parameters far from the reset values
    for bn in (net[1], net[6]):
        bn.running_mean.uniform_(-3, 3)
        bn.running_var.uniform_(2, 5)
        bn.weight.data.uniform_(0.5, 2)
        bn.bias.data.uniform_(-1, 1)
    return net


def _batch_stats(z, dims):
    """Mean, unbiased variance (running) and biased variance (normalising)."""
    n = z.numel() // z.shape[1]
    mean = z.mean(dims)
    biased = ((z - mean.reshape(1, -1, *[1] * (z.dim() - 2))) ** 2).mean(dims)
    return mean, biased * n / (n - 1), biased


def _normalise(z, bn, mean, biased):
    shape = (1, -1, *[1] * (z.dim() - 2))
    w, b = bn.weight.reshape(shape), bn.bias.reshape(shape)
    scale = torch.sqrt(biased.reshape(shape) + bn.eps)
    return (z - mean.reshape(shape)) / scale * w + b


def _dense_reference(net, batches, step):
    """Running statistics of both BNs, by hand in float64, batch by batch."""
    sums = [[0, 0], [0, 0]]
    for x in batches:
        z1 = x @ net[0].weight.T + net[0].bias
        m1, v1, b1 = _batch_stats(z1, (0,))
        h = step(_normalise(z1, net[1], m1, b1))
        z2 = step(h @ net[3].weight.T + net[3].bias)  # dropout is off
        m2, v2, _ = _batch_stats(z2, (0,))
        for acc, (m, v) in zip(sums, [(m1, v1), (m2, v2)]):
            acc[0] = acc[0] + m
            acc[1] = acc[1] + v
    return [(m / len(batches), v / len(batches)) for m, v in sums]


def _hard(z):
    return (z >= 0).to(z.dtype)


@pytest.mark.parametrize("n_batches", [1, 3])
def test_statistics_equal_hand_computed_hard_step_features(n_batches):
    """Check the running mean/var equal the batch statistics of the exact-step
    features computed by hand in float64 (one batch, and the average of
    three equal batches)."""
    net = _dense()
    g = torch.Generator().manual_seed(1)
    batches = [torch.randn(33, 5, generator=g, dtype=torch.float64) for _ in range(3)]
    batches = batches[:n_batches]
    expected = _dense_reference(net, batches, _hard)
    recalibrate_batchnorm(net, batches)
    for bn, (mean, var) in zip((net[1], net[6]), expected):
        torch.testing.assert_close(bn.running_mean, mean, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(bn.running_var, var, rtol=1e-12, atol=1e-12)
        assert int(bn.num_batches_tracked) == n_batches


def test_smooth_mode_uses_the_training_function():
    """Check mode="smooth" gives the statistics of HTAF's smooth features."""
    net = _dense()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(40, 5, dtype=torch.float64, generator=g)
    smooth = net[2].smooth
    expected = _dense_reference(net, [x], smooth)
    recalibrate_batchnorm(net, [(x, torch.zeros(40))], mode="smooth")
    torch.testing.assert_close(net[6].running_mean, expected[1][0])
    torch.testing.assert_close(net[6].running_var, expected[1][1])
    assert not torch.allclose(expected[1][0], _dense_reference(net, [x], _hard)[1][0])


def test_conv_statistics_over_batch_and_positions_awkward_sizes():
    """Check BatchNorm2d statistics pool the batch and the positions (5x7
    maps, 3 channels), after an exact step, against a float64 reference."""
    torch.manual_seed(3)
    conv = nn.Conv2d(2, 3, 3, padding=1)
    net = nn.Sequential(conv, HTAF(alpha0=1.0, alpha1=22.0), nn.BatchNorm2d(3)).double()
    x = torch.randn(1, 2, 5, 7, dtype=torch.float64)
    recalibrate_batchnorm(net, [x])
    bits = _hard(nn.functional.conv2d(x, conv.weight, conv.bias, padding=1))
    mean, var, _ = _batch_stats(bits, (0, 2, 3))
    torch.testing.assert_close(net[2].running_mean, mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(net[2].running_var, var, rtol=1e-12, atol=1e-12)


def test_modes_momentum_and_activation_modes_restored():
    """Check every submodule's train/eval flag, each BN's momentum and each
    activation's mode are as before the pass."""
    net = _dense()
    net.train()
    net[5].eval()  # a mixed state must come back as it was
    net[6].momentum = 0.3
    net[4].mode = "smooth"
    flags = [m.training for m in net.modules()]
    recalibrate_batchnorm(net, [torch.randn(8, 5, dtype=torch.float64)])
    assert [m.training for m in net.modules()] == flags
    assert (net[1].momentum, net[6].momentum) == (0.1, 0.3)
    assert (net[2].mode, net[4].mode) == ("auto", "smooth")


def test_dropout_is_off_and_the_pass_is_deterministic():
    """Check dropout does not act during the pass: p=0 and p=0.9 give the
    same statistics, twice."""
    x = torch.randn(50, 5, dtype=torch.float64)
    stats = []
    for p in (0.0, 0.9, 0.9):
        net = recalibrate_batchnorm(_dense(dropout=p), [x])
        stats.append((net[6].running_mean.clone(), net[6].running_var.clone()))
    for mean, var in stats[1:]:
        assert torch.equal(mean, stats[0][0])
        assert torch.equal(var, stats[0][1])


def test_layers_subset_by_name_or_module():
    """Check only the named layers change; the others normalise with their
    own statistics during the pass, which are kept."""
    net = _dense()
    before = net[1].running_mean.clone(), net[1].running_var.clone()
    x = torch.randn(30, 5, dtype=torch.float64)
    recalibrate_batchnorm(net, [x], layers=["6"])
    assert torch.equal(net[1].running_mean, before[0])
    # reference: the first BN in eval mode with its running statistics
    z1 = x @ net[0].weight.T + net[0].bias
    h = _hard(_normalise(z1, net[1], before[0], before[1]))
    mean, var, _ = _batch_stats(_hard(h @ net[3].weight.T + net[3].bias), (0,))
    torch.testing.assert_close(net[6].running_mean, mean)
    torch.testing.assert_close(net[6].running_var, var)
    other = _dense()
    recalibrate_batchnorm(other, [x], layers=[other[6]])
    torch.testing.assert_close(other[6].running_mean, mean)


def test_bad_input_raises_and_leaves_the_statistics():
    """Check an unknown layer, a bad mode, no batches and a failing batch
    raise clear errors and leave statistics, flags and momenta unchanged."""
    net = _dense()
    state = {k: v.clone() for k, v in net.state_dict().items()}
    flags = [m.training for m in net.modules()]
    good = torch.randn(8, 5, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"'3' is not a BatchNorm.*\['1', '6'\]"):
        recalibrate_batchnorm(net, [good], layers=["3"])
    with pytest.raises(ValueError, match="is not a BatchNorm"):
        recalibrate_batchnorm(net, [good], layers=[nn.BatchNorm1d(7)])
    with pytest.raises(TypeError, match="layers must be None or a list"):
        recalibrate_batchnorm(net, [good], layers="6")
    with pytest.raises(ValueError, match="mode"):
        recalibrate_batchnorm(net, [good], mode="step")
    with pytest.raises(ValueError, match="batches is empty"):
        recalibrate_batchnorm(net, [])
    with pytest.raises(RuntimeError):
        recalibrate_batchnorm(net, [good, torch.randn(8, 4, dtype=torch.float64)])
    with pytest.raises(TypeError, match="batches must yield tensors"):
        recalibrate_batchnorm(net, [good.numpy()])
    after = net.state_dict()
    assert all(torch.equal(state[k], after[k]) for k in state)
    assert [m.training for m in net.modules()] == flags
    assert net[1].momentum == net[6].momentum == 0.1


def test_unreached_layer_and_net_without_batchnorm():
    """Check a BN the pass never reaches keeps its statistics, and a net
    without BatchNorm is returned unchanged without a pass."""

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.BatchNorm1d(3)
            self.unused = nn.BatchNorm1d(3)

        def forward(self, x):
            return self.used(x)

    net = Branchy()
    net.unused.running_mean.fill_(2.0)
    recalibrate_batchnorm(net, [torch.randn(10, 3)])
    assert torch.equal(net.unused.running_mean, torch.full((3,), 2.0))
    assert int(net.used.num_batches_tracked) == 1
    plain = nn.Sequential(nn.Linear(3, 2), HTAF())
    assert recalibrate_batchnorm(plain, iter(())) is plain
    assert batchnorm_layers(plain) == {}
    assert list(batchnorm_layers(nn.BatchNorm1d(2, track_running_stats=False))) == []


@pytest.mark.parametrize(
    "net",
    [
        lambda: ResNet18(4, (1, 8, 8), width=2, activation="htaf"),
        lambda: ResNet18(4, (1, 8, 8), width=2, activation="htaf", preactivation=False),
        lambda: WideResNet(4, (1, 8, 8), depth=10, widen_factor=1, activation="ste"),
    ],
)
def test_image_nets_statistics_match_eval_features(net):
    """Check, on the residual nets, that after a one-batch pass each BN's
    running mean is the mean of its input in that pass with the exact step
    (read by a hook), and every step activation ran hard."""
    torch.manual_seed(0)
    net = net()
    x = torch.rand(16, 1, 8, 8)
    seen, hard = {}, []
    hooks = [
        bn.register_forward_pre_hook(
            lambda m, a, n=name: seen.update({n: a[0].mean((0, 2, 3))})
        )
        for name, bn in batchnorm_layers(net).items()
    ]
    hooks += [
        m.register_forward_hook(lambda m, a, o: hard.append(m.is_hard))
        for m in net.modules()
        if isinstance(m, StepActivation)
    ]
    try:
        recalibrate_batchnorm(net, [x])
    finally:
        for h in hooks:
            h.remove()
    assert hard
    assert all(hard)
    assert set(seen) == set(batchnorm_layers(net))
    for name, bn in batchnorm_layers(net).items():
        torch.testing.assert_close(bn.running_mean, seen[name])
    assert net.training


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(2, 9), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_batches_in_any_split_average_their_statistics(sizes, seed):
    """Check, for a BN right after the input's step (no earlier BN), that
    the running statistics are the plain average of each batch's mean and
    unbiased variance of the bits, for any batch sizes."""
    g = torch.Generator().manual_seed(seed)
    net = nn.Sequential(HTAF(), nn.BatchNorm1d(3)).double()
    batches = [torch.randn(k, 3, generator=g, dtype=torch.float64) for k in sizes]
    recalibrate_batchnorm(net, batches)
    stats = [_batch_stats(_hard(b), (0,))[:2] for b in batches]
    mean = torch.stack([m for m, _ in stats]).mean(0)
    var = torch.stack([v for _, v in stats]).mean(0)
    torch.testing.assert_close(net[1].running_mean, mean)
    torch.testing.assert_close(net[1].running_var, var)


@pytest.mark.parametrize(
    ("activation", "preactivation", "expected"),
    [("htaf", "auto", True), ("ste", "auto", True), ("relu", "auto", False),
     ("htaf", False, False), ("relu", True, True)],
)  # fmt: skip
def test_resnet18_form_follows_the_activation(activation, preactivation, expected):
    """Check step activations get pre-activation blocks (every step right
    after a BatchNorm, branches starting at zero: each block is the identity
    at initialisation), others the post-activation ones, unless asked."""
    net = ResNet18(4, (1, 8, 8), width=2, activation=activation,
                   preactivation=preactivation)  # fmt: skip
    assert net.preactivation is expected
    block = net.layer1[0]
    assert isinstance(block, WideBlock if expected else BasicBlock)
    assert hasattr(net, "bn") is expected
    if expected:
        x = torch.randn(3, 2, 8, 8)
        torch.testing.assert_close(block.eval()(x), x)
        assert all(
            not b.conv2.weight.any()
            for s in range(1, 5)
            for b in net.get_submodule(f"layer{s}")
        )


def test_resnet18_bad_preactivation_raises():
    """Check a preactivation value other than a bool or "auto" is named."""
    with pytest.raises(ValueError, match="'preactivation' parameter of ResNet18"):
        ResNet18(4, (1, 8, 8), width=2, preactivation="yes")
