"""SignCodeTransformer on Dask arrays: the net sent once, the same codes.

On a ``LocalCluster`` of two worker processes a Dask array of samples gives
a lazy Dask array of codes equal to the NumPy transform, the fitted net is
one key of the graph (sent once to each worker, not once per block), and a
Pipeline of codes and sign-kNN runs end to end on the cluster.
"""

import pickle

import numpy as np
import pytest
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from sksign.estimators import SignKNNClassifier  # noqa: E402
from sksign.transformers import SignCodeTransformer  # noqa: E402

RANDOM_STATE = 0


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(RANDOM_STATE)
    X = rng.randn(300, 8)
    y = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    mlp = MLPClassifier((24, 16), max_iter=300, random_state=RANDOM_STATE)
    return X, y, mlp.fit(X, y)


@pytest.mark.parametrize("output", ["bits", "signs", "packed"])
def test_dask_transform_equals_numpy_transform(client, data, output):
    """Check the lazy codes equal the NumPy ones, chunks and dtype included."""
    X, _, mlp = data
    codes = SignCodeTransformer(mlp, layers="all", prefit=True, output=output).fit(X)
    Xd = da.from_array(X, chunks=((70, 30, 1, 199), (5, 3)))
    lazy = codes.transform(Xd)
    expected = codes.transform(X)
    assert isinstance(lazy, da.Array)
    assert lazy.dtype == expected.dtype
    assert lazy.chunks == ((70, 30, 1, 199), (expected.shape[1],))
    np.testing.assert_array_equal(lazy.compute(), expected)


def test_net_is_one_key_of_the_graph(client, data):
    """Check the fitted net is shipped once, not embedded in each block's task."""
    X, _, mlp = data
    codes = SignCodeTransformer(mlp, layers="all", prefit=True).fit(X)
    lazy = codes.transform(da.from_array(X, chunks=(20, 8)))
    net_bytes = len(pickle.dumps(codes.estimator_))
    sizes = sorted(len(pickle.dumps(t)) for t in dict(lazy.__dask_graph__()).values())
    assert sum(size > net_bytes / 2 for size in sizes) == 1
    # the `estimator` parameter (a second copy of the net) stays behind
    assert sizes[-1] < 1.5 * net_bytes
    # blocks run on both workers, each of which received the net once
    with distributed.get_task_stream(client) as stream:
        lazy.compute()
    workers = {t["worker"] for t in stream.data}
    assert len(workers) == 2


def test_dask_transform_rejects_bad_input_before_scheduling(client, data):
    """Check a wrong feature count or output container fails with no task run."""
    X, _, mlp = data
    codes = SignCodeTransformer(mlp, prefit=True).fit(X)
    with distributed.get_task_stream(client) as stream:
        with pytest.raises(ValueError, match="7 features, but SignCodeTransformer"):
            codes.transform(da.from_array(X[:, :7], chunks=50))
        codes.set_output(transform="pandas")
        with pytest.raises(ValueError, match="Dask array"):
            codes.transform(da.from_array(X, chunks=50))
        codes.set_output(transform="default")
    assert stream.data == []


def test_pipeline_codes_and_sharded_knn_run_on_the_cluster(client, data):
    """Check a codes -> sign-kNN Pipeline on Dask arrays equals the NumPy one."""
    X, y, mlp = data
    X_train, y_train, X_test = X[:200], y[:200], X[200:]
    local = make_pipeline(
        SignCodeTransformer(mlp, layers="all", prefit=True, output="packed"),
        SignKNNClassifier(5, packed=True),
    ).fit(X_train, y_train)
    remote = make_pipeline(
        SignCodeTransformer(mlp, layers="all", prefit=True, output="packed"),
        SignKNNClassifier(5, packed=True),
    ).fit(da.from_array(X_train, chunks=(60, 8)), y_train)
    assert remote[-1]._fit_shards.n_shards == 4
    lazy = remote.predict(da.from_array(X_test, chunks=(25, 8)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), local.predict(X_test))
    np.testing.assert_array_equal(
        remote.predict_proba(X_test), local.predict_proba(X_test)
    )
