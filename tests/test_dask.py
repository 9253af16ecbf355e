"""Sweeps and cross-validation on a Dask cluster give exactly the local scores.

DESIGN.md, "Beyond one machine": ``GridSearchCV`` runs unchanged under
``joblib.parallel_backend("dask")``. Every estimator (and everything it holds:
no lambdas, no open handles) must travel between processes, and a seeded fit
must not depend on the process it runs in.
"""

import pickle

import joblib
import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_validate
from sklearn.pipeline import Pipeline

distributed = pytest.importorskip("distributed")

from sksign.estimators import (  # noqa: E402
    HTAFNetClassifier,
    ICBMClassifier,
    SignKNNClassifier,
)
from sksign.metrics import (  # noqa: E402
    make_gate_dominance_scorer,
    make_intervention_scorer,
)
from sksign.transformers import SignCodeTransformer  # noqa: E402

RANDOM_STATE = 0


@pytest.fixture(scope="module")
def small_digits(digits):
    X_train, _, y_train, _ = digits
    return X_train[:240], y_train[:240]


def _net(**params):
    return HTAFNetClassifier(
        (16,),
        max_epochs=2,
        batch_size=64,
        lr=1e-2,
        random_state=RANDOM_STATE,
        **params,
    )


def _scores(search):
    res = search.cv_results_
    keys = sorted(k for k in res if k.startswith("split") and k.endswith("_score"))
    return {k: np.asarray(res[k]) for k in keys}


def _run_both(client, make_search, X, y):
    # Dask ships tasks with cloudpickle, which would carry lambdas too; the
    # standard pickle proves the estimators hold nothing process-bound.
    template = make_search(n_jobs=1).estimator
    pickle.loads(pickle.dumps(template))
    local = make_search(n_jobs=1).fit(X, y)
    fitted = pickle.loads(pickle.dumps(local.best_estimator_))
    np.testing.assert_array_equal(fitted.predict(X), local.best_estimator_.predict(X))
    with (
        distributed.get_task_stream(client) as stream,
        joblib.parallel_backend("dask", wait_for_workers_timeout=60),
    ):
        remote = make_search(n_jobs=-1).fit(X, y)
    # the fits really ran on the cluster's worker processes
    workers = {task["worker"] for task in stream.data}
    assert workers, "no task ran on the Dask cluster"
    assert workers <= set(client.scheduler_info()["workers"])
    return local, remote


def _assert_same_scores(local, remote):
    a, b = _scores(local), _scores(remote)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert local.best_params_ == remote.best_params_
    assert [str(p) for p in local.cv_results_["params"]] == [
        str(p) for p in remote.cv_results_["params"]
    ]


def test_dask_grid_search_htaf_alphas_equals_local(client, small_digits):
    """Check that a GridSearchCV over alpha0/alpha1 on Dask equals the local run."""
    X, y = small_digits
    grid = {"alpha0": [1.0, 2.0], "alpha1": [11.0, 22.0]}

    def make_search(n_jobs):
        return GridSearchCV(
            _net(),
            grid,
            cv=StratifiedKFold(2, shuffle=True, random_state=RANDOM_STATE),
            n_jobs=n_jobs,
        )

    local, remote = _run_both(client, make_search, X, y)
    _assert_same_scores(local, remote)
    # the refitted best net came back from a worker and still predicts
    np.testing.assert_array_equal(
        local.best_estimator_.predict(X), remote.best_estimator_.predict(X)
    )


def test_dask_pipeline_sign_codes_knn_equals_local(client, small_digits):
    """Check that a codes -> sign-kNN Pipeline sweep on Dask equals the local run."""
    X, y = small_digits
    pipe = Pipeline(
        [
            ("codes", SignCodeTransformer(_net())),
            ("knn", SignKNNClassifier()),
        ]
    )
    grid = {"codes__estimator__alpha0": [1.0, 2.0], "knn__n_neighbors": [1, 5]}

    def make_search(n_jobs):
        return GridSearchCV(
            pipe,
            grid,
            cv=StratifiedKFold(2, shuffle=True, random_state=RANDOM_STATE),
            n_jobs=n_jobs,
        )

    local, remote = _run_both(client, make_search, X, y)
    _assert_same_scores(local, remote)
    np.testing.assert_array_equal(
        local.best_estimator_.predict(X), remote.best_estimator_.predict(X)
    )


@pytest.mark.parametrize("kind", ["icbm", "relu_net"])
def test_dask_cross_validate_with_sign_scorers_equals_local(client, small_digits, kind):
    """Check cross_validate with the sign scorers on Dask equals the local run."""
    X, y = small_digits
    if kind == "icbm":
        est = ICBMClassifier(
            n_concepts=16,
            hidden_layer_sizes=(32,),
            max_epochs=20,
            lr=1e-2,
            batch_size=32,
            random_state=RANDOM_STATE,
        )
    else:
        est = _net(activation="relu").set_params(max_epochs=20)
    scoring = {
        "accuracy": "accuracy",
        "sign_flip": make_intervention_scorer(alpha=0.3, random_state=RANDOM_STATE),
        "gate": make_gate_dominance_scorer(),
    }
    cv = StratifiedKFold(2, shuffle=True, random_state=RANDOM_STATE)
    pickle.loads(pickle.dumps(scoring))  # the scorers hold nothing process-bound
    local = cross_validate(est, X, y, cv=cv, scoring=scoring, n_jobs=1)
    with (
        distributed.get_task_stream(client) as stream,
        joblib.parallel_backend("dask", wait_for_workers_timeout=60),
    ):
        remote = cross_validate(est, X, y, cv=cv, scoring=scoring, n_jobs=-1)
    assert {task["worker"] for task in stream.data}, "nothing ran on the cluster"
    for key in ("test_accuracy", "test_sign_flip", "test_gate"):
        np.testing.assert_array_equal(local[key], remote[key], err_msg=key)
    # trained well above chance (10 classes), and the flips cost accuracy
    assert local["test_accuracy"].min() > 0.5
    assert (local["test_sign_flip"] < local["test_accuracy"]).all()
    if kind == "relu_net":
        assert np.isfinite(local["test_gate"]).all()
