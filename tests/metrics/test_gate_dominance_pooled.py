"""Gate dominance of conv nets whose readout reads a global average pool."""

import numpy as np
import pytest
import torch
from torch import nn

from sksign.metrics import gate_dominance_report
from sksign.nn import build_network


def _resnet(activation="relu", seed=0):
    torch.manual_seed(seed)
    net = build_network(
        "resnet18",
        3 * 8 * 8,
        4,
        activation=activation,
        input_shape=(3, 8, 8),
        width=2,
    )
    return net.eval()


@pytest.mark.parametrize("n_samples", [1, 7, 40])
def test_pooled_readout_is_the_flattened_linear_map(n_samples):
    """On ResNet-18 every unit is one channel at one position, with the
    readout's channel weight divided by the number of positions; the split
    f = f~ + R then reproduces the net's own logits."""
    rng = np.random.default_rng(n_samples)
    X = rng.standard_normal((n_samples, 3, 8, 8)).astype(np.float32)
    X_ref = rng.standard_normal((30, 3, 8, 8)).astype(np.float32)
    net = _resnet()
    rep = gate_dominance_report(net, X, X_ref=X_ref)
    assert rep.layer == "layer4.1.act2"
    assert rep.readout == "out"
    # the last map: 16 channels (8 * width) at 1x1 here (8x8 input / 8)
    with torch.no_grad():
        feats = {}
        handle = net.layer4[1].act2.register_forward_hook(
            lambda m, i, o: feats.setdefault("h", o)
        )
        logits = net(torch.as_tensor(X)).double().numpy()
        handle.remove()
    h = feats["h"]
    assert rep.d == h[0].numel()
    np.testing.assert_allclose(rep.logits, logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        rep.logits, rep.pure_sign_logits + rep.residuals, rtol=1e-10, atol=1e-10
    )


def test_pooled_readout_by_hand_on_a_larger_map():
    """A conv map of 2x2 positions: W / 4 per position, checked by hand."""

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 3, 3, padding=1)
            self.act = nn.SiLU()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.out = nn.Linear(3, 2)

        def forward(self, x):
            x = x.reshape(-1, 1, 2, 2)
            return self.out(self.pool(self.act(self.conv(x))).flatten(1))

    torch.manual_seed(1)
    net = Tiny().eval()
    X = np.random.default_rng(0).standard_normal((25, 4)).astype(np.float32)
    rep = gate_dominance_report(net, X)
    assert rep.d == 3 * 4
    with torch.no_grad():
        h = net.act(net.conv(torch.as_tensor(X).reshape(-1, 1, 2, 2)))
    h = h.double().reshape(25, -1).numpy()
    W = net.out.weight.detach().double().numpy()
    W_flat = np.repeat(W, 4, axis=1) / 4
    expected = h @ W_flat.T + net.out.bias.detach().double().numpy()
    np.testing.assert_allclose(rep.logits, expected, rtol=1e-6, atol=1e-6)
    # mu_j(s) of each (channel, position) unit by hand
    S = h > 0
    mu_pos = [np.abs(h[S[:, j], j]).mean() if S[:, j].any() else 0 for j in range(12)]
    np.testing.assert_allclose(rep.mu[:, 1], mu_pos, rtol=1e-12)


def test_non_linear_map_before_the_readout_is_refused():
    """A LayerNorm between the last activation and the readout is not a
    linear readout: the report refuses it and says why."""
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3)
    ).eval()
    X = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    with pytest.raises(ValueError, match="global average pool"):
        gate_dominance_report(net, X)
