"""scikit-learn's estimator checks on PackedClassifier and PackedRegressor.

A packed estimator wraps a net trained elsewhere: ``fit`` reads the packed
net passed as ``net`` and learns nothing from X and y (as
:class:`sklearn.frozen.FrozenEstimator`, which scikit-learn leaves out of
its own checks). The checks run twice here:

- on the estimators as shipped, wrapping a net packed for 3 features. The
  checks about what fit makes of X and y cannot apply to them; they are
  listed in ``EXPECTED_FAILED``, each with its reason (strict: a listed check
  that passes fails the test);
- on test-only subclasses whose ``fit`` trains a small step net on the
  check's X and y, packs it and reads it with the estimator's own code, so
  that every check reaches predict, its input validation, feature names,
  pickling and so on. These have no expected failure.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksign.deploy import PackedClassifier, PackedRegressor, pack
from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor

#: The small step nets the test subclasses train (as in tests/test_common.py,
#: float32: pack takes float32 nets).
SMALL = {"max_epochs": 30, "lr": 1e-2, "random_state": 0}


class _TrainsOnFit:
    """Mixin: ``fit(X, y)`` trains a small step net, packs it and reads it."""

    def fit(self, X, y):
        net = self._net_class((32,), **SMALL).fit(X, y)
        return self._read(pack(net).net_)


class TrainsOnFitPackedClassifier(_TrainsOnFit, PackedClassifier):
    """PackedClassifier whose fit packs an HTAFNetClassifier trained on X, y."""

    _net_class = HTAFNetClassifier


class TrainsOnFitPackedRegressor(_TrainsOnFit, PackedRegressor):
    """PackedRegressor whose fit packs an HTAFNetRegressor trained on X, y."""

    _net_class = HTAFNetRegressor


def _shipped():
    """The estimators as shipped, each wrapping a net packed for 3 features."""
    X = np.random.RandomState(0).rand(30, 3)
    y = (X[:, 0] > 0.5).astype(int)
    kw = {"max_epochs": 2, "random_state": 0}
    return [
        PackedClassifier(pack(HTAFNetClassifier((8,), **kw).fit(X, y)).net_),
        PackedRegressor(pack(HTAFNetRegressor((8,), **kw).fit(X, X.sum(1))).net_),
    ]


# why each check cannot apply to an estimator whose fit only reads its net
_IGNORES_X = "fit reads the packed net and ignores X: it validates nothing in it"
_IGNORES_Y = "fit reads the packed net and ignores y: it validates nothing in it"
_WIDTH = "predicts on the width fit was given, not the packed net's 3 features"
_COMMON = {
    "check_complex_data": _IGNORES_X,
    "check_dtype_object": _WIDTH,
    "check_estimators_dtypes": _WIDTH,
    "check_estimators_empty_data_messages": _IGNORES_X,
    "check_estimators_nan_inf": _IGNORES_X,
    "check_estimator_sparse_tag": _IGNORES_X,
    "check_fit1d": _IGNORES_X,
    "check_fit_idempotent": _WIDTH,
    "check_n_features_in": "n_features_in_ is the packed net's, not fit's X's",
    "check_n_features_in_after_fitting": "n_features_in_ is the packed net's",
    "check_supervised_y_no_nan": _IGNORES_Y,
}
EXPECTED_FAILED = {
    "PackedClassifier": {
        **_COMMON,
        "check_classifier_data_not_an_array": _WIDTH,
        "check_classifiers_classes": "classes_ are the packed net's, not fit's y's",
        "check_classifiers_one_label": "classes_ are the packed net's, not fit's y's",
        "check_classifiers_regression_target": _IGNORES_Y,
        "check_classifiers_train": _IGNORES_Y,
        "check_decision_proba_consistency": _WIDTH,
        "check_supervised_y_2d": "fit ignores y, so a 2-D y draws no warning",
    },
    "PackedRegressor": {
        **_COMMON,
        "check_regressor_data_not_an_array": _WIDTH,
        "check_regressor_multioutput": "the outputs are the packed net's, not y's",
        "check_regressors_int": _WIDTH,
        "check_regressors_train": _IGNORES_Y,
    },
}


def _expected_failed(estimator):
    return EXPECTED_FAILED.get(type(estimator).__name__, {})


@parametrize_with_checks(
    [*_shipped(), TrainsOnFitPackedClassifier(), TrainsOnFitPackedRegressor()],
    expected_failed_checks=_expected_failed,
    xfail_strict=True,
)
def test_sklearn_compatible(estimator, check):
    """Check the packed estimators follow scikit-learn's API conventions."""
    check(estimator)
