"""End to end on every device there is: the CPU always, CUDA where it exists.

The same test body runs with ``device="cpu"`` (so the checks themselves are
exercised on every machine) and with ``device="cuda"`` (skipped without a
GPU). A net trained on the device keeps its weights there through codes,
interventions, gate dominance and the sign-kNN; only bits and per-sample
outputs come back to the host, and the codes equal those of a CPU copy of the
same weights up to pre-activations that round across 0. One command runs the
GPU half: ``pytest tests/test_device_end_to_end.py tests/test_device.py``.
"""

import copy

import numpy as np
import pytest
import torch
from sklearn.pipeline import make_pipeline

from sksign.estimators import (
    HTAFNetClassifier,
    HTAFNetRegressor,
    ICBMClassifier,
    SignKNNClassifier,
)
from sksign.metrics import (
    gate_dominance_report,
    intervention_score,
    sign_gap,
)
from sksign.transformers import SignCodeTransformer

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            not torch.cuda.is_available(), reason="CUDA is not available"
        ),
    ),
]
# share of bits allowed to differ from a CPU copy of the same weights (GPU
# kernels round differently; only pre-activations within rounding of 0 flip)
MAX_FLIPPED = 1e-3


@pytest.fixture(scope="module")
def data(digits):
    X_train, X_test, y_train, y_test = digits
    return X_train[:600], X_test[:200], y_train[:600], y_test[:200]


def _on(module, device):
    return all(p.device.type == device for p in module.parameters())


def _cpu_codes(net, X_train, X_test):
    """Codes of all layers from a CPU copy of the net's module (a bare module)."""
    module = copy.deepcopy(net.module_).to("cpu")
    return SignCodeTransformer(module, layers="all").fit(X_train).transform(X_test)


@pytest.mark.parametrize("device", DEVICES)
def test_relu_net_codes_scorers_and_knn(device, data, host_transfers):
    """Check fit, codes, sign-kNN, interventions and gate dominance on `device`."""
    X_train, X_test, y_train, y_test = data
    net = HTAFNetClassifier(
        (64, 32),
        activation="relu",
        max_epochs=8,
        lr=1e-2,
        random_state=0,
        device=device,
    ).fit(X_train, y_train)
    assert _on(net.module_, device)
    assert net.score(X_test, y_test) > 0.8
    before = {k: v.clone() for k, v in net.module_.state_dict().items()}

    sct = SignCodeTransformer(net, prefit=True, layers="all").fit(X_train)
    assert _on(sct.estimator_.module_, device)
    with host_transfers() as moved:
        codes = sct.transform(X_test)
    assert moved.dtypes() == {torch.bool}  # only bits came back
    assert codes.shape == (len(X_test), 96)
    assert codes.dtype == np.uint8
    assert np.mean(codes != _cpu_codes(net, X_train, X_test)) <= MAX_FLIPPED

    pipe = make_pipeline(
        SignCodeTransformer(net, prefit=True, layers="all"),
        SignKNNClassifier(n_neighbors=5),
    ).fit(X_train, y_train)
    assert pipe.score(X_test, y_test) > 0.6  # chance is 0.1

    clean = intervention_score(net, X_test, y_test, alpha=0.0)
    # the same forward as predict (on a GPU, other batch shapes may round a
    # near-tie differently)
    assert abs(clean - net.score(X_test, y_test)) <= 0.01
    for kwargs in (
        {"kind": "sign_flip", "flip": "literal"},
        {"kind": "sign_flip", "flip": "gate"},
        {"kind": "magnitude", "noise": "standard"},
        {"kind": "magnitude", "noise": "matched", "X_ref": X_train},
    ):
        score = intervention_score(
            net, X_test, y_test, alpha=0.5, random_state=0, **kwargs
        )
        assert 0.0 <= score <= 1.0, kwargs
        again = intervention_score(
            net, X_test, y_test, alpha=0.5, random_state=0, **kwargs
        )
        assert again == score, kwargs  # seeded on the device too
    flipped = intervention_score(net, X_test, y_test, alpha=1.0, random_state=0)
    assert flipped < clean

    rep = gate_dominance_report(net, X_test, X_ref=X_train)
    assert rep.d == 32
    assert np.isfinite(rep.logits).all()
    np.testing.assert_allclose(
        rep.logits, rep.pure_sign_logits + rep.residuals, rtol=1e-5, atol=1e-5
    )
    gap = sign_gap(net, X_train, y_train, X_test, y_test, n_neighbors=5)
    assert 0.0 <= gap.knn_accuracy <= 1.0

    # nothing above moved or changed the net
    assert _on(net.module_, device)
    after = net.module_.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("device", DEVICES)
def test_htaf_cnn_regressor_and_icbm(device, data, host_transfers):
    """Check an HTAF CNN's codes, a regressor and an ICBM on `device`."""
    X_train, X_test, y_train, y_test = data
    cnn = HTAFNetClassifier(
        architecture="cnn",
        conv_channels=(4, 8),
        hidden_layer_sizes=(16,),
        max_epochs=2,
        random_state=0,
        device=device,
    ).fit(X_train, y_train)
    assert _on(cnn.module_, device)
    sct = SignCodeTransformer(cnn, prefit=True, layers="all").fit(X_train)
    codes = sct.transform(X_test)
    assert sct.n_bits_ == 4 * 4 + 4 * 8 + 16
    assert np.mean(codes != _cpu_codes(cnn, X_train, X_test)) <= MAX_FLIPPED

    reg = HTAFNetRegressor((16,), max_epochs=2, random_state=0, device=device).fit(
        X_train, y_train.astype(np.float32)
    )
    assert _on(reg.module_, device)
    pred = reg.predict(X_test)
    assert pred.shape == (len(X_test),)
    assert np.isfinite(pred).all()

    icbm = ICBMClassifier(
        n_concepts=8,
        hidden_layer_sizes=(32,),
        max_epochs=5,
        lr=1e-2,
        random_state=0,
        device=device,
    ).fit(X_train, y_train)
    assert _on(icbm.module_, device)
    with host_transfers() as moved:
        concepts = icbm.transform(X_test)
    assert moved.dtypes() == {torch.bool}
    assert concepts.shape == (len(X_test), 8)
    assert set(np.unique(concepts)) <= {0, 1}
    records = icbm.explain_concepts(X_test, y_test)
    assert len(records) == 8
    assert icbm.score(X_test, y_test) > 0.5


@pytest.mark.parametrize("device", DEVICES)
def test_weights_trained_on_device_load_on_cpu(device, data, tmp_path):
    """Check safetensors weights saved from `device` load into a CPU net."""
    pytest.importorskip("safetensors")
    X_train, X_test, y_train, _ = data
    net = HTAFNetClassifier((16,), max_epochs=2, random_state=0, device=device).fit(
        X_train, y_train
    )
    path = tmp_path / "net.safetensors"
    net.save_params(f_params=path, use_safetensors=True)
    params = {**net.get_params(), "device": "cpu"}
    cpu = HTAFNetClassifier(**params).initialize_for(
        net.n_features_in_, classes=net.classes_
    )
    cpu.load_params(f_params=path, use_safetensors=True)
    assert _on(cpu.module_, "cpu")
    np.testing.assert_allclose(
        cpu.predict_proba(X_test), net.predict_proba(X_test), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("device", DEVICES)
def test_same_random_state_same_net_on_device(device, data):
    """Check two seeded fits on `device` give the same weights and codes."""
    X_train, X_test, y_train, _ = data
    nets = [
        HTAFNetClassifier((32,), max_epochs=2, random_state=7, device=device).fit(
            X_train, y_train
        )
        for _ in range(2)
    ]
    a, b = (n.module_.state_dict() for n in nets)
    # the initial weights come from the seeded CPU generator on every device;
    # training on a GPU may differ in the last bits between runs
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-5)
    codes = [
        SignCodeTransformer(n, prefit=True).fit(X_train).transform(X_test) for n in nets
    ]
    assert np.mean(codes[0] != codes[1]) <= MAX_FLIPPED
