"""Our SEW-ResNet pieces against spikingjelly's, and HTAF as its surrogate."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import pytest
import torch

pytest.importorskip("spikingjelly")
sj_functional = pytest.importorskip("spikingjelly.activation_based.functional")
sj_neuron = pytest.importorskip("spikingjelly.activation_based.neuron")
sj_layer = pytest.importorskip("spikingjelly.activation_based.layer")

from sksign.nn import HTAFSurrogate  # noqa: E402
from sksign.nn.activations import htaf  # noqa: E402
from sksign.nn.architectures.sew_resnet import SEWBlock  # noqa: E402
from sksign.nn.layers.spiking import IFNeuron, LIFNeuron  # noqa: E402


class _SJBasicBlock(torch.nn.Module):
    """spikingjelly's SEW BasicBlock (model/sew_resnet.py), from its own layers.

    Written out here because that module imports torchvision; the forward is
    the same: conv-bn-sn twice, a conv-bn-sn downsample, then
    ``sew_function(identity, out)``.
    """

    def __init__(self, c_in, c_out, stride, cnf, surrogate):
        super().__init__()
        kw = {"v_threshold": 1.0, "v_reset": None, "surrogate_function": surrogate}
        self.conv1 = sj_layer.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = sj_layer.BatchNorm2d(c_out)
        self.sn1 = sj_neuron.IFNode(**kw)
        self.conv2 = sj_layer.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = sj_layer.BatchNorm2d(c_out)
        self.sn2 = sj_neuron.IFNode(**kw)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = torch.nn.Sequential(
                sj_layer.Conv2d(c_in, c_out, 1, stride, bias=False),
                sj_layer.BatchNorm2d(c_out),
            )
            self.downsample_sn = sj_neuron.IFNode(**kw)
        self.cnf = cnf

    def forward(self, x):
        identity = x
        out = self.sn1(self.bn1(self.conv1(x)))
        out = self.sn2(self.bn2(self.conv2(out)))
        if self.downsample is not None:
            identity = self.downsample_sn(self.downsample(x))
        if self.cnf == "ADD":
            return identity + out
        if self.cnf == "AND":
            return identity * out
        return identity * (1.0 - out)  # IAND


def _sj_neuron(kind, surrogate):
    if kind == "if":
        return sj_neuron.IFNode(
            v_threshold=1.0, v_reset=None, surrogate_function=surrogate, step_mode="m"
        )
    return sj_neuron.LIFNode(
        tau=2.0,
        decay_input=True,
        v_threshold=1.0,
        v_reset=None,
        surrogate_function=surrogate,
        step_mode="m",
    )


@pytest.mark.parametrize("kind", ["if", "lif"])
def test_neurons_agree_with_spikingjelly(kind):
    """Check IF/LIF spikes equal spikingjelly's (soft reset, eval, exact step)."""
    torch.manual_seed(0)
    x = 1.5 * torch.rand(6, 4, 10)  # (time, batch, units), spikingjelly's layout
    ours = (IFNeuron() if kind == "if" else LIFNeuron(tau=2.0)).eval()
    theirs = _sj_neuron(kind, HTAFSurrogate()).eval()
    got = ours(x.transpose(0, 1)).transpose(0, 1)
    sj_functional.reset_net(theirs)
    want = theirs(x)
    assert torch.equal(got, want)
    assert got.sum() > 0


@pytest.mark.parametrize("connect", ["add", "iand", "and"])
@pytest.mark.parametrize("stride", [1, 2])
def test_sew_block_agrees_with_spikingjelly(connect, stride):
    """Check our SEW block's forward equals spikingjelly's BasicBlock's."""
    torch.manual_seed(0)
    c_in, c_out = 4, 4 if stride == 1 else 8
    ours = SEWBlock(c_in, c_out, stride, connect=connect).eval()
    theirs = _SJBasicBlock(c_in, c_out, stride, connect.upper(), HTAFSurrogate())
    down = theirs.downsample
    sj_functional.set_step_mode(theirs, "m")
    mine = ours.state_dict()
    mapping = {
        "conv1.weight": "conv1.0.weight",
        "conv2.weight": "conv2.0.weight",
        "downsample.0.weight": "down.0.weight",
    }
    for bn_ours, bn_theirs in (("conv1.1", "bn1"), ("conv2.1", "bn2")) + (
        (("down.1", "downsample.1"),) if down is not None else ()
    ):
        for p in ("weight", "bias", "running_mean", "running_var"):
            mapping[f"{bn_theirs}.{p}"] = f"{bn_ours}.{p}"
    # non-trivial BatchNorm statistics so that spikes fire
    for key in list(mine):
        if key.endswith(("running_mean", "bias")):
            mine[key].uniform_(-0.5, 0.5)
        elif key.endswith(("running_var", "1.weight")):
            mine[key].uniform_(0.5, 1.5)
    ours.load_state_dict(mine)
    theirs_state = {k: mine[v] for k, v in mapping.items() if v in mine}
    missing = theirs.load_state_dict(theirs_state, strict=False)
    assert not [k for k in missing.missing_keys if "num_batches" not in k]
    theirs.eval()
    s = (torch.rand(3, 2, c_in, 8, 8) > 0.6).float()  # (time, batch, C, H, W)
    with torch.no_grad():
        got = ours(s.transpose(0, 1)).transpose(0, 1)
        sj_functional.reset_net(theirs)
        want = theirs(s)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)
    assert 0 < got.abs().sum()


def test_htaf_surrogate_modes_and_gradient():
    """Check smooth HTAF in training, the step in eval, HTAF's derivative backward."""
    x = torch.linspace(-2, 2, 41, requires_grad=True)
    sg = HTAFSurrogate(1.0, 22.0)
    torch.testing.assert_close(sg.train()(x), htaf(x, 1.0, 22.0))
    assert torch.equal(sg.eval()(x), (x >= 0).float())
    classic = HTAFSurrogate(1.0, 22.0, smooth_training=False).train()
    y = classic(x)
    assert torch.equal(y, (x >= 0).float())
    (g,) = torch.autograd.grad(y.sum(), x)
    x2 = x.detach().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(htaf(x2, 1.0, 22.0).sum(), x2)
    torch.testing.assert_close(g, g_ref)
    assert "alpha0=1.0" in repr(sg)
    with pytest.raises(ValueError, match="alpha1"):
        HTAFSurrogate(alpha1=-1.0)
