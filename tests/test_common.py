"""scikit-learn compatibility of every public estimator (parametrize_with_checks).

The packed estimators of sksign.deploy, whose fit reads a net trained
elsewhere, are checked in tests/deploy/test_packed_common.py.
"""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksign.estimators import (
    HTAFNetClassifier,
    HTAFNetRegressor,
    ICBMClassifier,
    SignKNNClassifier,
    SignKNNRegressor,
)
from sksign.transformers import SignCodeTransformer


class _RealsAsBits:
    """Mixin reading any real feature as the bit ``x > 0`` (sign-kNN only).

    The common checks feed continuous data, which the sign-kNN estimators
    refuse (a code holds 0/1, -1/+1 or bool values); thresholding the
    validated rows just before they are encoded lets every other part of the
    estimator meet the checks as it is.
    """

    def _encode(self, X, n_bits):
        return super()._encode(X > 0, n_bits)


class RealsAsBitsKNNClassifier(_RealsAsBits, SignKNNClassifier):
    """SignKNNClassifier reading real features as bits x > 0."""


class RealsAsBitsKNNRegressor(_RealsAsBits, SignKNNRegressor):
    """SignKNNRegressor reading real features as bits x > 0."""


def _estimators():
    # float64: check_sample_weight_equivalence compares a weighted fit with a
    # fit on repeated rows to rtol 1e-7, which float32 training meets only to
    # about 1e-6 (rounding; tests/estimators checks float32 there)
    small = {"max_epochs": 30, "lr": 1e-2, "random_state": 0, "dtype": "float64"}
    return [
        HTAFNetClassifier((32,), **small),
        HTAFNetRegressor((32,), **small),
        ICBMClassifier(n_concepts=8, hidden_layer_sizes=(32,), **small),
        RealsAsBitsKNNClassifier(),
        RealsAsBitsKNNRegressor(),
        SignCodeTransformer(random_state=0),
    ]


# No expected failures: every check passes for every estimator (the sign-kNN
# ones reading the checks' continuous data as bits x > 0, see _RealsAsBits).
@parametrize_with_checks(_estimators(), xfail_strict=True)
def test_sklearn_compatible(estimator, check):
    """Check the estimators follow scikit-learn's API conventions."""
    check(estimator)


@pytest.mark.parametrize(
    "net",
    [
        e
        for e in _estimators()
        if isinstance(e, HTAFNetClassifier | HTAFNetRegressor | ICBMClassifier)
    ],
)
def test_parameter_constraints_cover_every_parameter(net):
    """Check each net's constraints name every parameter get_params returns
    (skorch's routed ``prefix__name`` parameters are checked by skorch)."""
    params = {
        name
        for name in net.get_params(deep=False)
        if "__" not in name or name == "iterator_train__shuffle"
    }
    assert params <= set(net._parameter_constraints)
