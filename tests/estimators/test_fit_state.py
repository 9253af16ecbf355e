"""A fit that fails leaves the net as it was; warm starts and partial fits check data.

For HTAFNetClassifier, HTAFNetRegressor and ICBMClassifier: parameters are
checked before anything changes, a fit that fails anywhere (parameters, data,
fit_params, the first training step) restores the fitted state, and
``warm_start`` / ``partial_fit`` refuse data that does not match the net they
continue.
"""

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted
from torch import nn

from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor, ICBMClassifier

FAST = {"max_epochs": 3, "random_state": 0}


@pytest.fixture(scope="module")
def data(digits):
    X_train, _, y_train, _ = digits
    return X_train[:300], y_train[:300]


def _snapshot(est, X):
    """What a fitted net is: its outputs, attributes and weights."""
    out = est.predict_proba(X) if hasattr(est, "predict_proba") else est.predict(X)
    return (
        out,
        est.n_features_in_,
        len(est.history_),
        {k: v.clone() for k, v in est.module_.state_dict().items()},
    )


def _assert_unchanged(est, X, snap):
    out, n_features, n_epochs, weights = snap
    again = est.predict_proba(X) if hasattr(est, "predict_proba") else est.predict(X)
    np.testing.assert_array_equal(again, out)
    assert est.n_features_in_ == n_features
    assert len(est.history_) == n_epochs
    state = est.module_.state_dict()
    assert state.keys() == weights.keys()
    assert all(torch.equal(state[k], weights[k]) for k in weights)


def _nets():
    return {
        "classifier": HTAFNetClassifier((16,), **FAST),
        "regressor": HTAFNetRegressor((16,), **FAST),
        "icbm": ICBMClassifier(n_concepts=4, hidden_layer_sizes=(16,), **FAST),
    }


def _targets(name, y):
    return y.astype(np.float32) if name == "regressor" else y


@pytest.mark.parametrize("name", ["classifier", "regressor", "icbm"])
@pytest.mark.parametrize(
    "failure",
    ["bad_param", "other_data_bad_param", "bad_fit_params", "bad_max_epochs"],
)
def test_failed_refit_leaves_the_fitted_net(name, failure, data):
    """Check a refit that fails at any stage leaves predictions and weights alone."""
    X, y = data
    est = _nets()[name].fit(X, _targets(name, y))
    snap = _snapshot(est, X)
    good = est.get_params()
    if failure == "bad_param":
        bad, args, kwargs = {"alpha0": -1.0}, (X, _targets(name, y)), {}
        err, match = ValueError, "'alpha0'"
    elif failure == "other_data_bad_param":
        # new data of another width and a parameter that only fails when the
        # module is built: the net must not keep the new width
        key = "n_concepts" if name == "icbm" else "hidden_layer_sizes"
        value = 0 if name == "icbm" else (0,)
        bad, args, kwargs = {key: value}, (X[:, :10], _targets(name, y)), {}
        err, match = ValueError, None
    elif failure == "bad_fit_params":
        # reaches the module's forward, after the net was re-initialised
        bad, args = {}, (X, _targets(name, y))
        kwargs = {"row_mask": np.ones(len(X))}
        err, match = TypeError, "row_mask"
    else:
        bad, args, kwargs = {"max_epochs": 0}, (X, _targets(name, y)), {}
        err, match = ValueError, "'max_epochs'"
    est.set_params(**bad)
    with pytest.raises(err, match=match):
        est.fit(*args, **kwargs)
    # put back only what was changed (setting skorch's module, optimizer or
    # callbacks parameters re-initialises a net by skorch's design)
    est.set_params(**{key: good[key] for key in bad})
    _assert_unchanged(est, X, snap)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"sign_repulsion": -5.0}, "'sign_repulsion'.*non-negative real"),
        ({"sign_repulsion": float("nan")}, "'sign_repulsion'"),
        ({"repulsion_tau": 0.0}, "'repulsion_tau'.*positive real"),
        ({"repulsion_warmup": -1}, "'repulsion_warmup'.*>= 0"),
        ({"repulsion_ramp": 2.5}, "'repulsion_ramp'.*integer"),
        ({"max_epochs": -1}, "'max_epochs'.*>= 1"),
        ({"max_epochs": 2.0}, "'max_epochs'.*integer"),
        ({"lr": 0.0}, "'lr'.*positive real"),
        ({"lr": float("inf")}, "'lr'.*positive real.*Got inf"),
        ({"batch_size": 0}, "'batch_size'.*-1"),
        ({"batch_size": True}, "'batch_size'"),
        # resolved on the built net before any epoch, even one the warm-up
        # would never reach
        (
            {"sign_repulsion": 1.0, "repulsion_layers": "nope", "repulsion_warmup": 99},
            "layer 'nope' was not found",
        ),
    ],
)
def test_bad_hyperparameters_are_refused_before_training(params, match, data):
    """Check each hyperparameter is checked at the start of fit, naming it."""
    X, y = data
    clf = HTAFNetClassifier((8,), **{**FAST, **params})
    with pytest.raises(ValueError, match=match):
        clf.fit(X, y)
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)
    # batch_size=-1 (the whole data set) is skorch's convention and accepted
    HTAFNetClassifier((8,), batch_size=-1, max_epochs=1).fit(X[:50], y[:50])


def test_warm_start_refuses_other_widths_and_targets(data):
    """Check warm_start refuses a change of features or targets before training."""
    X, y = data
    reg = HTAFNetRegressor((16,), warm_start=True, **FAST).fit(X, y.astype(float))
    snap = _snapshot(reg, X)
    with pytest.raises(ValueError, match=r"y has 2 targets.*fitted with 1"):
        reg.fit(X, np.column_stack([y, y]).astype(float))
    with pytest.raises(ValueError, match=r"10 features.*expecting 64"):
        reg.fit(X[:, :10], y.astype(float))
    _assert_unchanged(reg, X, snap)

    clf = HTAFNetClassifier((16,), warm_start=True, **FAST).fit(X, y)
    snap = _snapshot(clf, X)
    with pytest.raises(ValueError, match=r"10 features.*expecting 64"):
        clf.fit(X[:, :10], y)
    with pytest.raises(ValueError, match="warm_start=True needs the same classes"):
        clf.fit(X, y % 3)
    _assert_unchanged(clf, X, snap)
    # the same data goes on training the same net
    w = clf.module_.fc0.weight.detach().clone()
    clf.fit(X, y)
    assert len(clf.history_) == 2 * FAST["max_epochs"]
    assert not torch.equal(w, clf.module_.fc0.weight)


def test_partial_fit_checks_classes_and_labels(data):
    """Check partial_fit: no half-fitted net, fixed classes, unseen labels named."""
    X, y = data
    clf = HTAFNetClassifier((8,), **FAST)
    with pytest.raises(ValueError, match=r"labels \[2, 3.*not among the classes"):
        clf.partial_fit(X, y, classes=[0, 1])
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)
    assert not hasattr(clf, "label_encoder_")

    clf.partial_fit(X[y < 5], y[y < 5], classes=np.arange(10))
    snap = _snapshot(clf, X)
    with pytest.raises(ValueError, match=r"classes=.*not the same as on the first"):
        clf.partial_fit(X, y, classes=["x", "y"])
    with pytest.raises(ValueError, match=r"labels \['a'\] that are not among"):
        clf.partial_fit(X[:3], np.array(["a", "a", "a"]))
    _assert_unchanged(clf, X, snap)
    clf.partial_fit(X, y, classes=np.arange(10)[::-1])  # the same set is fine
    assert len(clf.history_) == 2 * FAST["max_epochs"]


def test_skorch_classes_parameter_is_honoured(data):
    """Check skorch's `classes` parameter fixes classes_ (sorted, as scikit-learn)."""
    X, y = data
    keep = y < 2
    clf = HTAFNetClassifier((8,), classes=[3, 1, 0, 2], **FAST)
    clf.fit(X[keep], y[keep])
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2, 3])
    assert clf.predict_proba(X).shape == (len(X), 4)
    with pytest.raises(ValueError, match=r"labels \[4, 5.*not among the classes"):
        HTAFNetClassifier((8,), classes=[0, 1, 2, 3], **FAST).fit(X, y)


def test_image_shape_must_match_not_only_its_size(digits):
    """Check a CNN refuses images of another shape with the same pixel count."""
    X_train, X_test, y_train, _ = digits
    cnn = HTAFNetClassifier(architecture="cnn", conv_channels=(4,), **FAST)
    cnn.fit(X_train[:200].reshape(-1, 1, 8, 8), y_train[:200])
    with pytest.raises(ValueError, match=r"images of shape \(1, 4, 16\).*\(1, 8, 8\)"):
        cnn.predict(X_test.reshape(-1, 1, 4, 16))
    flat = cnn.predict(X_test)
    np.testing.assert_array_equal(cnn.predict(X_test.reshape(-1, 8, 8)), flat)
    np.testing.assert_array_equal(cnn.predict(X_test.reshape(-1, 1, 8, 8)), flat)


class _DropoutNet(nn.Module):
    """A user architecture with dropout: randomness inside training."""

    def __init__(self, n_features, n_outputs):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(n_features, 32),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(32, n_outputs),
        )

    def forward(self, x):
        return self.body(x)


def _weights(est):
    return {k: v.clone() for k, v in est.module_.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("kind", ["architecture", "icbm_backbone"])
def test_random_state_fixes_dropout_whatever_the_global_seed(kind, data):
    """Check a seeded fit gives the same model under any global torch seed."""
    X, y = data
    # the user's backbone (its own initial weights) is the same for every fit
    backbone = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Dropout(0.5))

    def make(seed):
        if kind == "architecture":
            return HTAFNetClassifier(
                architecture=_DropoutNet, **{**FAST, "random_state": seed}
            )
        return ICBMClassifier(backbone, n_concepts=4, **{**FAST, "random_state": seed})

    fits = []
    for global_seed in (5, 6):
        torch.manual_seed(global_seed)
        fits.append(_weights(make(0).fit(X, y)))
    assert _same(*fits)
    assert not _same(fits[0], _weights(make(1).fit(X, y)))


def test_fit_and_predict_leave_the_global_rng_alone(data):
    """Check seeded fits (with the RelaxationGap callback) and inference never
    draw from torch's global RNG."""
    X, y = data
    state = torch.get_rng_state()
    clf = HTAFNetClassifier((8,), relaxation_gap=True, **FAST).fit(X, y)
    clf.predict_proba(X)
    clf.predict(X)
    clf.decision_function(X)
    icbm = ICBMClassifier(n_concepts=4, hidden_layer_sizes=(8,), **FAST).fit(X, y)
    icbm.transform(X)
    HTAFNetRegressor((8,), **FAST).fit(X, y.astype(np.float32)).predict(X)
    assert torch.equal(state, torch.get_rng_state())


def test_input_shape_must_agree_with_image_input(digits):
    """Check fit refuses an input_shape that contradicts 4-D X."""
    X_train, _, y_train, _ = digits
    X4 = X_train[:100].reshape(-1, 1, 8, 8)
    with pytest.raises(ValueError, match=r"images of shape \(1, 8, 8\).*input_shape="):
        HTAFNetClassifier(architecture="cnn", input_shape=(1, 4, 16), **FAST).fit(
            X4, y_train[:100]
        )
    agreed = HTAFNetClassifier(architecture="cnn", input_shape=(1, 8, 8), **FAST)
    agreed.fit(X4, y_train[:100])
    assert agreed.predict(X4).shape == (100,)


def test_architecture_instance_is_explained_at_fit(data):
    """Check an nn.Module instance as architecture gets the parameter's error."""
    X, y = data
    clf = HTAFNetClassifier(architecture=nn.Linear(64, 10), **FAST)  # no error yet
    with pytest.raises(ValueError, match=r"Pass the class.*not an instance"):
        clf.fit(X, y)


def test_early_stopping_without_validation_data_is_explained(data):
    """Check EarlyStopping on valid_loss with train_split=None gets a clear error."""
    from skorch.callbacks import EarlyStopping
    from skorch.dataset import ValidSplit

    X, y = data
    with pytest.raises(
        ValueError, match=r"EarlyStopping.*train_split=None.*ValidSplit"
    ):
        HTAFNetClassifier((8,), callbacks=[EarlyStopping()], **FAST).fit(X, y)
    # either remedy works
    HTAFNetClassifier(
        (8,), callbacks=[EarlyStopping(monitor="train_loss")], **FAST
    ).fit(X, y)
    HTAFNetClassifier(
        (8,), callbacks=[EarlyStopping()], train_split=ValidSplit(3), **FAST
    ).fit(X, y)
