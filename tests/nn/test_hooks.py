"""Tests for sksign.nn.hooks: layer resolution and sign recording."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sksign.nn.activations import HTAF, ScaledSigmoid
from sksign.nn.hooks import (
    activation_kind,
    find_activations,
    pool_signs,
    quadrant_bounds,
    record_signs,
    resolve_layers,
    temporarily_eval,
)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _assert_clean(module):
    for m in module.modules():
        assert len(m._forward_pre_hooks) == 0
        assert len(m._forward_hooks) == 0


class GELUActivation(nn.Module):
    """Stand-in for transformers' GELUActivation (a class of another library)."""

    def forward(self, x):
        return F.gelu(x)


class QuickGELUActivation(GELUActivation):
    pass


class SigmoidActivation(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)


class Block(nn.Module):
    """Residual block: relu(fc2(relu(fc1(x))) + x), one in-place ReLU reused."""

    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, d)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Linear(d, d)

    def forward(self, x):
        out = self.relu(self.fc1(x))
        out = self.fc2(out) + x
        return self.relu(out)


class PreActBlock(nn.Module):
    """Residual block without an activation after the addition."""

    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, d)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(d, d)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class Functional(nn.Module):
    """A net with functional activations only."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 5)
        self.fc2 = nn.Linear(5, 4)
        self.unused = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Raiser(nn.Module):
    """Raises inside its forward, after the first activation ran."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        h = self.act(self.fc(x))
        raise RuntimeError("boom")
        return self.head(h)  # pragma: no cover


def _numpy_forward(net, x):
    """Pre-activations of each Linear of a Linear/activation Sequential."""
    a = x.astype(np.float64)
    zs = []
    for layer in net:
        if isinstance(layer, nn.Linear):
            W = layer.weight.detach().numpy().astype(np.float64)
            b = layer.bias.detach().numpy().astype(np.float64)
            a = a @ W.T + b
            zs.append(a.copy())
        elif isinstance(layer, nn.ReLU):
            a = np.maximum(a, 0)
        elif isinstance(layer, nn.Tanh):
            a = np.tanh(a)
        else:  # pragma: no cover
            raise TypeError(layer)
    return zs


def test_record_signs_sequential_equals_numpy():
    """Check that the bits of every layer equal the signs computed from weights."""
    net = nn.Sequential(
        nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 7), nn.Tanh(), nn.Linear(7, 3)
    )
    x = np.random.default_rng(0).standard_normal((50, 6)).astype(np.float32)
    z0, z1, _ = _numpy_forward(net, x)
    with record_signs(net, "all") as rec, torch.no_grad():
        net(torch.from_numpy(x))
    bits = rec.pop()
    assert rec.layers == ["1", "3"]
    np.testing.assert_array_equal(bits["1"].numpy(), z0 > 0)
    np.testing.assert_array_equal(bits["3"].numpy(), z1 > 0)
    assert rec.feature_names()[:2] == ["1_0", "1_1"]
    assert rec.n_bits == 15
    _assert_clean(net)


def test_relu_zero_output_is_bit_zero():
    """Check that ReLU's zero outputs (z <= 0) give bit 0, z > 0 bit 1."""
    relu = nn.Sequential(nn.ReLU())
    with record_signs(relu, [nn.ReLU]) as rec:
        relu(torch.tensor([[-1.0, 0.0, 2.0, -0.0]]))
    np.testing.assert_array_equal(rec.pop_matrix().numpy(), [[0, 0, 1, 0]])


def test_inplace_relu_reads_input_before_modification():
    """Check that an in-place ReLU is read before it overwrites its input."""
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(inplace=True))
    x = torch.randn(20, 4)
    with torch.no_grad():
        z = net[0](x)
    with record_signs(net, "last") as rec, torch.no_grad():
        net(x)
    np.testing.assert_array_equal(rec.pop_matrix().numpy(), (z > 0).numpy())


@pytest.mark.parametrize("act", [HTAF(mode="smooth"), HTAF(), ScaledSigmoid()])
def test_step_activation_bits_come_from_input(act):
    """Check that HTAF-family bits are the sign of the input, not the output."""
    net = nn.Sequential(nn.Linear(3, 8), act)
    x = torch.randn(30, 3)
    x[0] = 0.0
    with torch.no_grad():
        net[0].bias.zero_()
        z = net[0](x)
        out = net.eval()(x)
    net.train()
    assert (out[0] > 0).all()  # HTAF gives 0.5 or 1 at z == 0, the bit is 0
    with record_signs(net, "all") as rec, torch.no_grad():
        net(x)
    bits = rec.pop_matrix().numpy()
    np.testing.assert_array_equal(bits, (z > 0).numpy())
    assert not bits[0].any()
    assert net.training  # mode restored


def test_quadrant_rule_hand_made_map():
    """Check the 2x2 majority rule: ties go to +1, odd sizes share the middle."""
    pos = torch.zeros(1, 2, 4, 4, dtype=torch.bool)
    # channel 0: top-left all +, top-right 2 of 4 (tie -> +1),
    # bottom-left 1 of 4 (-1), bottom-right 3 of 4 (+1)
    pos[0, 0, :2, :2] = True
    pos[0, 0, 0, 2:] = True
    pos[0, 0, 2, 0] = True
    pos[0, 0, 2:, 2:] = True
    pos[0, 0, 3, 3] = False
    # channel 1: all negative
    bits, layout = pool_signs(pos)
    np.testing.assert_array_equal(bits.numpy(), [[1, 1, 0, 1, 0, 0, 0, 0]])
    assert layout.names("c")[:5] == ["c_c0q0", "c_c0q1", "c_c0q2", "c_c0q3", "c_c1q0"]

    # odd sizes 3 x 5: rows [0, 2) / [1, 3), cols [0, 3) / [2, 5)
    assert quadrant_bounds(3) == ((0, 2), (1, 3))
    assert quadrant_bounds(5) == ((0, 3), (2, 5))
    z = torch.tensor(
        [
            [1, 1, -1, -1, -1],
            [-1, -1, 1, -1, -1],
            [1, 1, 1, 1, -1],
        ],
        dtype=torch.float32,
    ).reshape(1, 1, 3, 5)
    bits, _ = pool_signs(z > 0)
    # q0 rows 0-1, cols 0-2: 3 of 6 -> tie -> 1
    # q1 rows 0-1, cols 2-4: 1 of 6 -> 0
    # q2 rows 1-2, cols 0-2: 4 of 6 -> 1
    # q3 rows 1-2, cols 2-4: 3 of 6 -> 1
    np.testing.assert_array_equal(bits.numpy(), [[1, 0, 1, 1]])

    # a 1 x 1 map: every quadrant is the single pixel
    bits, _ = pool_signs(torch.tensor([[[[True]]], [[[False]]]]))
    np.testing.assert_array_equal(bits.numpy(), [[1, 1, 1, 1], [0, 0, 0, 0]])


def test_quadrant_pooling_through_conv_net():
    """Check that a conv layer's code is the quadrant majority of its input."""
    net = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten())
    x = torch.randn(4, 1, 7, 6)
    with torch.no_grad():
        z = net[0](x).numpy()
    with record_signs(net, "all") as rec, torch.no_grad():
        net(x)
    bits = rec.pop_matrix().numpy().reshape(4, 3, 4)
    rows, cols = quadrant_bounds(z.shape[2]), quadrant_bounds(z.shape[3])
    for q, ((r0, r1), (c0, c1)) in enumerate([(r, c) for r in rows for c in cols]):
        block = z[:, :, r0:r1, c0:c1] > 0
        expected = 2 * block.sum((2, 3)) >= block[0, 0].size
        np.testing.assert_array_equal(bits[:, :, q], expected)
    with record_signs(net, "all", conv_pool="flatten") as rec, torch.no_grad():
        net(x)
    np.testing.assert_array_equal(rec.pop_matrix().numpy(), (z > 0).reshape(4, -1))


def _nested():
    inter = nn.ModuleDict({"dense": nn.Linear(4, 4), "act": GELUActivation()})
    layer = nn.ModuleList(
        [nn.ModuleDict({"intermediate": inter, "out": nn.Linear(4, 4)})]
    )
    layer.append(
        nn.ModuleDict(
            {
                "intermediate": nn.ModuleDict(
                    {"dense": nn.Linear(4, 4), "act": QuickGELUActivation()}
                ),
                "out": nn.Linear(4, 4),
            }
        )
    )
    return nn.ModuleDict({"encoder": nn.ModuleDict({"layer": layer})})


def test_resolve_layers_specs():
    """Check 'last', 'all', names, types, tuples and wildcards."""
    net = nn.Sequential(
        nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4), nn.SiLU(), nn.Linear(4, 2)
    )
    assert list(resolve_layers(net, "last")) == ["3"]
    assert list(resolve_layers(net, "all")) == ["1", "3"]
    assert list(resolve_layers(net, ["3", "0"])) == ["0", "3"]
    assert list(resolve_layers(net, "1")) == ["1"]
    assert list(resolve_layers(net, nn.ReLU)) == ["1"]
    assert list(resolve_layers(net, (nn.ReLU, nn.SiLU))) == ["1", "3"]
    assert list(resolve_layers(net, [nn.Linear])) == ["0", "2", "4"]

    nested = _nested()
    assert list(resolve_layers(nested, "all")) == [
        "encoder.layer.0.intermediate.act",
        "encoder.layer.1.intermediate.act",
    ]
    # the wildcard also matches the Linear layers; it keeps the activations
    assert list(resolve_layers(nested, "encoder.layer.*.intermediate.*")) == [
        "encoder.layer.0.intermediate.act",
        "encoder.layer.1.intermediate.act",
    ]
    assert list(resolve_layers(nested, "encoder.layer.*.out")) == [
        "encoder.layer.0.out",
        "encoder.layer.1.out",
    ]


def test_activation_kind_is_generous():
    """Check activation discovery by type and by class name of other libraries."""
    assert activation_kind(nn.ReLU()) == "sign"
    assert activation_kind(nn.LeakyReLU()) == "sign"
    assert activation_kind(nn.Hardtanh()) == "sign"
    assert activation_kind(nn.ELU()) == "sign"
    assert activation_kind(HTAF()) == "sign"
    assert activation_kind(GELUActivation()) == "sign"
    assert activation_kind(QuickGELUActivation()) == "sign"
    assert activation_kind(nn.Sigmoid()) == "non_sign"
    assert activation_kind(nn.Softplus()) == "non_sign"
    assert activation_kind(nn.LogSigmoid()) == "non_sign"
    assert activation_kind(SigmoidActivation()) == "non_sign"
    assert activation_kind(nn.Linear(2, 2)) is None
    assert activation_kind(nn.Sequential(nn.ReLU())) is None
    net = nn.Sequential(nn.Linear(2, 2), nn.Sigmoid(), nn.Tanh())
    assert list(find_activations(net)) == ["2"]
    assert list(find_activations(net, include_non_sign_preserving=True)) == ["1", "2"]


@pytest.mark.parametrize(
    ("module", "setting"),
    [
        (nn.LeakyReLU(-0.5), "negative_slope=-0.5"),
        (nn.PReLU(init=-0.25), "a learned slope of -0.25"),
        (nn.RReLU(-0.3, 0.1), "lower=-0.3"),
        (nn.ELU(alpha=-1.0), "alpha=-1"),
        (nn.Hardtanh(0.1, 1.0), "min_val=0.1"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "",
)
def test_negative_slopes_are_not_sign_preserving(module, setting):
    """Check that a slope or alpha that flips negative inputs breaks h = S * M."""
    torch.manual_seed(0)
    z = torch.randn(200)
    h = module.eval()(z)
    assert ((h > 0) != (z > 0)).any()  # the premise really fails
    assert activation_kind(module) == "non_sign"
    net = nn.Sequential(nn.Linear(3, 4), module, nn.Linear(4, 2))
    assert list(find_activations(net)) == []
    with pytest.raises(
        ValueError, match=f"is a {type(module).__name__} with {setting}"
    ):
        resolve_layers(net, ["1"])
    # an explicit opt-in still records the sign of its input
    assert list(resolve_layers(net, ["1"], allow_non_sign_preserving=True)) == ["1"]


def test_last_and_all_refuse_a_negative_slope_instead_of_skipping_it():
    """Check "last"/"all" raise on a broken hidden activation, and the opt-in."""
    bad_last = nn.Sequential(
        nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4), nn.LeakyReLU(-0.1), nn.Linear(4, 2)
    )
    for spec in ("last", "all"):
        with pytest.raises(ValueError, match="'3' is a LeakyReLU with negative_slope"):
            resolve_layers(bad_last, spec)
    assert list(resolve_layers(bad_last, "all", allow_non_sign_preserving=True)) == [
        "1",
        "3",
    ]
    # a broken activation before the last good one: "last" reads the good one,
    # "all" refuses; a sigmoid output after it is passed over as before
    bad_first = nn.Sequential(
        nn.Linear(3, 4),
        nn.PReLU(init=-0.2),
        nn.Linear(4, 4),
        nn.ReLU(),
        nn.Linear(4, 1),
        nn.Sigmoid(),
    )
    assert list(resolve_layers(bad_first, "last")) == ["3"]
    with pytest.raises(ValueError, match="'1' is a PReLU with a learned slope"):
        resolve_layers(bad_first, "all")
    # the opt-in also lets "last"/"all" take sigmoid and the like
    gated = nn.Sequential(nn.Linear(3, 4), nn.Sigmoid(), nn.Linear(4, 2))
    with pytest.raises(ValueError, match=r"no sign-preserving.*\['1'\] are not"):
        resolve_layers(gated, "all")
    assert list(resolve_layers(gated, "all", allow_non_sign_preserving=True)) == ["1"]


def test_wildcards_refuse_a_negative_slope_too():
    """Check a wildcard raises on a negative-slope PReLU like "all" and names do."""
    net = nn.Sequential(
        nn.Linear(3, 3), nn.PReLU(), nn.Linear(3, 3), nn.PReLU(), nn.Linear(3, 2)
    )
    with torch.no_grad():
        net[3].weight.fill_(-0.2)  # a slope learned negative
    for spec in ("*", ["[0-9]"], "all", nn.PReLU, ["3"]):
        with pytest.raises(ValueError, match="'3' is a PReLU with a learned slope"):
            resolve_layers(net, spec)
    got = resolve_layers(net, "*", allow_non_sign_preserving=True)
    assert list(got) == ["1", "3"]


def test_first_token_bits_do_not_pin_the_token_map():
    """Check token_pool="first" stores N x U bits, not views of the N x T x U map."""
    net = nn.Sequential(nn.Linear(16, 64), nn.GELU())
    with record_signs(net, "all", token_pool="first") as rec, torch.no_grad():
        for _ in range(3):
            net(torch.randn(8, 32, 16))
        held = sum(b.untyped_storage().nbytes() for b in rec._store["1"])
        bits = rec.pop_matrix()
    assert bits.shape == (24, 64)
    assert held == 3 * 8 * 64  # one byte per kept bit, not 32 tokens' worth


def test_usual_slopes_stay_sign_preserving():
    """Check the default and positive settings of the same modules."""
    for module in (
        nn.LeakyReLU(0.01),
        nn.PReLU(),
        nn.RReLU(),
        nn.ELU(),
        nn.CELU(),
        nn.Hardtanh(),
        nn.ReLU6(),
        nn.LeakyReLU(0.0),
        nn.CELU(alpha=-2.0),  # CELU keeps the sign for any alpha
    ):
        z = torch.randn(200)
        h = module.eval()(z)
        assert not ((h > 0) & (z <= 0)).any()
        assert not ((h < 0) & (z > 0)).any()
        assert activation_kind(module) == "sign", module
    prelu = nn.PReLU(num_parameters=3)
    with torch.no_grad():
        prelu.weight[1] = -0.1  # one learned negative slope is enough
    assert activation_kind(prelu) == "non_sign"


def test_resolve_layers_errors():
    """Check the errors for unknown names, empty wildcards and bad activations."""
    net = nn.Sequential(
        nn.Linear(3, 4), nn.Sigmoid(), nn.Linear(4, 4), nn.Softplus(), nn.ReLU()
    )
    with pytest.raises(ValueError, match=r"layer 'x' was not found.*available:.*4"):
        resolve_layers(net, ["x"])
    with pytest.raises(ValueError, match=r"Did you mean '4'"):
        resolve_layers(net, "4 ")
    with pytest.raises(ValueError, match="matched no module"):
        resolve_layers(net, "enc.*")
    with pytest.raises(ValueError, match="no module of type"):
        resolve_layers(net, nn.GELU)
    with pytest.raises(ValueError, match="Sigmoid, which is not sign-preserving"):
        resolve_layers(net, ["1"])
    with pytest.raises(ValueError, match="Softplus, which is not sign-preserving"):
        resolve_layers(net, nn.Softplus)
    assert list(resolve_layers(net, ["1"], allow_non_sign_preserving=True)) == ["1"]
    # a wildcard skips the sigmoid/softplus it also matches
    assert list(resolve_layers(net, "*")) == ["4"]
    assert list(resolve_layers(net, "*", allow_non_sign_preserving=True)) == [
        "1",
        "3",
        "4",
    ]
    with pytest.raises(ValueError, match="Sigmoid, which is not sign-preserving"):
        resolve_layers(net, "[1]")
    with pytest.raises(ValueError, match="empty"):
        resolve_layers(net, [])
    with pytest.raises(TypeError, match="module name or a module type"):
        resolve_layers(net, [3])
    with pytest.raises(ValueError, match="found no activation module"):
        resolve_layers(Functional(), "all")


def test_functional_activations_read_linear_outputs():
    """Check that naming Linear layers records the sign of their outputs."""
    net = Functional()
    x = torch.randn(10, 3)
    with torch.no_grad():
        z1 = net.fc1(x)
        z2 = net.fc2(F.relu(z1))
    with record_signs(net, ["fc1", "fc2"]) as rec, torch.no_grad():
        net(x)
    bits = rec.pop()
    assert torch.equal(bits["fc1"], z1 > 0)
    assert torch.equal(bits["fc2"], z2 > 0)
    with (
        pytest.raises(ValueError, match=r"\['unused'\] gave no sign bits"),
        record_signs(net, ["fc1", "unused"]),
        torch.no_grad(),
    ):
        net(x)
    _assert_clean(net)


def test_reused_module_gives_numbered_keys():
    """Check that a module called twice per forward gives name and name#1."""
    net = Block(4)
    with record_signs(net, "all") as rec, torch.no_grad():
        net(torch.randn(3, 4))
        net(torch.randn(2, 4))
    assert rec.layers == ["relu", "relu#1"]
    assert rec.pop_matrix().shape == (5, 8)


@pytest.mark.parametrize("residual", ["int", "out", "both"])
def test_residual_codes(residual):
    """Check S_int and S_out of residual blocks against a manual forward."""
    net = nn.Sequential(nn.Linear(3, 4), Block(4), PreActBlock(4), nn.Linear(4, 2))
    x = torch.randn(12, 3)
    with torch.no_grad():
        h0 = net[0](x)
        z_int1 = net[1].fc1(h0)
        z_out1 = net[1].fc2(torch.relu(z_int1)) + h0
        h1 = torch.relu(z_out1)
        z_int2 = net[2].fc1(h1)
        out2 = h1 + net[2].fc2(torch.tanh(z_int2))
    with record_signs(net, [Block, PreActBlock], residual=residual) as rec:
        with torch.no_grad():
            net(x)
    bits = rec.pop()
    expected = {
        "int": ["1.relu", "2.act"],
        "out": ["1", "2"],
        "both": ["1.relu", "1", "2.act", "2"],
    }[residual]
    assert rec.layers == expected
    if residual != "out":
        assert torch.equal(bits["1.relu"], z_int1 > 0)
        assert torch.equal(bits["2.act"], z_int2 > 0)
    if residual != "int":
        assert torch.equal(bits["1"], z_out1 > 0)
        assert torch.equal(bits["2"], out2 > 0)
    _assert_clean(net)


def test_residual_int_rejects_overlap():
    """Check that selecting a block and a layer inside it with 'int' raises."""
    net = nn.Sequential(nn.Linear(3, 4), Block(4))
    with pytest.raises(ValueError, match="lie inside the residual block"):
        with record_signs(net, ["1", "1.relu"], residual="int"):
            pass  # pragma: no cover


def _token_net():
    return nn.Sequential(nn.Linear(3, 5), nn.GELU())


def test_token_pooling_first_and_majority():
    """Check token pooling first/majority with and without a padding mask."""
    net = _token_net()
    x = torch.randn(6, 4, 3)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]] * 2)
    with torch.no_grad():
        pos = (net[0](x) > 0).numpy()
    with record_signs(net, "all", token_pool="first") as rec, torch.no_grad():
        net(x)
    np.testing.assert_array_equal(rec.pop_matrix().numpy(), pos[:, 0])

    with record_signs(net, "all", token_pool="majority") as rec, torch.no_grad():
        net(x)
    np.testing.assert_array_equal(
        rec.pop_matrix().numpy(), 2 * pos.sum(1) >= pos.shape[1]
    )

    with (
        record_signs(net, "all", token_pool="majority", attention_mask=mask) as rec,
        torch.no_grad(),
    ):
        net(x)
    m = mask.numpy().astype(bool)[:, :, None]
    expected = 2 * (pos & m).sum(1) >= m.sum(1)
    np.testing.assert_array_equal(rec.pop_matrix().numpy(), expected)
    # a tie (1 of 2 real tokens positive) goes to +1
    z = torch.tensor([[[1.0], [-1.0], [5.0]]])
    bits, _ = pool_signs(
        z > 0, token_pool="majority", attention_mask=torch.tensor([[1, 1, 0]])
    )
    assert bits.tolist() == [[True]]


def test_keep_tokens_records_one_code_per_token():
    """Check keep_tokens: (N, T, n_bits) per-token bits, and mixed layers raise."""
    net = nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.Linear(5, 2), nn.ReLU())
    x = torch.randn(6, 4, 3)
    with torch.no_grad():
        h = net[0](x)
        z2 = net[2](net[1](h))
    with record_signs(net, "all", keep_tokens=True) as rec, torch.no_grad():
        net(x)
        net(x[:2])
    assert rec.per_token
    assert rec.n_bits == 7
    bits = rec.pop_matrix()
    assert bits.shape == (8, 4, 7)
    expected = torch.cat([h > 0, z2 > 0], dim=2)
    assert torch.equal(bits[:6], expected)
    assert torch.equal(bits[6:], expected[:2])
    # a 2-D layer beside token layers has no per-token code
    mixed = nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.Flatten(), nn.ReLU())
    with pytest.raises(ValueError, match=r"layer '3' gives a 2-D.*token layer '1'"):
        with record_signs(mixed, "all", keep_tokens=True), torch.no_grad():
            mixed(x)
    # without a token axis, keep_tokens changes nothing
    flat = _token_net()
    with record_signs(flat, "all", keep_tokens=True) as rec, torch.no_grad():
        flat(x[:, 0])
    assert not rec.per_token
    assert rec.pop_matrix().shape == (6, 5)
    _assert_clean(net)
    _assert_clean(mixed)


def test_token_pool_errors():
    """Check that token_pool on 2-D and no token_pool on 3-D activations raise."""
    net = _token_net()
    with pytest.raises(ValueError, match=r"token_pool='first' was given.*2-D"):
        with record_signs(net, "all", token_pool="first"), torch.no_grad():
            net(torch.randn(2, 3))
    with pytest.raises(ValueError, match="3-D activation"):
        with record_signs(net, "all"), torch.no_grad():
            net(torch.randn(2, 4, 3))
    with pytest.raises(ValueError, match="attention_mask has shape"):
        with (
            record_signs(
                net, "all", token_pool="majority", attention_mask=torch.ones(2, 3)
            ),
            torch.no_grad(),
        ):
            net(torch.randn(2, 4, 3))
    _assert_clean(net)


def test_hooks_removed_and_mode_restored_after_exception():
    """Check that hooks go and train/eval modes come back when forward raises."""
    net = Raiser()
    net.train()
    net.head.eval()
    inside = {}

    def fail_inside():
        with record_signs(net, ["act", "head", "fc"]) as rec:
            inside.update(rec=rec, net=net.training, act=net.act.training)
            net(torch.randn(2, 3))

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert not inside["net"]
    assert not inside["act"]
    # the net's forward raised, not a hook of the recorder; the layers called
    # before the error were recorded
    assert inside["rec"].error is None
    assert inside["rec"].layers == ["fc", "act"]
    _assert_clean(net)
    assert net.training
    assert net.fc.training
    assert net.act.training
    assert not net.head.training


def test_temporarily_eval_restores_mixed_modes():
    """Check that each submodule gets its own mode back."""
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout())
    net[1].eval()
    with temporarily_eval(net):
        assert not any(m.training for m in net.modules())
    assert net.training
    assert net[0].training
    assert not net[1].training


def test_record_signs_bad_options():
    """Check the errors for bad conv_pool, token_pool and residual values."""
    net = _token_net()
    for kwargs in ({"conv_pool": "max"}, {"token_pool": "mean"}, {"residual": "x"}):
        with pytest.raises(ValueError, match="must be one of"):
            with record_signs(net, **kwargs):
                pass  # pragma: no cover
    _assert_clean(net)


def test_to_cpu_false_keeps_bits_until_pop():
    """Check that bits accumulate over forwards and pop empties the store."""
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    with record_signs(net, "all", to_cpu=False) as rec, torch.no_grad():
        net(torch.randn(3, 3))
        net(torch.randn(4, 3))
        assert rec.pop_matrix().shape == (7, 4)
        assert rec.pop_matrix().shape == (0, 4)


@pytest.mark.parametrize(
    "shape", [(2, 3, 6, 8), (3, 2, 7, 9), (1, 1, 1, 1), (2, 1, 3, 601)]
)
def test_quadrant_pool_matches_brute_force(shape):
    """Check the quadrant pooling against a direct count on random maps."""
    pos = torch.rand(shape) > 0.5
    n, c, h, w = shape
    expected = []
    for r0, r1 in quadrant_bounds(h):
        for c0, c1 in quadrant_bounds(w):
            blk = pos[:, :, r0:r1, c0:c1]
            expected.append(2 * blk.sum((2, 3)) >= blk.shape[2] * blk.shape[3])
    expected = torch.stack(expected, -1).reshape(n, 4 * c)
    bits, _ = pool_signs(pos)
    assert torch.equal(bits, expected)


class _SharedReluBlock(nn.Module):
    """A torchvision-style block: one ReLU module called twice."""

    def __init__(self, width):
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.fc2(self.relu(self.fc1(x))) + x)


def test_last_is_the_last_activation_call_of_the_forward():
    """Check layers="last" on a ReLU called twice per forward gives the second
    call's bits only (S_out), as a hand-written hook keeping the last call."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 5), _SharedReluBlock(5), nn.Linear(5, 2))
    x = torch.randn(7, 3)
    calls = []
    handle = net[1].relu.register_forward_pre_hook(
        lambda _m, args: calls.append(args[0] > 0)
    )
    with torch.no_grad():
        net(x)
    handle.remove()
    assert len(calls) == 2
    with record_signs(net, "last") as rec, torch.no_grad():
        net(x)
        net(x[:3])
    assert rec.layers == ["1.relu#1"]
    bits = rec.pop_matrix()
    assert torch.equal(bits, torch.cat([calls[1], calls[1][:3]]))
    with record_signs(net, "all") as rec, torch.no_grad():
        net(x)
    assert rec.layers == ["1.relu", "1.relu#1"]


def test_last_takes_the_layout_of_the_last_call():
    """Check a module called on two shapes keeps the last call's layout."""

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 6)
            self.act = nn.Tanh()

        def forward(self, x):
            return self.act(self.fc(self.act(x)))

    net = Shared()
    x = torch.randn(3, 4)
    with record_signs(net, "last") as rec, torch.no_grad():
        net(x)
    assert rec.n_bits == 6
    expected = net.fc(torch.tanh(x)) > 0
    assert torch.equal(rec.pop_matrix(), expected)


def test_spiking_conv_codes_take_the_majority_over_time_steps():
    """Check a SEW-ResNet's last code is, per unit, the majority over the T
    steps of ``z > 0`` (ties to +1), as a hand-written hook computes it (the
    last map is 2x2, so its quadrants are its pixels)."""
    from sksign.nn import build_network

    torch.manual_seed(0)
    net = build_network("sew_resnet", 256, 3, input_shape=(1, 16, 16), width=4)
    net.eval()
    x = torch.rand(6, 256)
    seen = []
    handle = net.layer4[1].sn2.register_forward_pre_hook(
        lambda _m, args: seen.append(args[0].detach())
    )
    with torch.no_grad():
        net(x)
    handle.remove()
    (z,) = seen
    n, t, c, h, w = z.shape
    assert (h, w) == (2, 2)
    votes = (z > 0).sum(dim=1).numpy()
    expected = (2 * votes >= t).reshape(n, c * h * w)
    with record_signs(net, "last") as rec, torch.no_grad():
        net(x)
    np.testing.assert_array_equal(rec.pop_matrix().numpy(), expected)
