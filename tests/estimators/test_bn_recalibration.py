"""``recalibrate_bn``: the nets end fit with BatchNorm statistics of the exact step."""

import time

import numpy as np
import pytest
import torch
from skorch.dataset import ValidSplit

from sksign._compat import InvalidParameterError
from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor, ICBMClassifier
from sksign.nn import batchnorm_layers, recalibrate_batchnorm

WRN = {"architecture": "wrn", "architecture_params": {"depth": 10, "widen_factor": 1}}
FAST = {"max_epochs": 2, "batch_size": 16, "random_state": 0}


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    X = rng.random((56, 1, 16, 16)).astype(np.float32)
    y = (X[:, 0, :8].mean(axis=(1, 2)) > X[:, 0, 8:].mean(axis=(1, 2))).astype(int)
    return X, y


def _state(est):
    return {k: v.clone() for k, v in est.module_.state_dict().items()}


def _assert_same_state(a, b):
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, different


def _batches(X, batch_size):
    x = torch.as_tensor(X)
    return [x[i : i + batch_size] for i in range(0, len(x), batch_size)]


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: HTAFNetClassifier(**WRN, **FAST, **kw),
        lambda **kw: HTAFNetRegressor(**WRN, **FAST, **kw),
        lambda **kw: ICBMClassifier(
            "wrn",
            {"depth": 10, "widen_factor": 1},
            backbone_activation="htaf",
            n_concepts=4,
            **FAST,
            **kw,
        ),
    ],
    ids=["classifier", "regressor", "icbm"],
)
def test_fit_ends_with_the_recalibration_pass(images, make):
    """Check a fit with recalibrate_bn=True equals the fit without it followed
    by recalibrate_batchnorm over the training rows in batches of batch_size
    (same weights, BN statistics of the exact step), and that they differ
    from the statistics of training."""
    X, y = images
    y = y.astype(np.float32) if "Regressor" in type(make()).__name__ else y
    on = make().fit(X, y)
    off = make(recalibrate_bn=False).fit(X, y)
    trained = _state(off)
    recalibrate_batchnorm(off.module_, _batches(X, 16))
    _assert_same_state(_state(on), _state(off))
    name = next(iter(batchnorm_layers(on.module_)))
    key = f"{name}.num_batches_tracked"
    assert int(_state(on)[key]) == 4  # 56 rows in batches of 16
    later = [k for k in trained if k.endswith("running_mean")][-1]
    assert not torch.equal(trained[later], _state(on)[later])
    np.testing.assert_array_equal(on.predict(X), off.predict(X))
    assert on.module_.training == off.module_.training


def test_partial_fit_recalibrates_each_round(images):
    """Check partial_fit ends each round with the pass, too."""
    X, y = images
    net = HTAFNetClassifier(**WRN, **FAST).partial_fit(X, y, classes=[0, 1])
    assert int(net.module_.bn.num_batches_tracked) == 4
    net.partial_fit(X, y)
    assert int(net.module_.bn.num_batches_tracked) == 4
    assert len(net.history_) == 4


def test_train_split_rows_only(images):
    """Check the pass reads the rows the split trains on, not the held-out ones."""
    X, y = images
    kw = {**WRN, **FAST, "train_split": ValidSplit(4)}
    on = HTAFNetClassifier(**kw).fit(X, y)
    off = HTAFNetClassifier(**kw, recalibrate_bn=False).fit(X, y)
    dataset, _ = off.get_split_datasets(X, y)
    rows = np.asarray(dataset.indices)
    assert len(rows) == 42
    recalibrate_batchnorm(off.module_, _batches(X[rows], 16))
    _assert_same_state(_state(on), _state(off))


@pytest.mark.parametrize(
    "kwargs",
    [
        {**WRN, "activation": "relu"},  # BatchNorm, no step activation
        {**WRN, "inference": "smooth"},  # the smooth function at inference
        {"hidden_layer_sizes": (8,)},  # a step net without BatchNorm
    ],
    ids=["relu", "smooth", "no_batchnorm"],
)
def test_no_op_cases(images, kwargs):
    """Check nets without a step or without BatchNorm, and inference="smooth",
    are fitted exactly as with recalibrate_bn=False."""
    X, y = images
    on = HTAFNetClassifier(**kwargs, **FAST).fit(X, y)
    off = HTAFNetClassifier(**kwargs, **FAST, recalibrate_bn=False).fit(X, y)
    _assert_same_state(_state(on), _state(off))


def test_frozen_backbone_keeps_its_statistics(images):
    """Check an ICBM whose step backbone is frozen keeps the backbone's
    BatchNorm statistics (the pass is a no-op: no other BatchNorm)."""
    X, y = images
    torch.manual_seed(0)
    from sksign.nn import WideResNet

    backbone = WideResNet(2, (1, 16, 16), depth=10, widen_factor=1)
    backbone.out = torch.nn.Identity()
    kw = {"n_concepts": 4, "freeze_backbone": True, **FAST}
    on = ICBMClassifier(backbone, **kw).fit(X, y)
    for name, bn in batchnorm_layers(backbone).items():
        frozen = on.module_.backbone.get_submodule(name)
        assert torch.equal(frozen.running_mean, bn.running_mean)
        assert int(frozen.num_batches_tracked) == 0
    off = ICBMClassifier(backbone, **kw, recalibrate_bn=False).fit(X, y)
    _assert_same_state(_state(on), _state(off))


def test_same_seed_same_statistics(images):
    """Check the pass is deterministic: the same random_state, the same net."""
    X, y = images
    a = HTAFNetClassifier(**WRN, **FAST).fit(X, y)
    b = HTAFNetClassifier(**WRN, **FAST).fit(X, y)
    _assert_same_state(_state(a), _state(b))


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_bad_value_raises_and_leaves_the_fitted_net(images, value):
    """Check a non-boolean recalibrate_bn names the parameter and a fitted
    net is left unchanged by the failed refit."""
    X, y = images
    net = HTAFNetClassifier(**WRN, **FAST).fit(X, y)
    before, proba, epochs = _state(net), net.predict_proba(X), len(net.history_)
    net.set_params(recalibrate_bn=value)
    with pytest.raises(InvalidParameterError, match="'recalibrate_bn' parameter"):
        net.fit(X, y)
    _assert_same_state(_state(net), before)
    np.testing.assert_array_equal(net.predict_proba(X), proba)
    assert len(net.history_) == epochs
    icbm = ICBMClassifier(n_concepts=2, hidden_layer_sizes=(4,), recalibrate_bn=value)
    with pytest.raises(InvalidParameterError, match="'recalibrate_bn' parameter"):
        icbm.fit(X.reshape(len(X), -1), y)


def _padded_digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32).reshape(-1, 1, 8, 8)
    return np.pad(X, ((0, 0), (0, 0), (12, 12), (12, 12))), y


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arch", "params"),
    [("wrn", {"depth": 10, "widen_factor": 1}), ("resnet18", {"width": 8})],
)
def test_recalibration_does_not_lose_eval_accuracy(arch, params):
    """Check that on the padded digits the exact-step accuracy on the
    training data is at least as high with the pass as without it."""
    X, y = _padded_digits()
    kw = {"architecture": arch, "architecture_params": params, "activation": "htaf"}
    kw |= {"max_epochs": 3, "batch_size": 32, "random_state": 0}
    X, y = X[::2], y[::2]
    off = HTAFNetClassifier(**kw, recalibrate_bn=False).fit(X, y)
    on = HTAFNetClassifier(**kw).fit(X, y)
    assert on.score(X, y) >= off.score(X, y)


@pytest.mark.slow
def test_resnet18_with_htaf_everywhere_learns():
    """Check ResNet-18 with HTAF(1, 11) at every activation (pre-activation
    blocks, the default for a step) reaches 0.7 exact-step accuracy on
    held-out padded digits at width 8, in 20 epochs on 449 images (about
    50 s on one core). Without annealing: on so few images the default
    annealing from 0.1 ends lower (0.63; 0.71 without, measured)."""
    X, y = _padded_digits()
    net = HTAFNetClassifier(
        architecture="resnet18",
        architecture_params={"width": 8},
        activation="htaf",
        alpha0=1.0,
        alpha0_start=None,
        max_epochs=20,
        batch_size=32,
        random_state=0,
    )
    start = time.perf_counter()
    net.fit(X[::2], y[::2])
    assert time.perf_counter() - start < 120
    assert net.module_.preactivation
    assert net.score(X[1::2], y[1::2]) >= 0.7
