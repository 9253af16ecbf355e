"""prefit=True under scikit-learn's clone: the error says the clone lost the fit."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from sksign.estimators import HTAFNetClassifier
from sksign.transformers import SignCodeTransformer

RANDOM_STATE = 0


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(RANDOM_STATE)
    X = rng.rand(60, 8).astype(np.float32)
    return X, (X[:, 0] > 0.5).astype(int)


@pytest.fixture(scope="module")
def fitted_net(data):
    return HTAFNetClassifier((8,), max_epochs=2, random_state=RANDOM_STATE).fit(*data)


def _search(step, data):
    pipe = make_pipeline(step, LogisticRegression())
    grid = {"logisticregression__C": [1.0]}
    return GridSearchCV(pipe, grid, cv=2, error_score="raise").fit(*data)


def test_prefit_in_a_search_names_the_clone(data, fitted_net):
    sct = SignCodeTransformer(fitted_net, prefit=True)
    with pytest.raises(NotFittedError, match="clone") as info:
        _search(sct, data)
    message = str(info.value)
    assert "GridSearchCV" in message
    assert "FrozenEstimator" in message
    assert "prefit=False" in message


def test_frozen_net_keeps_its_fit_through_a_search(data, fitted_net):
    """The way around it the message names: FrozenEstimator survives clone."""
    sct = SignCodeTransformer(FrozenEstimator(fitted_net), prefit=True)
    search = _search(sct, data)
    assert 0.0 <= search.best_score_ <= 1.0


@pytest.mark.parametrize("prefit", [True, False])
def test_frozen_mlp_classifier_is_read(data, prefit):
    """A FrozenEstimator around a fitted scikit-learn MLP gives the MLP's own codes."""
    from sklearn.neural_network import MLPClassifier

    X, y = data
    mlp = MLPClassifier((16,), max_iter=300, random_state=0).fit(X, y)
    expected = SignCodeTransformer(mlp, prefit=True).fit_transform(X)
    got = SignCodeTransformer(FrozenEstimator(mlp), prefit=prefit).fit(X, y)
    assert isinstance(got.estimator_, MLPClassifier)
    np.testing.assert_array_equal(got.transform(X), expected)
