"""HTAFNetRegressor's target standardisation (``standardize_target``)."""

import inspect

import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sksign._compat import InvalidParameterError
from sksign.estimators import HTAFNetRegressor

FAST = {"hidden_layer_sizes": (16,), "max_epochs": 3, "random_state": 0}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4)).astype(np.float32)
    y = 300.0 + 40.0 * (X @ np.array([1.0, -0.5, 0.25, 0.0]))
    return X, y


def test_standardisation_equals_hand_computation(data):
    """Check a fit on y equals the seeded net fitted on (y - m) / s, mapped back."""
    X, y = data
    reg = HTAFNetRegressor(**FAST).fit(X, y)
    m, s = y.mean(), y.std()
    np.testing.assert_allclose(reg.target_mean_, [m])
    np.testing.assert_allclose(reg.target_scale_, [s])

    by_hand = HTAFNetRegressor(standardize_target=False, **FAST).fit(X, (y - m) / s)
    np.testing.assert_allclose(
        reg.predict(X), by_hand.predict(X) * s + m, rtol=0, atol=1e-5 * s
    )
    # the loss the net trained on is that of the standardised targets
    np.testing.assert_allclose(
        reg.history_[:, "train_loss"], by_hand.history_[:, "train_loss"], rtol=1e-6
    )


def test_off_switch_trains_on_raw_targets(data):
    """Check standardize_target=False keeps the identity and the raw-target loss."""
    X, y = data
    reg = HTAFNetRegressor(standardize_target=False, **FAST).fit(X, y)
    np.testing.assert_array_equal(reg.target_mean_, [0.0])
    np.testing.assert_array_equal(reg.target_scale_, [1.0])
    # a net starting near 0 on targets around 300: a loss in the tens of
    # thousands, where the standardised one starts near 1
    assert reg.history_[0, "train_loss"] > 1e4
    on = HTAFNetRegressor(**FAST).fit(X, y)
    assert on.history_[0, "train_loss"] < 10


def test_standardize_target_is_validated(data):
    """Check a non-boolean standardize_target is refused by the constraints."""
    X, y = data
    with pytest.raises(InvalidParameterError, match="standardize_target"):
        HTAFNetRegressor(standardize_target="yes", **FAST).fit(X, y)


def test_constant_target_does_not_divide_by_zero(data):
    """Check a constant target column keeps scale 1 and predicts its value."""
    X, y = data
    reg = HTAFNetRegressor(**FAST).fit(X, np.full(len(X), 7.5))
    np.testing.assert_array_equal(reg.target_scale_, [1.0])
    np.testing.assert_array_equal(reg.target_mean_, [7.5])
    pred = reg.predict(X)
    assert np.all(np.isfinite(pred))
    # scale 1: the net's own (standardised) output, shifted by the constant
    raw = reg.forward(X.astype(np.float32), training=False).numpy().ravel()
    np.testing.assert_allclose(pred, raw + 7.5, atol=1e-6)

    Y = np.column_stack([y, np.full(len(X), -2.0)])
    reg2 = HTAFNetRegressor(**FAST).fit(X, Y)
    np.testing.assert_allclose(reg2.target_scale_, [y.std(), 1.0])
    assert np.all(np.isfinite(reg2.predict(X)))


def test_multi_output_scales_each_column(data):
    """Check each target column gets its own mean and scale, in 2-D predictions."""
    X, y = data
    Y = np.column_stack([y, 1e-3 * y - 5.0])
    reg = HTAFNetRegressor((32,), max_epochs=100, batch_size=32, random_state=0)
    reg.fit(X, Y)
    np.testing.assert_allclose(reg.target_mean_, Y.mean(0))
    np.testing.assert_allclose(reg.target_scale_, Y.std(0))
    pred = reg.predict(X)
    assert pred.shape == (len(X), 2)
    # both columns are the same signal: both are fitted equally well
    r2 = 1 - ((pred - Y) ** 2).sum(0) / ((Y - Y.mean(0)) ** 2).sum(0)
    assert r2.min() > 0.9
    np.testing.assert_allclose(r2[0], r2[1], atol=0.02)


@pytest.mark.parametrize("how", ["partial_fit", "warm_start"])
def test_continued_training_keeps_the_first_scaling(data, how):
    """Check partial_fit and warm_start reuse the scaling learned first."""
    X, y = data
    reg = HTAFNetRegressor(warm_start=how == "warm_start", **FAST)
    first = reg.partial_fit if how == "partial_fit" else reg.fit
    first(X, y)
    mean, scale = reg.target_mean_, reg.target_scale_
    again = reg.partial_fit if how == "partial_fit" else reg.fit
    again(X, 10.0 * y + 1000.0)
    np.testing.assert_array_equal(reg.target_mean_, mean)
    np.testing.assert_array_equal(reg.target_scale_, scale)
    assert len(reg.history_) == 2 * FAST["max_epochs"]


def test_refit_learns_a_new_scaling(data):
    """Check a plain refit (no warm_start) learns the scaling of its own y."""
    X, y = data
    reg = HTAFNetRegressor(**FAST).fit(X, y)
    reg.fit(X, 2.0 * y)
    np.testing.assert_allclose(reg.target_scale_, [2.0 * y.std()])


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("nan", "NaN or infinity"),
        ("inf", "NaN or infinity"),
        ("3d", "1-D or 2-D"),
        ("str", "numeric targets"),
    ],
)
@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_bad_targets_are_refused_and_leave_the_fitted_net(data, bad, match, method):
    """Check NaN, inf, 3-D and string targets raise clearly and change nothing."""
    X, y = data
    reg = HTAFNetRegressor(**FAST).fit(X, y)
    before = (reg.predict(X), reg.target_mean_, reg.target_scale_, len(reg.history_))
    y_bad = {
        "nan": np.where(np.arange(len(y)) == 3, np.nan, y),
        "inf": np.where(np.arange(len(y)) == 3, np.inf, y),
        "3d": y.reshape(-1, 1, 1),
        "str": np.array(["a"] * len(y)),
    }[bad]
    with pytest.raises(ValueError, match=match):
        getattr(reg, method)(X, y_bad)
    np.testing.assert_array_equal(reg.predict(X), before[0])
    np.testing.assert_array_equal(reg.target_mean_, before[1])
    np.testing.assert_array_equal(reg.target_scale_, before[2])
    assert len(reg.history_) == before[3]


def test_unfitted_net_has_no_target_scaling():
    """Check target_mean_ is missing (AttributeError) before fit."""
    assert not hasattr(HTAFNetRegressor(), "target_mean_")
    assert not hasattr(HTAFNetRegressor(), "target_scale_")


def test_save_params_carries_the_scaling(data, tmp_path):
    """Check load_params into a net built by initialize_for restores the scaling."""
    X, y = data
    reg = HTAFNetRegressor(**FAST).fit(X, y)
    reg.save_params(f_params=tmp_path / "r.pt")
    new = HTAFNetRegressor(**FAST).initialize_for(reg.n_features_in_)
    new.load_params(f_params=tmp_path / "r.pt")
    np.testing.assert_array_equal(new.target_mean_, reg.target_mean_)
    np.testing.assert_array_equal(new.predict(X), reg.predict(X))


def test_defaults_fit_raw_friedman1():
    """Check the defaults reach a good R2 on raw friedman1 targets (old: ~0)."""
    X, y = make_friedman1(n_samples=1000, noise=1.0, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    model = make_pipeline(StandardScaler(), HTAFNetRegressor(random_state=0))
    # the old defaults (no target standardisation) score about 0 here
    assert model.fit(X_train, y_train).score(X_test, y_test) > 0.75


def test_docstring_states_the_regressor_defaults():
    """Check the class docstring names the regressor's own defaults."""
    params = inspect.signature(HTAFNetRegressor).parameters
    doc = HTAFNetRegressor.__doc__
    width = params["hidden_layer_sizes"].default
    assert f"hidden_layer_sizes : int or tuple of int, default={width}" in doc
    assert "standardize_target : bool, default=True" in doc
    assert params["standardize_target"].default is True
