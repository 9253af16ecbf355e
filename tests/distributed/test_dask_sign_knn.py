"""Sign-kNN on Dask arrays gives exactly the single-machine answers.

A ``LocalCluster`` of two worker processes (one thread each) holds the codes,
one shard per row chunk, in chunks of unequal size. Distances, indices,
labels, probabilities and regression means must equal those of the estimator
fitted on the same codes as a NumPy array, ties included (lower training row
first), for random and clustered codes of 1 to 1,000 bits, k from 1 to 50 and
1 to 7 shards.
"""

import gc
import itertools
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import dask  # noqa: E402

from sksign.estimators import SignKNNClassifier, SignKNNRegressor  # noqa: E402
from sksign.kernels import pack_bits  # noqa: E402

BIT_COUNTS = (1, 63, 65, 256, 1000)
KINDS = ("random", "clustered")
N_TRAIN = 160
N_QUERIES = 40


def _codes(kind, n_bits, seed, n=N_TRAIN, n_queries=N_QUERIES):
    """Codes (0/1 uint8), 3 classes, queries; clustered ones have many ties.

    Clustered codes are a few centres with a few bits flipped, so that many
    codes are exact duplicates; the queries include training codes (distance
    0) and a duplicate of one of them.
    """
    rng = np.random.default_rng(seed)
    if kind == "random":
        X = rng.integers(0, 2, size=(n + n_queries, n_bits), dtype=np.uint8)
    else:
        centres = rng.integers(0, 2, size=(4, n_bits), dtype=np.uint8)
        flips = rng.random((n + n_queries, n_bits)) < min(0.05, 2 / n_bits)
        X = centres[rng.integers(0, 4, size=n + n_queries)] ^ flips.astype(np.uint8)
    y = rng.integers(0, 3, size=n)
    Q = np.concatenate([X[n:], X[:3], X[:1]])
    return X[:n], y, Q


def _chunks(n, n_shards, seed):
    """`n_shards` row chunks of unequal sizes adding up to `n` (each >= 1)."""
    if n_shards == 1:
        return (n,)
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, n), size=n_shards - 1, replace=False))
    return tuple(np.diff(np.concatenate([[0], cuts, [n]])).tolist())


def _dask(X, row_chunks):
    return da.from_array(X, chunks=(row_chunks, X.shape[1]))


def _assert_same_radius(ref, got):
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def _check_grid(n_bits, kind, n_shards, ks, seed, query_chunks=(15, 10)):
    """Compare the NumPy and sharded estimators for every k in `ks`.

    Everything lazy is computed in one go, so the cluster sees one graph.
    """
    X, y, Q = _codes(kind, n_bits, seed)
    y_reg = np.random.default_rng(seed).normal(size=(N_TRAIN, 2))
    chunks = _chunks(N_TRAIN, n_shards, seed)
    query_chunks = (*query_chunks, Q.shape[0] - sum(query_chunks))
    Xd, Qd = _dask(X, chunks), _dask(Q, query_chunks)
    expected, lazy = [], []
    fitted = {}
    for weights in ("uniform", "distance"):
        ref = SignKNNClassifier(weights=weights).fit(X, y)
        dist = SignKNNClassifier(weights=weights).fit(Xd, y)
        reg_ref = SignKNNRegressor(weights=weights).fit(X, y_reg)
        reg = SignKNNRegressor(weights=weights).fit(Xd, y_reg)
        fitted[weights] = dist
        assert dist._fit_shards.n_shards == n_shards
        assert dist._fit_words is None
        for k in ks:
            for est in (ref, dist, reg_ref, reg):
                est.set_params(n_neighbors=k)
            expected += [ref.predict(Q), ref.predict_proba(Q), reg_ref.predict(Q)]
            lazy += [dist.predict(Qd), dist.predict_proba(Qd), reg.predict(Qd)]
            if weights == "uniform":  # the neighbours do not depend on weights
                expected += ref.kneighbors(Q)
                lazy += dist.kneighbors(Qd)
    computed = dask.compute(*lazy)
    for a, b in zip(expected, computed, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    return X, y, Q, fitted


@given(
    n_bits=st.sampled_from(BIT_COUNTS),
    kind=st.sampled_from(KINDS),
    n_shards=st.integers(1, 7),
    k=st.integers(1, 50),
)
@settings(max_examples=6, deadline=None)
def test_sharded_search_equals_single_machine_sample(client, n_bits, kind, n_shards, k):
    """Check k-NN, votes and means on shards equal the single-machine ones."""
    _check_grid(n_bits, kind, n_shards, [k], seed=n_bits * 7 + n_shards)


@pytest.mark.parametrize(
    ("n_bits", "kind", "n_shards", "ks"),
    [
        (1, "clustered", 7, [1, 50]),  # two distinct codes: ties everywhere
        (65, "clustered", 5, [24, 25]),  # k past the smallest shards
        (1000, "random", 3, [10]),
    ],
)
def test_sharded_search_equals_single_machine_edges(client, n_bits, kind, n_shards, ks):
    """Check the tie-heavy and k > shard size cases exactly."""
    _check_grid(n_bits, kind, n_shards, ks, seed=3)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n_bits", "kind", "n_shards"),
    list(itertools.product(BIT_COUNTS, KINDS, range(1, 8))),
)
def test_sharded_search_equals_single_machine_full_grid(client, n_bits, kind, n_shards):
    """Check every k from 1 to 50 for every bit count, kind and shard count."""
    _check_grid(
        n_bits, kind, n_shards, range(1, 51), seed=n_bits + n_shards, query_chunks=()
    )


def test_numpy_queries_give_numpy_and_dask_queries_stay_lazy(client):
    """Check NumPy queries give NumPy results and Dask queries lazy Dask ones."""
    X, y, Q = _codes("clustered", 65, seed=1)
    Xd = _dask(X, _chunks(N_TRAIN, 4, 1))
    ref = SignKNNClassifier(7).fit(X, y)
    clf = SignKNNClassifier(7).fit(Xd, y)
    pred = clf.predict(Q)
    assert isinstance(pred, np.ndarray)
    np.testing.assert_array_equal(pred, ref.predict(Q))
    lazy = clf.predict(_dask(Q, 9))
    assert isinstance(lazy, da.Array)
    assert lazy.chunks == ((9, 9, 9, 9, 8),)
    assert lazy.dtype == ref.predict(Q).dtype
    # string labels keep their dtype
    labels = np.array(["ant", "bee", "cat"])[y]
    np.testing.assert_array_equal(
        SignKNNClassifier(7).fit(Xd, labels).predict(_dask(Q, 9)).compute(),
        SignKNNClassifier(7).fit(X, labels).predict(Q),
    )


def test_kneighbors_and_radius_without_X_equal_single_machine(client):
    """Check X=None (each training code left out) on shards, duplicates included."""
    X, y, _ = _codes("clustered", 63, seed=2)
    Xd = _dask(X, _chunks(N_TRAIN, 6, 2))
    ref = SignKNNClassifier().fit(X, y)
    clf = SignKNNClassifier().fit(Xd, y)
    for k in (1, 5, 40):
        d_ref, i_ref = ref.kneighbors(n_neighbors=k)
        d, i = dask.compute(*clf.kneighbors(n_neighbors=k))
        np.testing.assert_array_equal(d, d_ref)
        np.testing.assert_array_equal(i, i_ref)
    for sort_results in (False, True):
        ref_r = ref.radius_neighbors(radius=0.1, sort_results=sort_results)
        got = dask.compute(*clf.radius_neighbors(radius=0.1, sort_results=sort_results))
        for a, b in zip(ref_r, got):
            _assert_same_radius(a, b)


@pytest.mark.parametrize("fit_on_dask", [True, False])
def test_radius_neighbors_equal_single_machine(client, fit_on_dask):
    """Check radius_neighbors on NumPy and Dask queries, sorted or not."""
    X, y, Q = _codes("clustered", 256, seed=4)
    ref = SignKNNClassifier().fit(X, y)
    clf = SignKNNClassifier().fit(
        _dask(X, _chunks(N_TRAIN, 3, 4)) if fit_on_dask else X, y
    )
    for radius, sort_results in ((0.0, False), (0.05, True), (0.6, False)):
        expected = ref.radius_neighbors(Q, radius, sort_results=sort_results)
        lazy = clf.radius_neighbors(_dask(Q, 11), radius, sort_results=sort_results)
        assert all(isinstance(part, da.Array) for part in lazy)
        for a, b in zip(expected, dask.compute(*lazy)):
            _assert_same_radius(a, b)
        if fit_on_dask:
            ind = clf.radius_neighbors(
                Q, radius, return_distance=False, sort_results=sort_results
            )
            _assert_same_radius(expected[1], ind)


@pytest.mark.parametrize("weights", ["uniform", "distance"])
def test_numpy_fit_maps_over_dask_queries(client, weights):
    """Check an estimator fitted on NumPy answers Dask queries lazily, the same."""
    X, y, Q = _codes("random", 65, seed=5)
    ref = SignKNNClassifier(6, weights=weights).fit(X, y)
    Qd = _dask(Q, 13)
    for method in ("predict", "predict_proba"):
        lazy = getattr(ref, method)(Qd)
        assert isinstance(lazy, da.Array)
        np.testing.assert_array_equal(lazy.compute(), getattr(ref, method)(Q))
    d, i = dask.compute(*ref.kneighbors(Qd, n_neighbors=9))
    d_ref, i_ref = ref.kneighbors(Q, n_neighbors=9)
    np.testing.assert_array_equal(d, d_ref)
    np.testing.assert_array_equal(i, i_ref)
    reg = SignKNNRegressor(6, weights=weights).fit(X, y.astype(float))
    np.testing.assert_array_equal(reg.predict(Qd).compute(), reg.predict(Q))


def test_sign_and_packed_inputs_equal_single_machine(client):
    """Check +-1 codes and packed uint8 codes on shards, 63 bits (padding)."""
    X, y, Q = _codes("clustered", 63, seed=6)
    chunks = _chunks(N_TRAIN, 5, 6)
    signs = 2 * X.astype(np.int8) - 1
    ref = SignKNNClassifier(8, weights="distance").fit(signs, y)
    clf = SignKNNClassifier(8, weights="distance").fit(_dask(signs, chunks), y)
    np.testing.assert_array_equal(
        clf.predict_proba(2 * Q.astype(np.int8) - 1),
        ref.predict_proba(2 * Q.astype(np.int8) - 1),
    )
    packed = SignKNNClassifier(8, packed=True, n_bits=63)
    packed.fit(_dask(pack_bits(X), chunks), y)
    np.testing.assert_array_equal(
        packed.kneighbors(_dask(pack_bits(Q), 7))[1].compute(), ref.kneighbors(Q)[1]
    )


def test_shards_stay_on_the_workers(client):
    """Check each chunk is one persisted shard held by a worker, not the client."""
    X, y, _ = _codes("random", 256, seed=7)
    chunks = (50, 0, 70, 40)  # an empty chunk too
    clf = SignKNNClassifier(3).fit(_dask(X, chunks), y)
    shards = clf._fit_shards
    np.testing.assert_array_equal(shards.offsets, [0, 50, 50, 120, 160])
    futures = distributed.futures_of(shards.words)
    assert len(futures) == len(chunks)
    who_has = client.who_has(futures)
    assert all(who_has[f.key] for f in futures)
    assert set().union(*who_has.values()) <= set(client.scheduler_info()["workers"])
    assert (clf.n_samples_fit_, clf.n_bits_, clf.n_features_in_) == (N_TRAIN, 256, 256)
    assert not hasattr(clf, "feature_names_in_")
    np.testing.assert_array_equal(
        clf.predict(X[:20]), SignKNNClassifier(3).fit(X, y).predict(X[:20])
    )


def test_wrong_queries_fail_before_any_task_runs(client):
    """Check a wrong bit count or dtype fails with nothing scheduled."""
    X, y, Q = _codes("random", 65, seed=8)
    clf = SignKNNClassifier(3).fit(_dask(X, (80, 80)), y)
    numpy_fit = SignKNNClassifier(3).fit(X, y)
    bad = [
        (
            _dask(Q[:, :64], 10),
            ValueError,
            "64 features, but SignKNNClassifier is expecting 65",
        ),
        (_dask(Q.astype(str), 10), TypeError, "0/1, \\+-1 or bool"),
        (da.from_array(Q[:, 0], chunks=10), ValueError, "2D"),
    ]
    with distributed.get_task_stream(client) as stream:
        for est in (clf, numpy_fit):
            for Qbad, error, match in bad:
                for method in ("predict", "predict_proba", "kneighbors"):
                    with pytest.raises(error, match=match):
                        getattr(est, method)(Qbad)
                with pytest.raises(error, match=match):
                    est.radius_neighbors(Qbad, radius=0.2)
        with pytest.raises(ValueError, match="65"):
            clf.predict(Q[:, :64])
        with pytest.raises(ValueError, match="n_neighbors"):
            clf.kneighbors(_dask(Q, 10), n_neighbors=N_TRAIN + 1)
        unknown = _dask(Q, 10)[_dask(Q, 10)[:, 0] > 0]
        with pytest.raises(ValueError, match="compute_chunk_sizes"):
            clf.predict(unknown)
    assert stream.data == []


def test_failed_fit_leaves_a_fitted_model_unchanged(client):
    """Check bad training data raises clearly and keeps the previous model."""
    X, y, Q = _codes("random", 65, seed=9)
    clf = SignKNNClassifier(3).fit(_dask(X, (80, 80)), y)
    before = clf.predict(Q)
    shards = clf._fit_shards
    Xnan = X.astype(float)
    Xnan[100, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.fit(_dask(Xnan, (80, 80)), y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clf.fit(_dask(X, (80, 80)), y[:-1])
    with pytest.raises(ValueError, match="faiss"):
        SignKNNClassifier(algorithm="faiss").fit(_dask(X, (80, 80)), y)
    with pytest.raises(TypeError, match="uint8"):
        SignKNNClassifier(packed=True).fit(_dask(X.astype(np.int16), 80), y)
    with pytest.raises(ValueError, match="n_bits=64 does not match"):
        SignKNNClassifier(n_bits=64).fit(_dask(X, 80), y)
    assert clf._fit_shards is shards
    np.testing.assert_array_equal(clf.predict(Q), before)


def test_sharded_model_refit_on_numpy_forgets_the_shards(client):
    """Check a refit on NumPy codes drops the shards and answers locally."""
    X, y, Q = _codes("random", 63, seed=10)
    clf = SignKNNClassifier(4).fit(_dask(X, 40), y)
    clf.fit(X, y)
    assert clf._fit_shards is None
    assert isinstance(clf._fit_words, np.ndarray)
    np.testing.assert_array_equal(
        clf.predict(Q), SignKNNClassifier(4).fit(X, y).predict(Q)
    )


def test_one_graph_key_per_shipped_estimator(client):
    """Check the estimator shipped with Dask queries is one key, not per block."""
    X, y, Q = _codes("random", 1000, seed=11)
    ref = SignKNNClassifier(3).fit(X, y)
    lazy = ref.predict(_dask(Q, 5))
    graph = dict(lazy.__dask_graph__())
    sizes = sorted(len(pickle.dumps(task)) for task in graph.values())
    codes_bytes = ref._fit_words.nbytes
    assert sum(size > codes_bytes for size in sizes) == 1
    assert sizes[-2] < codes_bytes / 2


def test_lazy_result_outlives_the_estimator(client):
    """Check a lazy prediction keeps the shards it reads alive on its own."""
    X, y, Q = _codes("random", 65, seed=12)
    clf = SignKNNClassifier(5).fit(_dask(X, (50, 60, 50)), y)
    lazy = clf.predict(_dask(Q, 10))
    shard_keys = {f.key for f in distributed.futures_of(clf._fit_shards.words)}
    assert shard_keys <= {f.key for f in distributed.futures_of(lazy)}
    del clf
    gc.collect()
    np.testing.assert_array_equal(
        lazy.compute(), SignKNNClassifier(5).fit(X, y).predict(Q)
    )
