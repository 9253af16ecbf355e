"""``architecture_params``: the architecture's arguments as one parameter."""

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.random((40, 16)).astype(np.float32)
    return X, (X[:, 0] > 0.5).astype(int)


@pytest.mark.parametrize("cls", [HTAFNetClassifier, HTAFNetRegressor])
def test_dict_reaches_the_constructor_and_module_params_win(data, cls):
    """Check the dict's keys reach the built net and ``module__`` overrides."""
    X, y = data
    net = cls((4,), architecture="bnn", max_epochs=1, random_state=0)
    net.set_params(architecture_params={"batch_norm": False}).fit(X, y)
    assert net.module_.batch_norm is False
    net.set_params(module__batch_norm=True).fit(X, y)
    assert net.module_.batch_norm is True


def test_grid_search_varies_the_dict_as_a_whole(data):
    """Check GridSearchCV sets each candidate dict on the built net."""
    X, y = data
    grid = GridSearchCV(
        HTAFNetClassifier((4,), architecture="bnn", max_epochs=1, random_state=0),
        {"architecture_params": [{"batch_norm": False}, {"batch_norm": True}]},
        cv=2,
    ).fit(X, y)
    assert len(grid.cv_results_["params"]) == 2
    best = grid.best_estimator_
    assert best.module_.batch_norm is best.architecture_params["batch_norm"]


def test_bad_dict_is_refused_and_leaves_the_fitted_net(data):
    """Check a non-dict and an unknown argument fail, the fitted net unchanged."""
    X, y = data
    net = HTAFNetClassifier((4,), max_epochs=1, random_state=0).fit(X, y)
    before = net.predict_proba(X)
    with pytest.raises(ValueError, match="architecture_params"):
        net.set_params(architecture_params=[("width", 3)]).fit(X, y)
    with pytest.raises(TypeError, match="no_such_argument"):
        net.set_params(architecture_params={"no_such_argument": 1}).fit(X, y)
    np.testing.assert_array_equal(net.predict_proba(X), before)
