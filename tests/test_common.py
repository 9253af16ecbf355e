"""scikit-learn compatibility of every public estimator (parametrize_with_checks)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor

# Every entry needs a reason; xfail_strict makes stale entries fail.
_SKORCH_INIT = (
    "skorch's NeuralNet.__init__ sets history_, initialized_ and virtual_params_"
)
EXPECTED_FAILED_CHECKS = {
    "HTAFNetClassifier": {"check_no_attributes_set_in_init": _SKORCH_INIT},
    "HTAFNetRegressor": {"check_no_attributes_set_in_init": _SKORCH_INIT},
}


def _estimators():
    small = {"hidden_layer_sizes": (32,), "max_epochs": 30, "lr": 1e-2}
    return [
        HTAFNetClassifier(**small, random_state=0),
        HTAFNetRegressor(**small, random_state=0),
    ]


def _expected_failed_checks(estimator):
    return EXPECTED_FAILED_CHECKS.get(type(estimator).__name__, {})


@parametrize_with_checks(
    _estimators(), expected_failed_checks=_expected_failed_checks, xfail_strict=True
)
def test_sklearn_compatible(estimator, check, run_sklearn_check):
    """Check the estimators follow scikit-learn's API conventions."""
    run_sklearn_check(check, estimator)
