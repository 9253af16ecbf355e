"""Tests for the papers' image nets and their factory entries."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import pytest
import torch
from torch import nn

from sksign.nn import (
    BiRealResNet18,
    ResNet18,
    SEWResNet,
    VisionTransformer,
    WideResNet,
    architecture_arguments,
    build_network,
    check_input_shape,
    record_signs,
)
from sksign.nn.activations import STEP_ACTIVATIONS, StepActivation
from sksign.nn.architectures.factory import IMAGE_ARCHITECTURES
from sksign.nn.architectures.sew_resnet import SEWBlock
from sksign.nn.hooks import activation_kind
from sksign.nn.layers.binary import BinaryConv2d
from sksign.nn.layers.spiking import IFNeuron, LIFNeuron

# small configurations of every image net (CPU, milliseconds)
SMALL = {
    "resnet18": {"width": 4},
    "wrn": {"depth": 10, "widen_factor": 1},
    "vit": {"dim": 16, "depth": 2, "heads": 2, "mlp_dim": 32},
    "sew_resnet": {"width": 4, "blocks": (1, 1, 1, 1), "time_steps": 2},
    "bireal": {"width": 4},
}
STEP_CASES = [
    ("resnet18", "htaf"),
    ("wrn", "ste"),
    ("wrn", "scaled_sigmoid"),
    ("vit", "htaf"),
    ("sew_resnet", "htaf"),
    ("bireal", "htaf"),
    ("bireal", "ste"),
]


def _net(arch, activation="htaf", shape=(3, 16, 16), n_outputs=5, **extra):
    kwargs = {**SMALL[arch], **extra}
    time_steps = kwargs.pop("time_steps", 4)
    return build_network(
        arch,
        int(torch.tensor(shape).prod()),
        n_outputs,
        input_shape=shape,
        activation=activation,
        time_steps=time_steps,
        **kwargs,
    )


def _n_params(module):
    return sum(p.numel() for p in module.parameters())


# -- parameter counts at full width (meta device: no memory, no forward) --
@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        (lambda: ResNet18(10), 11_173_962),
        (lambda: WideResNet(10, depth=28, widen_factor=10), 36_479_194),
        (lambda: WideResNet(10, depth=16, widen_factor=4), 2_748_890),
    ],
)
def test_published_parameter_counts(builder, expected):
    """Check ResNet-18 (11.17M) and WRN-28-10 (36.5M) have the published sizes."""
    with torch.device("meta"):
        net = builder()
    assert _n_params(net) == expected


def test_vit_parameter_count_by_hand():
    """Check the default ViT (patch 4, 256, depth 6, 8 heads) counted by hand."""
    dim, mlp, depth, tokens = 256, 512, 6, 64
    block = 4 * dim + (3 * dim * dim + 3 * dim) + (dim * dim + dim)
    block += (dim * mlp + mlp) + (mlp * dim + dim)
    expected = 3 * 16 * dim + dim + dim + (tokens + 1) * dim + depth * block
    expected += 2 * dim + dim * 10 + 10
    with torch.device("meta"):
        net = VisionTransformer(10)
    assert _n_params(net) == expected
    assert net.blocks[0].attn.num_heads == 8


def test_bireal_and_sew_share_resnet18_layout():
    """Check Bi-Real and SEW-ResNet-18 have 16 binary convs / 16+3 spiking layers."""
    with torch.device("meta"):
        bireal = BiRealResNet18(10)
        sew = SEWResNet(10)
    convs = [m for m in bireal.modules() if isinstance(m, BinaryConv2d)]
    assert len(convs) == 16
    neurons = [m for m in sew.modules() if isinstance(m, IFNeuron)]
    assert len(neurons) == 1 + 16 + 3  # stem, two per block, three downsamples


# -- shapes, gradients, flat rows --
@pytest.mark.parametrize("arch", IMAGE_ARCHITECTURES)
def test_forward_backward_shapes(arch):
    """Check images and flat rows give (N, n_outputs) and every weight a gradient."""
    act = "relu" if arch in ("resnet18", "wrn", "vit") else "htaf"
    net = _net(arch, act).train()
    x = torch.randn(3, 3, 16, 16)
    out = net(x)
    assert out.shape == (3, 5)
    out.square().sum().backward()
    missing = [n for n, p in net.named_parameters() if p.grad is None]
    assert not missing
    net.eval()
    with torch.no_grad():
        torch.testing.assert_close(net(x), net(x.flatten(1)))
        assert net.forward_features(x).shape == (3, net.n_features_out)


@pytest.mark.parametrize("activation", ["relu", "silu", "gelu", "tanh", "htaf", "ste"])
def test_resnet18_any_activation_one_module_per_call(activation):
    """Check every activation module is called exactly once per forward pass."""
    net = _net("resnet18", activation).eval()
    calls = {}
    hooks = [
        m.register_forward_hook(
            lambda m, a, o, n=n: calls.update({n: calls.get(n, 0) + 1})
        )
        for n, m in net.named_modules()
        if activation_kind(m) is not None
    ]
    try:
        net(torch.randn(2, 3, 16, 16))
    finally:
        for h in hooks:
            h.remove()
    assert len(calls) == 1 + 8 * 2  # stem + S_int and S_out of 8 blocks
    assert set(calls.values()) == {1}


@pytest.mark.parametrize(("arch", "activation"), STEP_CASES)
def test_eval_hidden_units_are_exact_bits(arch, activation):
    """Check in eval every step activation outputs exactly 0 or 1 (and ran)."""
    net = _net(arch, activation).eval()
    seen = []

    def check(module, args, output):
        seen.append(module)
        assert torch.all((output == 0) | (output == 1))

    acts = [m for m in net.modules() if isinstance(m, StepActivation)]
    assert acts
    hooks = [m.register_forward_hook(check) for m in acts]
    try:
        with torch.no_grad():
            net(torch.randn(4, 3, 16, 16))
    finally:
        for h in hooks:
            h.remove()
    assert {id(m) for m in seen} == {id(m) for m in acts}
    # in training the smooth HTAF is not binary
    if activation == "htaf":
        net.train()
        outs = []
        hook = acts[-1].register_forward_hook(lambda m, a, o: outs.append(o))
        net(torch.randn(4, 3, 16, 16))
        hook.remove()
        assert not torch.all((outs[0] == 0) | (outs[0] == 1))


@pytest.mark.parametrize("arch", IMAGE_ARCHITECTURES)
def test_same_seed_same_weights(arch):
    """Check the same seed builds the same weights, another seed others."""

    def build(seed):
        torch.manual_seed(seed)
        return _net(arch).state_dict()

    a, b, c = build(0), build(0), build(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if a[k].is_floating_point())


# -- spiking nets --
@pytest.mark.parametrize("neuron", ["if", "lif"])
@pytest.mark.parametrize("connect", ["add", "iand", "and"])
def test_sew_state_resets_between_batches(neuron, connect):
    """Check a batch's output does not depend on the batches run before it."""
    net = _net("sew_resnet", neuron=neuron, connect=connect).eval()
    a, b = torch.rand(3, 3, 16, 16), 5 * torch.rand(2, 3, 16, 16)
    with torch.no_grad():
        first = net(a)
        net(b)
        again = net(a)
        together = net(torch.cat([a, b]))[:3]
    assert torch.equal(first, again)
    torch.testing.assert_close(first, together)


def test_sew_last_spiking_layer_is_the_block_output():
    """Check "last" picks the last block's sn2, also when it downsamples."""
    from sksign.nn import resolve_layers

    net = _net("sew_resnet")  # one block per stage: layer4.0 downsamples
    assert list(resolve_layers(net, "last")) == ["layer4.0.sn2"]
    calls = []
    hooks = [
        m.register_forward_hook(lambda m, a, o, n=n: calls.append(n))
        for n, m in net.named_modules()
        if isinstance(m, IFNeuron)
    ]
    with torch.no_grad():
        net.eval()(torch.rand(1, 3, 16, 16))
    for h in hooks:
        h.remove()
    assert calls[-1] == "layer4.0.sn2"


@pytest.mark.parametrize("neuron", ["if", "lif"])
def test_sew_detach_reset_stops_the_gradient_through_the_reset(neuron):
    """Check detach_reset reaches every neuron and changes only the backward."""
    torch.manual_seed(0)
    nets = {d: _net("sew_resnet", neuron=neuron, detach_reset=d) for d in (True, False)}
    nets[False].load_state_dict(nets[True].state_dict())
    for d, net in nets.items():
        neurons = [m for m in net.modules() if isinstance(m, IFNeuron)]
        assert neurons
        assert all(m.detach_reset is d for m in neurons)
    x = torch.rand(4, 3, 16, 16)
    outs, grads = {}, {}
    for d, net in nets.items():
        net.train()
        out = net(x)
        out.square().sum().backward()
        outs[d] = out.detach()
        grads[d] = net.stem[0].weight.grad.clone()
    torch.testing.assert_close(outs[True], outs[False])
    assert not torch.allclose(grads[True], grads[False])
    with pytest.raises(TypeError, match=r"'detach_reset'.*bool"):
        _net("sew_resnet", detach_reset="yes")


def test_lif_neuron_dynamics():
    """Check LIF integrates with leak 1/tau and resets by subtraction."""
    x = torch.tensor([[[1.5], [1.5], [1.5], [0.0]]])  # (batch, time, units)
    spikes = LIFNeuron(tau=2.0).eval()(x).flatten().tolist()
    # v: 0.75 -> 1.125 (spike, 0.125) -> 0.8125 -> 0.40625
    assert spikes == [0.0, 1.0, 0.0, 0.0]
    assert "tau=2" in repr(LIFNeuron())


def test_sew_block_connections():
    """Check ADD, IAND and AND combine the branch and identity spikes."""
    torch.manual_seed(0)
    s = (torch.rand(2, 3, 4, 6, 6) > 0.5).float()
    blocks = {c: SEWBlock(4, 4, connect=c).eval() for c in ("add", "iand", "and")}
    for block in blocks.values():
        block.load_state_dict(blocks["add"].state_dict())
    with torch.no_grad():
        a = blocks["add"](s) - s
        torch.testing.assert_close(blocks["iand"](s), (1 - a) * s)
        torch.testing.assert_close(blocks["and"](s), a * s)


# -- Bi-Real --
def test_bireal_weights_are_scaled_signs():
    """Check every binary conv uses +/- one scale per output channel."""
    net = _net("bireal")
    for m in net.modules():
        if isinstance(m, BinaryConv2d):
            w = m.binary_weight().detach().abs().flatten(1)
            assert torch.allclose(w, w[:, :1].expand_as(w))
    x = torch.randn(2, 3, 16, 16)
    net.eval()
    unit = net.layer2[0]
    seen = []
    h = unit.conv.register_forward_pre_hook(lambda m, a: seen.append(a[0]))
    with torch.no_grad():
        net(x)
    h.remove()
    assert set(seen[0].unique().tolist()) <= {-1.0, 1.0}


# -- sign codes --
def test_resnet18_sign_codes_match_hand_written_hook():
    """Check record_signs on a block's S_out equals a hand-written pre-hook."""
    net = _net("resnet18", "relu").eval()
    x = torch.randn(5, 3, 16, 16)
    hand = []
    act = net.layer4[1].act2
    h = act.register_forward_pre_hook(lambda m, a: hand.append(a[0] > 0))
    with torch.no_grad():
        net(x)
    h.remove()
    with record_signs(net, "last", conv_pool="flatten") as rec, torch.no_grad():
        net(x)
    assert rec.layers == ["layer4.1.act2"]
    assert torch.equal(rec.pop_matrix(), hand[0].flatten(1))
    with record_signs(net, ["layer4.1"], residual="both", conv_pool="flatten") as rec:
        with torch.no_grad():
            net(x)
    bits = rec.pop_matrix()
    assert bits.shape[1] == 2 * hand[0][0].numel()  # S_int and S_out


def test_vit_token_codes_match_hand_written_hook():
    """Check the ViT's MLP activations give (N, tokens, units) token codes."""
    net = _net("vit", "gelu").eval()
    x = torch.randn(4, 3, 16, 16)
    hand = []
    h = net.blocks[-1].act.register_forward_pre_hook(lambda m, a: hand.append(a[0]))
    with torch.no_grad():
        net(x)
    h.remove()
    assert hand[0].shape == (4, 1 + 16, 32)
    with record_signs(net, "last", token_pool="first") as rec, torch.no_grad():
        net(x)
    assert torch.equal(rec.pop_matrix(), hand[0][:, 0] > 0)


# -- bad input --
def test_unknown_architecture_and_argument_list_valid_ones():
    """Check unknown names and arguments raise errors listing the valid ones."""
    with pytest.raises(ValueError, match="'resnet18'"):
        build_network("resnet50", 3072, 10, input_shape=(3, 32, 32))
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['depht'\].*'depth'"):
        build_network("wrn", 3072, 10, input_shape=(3, 32, 32), depht=16)
    with pytest.raises(TypeError, match="'width'"):
        check_input_shape("resnet18", (3, 32, 32), widht=8)
    assert "patch" in architecture_arguments("vit")
    with pytest.raises(ValueError, match="6 n \\+ 4"):
        WideResNet(10, depth=12)
    with pytest.raises(ValueError, match="must divide dim"):
        VisionTransformer(10, dim=30, heads=8)
    with pytest.raises(ValueError, match="step-like"):
        _net("bireal", "relu")


@pytest.mark.parametrize(
    ("arch", "shape", "match"),
    [
        ("resnet18", (3, 4, 4), r"at least 8x8.*\(3, 4, 4\)"),
        ("sew_resnet", (1, 6, 6), "at least 8x8"),
        ("bireal", (3, 7, 32), "at least 8x8"),
        ("wrn", (3, 2, 2), "at least 4x4"),
        ("vit", (3, 30, 30), "multiples of 4"),
        ("resnet18", (3072,), r"\(channels, height, width\)"),
    ],
)
def test_images_too_small_fail_before_training(arch, shape, match):
    """Check a shape the net cannot take fails with the expected shape."""
    with pytest.raises(ValueError, match=match):
        check_input_shape(arch, shape)
    n = int(torch.tensor(shape).prod())
    with pytest.raises(ValueError, match=match):
        build_network(arch, n, 10, input_shape=shape, **SMALL[arch])


@pytest.mark.parametrize("arch", IMAGE_ARCHITECTURES)
def test_wrong_batch_shape_names_expected_shape(arch):
    """Check a batch of another shape fails with the expected one in the message."""
    net = _net(arch).eval()
    with pytest.raises(ValueError, match=r"expected input of shape \(N, 3, 16, 16\)"):
        net(torch.randn(2, 1, 16, 16))
    with pytest.raises(ValueError, match=r"flat rows \(N, 768\)"):
        net(torch.randn(2, 700))


def test_check_input_shape_accepts_fitting_shapes():
    """Check fitting shapes pass and the dense nets take any flat shape."""
    assert check_input_shape("wrn", (3, 4, 4)) == (3, 4, 4)
    assert check_input_shape("vit", (1, 8, 12), patch=4) == (1, 8, 12)
    assert check_input_shape("mlp", (17,)) == (17,)
    assert check_input_shape("cnn", (8, 8)) == (1, 8, 8)
    assert check_input_shape("resnet18", (32, 32)) == (1, 32, 32)


# -- training (slow) --
# (architecture, activation, extra arguments, epochs, Adam lr, eval accuracy
# to reach). The step nets train with a cosine schedule to 0: at a constant
# rate their exact-step (eval) accuracy trailed the smooth one by 8-10
# points, and a ResNet-18 with HTAF(2, 11) at every activation stays near
# chance at lr 3e-3 (0.35 at width 8).
TRAINING = [
    ("resnet18", "relu", {"width": 8}, 4, 3e-3, 0.85),
    ("resnet18", "htaf", {"width": 16}, 20, 3e-4, 0.8),
    ("vit", "gelu", {}, 10, 3e-3, 0.8),
    ("wrn", "htaf", {"widen_factor": 2}, 20, 2e-3, 0.85),
    ("sew_resnet", "htaf", {"width": 8}, 20, 3e-3, 0.7),
    ("bireal", "htaf", {"width": 16}, 20, 2e-3, 0.6),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arch", "activation", "extra", "epochs", "lr", "target"),
    TRAINING,
    ids=[f"{case[0]}-{case[1]}" for case in TRAINING],
)
def test_trains_on_padded_digits(arch, activation, extra, epochs, lr, target):
    """Check each net learns padded 16x16 digits (eval mode: exact steps)."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    X = nn.functional.pad(X, (4, 4, 4, 4)).expand(-1, 3, -1, -1).contiguous()
    y = torch.tensor(y)
    torch.manual_seed(0)
    perm = torch.randperm(len(y))
    train, test = perm[:1400], perm[1400:]
    net = _net(arch, activation, n_outputs=10, shape=(3, 16, 16), **extra)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    batches = train.split(64)
    steps = epochs * len(batches)
    cosine = activation in STEP_ACTIVATIONS
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps) if cosine else None
    for epoch in range(epochs):
        net.train()
        order = train[
            torch.randperm(len(train), generator=torch.Generator().manual_seed(epoch))
        ]
        for idx in order.split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(net(X[idx]), y[idx]).backward()
            opt.step()
            if sched is not None:
                sched.step()
    net.eval()
    with torch.no_grad():
        acc = (net(X[test]).argmax(1) == y[test]).float().mean().item()
    assert acc > target, acc


# -- ICBM on the image backbones --
@pytest.mark.parametrize("arch", IMAGE_ARCHITECTURES)
def test_icbm_on_image_backbones(arch):
    """Check the concept layer sits on every image net and gives exact bits."""
    from sksign.nn import ICBMNet

    act = "htaf" if arch in ("sew_resnet", "bireal") else "relu"
    kwargs = dict(SMALL[arch])
    net = ICBMNet(
        arch,
        768,
        12,
        5,
        input_shape=(3, 16, 16),
        backbone_activation=act,
        backbone_kwargs=kwargs,
    )
    x = torch.randn(4, 3, 16, 16)
    net.train()(x.flatten(1)).sum().backward()
    assert net.fc.weight.grad is not None
    net.eval()
    with torch.no_grad():
        bits = net.concept_bits(x.flatten(1))
        out = net(x.flatten(1))
    assert bits.shape == (4, 12)
    assert out.shape == (4, 5)
    assert not hasattr(net.backbone.net, "out")


def test_icbm_on_a_users_image_module():
    """Check a user's own nn.Module backbone taking images works with input_shape."""
    from sksign.nn import ICBMNet

    user = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
    )
    net = ICBMNet(user, 3 * 8 * 8, 6, 2, input_shape=(3, 8, 8)).eval()
    assert net(torch.randn(2, 192)).shape == (2, 2)
    with pytest.raises(TypeError, match="valid arguments"):
        ICBMNet(
            "resnet18", 768, 6, 2, input_shape=(3, 16, 16), backbone_kwargs={"w": 1}
        )
