"""Tests for the scorers of sksign.metrics: interventions and gate dominance."""

import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris
from sklearn.exceptions import NotFittedError
from sklearn.metrics import accuracy_score
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from torch import nn

from sksign._adapter import TorchClassifier
from sksign.estimators import HTAFNetClassifier
from sksign.metrics import (
    gate_dominance,
    gate_dominance_from_activations,
    gate_dominance_report,
    intervention_score,
    make_gate_dominance_scorer,
    make_intervention_scorer,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

DEFINITIONS = [
    {"kind": "sign_flip", "flip": "literal"},
    {"kind": "sign_flip", "flip": "gate"},
    {"kind": "magnitude", "noise": "standard"},
    {"kind": "magnitude", "noise": "matched"},
]


def _small(**kw):
    params = {
        "activation": "relu",
        "max_epochs": 5,
        "lr": 1e-2,
        "random_state": 0,
    }
    params.update(kw)
    return HTAFNetClassifier((32,), **params)


@pytest.fixture(scope="module")
def net(digits):
    X_train, _, y_train, _ = digits
    return _small().fit(X_train, y_train)


@pytest.fixture(scope="module")
def step_net(digits):
    X_train, _, y_train, _ = digits
    return _small(activation="htaf").fit(X_train, y_train)


def _snapshot(module):
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    modes = [m.training for m in module.modules()]
    return state, modes


def _assert_unchanged(module, snapshot):
    state, modes = snapshot
    for k, v in module.state_dict().items():
        assert torch.equal(v, state[k]), k
    assert [m.training for m in module.modules()] == modes
    for m in module.modules():
        assert not m._forward_hooks
        assert not m._forward_pre_hooks


@pytest.mark.parametrize("definition", DEFINITIONS)
def test_alpha_zero_gives_clean_accuracy(net, digits, definition):
    """Check alpha=0 returns the clean accuracy exactly, for every definition."""
    _, X_test, _, y_test = digits
    clean = accuracy_score(y_test, net.predict(X_test))
    score = intervention_score(net, X_test, y_test, alpha=0.0, **definition)
    assert isinstance(score, float)
    assert score == clean


@pytest.mark.parametrize("definition", DEFINITIONS)
def test_same_random_state_same_score(net, digits, definition):
    """Check the same random_state gives the same score."""
    _, X_test, _, y_test = digits
    kw = {"alpha": 0.3, "n_repeats": 2, **definition}
    a = intervention_score(net, X_test, y_test, random_state=7, **kw)
    b = intervention_score(net, X_test, y_test, random_state=7, **kw)
    assert a == b
    assert 0.0 <= a <= 1.0


def test_sign_flip_hurts(net, digits):
    """Check flipping every sign destroys the accuracy."""
    _, X_test, _, y_test = digits
    clean = net.score(X_test, y_test)
    flipped = intervention_score(net, X_test, y_test, alpha=1.0, flip="gate")
    assert flipped < clean - 0.3


@pytest.mark.parametrize("noise", ["standard", "matched"])
def test_magnitude_on_step_net_changes_nothing(step_net, digits, noise):
    """Check a net whose readout sees only signs ignores magnitude noise."""
    _, X_test, _, y_test = digits
    clean = step_net.score(X_test, y_test)
    score = intervention_score(
        step_net, X_test, y_test, kind="magnitude", alpha=1.0, noise=noise
    )
    assert score == clean


@pytest.mark.parametrize("definition", DEFINITIONS)
def test_model_unchanged(digits, definition):
    """Check parameters, hooks and each submodule's mode survive a call."""
    X_train, X_test, y_train, y_test = digits
    net = _small(max_epochs=1).fit(X_train[:200], y_train[:200])
    net.module_.train()
    net.module_.act0.eval()  # a mixed mode must be restored as it was
    snap = _snapshot(net.module_)
    intervention_score(net, X_test, y_test, alpha=0.5, random_state=0, **definition)
    gate_dominance(net, X_test)
    _assert_unchanged(net.module_, snap)


def test_model_unchanged_after_exception(net, digits, monkeypatch):
    """Check hooks are removed and modes restored when the forward raises."""
    _, X_test, _, y_test = digits
    snap = _snapshot(net.module_)

    def boom(*args, **kwargs):
        assert any(m._forward_hooks for m in net.module_.modules())
        assert not net.module_.training
        raise RuntimeError("boom")

    monkeypatch.setattr(TorchClassifier, "logits", boom)
    for kind in ("sign_flip", "magnitude"):
        with pytest.raises(RuntimeError, match="boom"):
            intervention_score(net, X_test, y_test, kind=kind, random_state=0)
    _assert_unchanged(net.module_, snap)


def test_gate_dominance_decomposition(net, digits):
    """Check f = f~ + R on every sample and f equals the net's logits."""
    X_train, X_test, _, _ = digits
    rep = gate_dominance_report(net, X_test, X_ref=X_train)
    np.testing.assert_allclose(
        rep.logits, rep.pure_sign_logits + rep.residuals, rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(
        rep.logits, net.decision_function(X_test), rtol=1e-4, atol=1e-4
    )
    assert rep.mu.shape == (32, 2)
    assert rep.d == 32
    assert rep.C == 10
    assert rep.layer == "act0"
    assert rep.readout == "out"
    assert rep.definition.startswith("gate_dominance/theorem6.1")
    assert rep.eps_1 == pytest.approx(1 - rep.agreement)
    assert rep.eps_1 <= rep.union_bound + 1e-12
    assert rep.eps_1 <= rep.bound + 1e-12
    assert gate_dominance(net, X_test, X_ref=X_train) == rep.median_Z1
    # the identity Z1 = min_c |m_c| / sigma_c * sqrt(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.nanmin(np.abs(rep.m) / rep.sigma, axis=1) * np.sqrt(rep.d)
    finite = np.isfinite(rep.Z1)
    np.testing.assert_allclose(z[finite], rep.Z1[finite], rtol=1e-9)


def _two_unit_net():
    """x -> (x, -x) -> ReLU -> W = I, b = (0, 0.5)."""
    fc0 = nn.Linear(1, 2)
    out = nn.Linear(2, 2)
    with torch.no_grad():
        fc0.weight.copy_(torch.tensor([[1.0], [-1.0]]))
        fc0.bias.zero_()
        out.weight.copy_(torch.eye(2))
        out.bias.copy_(torch.tensor([0.0, 0.5]))
    return nn.Sequential(OrderedDict([("fc0", fc0), ("act0", nn.ReLU()), ("out", out)]))


def test_gate_dominance_by_hand():
    """Check Z1, mu, delta_bar and both bounds on a 2-unit net worked by hand."""
    X = np.array([[1.0], [2.0], [-1.0], [-3.0]], dtype=np.float32)
    rep = gate_dominance_report(_two_unit_net(), X)
    # h = (1,0), (2,0), (0,1), (0,3): mu_1(+1) = 1.5, mu_2(+1) = 2, mu(-1) = 0
    np.testing.assert_allclose(rep.mu, [[0.0, 1.5], [0.0, 2.0]])
    assert rep.delta_bar == pytest.approx(1.0)
    np.testing.assert_allclose(
        rep.pure_sign_logits, [[1.5, 0.5], [1.5, 0.5], [0.0, 2.5], [0.0, 2.5]]
    )
    np.testing.assert_allclose(rep.residuals, [[-0.5, 0], [0.5, 0], [0, -1], [0, 1]])
    np.testing.assert_array_equal(rep.y_pred_sign, [0, 0, 1, 1])
    # group 0: margins 1, r^2 = mean(0.25, 0.25); group 1: margins 2.5, r^2 = 1
    np.testing.assert_allclose(rep.Z1, [2.0, 2.0, 2.5, 2.5])
    assert rep.median_Z1 == pytest.approx(2.25)
    assert rep.bound == pytest.approx(np.mean([0.25, 0.25, 0.16, 0.16]))
    assert rep.union_bound == pytest.approx(np.mean([0.25, 0.25, 0.16, 0.16]))
    assert rep.agreement == 1.0
    assert rep.eps_1 == 0.0
    # mu from other reference data: only unit 0 active there, unit 1 never +1
    rep = gate_dominance_report(_two_unit_net(), X, X_ref=np.array([[4.0]]))
    np.testing.assert_allclose(rep.mu, [[0.0, 4.0], [0.0, 0.0]])
    np.testing.assert_array_equal(rep.mu_counts, [[0, 1], [1, 0]])


def test_scorers_in_grid_search(digits):
    """Check the scorers work in GridSearchCV(scoring={...}) over hidden width."""
    X_train, _, y_train, _ = digits
    grid = GridSearchCV(
        _small(max_epochs=3),
        {"hidden_layer_sizes": [(16,), (32,)]},
        scoring={
            "accuracy": "accuracy",
            "flip": make_intervention_scorer(kind="sign_flip", random_state=0),
            "gd": gate_dominance,
        },
        refit="accuracy",
        cv=2,
    )
    grid.fit(X_train[:600], y_train[:600])
    for key in ("mean_test_accuracy", "mean_test_flip", "mean_test_gd"):
        assert np.all(np.isfinite(grid.cv_results_[key])), key
    assert np.all(grid.cv_results_["mean_test_flip"] <= 1.0)


def test_scorer_in_cross_validate(digits):
    """Check a fixed-setting scorer works in cross_validate."""
    X_train, _, y_train, _ = digits
    scorer = make_intervention_scorer(kind="magnitude", noise="matched", alpha=0.5)
    res = cross_validate(
        _small(max_epochs=2),
        X_train[:400],
        y_train[:400],
        cv=2,
        scoring={"mag": scorer, "gd": make_gate_dominance_scorer()},
    )
    assert res["test_mag"].shape == (2,)
    assert np.all((res["test_mag"] >= 0) & (res["test_mag"] <= 1))


def test_scorer_in_epoch_scoring(digits):
    """Check EpochScoring runs the scorer mid-fit without changing training."""
    from skorch.callbacks import EpochScoring
    from skorch.dataset import ValidSplit

    X_train, _, y_train, _ = digits
    X, y = X_train[:500], y_train[:500]
    scorer = make_intervention_scorer(kind="sign_flip", alpha=0.0)
    cb = EpochScoring(scorer, lower_is_better=False, on_train=True, name="flip")
    with_cb = _small(max_epochs=3, callbacks=[cb]).fit(X, y)
    plain = _small(max_epochs=3).fit(X, y)
    hist = with_cb.history
    assert len(hist[:, "flip"]) == 3
    # alpha=0 on the training data is the training accuracy after the epoch
    assert hist[-1, "flip"] == accuracy_score(y, with_cb.predict(X))
    # the scorer does not touch the training trajectory
    np.testing.assert_allclose(hist[:, "train_loss"], plain.history[:, "train_loss"])
    cb = EpochScoring(
        make_intervention_scorer(kind="magnitude", alpha=0.3, random_state=0),
        lower_is_better=False,
        name="mag_valid",
    )
    split = ValidSplit(5, stratified=True)
    net = _small(max_epochs=2, callbacks=[cb], train_split=split).fit(X, y)
    assert all(0.0 <= v <= 1.0 for v in net.history[:, "mag_valid"])


def test_pipeline(digits):
    """Check a Pipeline is unwrapped: X goes through its head first."""
    X_train, X_test, y_train, y_test = digits
    pipe = make_pipeline(StandardScaler(), _small(max_epochs=3)).fit(X_train, y_train)
    Xt = pipe[:-1].transform(X_test)
    for definition in DEFINITIONS:
        kw = {"alpha": 0.3, "random_state": 0, **definition}
        assert intervention_score(pipe, X_test, y_test, **kw) == intervention_score(
            pipe[-1], Xt, y_test, **kw
        )
    assert intervention_score(pipe, X_test, y_test, alpha=0.0) == pipe.score(
        X_test, y_test
    )
    assert gate_dominance(pipe, X_test) == gate_dominance(pipe[-1], Xt)


def test_frozen_estimators_are_read_as_the_net_they_hold(digits):
    """Check a FrozenEstimator (alone, or as a Pipeline's last step) scores as
    the fitted net inside it, for an sksign net and a scikit-learn MLP."""
    from sklearn.frozen import FrozenEstimator

    X_train, X_test, y_train, y_test = digits
    mlp = MLPClassifier((16,), max_iter=60, random_state=0).fit(X_train, y_train)
    net = _small(max_epochs=2).fit(X_train, y_train)
    scaler = StandardScaler().fit(X_train)
    Xt = scaler.transform(X_test)
    for fitted in (mlp, net):
        kw = {"alpha": 0.3, "random_state": 0}
        expected = intervention_score(fitted, X_test, y_test, **kw)
        frozen = FrozenEstimator(fitted)
        assert intervention_score(frozen, X_test, y_test, **kw) == expected
        assert gate_dominance(frozen, X_test) == gate_dominance(fitted, X_test)
        pipe = make_pipeline(scaler, frozen)
        assert intervention_score(pipe, X_test, y_test, **kw) == intervention_score(
            fitted, Xt, y_test, **kw
        )


@pytest.mark.parametrize("binary", [False, True])
def test_mlp_classifier(digits, binary):
    """Check scikit-learn's MLPClassifier is read from coefs_/intercepts_."""
    X_train, X_test, y_train, y_test = digits
    if binary:
        keep_tr, keep_te = y_train < 2, y_test < 2
        X_train, y_train = X_train[keep_tr], np.where(y_train[keep_tr], "b", "a")
        X_test, y_test = X_test[keep_te], np.where(y_test[keep_te], "b", "a")
    mlp = MLPClassifier(hidden_layer_sizes=(24, 16), max_iter=60, random_state=0).fit(
        X_train, y_train
    )
    for definition in DEFINITIONS:
        assert intervention_score(
            mlp, X_test, y_test, alpha=0.0, **definition
        ) == mlp.score(X_test, y_test)
    low = intervention_score(mlp, X_test, y_test, alpha=0.5, random_state=0)
    assert 0.0 <= low <= 1.0
    rep = gate_dominance_report(mlp, X_test, X_ref=X_train)
    assert rep.d == 16
    assert rep.C == (2 if binary else 10)
    np.testing.assert_allclose(rep.logits, rep.pure_sign_logits + rep.residuals)
    classes = mlp.classes_[rep.y_pred]
    np.testing.assert_array_equal(classes, mlp.predict(X_test))


def test_bare_module(digits):
    """Check a bare nn.Module (logits out, y as class indices) is scored."""
    X_train, X_test, y_train, y_test = digits
    net = _small(max_epochs=3).fit(X_train, y_train)
    module = net.module_
    clean = net.score(X_test, y_test)
    assert intervention_score(module, X_test, y_test, alpha=0.0) == clean
    assert gate_dominance(module, X_test) == gate_dominance(net, X_test)


def test_scorer_repr_and_pickle(net, digits):
    """Check the scorer's repr mirrors make_scorer and it pickles."""
    _, X_test, _, y_test = digits
    scorer = make_intervention_scorer(kind="magnitude", noise="matched", alpha=0.5)
    assert repr(scorer) == (
        "make_intervention_scorer(intervention_score, kind='magnitude', "
        "noise='matched', alpha=0.5)"
    )
    assert scorer.definition == "magnitude/matched"
    clone = pickle.loads(pickle.dumps(scorer))
    kw = {"random_state": 0}
    s = make_intervention_scorer(kind="magnitude", **kw)
    assert pickle.loads(pickle.dumps(s))(net, X_test, y_test) == s(net, X_test, y_test)
    assert repr(clone) == repr(scorer)
    assert "gate_dominance" in repr(make_gate_dominance_scorer())


def test_bad_input(net, digits):
    """Check bad parameters and inputs raise clear errors."""
    X_train, X_test, y_train, y_test = digits
    msg = (
        r"The 'alpha' parameter of intervention_score must be a float in the range "
        r"\[0.0, 1.0\]. Got 1.5 instead."
    )
    with pytest.raises(ValueError, match=msg):
        intervention_score(net, X_test, y_test, alpha=1.5)
    with pytest.raises(ValueError, match="'kind' parameter of intervention_score"):
        intervention_score(net, X_test, y_test, kind="shuffle")
    with pytest.raises(ValueError, match="'flip' parameter"):
        intervention_score(net, X_test, y_test, flip="half")
    with pytest.raises(ValueError, match="'noise' parameter"):
        intervention_score(net, X_test, y_test, noise="pink")
    with pytest.raises(ValueError, match="'n_repeats' parameter"):
        intervention_score(net, X_test, y_test, n_repeats=0)
    with pytest.raises(ValueError, match="'alpha' parameter of make_intervention"):
        make_intervention_scorer(alpha=-0.1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        make_intervention_scorer(beta=1)
    X_nan = X_test.copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        intervention_score(net, X_nan, y_test)
    with pytest.raises(ValueError, match="NaN"):
        gate_dominance(
            make_pipeline(StandardScaler(), net).fit(X_train, y_train), X_nan
        )
    with pytest.raises(NotFittedError):
        intervention_score(_small(), X_test, y_test)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        intervention_score(net, X_test, y_test[:-1])
    reg = MLPRegressor(hidden_layer_sizes=(8,), max_iter=5).fit(
        X_train[:50], y_train[:50]
    )
    with pytest.raises(TypeError, match="needs a classifier"):
        intervention_score(reg, X_test, y_test)
    with pytest.raises(TypeError, match="needs a classifier"):
        gate_dominance(reg, X_test)
    sig = nn.Sequential(nn.Linear(64, 8), nn.Sigmoid(), nn.Linear(8, 10))
    with pytest.raises(ValueError, match="no sign-preserving activation module"):
        intervention_score(sig, X_test, y_test)
    with pytest.raises(ValueError, match="no sign-preserving activation module"):
        gate_dominance(sig, X_test)
    with pytest.raises(ValueError, match="integer class indices"):
        intervention_score(net.module_, X_test, y_test.astype(str))
    logistic = MLPClassifier(hidden_layer_sizes=(4,), activation="logistic", max_iter=5)
    logistic.fit(X_train[:50], y_train[:50])
    with pytest.raises(ValueError, match="sign-preserving"):
        intervention_score(logistic, X_test, y_test)


def test_plain_skorch_net_is_scored_on_logit_indices():
    """Check a plain skorch classifier (labels 1..C) is scored as it predicts."""
    from skorch import NeuralNetClassifier

    X, y = load_iris(return_X_y=True)
    X = X.astype(np.float32)
    torch.manual_seed(0)
    net = NeuralNetClassifier(
        nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 4)),
        criterion=nn.CrossEntropyLoss,
        optimizer=torch.optim.Adam,
        max_epochs=50,
        lr=0.05,
        train_split=None,
        verbose=0,
    ).fit(X, y + 1)  # skorch trains on y as logit indices: class 0 is never seen
    own = float(np.mean(net.predict(X) == y + 1))
    assert own > 0.5
    assert intervention_score(net, X, y + 1, alpha=0.0) == own


def test_targets_that_cannot_be_scored_raise():
    """Check NaN y, indices outside the logits and a mis-sized X_ref are named."""
    X, y = load_iris(return_X_y=True)
    mlp = MLPClassifier((8,), max_iter=50, random_state=0).fit(X, y)
    y_nan = y.astype(float)
    y_nan[0] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        intervention_score(mlp, X, y_nan)
    with pytest.raises(ValueError, match=r"X_ref has 3 features.*expecting 4"):
        intervention_score(mlp, X, y, kind="magnitude", noise="matched", X_ref=X[:, :3])
    module = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).double()
    for bad in (y + 5, y - 1):
        with pytest.raises(ValueError, match=r"y must be in \[0, 2\]"):
            intervention_score(module, X, bad)
    # labels a fitted classifier does not know count as wrong, as in
    # scikit-learn's accuracy (a test fold may hold a class its training lacked)
    assert intervention_score(mlp, X, np.where(y == 2, 7, y), alpha=0.0) < 1.0


def test_identity_mlp_classifier_is_scored():
    """Check an identity MLPClassifier is accepted: its hidden sign is z's sign.

    The scorers and SignCodeTransformer share one allow-list of sign-preserving
    scikit-learn activations, ("identity", "relu", "tanh").
    """
    X, y = load_iris(return_X_y=True)
    mlp = MLPClassifier((8,), activation="identity", max_iter=300, random_state=0)
    mlp.fit(X, y)
    assert intervention_score(mlp, X, y, alpha=0.0) == mlp.score(X, y)
    rep = gate_dominance_report(mlp, X)
    assert rep.layer == "hidden0"
    assert rep.d == 8
    np.testing.assert_allclose(rep.logits, rep.pure_sign_logits + rep.residuals)


def test_gate_dominance_from_activations_matches_report(net, digits):
    """Check the pure function gives the report of the net from its arrays."""
    X_train, X_test, _, _ = digits
    rep = gate_dominance_report(net, X_test, X_ref=X_train)
    X = np.asarray(X_test, dtype=np.float32)
    ref = np.asarray(X_train, dtype=np.float32)
    module = net.module_
    with torch.no_grad():
        z = module.fc0(torch.from_numpy(X)).double().numpy()
        z_ref = module.fc0(torch.from_numpy(ref)).double().numpy()
    W = module.out.weight.detach().double().numpy()
    b = module.out.bias.detach().double().numpy()
    pure = gate_dominance_from_activations(
        z,
        np.maximum(z, 0),
        W,
        b,
        z_ref=z_ref,
        h_ref=np.maximum(z_ref, 0),
        layer="act0",
        readout="out",
    )
    assert repr(pure) == repr(rep)
    for name in ("mu", "mu_counts", "signs", "y_pred_sign", "Z1"):
        np.testing.assert_array_equal(getattr(pure, name), getattr(rep, name))
    np.testing.assert_allclose(pure.logits, rep.logits)


def test_gate_dominance_from_activations_by_hand_and_bad_input():
    """Check the pure function on the 2-unit example and its input checks."""
    z = np.array([[1.0, -1.0], [2.0, -2.0], [-1.0, 1.0], [-3.0, 3.0]])
    h = np.maximum(z, 0)
    rep = gate_dominance_from_activations(z, h, np.eye(2), [0.0, 0.5])
    np.testing.assert_allclose(rep.Z1, [2.0, 2.0, 2.5, 2.5])
    assert rep.layer == "hidden"
    assert rep.readout == "readout"
    # no bias: zeros
    no_b = gate_dominance_from_activations(z, h, np.eye(2))
    np.testing.assert_allclose(no_b.logits, h)
    with pytest.raises(InvalidParameterError, match="'layer' parameter"):
        gate_dominance_from_activations(z, h, np.eye(2), layer=3)
    with pytest.raises(ValueError, match="same shape"):
        gate_dominance_from_activations(z, h[:, :1], np.eye(2))
    with pytest.raises(ValueError, match="given together"):
        gate_dominance_from_activations(z, h, np.eye(2), z_ref=z)
    with pytest.raises(ValueError, match="has 3 inputs but layer 'hidden' has 2"):
        gate_dominance_from_activations(z, h, np.ones((2, 3)))
    with pytest.raises(ValueError, match=">= 2 logits"):
        gate_dominance_from_activations(z, h, np.ones((1, 2)))
    with pytest.raises(ValueError, match="b has 3 entries"):
        gate_dominance_from_activations(z, h, np.eye(2), np.zeros(3))
    with pytest.raises(ValueError, match="Input z contains NaN"):
        gate_dominance_from_activations(np.full_like(z, np.nan), h, np.eye(2))


def test_intervention_score_takes_call_keys(digits):
    """Check a call key (as a fitted SignCodeTransformer's ``layers_`` name a
    reused module's calls) corrupts that call only: literal flips of the
    second call of one ReLU module give the accuracy of those logits."""
    X, _, y, _ = digits

    class Reused(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(X.shape[1], 16), nn.Linear(16, 16)
            self.act, self.head = nn.ReLU(), nn.Linear(16, 10)

        def forward(self, x):
            return self.head(self.act(self.b(self.act(self.a(x)))))

    torch.manual_seed(0)
    module = Reused().eval()
    with torch.no_grad():
        xt = torch.from_numpy(X)
        logits = module.head(-torch.relu(module.b(torch.relu(module.a(xt)))))
    expected = float(np.mean(logits.argmax(1).numpy() == y))
    got = intervention_score(module, X, y, layers=["act#1"], alpha=1.0)
    assert got == pytest.approx(expected)
    assert got != intervention_score(module, X, y, layers=["act"], alpha=1.0)
