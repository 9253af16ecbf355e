"""Device logic, checked on CPU: tensors stay on the net's device and dtype.

DESIGN.md: "nothing in the package assumes CPU". Nets, SignCodeTransformer and
the scorers run the forward pass on the net's own device and dtype, and the
transformers move only bits back to the host (one transfer per batch). On a
CPU-only machine this is checked with float64 modules (a dtype the package must
follow rather than assume), explicit ``device="cpu"`` and by recording which
tensors are moved to the host. The "cuda" tests run only where CUDA is there.
"""

import numpy as np
import pytest
import torch
from torch import nn

from sksign.estimators import HTAFNetClassifier, ICBMClassifier
from sksign.metrics import gate_dominance, intervention_score, sign_gap
from sksign.transformers import SignCodeTransformer

RANDOM_STATE = 0
needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="CUDA is not available"
)


@pytest.fixture(scope="module")
def data(digits):
    X_train, _, y_train, _ = digits
    return X_train[:300], y_train[:300]


@pytest.fixture(scope="module")
def net(data):
    X, y = data
    return HTAFNetClassifier(
        (16, 8), max_epochs=2, random_state=RANDOM_STATE, device="cpu"
    ).fit(X, y)


@pytest.fixture(scope="module")
def icbm(data):
    X, y = data
    return ICBMClassifier(
        n_concepts=8, hidden_layer_sizes=(16,), max_epochs=2, random_state=RANDOM_STATE
    ).fit(X, y)


def _float64_mlp(n_features=64, n_classes=3):
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(n_features, 12),
        nn.ReLU(),
        nn.Linear(12, 6),
        nn.Tanh(),
        nn.Linear(6, n_classes),
    ).double()


class _InputRecorder:
    """Forward pre-hook recording the device and dtype of every batch."""

    def __init__(self, module):
        self.seen = []
        self.handle = module.register_forward_pre_hook(self)

    def __call__(self, _module, args):
        self.seen.append((args[0].device, args[0].dtype, args[0].shape[0]))

    def remove(self):
        self.handle.remove()


# ---------------------------------------------------------------------------
# only bits leave the device
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("output", ["bits", "signs", "packed"])
def test_sign_codes_move_only_bits_once_per_batch(net, data, output, host_transfers):
    """Check that transform moves bool bits to the host, once per batch only."""
    X, _ = data
    sct = SignCodeTransformer(net, prefit=True, layers="all", output=output)
    sct.set_params(batch_size=64).fit(X)
    with host_transfers() as moved:
        codes = sct.transform(X)

    assert moved.dtypes() == {torch.bool}, moved.cpu + moved.numpy
    n_batches = -(-len(X) // 64)
    # two layers, one transfer per batch (the recorder pops both at once)
    assert len(moved.cpu) == n_batches
    assert all(shape[1] == sct.n_bits_ for _, shape in moved.cpu)
    expected = {"bits": np.uint8, "signs": np.int8, "packed": np.uint8}[output]
    width = -(-sct.n_bits_ // 8) if output == "packed" else sct.n_bits_
    assert codes.dtype == expected
    assert codes.shape == (len(X), width)
    assert sct.n_bits_ == 16 + 8


def test_icbm_transform_moves_only_bits(icbm, data, host_transfers):
    """Check that ICBMClassifier.transform moves only the concept bits to the host."""
    X, _ = data
    with host_transfers() as moved:
        concepts = icbm.transform(X)
    assert moved.dtypes() == {torch.bool}, moved.cpu + moved.numpy
    assert concepts.dtype == np.uint8
    assert concepts.shape == (len(X), 8)


def test_net_predict_moves_outputs_not_activations(net, data, host_transfers):
    """Check that predict moves only (n, n_classes) logits back, no hidden layer."""
    X, _ = data
    with host_transfers() as moved:
        net.predict_proba(X)
    transfers = moved.cpu + moved.numpy
    assert transfers, "predict_proba moved nothing to the host"
    assert all(shape[-1] == len(net.classes_) for _, shape in transfers), transfers


# ---------------------------------------------------------------------------
# the net's dtype and device are followed, not assumed
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), None])
def test_sign_codes_follow_float64_module(device, data):
    """Check that a float64 module gets float64 batches on its device."""
    X, _ = data
    module = _float64_mlp()
    sct = SignCodeTransformer(module, layers="all", device=device).fit(X)
    rec = _InputRecorder(sct.estimator_)  # the transformer reads its own copy
    try:
        codes = sct.transform(X)
    finally:
        rec.remove()
    assert {(dev.type, dt) for dev, dt, _ in rec.seen} == {("cpu", torch.float64)}
    with torch.no_grad():
        x = torch.from_numpy(X.astype(np.float64))
        z1 = module[0](x)
        z2 = module[2](module[1](z1))
    expected = np.hstack([(z1 > 0).numpy(), (z2 > 0).numpy()]).astype(np.uint8)
    np.testing.assert_array_equal(codes, expected)
    assert next(sct.estimator_.parameters()).dtype == torch.float64


def test_sign_codes_keep_float64_precision():
    """Check that float64 input reaches a float64 module unrounded."""
    lin = nn.Linear(1, 1).double()
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.bias.fill_(-1.0)
    module = nn.Sequential(lin, nn.ReLU())
    X = np.array([[1 + 1e-12], [1 - 1e-12], [2.0]])
    codes = SignCodeTransformer(module).fit(X).transform(X)
    np.testing.assert_array_equal(codes.ravel(), [1, 0, 1])


@pytest.mark.parametrize(
    "scorer",
    [
        lambda m, X, y: intervention_score(m, X, y, random_state=0),
        lambda m, X, y: intervention_score(m, X, y, kind="magnitude", random_state=0),
        lambda m, X, y: gate_dominance(m, X, y),
        lambda m, X, y: sign_gap(m, X, y, X, y, n_neighbors=1),
    ],
    ids=["sign_flip", "magnitude", "gate_dominance", "sign_gap"],
)
def test_scorers_follow_module_dtype_and_device(scorer, data):
    """Check that the scorers feed a float64 module float64 batches on its device."""
    X, y = data
    module = _float64_mlp().eval()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    rec = _InputRecorder(module)
    try:
        score = scorer(module, X, y % 3)
    finally:
        rec.remove()
    assert rec.seen
    assert {(dev.type, dt) for dev, dt, _ in rec.seen} == {("cpu", torch.float64)}
    assert isinstance(score, float) or hasattr(score, "gap")
    after = module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not module.training


def test_intervention_alpha_zero_is_exact_in_float64(data):
    """Check that alpha=0 gives the float64 clean accuracy exactly."""
    X, y = data
    module = _float64_mlp().eval()
    with torch.no_grad():
        pred = module(torch.from_numpy(X.astype(np.float64))).argmax(1).numpy()
    clean = float(np.mean(pred == y % 3))
    assert intervention_score(module, X, y % 3, alpha=0.0) == clean


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")])
def test_net_device_parameter_accepts_str_and_device(device, data):
    """Check that device="cpu" and torch.device("cpu") train the same net."""
    X, y = data
    a = HTAFNetClassifier((8,), max_epochs=1, random_state=0, device=device)
    b = HTAFNetClassifier((8,), max_epochs=1, random_state=0, device="cpu")
    a.fit(X, y)
    b.fit(X, y)
    assert next(a.module_.parameters()).device.type == "cpu"
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_transformer_device_moves_only_its_copy(net, data):
    """Check that device= moves the fitted copy, never the user's net."""
    X, _ = data
    sct = SignCodeTransformer(net, prefit=True, device=torch.device("cpu")).fit(X)
    assert sct.estimator_ is not net
    assert sct.estimator_.module_ is not net.module_
    np.testing.assert_array_equal(
        sct.transform(X),
        SignCodeTransformer(net, prefit=True).fit(X).transform(X),
    )


# ---------------------------------------------------------------------------
# CUDA (skipped without a GPU); tests/test_device_end_to_end.py runs its
# end-to-end checks on CUDA too
# ---------------------------------------------------------------------------
@needs_cuda
def test_cuda_transformer_device_override(net, data):
    """Check that SignCodeTransformer(device="cuda") reads a CPU net on the GPU."""
    X, _ = data
    sct = SignCodeTransformer(net, prefit=True, layers="all", device="cuda").fit(X)
    assert next(sct.estimator_.module_.parameters()).device.type == "cuda"
    assert next(net.module_.parameters()).device.type == "cpu"
    ref = SignCodeTransformer(net, prefit=True, layers="all").fit(X).transform(X)
    assert np.mean(sct.transform(X) == ref) > 0.999
