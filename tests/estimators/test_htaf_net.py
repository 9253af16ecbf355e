"""Tests for HTAFNetClassifier and HTAFNetRegressor."""

import pickle

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from skorch.callbacks import EarlyStopping
from skorch.dataset import ValidSplit

from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor
from sksign.nn.activations import HTAF, ScaledSigmoid, STEHeaviside, htaf_grid

FAST = {"hidden_layer_sizes": (32,), "max_epochs": 4, "random_state": 0}


@pytest.fixture(scope="module")
def fitted(digits):
    X_train, _, y_train, _ = digits
    return HTAFNetClassifier(**FAST).fit(X_train, y_train)


def test_htaf_net_learns_digits_with_exact_step(digits):
    """Check an HTAF DHN reaches high test accuracy with the step at inference."""
    X_train, X_test, y_train, y_test = digits
    clf = HTAFNetClassifier((128,), max_epochs=15, random_state=0)
    clf.fit(X_train, y_train)
    assert clf.score(X_test, y_test) > 0.93
    acts = [m for m in clf.module_.modules() if isinstance(m, HTAF)]
    assert acts
    assert not clf.module_.training
    # The hidden layer is exactly binary at inference.
    seen = []
    h = acts[0].register_forward_hook(lambda m, i, o: seen.append(o))
    clf.predict(X_test[:20])
    h.remove()
    assert torch.all((seen[0] == 0) | (seen[0] == 1))


@pytest.mark.parametrize(
    ("activation", "module_type"),
    [
        ("htaf", HTAF),
        ("ste", STEHeaviside),
        ("scaled_sigmoid", ScaledSigmoid),
        ("relu", torch.nn.ReLU),
        ("silu", torch.nn.SiLU),
        ("gelu", torch.nn.GELU),
        ("tanh", torch.nn.Tanh),
    ],
)
def test_every_activation_builds_and_trains(digits, activation, module_type):
    """Check each activation name builds its module and trains above chance."""
    X_train, X_test, y_train, y_test = digits
    clf = HTAFNetClassifier(activation=activation, **FAST).fit(X_train, y_train)
    assert isinstance(clf.module_.act0, module_type)
    assert clf.score(X_test, y_test) > 0.5


def test_scaled_sigmoid_slope_matches_htaf(digits):
    """Check scaled_sigmoid uses k = alpha0 * alpha1."""
    X_train, _, y_train, _ = digits
    clf = HTAFNetClassifier(
        activation="scaled_sigmoid", alpha0=3.0, alpha1=7.0, **FAST
    ).fit(X_train[:50], y_train[:50])
    assert clf.module_.act0.k == 21.0


def test_string_labels_and_pandas(digits):
    """Check string labels come back from predict and DataFrame names are kept."""
    X_train, X_test, y_train, _ = digits
    names = np.array([f"digit_{d}" for d in range(10)])
    cols = [f"px{i}" for i in range(X_train.shape[1])]
    clf = HTAFNetClassifier(**FAST).fit(
        pd.DataFrame(X_train, columns=cols), names[y_train]
    )
    assert list(clf.classes_) == sorted(names)
    pred = clf.predict(pd.DataFrame(X_test, columns=cols))
    assert set(pred) <= set(names)
    assert list(clf.feature_names_in_) == cols
    assert clf.n_features_in_ == 64


def test_same_random_state_same_model(digits):
    """Check the same random_state gives identical weights and predictions."""
    X_train, X_test, y_train, _ = digits
    a = HTAFNetClassifier(**FAST).fit(X_train, y_train)
    b = HTAFNetClassifier(**FAST).fit(X_train, y_train)
    c = HTAFNetClassifier(**{**FAST, "random_state": 1}).fit(X_train, y_train)
    for pa, pb in zip(a.module_.parameters(), b.module_.parameters()):
        assert torch.equal(pa, pb)
    np.testing.assert_array_equal(a.predict_proba(X_test), b.predict_proba(X_test))
    assert not np.array_equal(a.predict_proba(X_test), c.predict_proba(X_test))


def test_cnn_on_images_and_flat_rows(digits):
    """Check the CNN takes 4-D images or flat rows with an inferred shape."""
    X_train, X_test, y_train, y_test = digits
    images = X_train.reshape(-1, 1, 8, 8)
    common = {
        "architecture": "cnn",
        "hidden_layer_sizes": (32,),
        "max_epochs": 6,
        # the recipe for short fits: "auto" anneals alpha0 over the 6 epochs
        "lr_schedule": "constant",
        "alpha0_start": None,
        "random_state": 0,
    }
    a = HTAFNetClassifier(**common).fit(images, y_train)
    b = HTAFNetClassifier(**common).fit(X_train, y_train)
    assert a.input_shape_ == b.input_shape_ == (1, 8, 8)
    np.testing.assert_array_equal(
        a.predict(X_test.reshape(-1, 1, 8, 8)), b.predict(X_test)
    )
    assert a.score(X_test.reshape(-1, 1, 8, 8), y_test) > 0.5
    with pytest.raises(ValueError, match="input_shape"):
        HTAFNetClassifier(architecture="cnn", max_epochs=1).fit(
            np.zeros((10, 10)), np.arange(10) % 2
        )


def test_grid_search_over_alphas_in_parallel(digits):
    """Check GridSearchCV grids alpha0/alpha1 directly, with n_jobs=2."""
    X_train, _, y_train, _ = digits
    grid = GridSearchCV(
        HTAFNetClassifier(**FAST, lr=1e-2),
        htaf_grid(22.0, alpha0=(1.0, 2.0)),
        cv=2,
        n_jobs=2,
    ).fit(X_train[:600], y_train[:600])
    assert len(grid.cv_results_["params"]) == 2
    assert grid.best_estimator_.alpha0 * grid.best_estimator_.alpha1 == 22.0
    a0 = grid.best_estimator_.alpha0
    act = grid.best_estimator_.module_.act0
    assert (act.alpha0, act.alpha1) == (a0, 22.0 / a0)
    assert grid.best_score_ > 0.5


@pytest.mark.parametrize("method", ["predict_proba", "decision_function"])
def test_outputs_invariant_to_batch_subsets(fitted, digits, method):
    """Check a step net's outputs for a row do not depend on its batch: one
    row at a time, blocks of 7 and the reversed batch give the full-batch
    values exactly (hidden units are bits, the readout sums in float64)."""
    _, X_test, _, _ = digits
    full = getattr(fitted, method)(X_test)
    parts = np.concatenate(
        [getattr(fitted, method)(X_test[i : i + 7]) for i in range(0, len(X_test), 7)]
    )
    np.testing.assert_array_equal(parts, full)
    rows = np.concatenate(
        [getattr(fitted, method)(X_test[i : i + 1]) for i in range(40)]
    )
    np.testing.assert_array_equal(rows, full[:40])
    np.testing.assert_array_equal(getattr(fitted, method)(X_test[::-1])[::-1], full)


def test_clone_pickle_joblib_round_trips(fitted, digits, tmp_path):
    """Check clone keeps params and pickle/joblib keep predictions exactly."""
    _, X_test, _, _ = digits
    expected = fitted.predict_proba(X_test)
    params = clone(fitted).get_params(deep=False)
    assert params["alpha0"] == fitted.alpha0
    assert params["hidden_layer_sizes"] == (32,)
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(fitted)).predict_proba(X_test), expected
    )
    joblib.dump(fitted, tmp_path / "net.joblib")
    np.testing.assert_array_equal(
        joblib.load(tmp_path / "net.joblib").predict_proba(X_test), expected
    )


def test_relaxation_gap_callback_records_history(digits):
    """Check the relaxation gap callback fills history_ on the validation split."""
    X_train, _, y_train, _ = digits
    clf = HTAFNetClassifier(**FAST, train_split=ValidSplit(5), relaxation_gap=True).fit(
        X_train, y_train
    )
    row = clf.history_[-1]
    for key in ("valid_acc_smooth", "valid_acc_step", "binarization_rate"):
        assert 0.0 <= row[key] <= 1.0
    assert row["relaxation_gap"] == pytest.approx(
        row["valid_acc_smooth"] - row["valid_acc_step"]
    )
    # The step accuracy is the net's own inference accuracy on the split.
    assert "valid_acc" in row
    assert row["valid_acc_step"] == pytest.approx(row["valid_acc"])


def test_relaxation_gap_auto_follows_verbose(digits, capsys):
    """Check the callback is on with verbose and off without; output prints."""
    X_train, _, y_train, _ = digits
    quiet = HTAFNetClassifier(**FAST).fit(X_train[:200], y_train[:200])
    assert "relaxation_gap" not in quiet.history_[-1]
    loud = HTAFNetClassifier(**FAST, verbose=1).fit(X_train[:200], y_train[:200])
    assert "train_acc_step" in loud.history_[-1]
    assert "binarization_rate" in capsys.readouterr().out
    relu = HTAFNetClassifier(**FAST, activation="relu", relaxation_gap=True)
    relu.fit(X_train[:200], y_train[:200])
    assert "relaxation_gap" not in relu.history_[-1]


def test_skorch_callbacks_still_work(digits):
    """Check EarlyStopping and a validation split work as in skorch."""
    X_train, _, y_train, _ = digits
    clf = HTAFNetClassifier(
        (32,),
        max_epochs=200,
        random_state=0,
        train_split=ValidSplit(5),
        callbacks=[EarlyStopping(patience=2, threshold=0.5)],
    ).fit(X_train, y_train)
    assert len(clf.history_) < 200


def test_regressor_1d_and_2d_targets():
    """Check the regressor fits 1-D and 2-D y and returns the same ndim."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5)).astype(np.float32)
    y = X @ np.array([1.0, -2.0, 0.5, 0.0, 1.0])
    reg = HTAFNetRegressor((64,), activation="relu", max_epochs=60, random_state=0)
    pred = reg.fit(X, y).predict(X)
    assert pred.shape == (300,)
    assert reg.score(X, y) > 0.9
    Y = np.column_stack([y, -y])
    pred2 = clone(reg).fit(X, Y).predict(X)
    assert pred2.shape == (300, 2)
    assert not hasattr(reg, "predict_proba")


def test_partial_fit_continues_training(digits):
    """Check partial_fit keeps weights and adds epochs."""
    X_train, _, y_train, _ = digits
    clf = HTAFNetClassifier(**FAST)
    clf.partial_fit(X_train, y_train, classes=np.arange(10))
    w = clf.module_.fc0.weight.detach().clone()
    clf.partial_fit(X_train, y_train)
    assert len(clf.history_) == 2 * FAST["max_epochs"]
    assert not torch.equal(w, clf.module_.fc0.weight)


# -- bad input --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("X_bad", "match"),
    [
        (np.full((5, 64), np.nan), "NaN"),
        (np.full((5, 64), np.inf), "infinity"),
        (np.zeros((5, 63)), "63 features"),
        (np.array([["a"] * 64] * 5), "could not convert|string"),
    ],
)
def test_bad_predict_input_leaves_model_intact(fitted, digits, X_bad, match):
    """Check bad input at predict raises a clear error and changes nothing."""
    _, X_test, _, _ = digits
    before = fitted.predict_proba(X_test)
    with pytest.raises(ValueError, match=match):
        fitted.predict(X_bad)
    np.testing.assert_array_equal(fitted.predict_proba(X_test), before)


def test_predict_before_fit():
    """Check predict on an unfitted net raises NotFittedError."""
    with pytest.raises(NotFittedError):
        HTAFNetClassifier().predict(np.zeros((2, 3)))
    with pytest.raises(NotFittedError):
        HTAFNetRegressor().predict(np.zeros((2, 3)))


def test_one_class_y():
    """Check y with a single class is refused with a message naming it."""
    with pytest.raises(ValueError, match="only one class"):
        HTAFNetClassifier(max_epochs=1).fit(np.zeros((4, 2)), ["a"] * 4)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"activation": "sigmoid"}, "activation"),
        ({"architecture": "rnn"}, "architecture"),
        ({"alpha0": -1.0}, "alpha0"),
        ({"alpha1": 0}, "alpha1"),
        ({"relaxation_gap": "yes"}, "relaxation_gap"),
    ],
)
def test_bad_parameters_raise_at_fit(params, match):
    """Check invalid parameters raise a ValueError naming the parameter at fit."""
    X, y = np.zeros((6, 2)), np.array([0, 1] * 3)
    clf = HTAFNetClassifier(max_epochs=1, **params)
    with pytest.raises(ValueError, match=match):
        clf.fit(X, y)


def test_mismatched_lengths():
    """Check X and y of different lengths are refused."""
    with pytest.raises(ValueError, match="inconsistent"):
        HTAFNetClassifier(max_epochs=1).fit(np.zeros((6, 2)), [0, 1, 0])
    with pytest.raises(ValueError, match="inconsistent"):
        HTAFNetRegressor(max_epochs=1).fit(np.zeros((6, 2)), [0.0, 1.0])
