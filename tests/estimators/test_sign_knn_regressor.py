"""Tests for SignKNNRegressor (k-NN regression on packed bit codes)."""

import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.exceptions import NotFittedError
from sklearn.metrics import r2_score
from sklearn.neighbors import KNeighborsRegressor, NearestNeighbors
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import check_param_validation

from sksign.estimators import HTAFNetRegressor, SignKNNClassifier, SignKNNRegressor
from sksign.kernels import pack_bits
from sksign.transformers import SignCodeTransformer

try:
    import faiss  # noqa: F401

    HAS_FAISS = True
except ImportError:
    HAS_FAISS = False

needs_faiss = pytest.mark.skipif(not HAS_FAISS, reason="faiss is not installed")


def _codes(rng, n, n_bits, n_queries, n_outputs=None):
    """Random 0/1 codes, queries and Gaussian targets (1-D for n_outputs=None)."""
    X = rng.integers(0, 2, size=(n, n_bits), dtype=np.uint8)
    Q = rng.integers(0, 2, size=(n_queries, n_bits), dtype=np.uint8)
    y = rng.normal(size=(n,) if n_outputs is None else (n, n_outputs))
    return X, y, Q


def _hamming(Q, X):
    """Hamming distance counts between every query and training code."""
    return (Q[:, None, :] != X[None, :, :]).sum(axis=-1)


def _reference(X, y, Q, k, weights):
    """scikit-learn's regression formula on neighbours sorted by (distance, index).

    The tie rule of sksign, written independently of its kernels.
    """
    n_bits = X.shape[1]
    counts = _hamming(Q, X)
    ind = np.argsort(counts, axis=1, kind="stable")[:, :k]
    dist = np.take_along_axis(counts, ind, axis=1) / n_bits
    y2 = y.reshape(len(y), -1).astype(np.float64)
    if weights == "uniform":
        pred = y2[ind].mean(axis=1)
    else:
        with np.errstate(divide="ignore"):
            w = 1.0 / dist
        exact = np.isinf(w)
        rows = exact.any(axis=1)
        w[rows] = exact[rows]
        pred = (y2[ind] * w[:, :, None]).sum(axis=1) / w.sum(axis=1)[:, None]
    return pred.ravel() if y.ndim == 1 else pred


def _untied_rows(X, Q, k):
    """Rows whose k nearest codes are one set whatever the tie rule."""
    full = np.sort(_hamming(Q, X), axis=1)
    if k == X.shape[0]:
        return np.ones(len(Q), dtype=bool)
    return full[:, k - 1] < full[:, k]


def test_param_validation():
    """Check that every constructor parameter is validated."""
    check_param_validation("SignKNNRegressor", SignKNNRegressor())


def test_importable_from_the_top_level():
    """Check the lazy top-level table exports the regressor."""
    import sksign

    assert sksign.SignKNNRegressor is SignKNNRegressor
    assert "SignKNNRegressor" in sksign.__all__


@pytest.mark.parametrize("n_bits", [1, 7, 63, 65, 130])
@pytest.mark.parametrize("weights", ["uniform", "distance"])
@pytest.mark.parametrize("n_outputs", [None, 3])
def test_matches_sklearn_hamming_knn_regressor(n_bits, weights, n_outputs):
    """Check predictions equal sklearn's for every k where no tie decides.

    Where a tie at the k-th distance decides the neighbour set, sklearn picks
    another member of the tie; there the predictions equal sklearn's formula
    on the neighbours ordered by (distance, training index).
    """
    rng = np.random.default_rng(n_bits)
    n_train = 24
    X, y, Q = _codes(rng, n_train, n_bits, 40, n_outputs)
    n_compared = 0
    for k in range(1, n_train + 1):
        ours = SignKNNRegressor(k, weights=weights).fit(X, y)
        ref = KNeighborsRegressor(k, weights=weights, metric="hamming")
        ref.set_params(algorithm="brute").fit(X, y)
        pred = ours.predict(Q)
        assert pred.shape == ((len(Q),) if n_outputs is None else (len(Q), n_outputs))
        assert pred.dtype == np.float64
        np.testing.assert_array_equal(ours.kneighbors(Q)[0], ref.kneighbors(Q)[0])
        untied = _untied_rows(X, Q, k)
        n_compared += untied.sum()
        np.testing.assert_allclose(
            pred[untied], ref.predict(Q)[untied], rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(
            pred, _reference(X, y, Q, k, weights), rtol=1e-12, atol=1e-12
        )
    # k = n_train compares every row; wider codes leave many rows untied
    assert n_compared >= (len(Q) if n_bits < 63 else 5 * len(Q))


def test_ties_broken_by_training_index():
    """Check that equally distant codes come in index order, as the classifier's."""
    X = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 0], [0, 1, 1, 0]])
    y = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    reg = SignKNNRegressor(3).fit(X, y)
    dist, ind = reg.kneighbors([[1, 1, 1, 0]])
    np.testing.assert_array_equal(ind, [[1, 2, 3]])
    np.testing.assert_array_equal(dist, [[0.25, 0.25, 0.25]])
    np.testing.assert_allclose(reg.predict([[1, 1, 1, 0]]), [2.0])
    # 1-NN: four codes at distance 0.25; the first one (index 1) decides.
    assert SignKNNRegressor(1).fit(X, y).predict([[1, 1, 1, 0]])[0] == 1.0
    # a duplicate code (index 3 repeats index 1): the earlier one is the 1-NN
    assert SignKNNRegressor(1).fit(X, y).predict([[1, 1, 0, 0]])[0] == 1.0


@pytest.mark.parametrize("n_bits", [3, 9])
def test_same_neighbours_as_the_classifier(n_bits):
    """Check the regressor and the classifier find the same neighbours, in order."""
    rng = np.random.default_rng(n_bits)
    X, y, Q = _codes(rng, 60, n_bits, 30)  # few bits: many ties and duplicates
    labels = (y > 0).astype(int)
    for k in (1, 4, 17):
        reg = SignKNNRegressor(k).fit(X, y)
        clf = SignKNNClassifier(k).fit(X, labels)
        for query in (Q, None):
            for a, b in zip(reg.kneighbors(query), clf.kneighbors(query)):
                np.testing.assert_array_equal(a, b)


def test_distance_weights_give_exact_matches_the_mean():
    """Check that a query with exact matches takes their mean target (as sklearn)."""
    X = np.array([[1, 1, 1, 1], [0, 1, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1], [0, 0, 1, 1]])
    y = np.array([1.0, 10.0, 20.0, 3.0, 100.0])
    query = [[1, 1, 1, 1], [0, 1, 1, 1], [1, 0, 0, 0]]
    reg = SignKNNRegressor(5, weights="distance").fit(X, y)
    ref = KNeighborsRegressor(5, weights="distance", metric="hamming").fit(X, y)
    pred = reg.predict(query)
    np.testing.assert_allclose(pred[:2], [2.0, 15.0])
    np.testing.assert_allclose(pred, ref.predict(query))
    # multi-output: each output is the mean of the exact matches' targets
    y2 = np.column_stack([y, -2 * y])
    pred2 = SignKNNRegressor(5, weights="distance").fit(X, y2).predict(query[:2])
    np.testing.assert_allclose(pred2, [[2.0, -4.0], [15.0, -30.0]])


def test_callable_weights():
    """Check a callable gets the normalised distances and weights like sklearn's."""
    rng = np.random.default_rng(5)
    X, y, Q = _codes(rng, 80, 256, 30)
    seen = []

    def inverse_square(dist):
        seen.append(dist.copy())
        return 1.0 / (dist + 0.05) ** 2

    ours = SignKNNRegressor(6, weights=inverse_square).fit(X, y)
    ref = KNeighborsRegressor(6, weights=inverse_square, metric="hamming")
    ref.set_params(algorithm="brute").fit(X, y)
    untied = _untied_rows(X, Q, 6)
    assert untied.sum() >= 10
    np.testing.assert_allclose(ours.predict(Q)[untied], ref.predict(Q)[untied])
    assert seen[0].shape == (30, 6)
    assert np.all((seen[0] >= 0) & (seen[0] <= 1))
    flat = SignKNNRegressor(6, weights=np.ones_like).fit(X, y)
    np.testing.assert_allclose(
        flat.predict(Q), SignKNNRegressor(6).fit(X, y).predict(Q)
    )
    bad = SignKNNRegressor(6, weights=lambda d: d[:, 0]).fit(X, y)
    with pytest.raises(ValueError, match="shape of its distances"):
        bad.predict(Q)


@pytest.mark.parametrize("n_bits", [5, 64, 130])
def test_packed_and_unpacked_input_agree(n_bits):
    """Check that packed uint8 rows give identical results (padding bits are
    checked to be zero: see test_sign_knn_input.py)."""
    rng = np.random.default_rng(0)
    X, y, Q = _codes(rng, 150, n_bits, 30, n_outputs=2)
    Xp, Qp = pack_bits(X), pack_bits(Q)
    plain = SignKNNRegressor(3, weights="distance").fit(2 * X.astype(np.int8) - 1, y)
    packed = SignKNNRegressor(3, weights="distance", packed=True, n_bits=n_bits)
    packed.fit(Xp, y)
    assert packed.n_bits_ == plain.n_bits_ == n_bits
    assert packed.n_features_in_ == Xp.shape[1]
    np.testing.assert_array_equal(plain.predict(Q.astype(bool)), packed.predict(Qp))
    for a, b in zip(plain.kneighbors(Q), packed.kneighbors(Qp)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(plain.kneighbors()[1], packed.kneighbors()[1])
    assert packed._fit_words.nbytes == 150 * 8 * (-(-n_bits // 64))


@given(
    bits=st.integers(1, 70).flatmap(
        lambda n_bits: st.lists(
            st.lists(st.booleans(), min_size=n_bits, max_size=n_bits),
            min_size=2,
            max_size=25,
        )
    ),
    data=st.data(),
)
def test_property_equals_stable_reference(bits, data):
    """Check predictions equal sklearn's formula on (distance, index)-sorted codes."""
    codes = np.array(bits, dtype=np.uint8)
    n_train = data.draw(st.integers(1, len(codes) - 1), label="n_train")
    X, Q = codes[:n_train], codes[n_train:]
    k = data.draw(st.integers(1, n_train), label="k")
    weights = data.draw(st.sampled_from(["uniform", "distance"]), label="weights")
    y = np.arange(n_train, dtype=np.float64) ** 1.5 - 3.0
    reg = SignKNNRegressor(k, weights=weights).fit(X, y)
    np.testing.assert_allclose(reg.predict(Q), _reference(X, y, Q, k, weights))


@given(
    n_bits=st.integers(1, 130),
    n_train=st.integers(1, 30),
    seed=st.integers(0, 2**16),
    weights=st.sampled_from(["uniform", "distance"]),
)
def test_property_predictions_are_averages_of_targets(n_bits, n_train, seed, weights):
    """Check predictions lie within the targets' range, and k = n gives the mean."""
    rng = np.random.default_rng(seed)
    X, y, Q = _codes(rng, n_train, n_bits, 10, n_outputs=2)
    k = int(rng.integers(1, n_train + 1))
    pred = SignKNNRegressor(k, weights=weights).fit(X, y).predict(Q)
    assert np.all(pred >= y.min(axis=0) - 1e-12)
    assert np.all(pred <= y.max(axis=0) + 1e-12)
    full = SignKNNRegressor(n_train).fit(X, y).predict(Q)
    np.testing.assert_allclose(full, np.broadcast_to(y.mean(axis=0), full.shape))


def test_one_column_y_stays_two_dimensional():
    """Check y of shape (n, 1) gives (n, 1) predictions, as in sklearn."""
    rng = np.random.default_rng(1)
    X, y, Q = _codes(rng, 40, 20, 5)
    reg = SignKNNRegressor(3).fit(X, y[:, None])
    assert reg.predict(Q).shape == (5, 1)
    np.testing.assert_array_equal(
        reg.predict(Q).ravel(), SignKNNRegressor(3).fit(X, y).predict(Q)
    )
    ints = SignKNNRegressor(3).fit(X, (10 * y).astype(int))
    assert ints.predict(Q).dtype == np.float64


def test_score_is_r2():
    """Check score is the R2 of the predictions."""
    rng = np.random.default_rng(2)
    X, y, Q = _codes(rng, 100, 40, 50, n_outputs=2)
    y_true = rng.normal(size=(50, 2))
    reg = SignKNNRegressor(4).fit(X, y)
    assert reg.score(Q, y_true) == pytest.approx(r2_score(y_true, reg.predict(Q)))
    assert reg.score(X, y) == pytest.approx(r2_score(y, reg.predict(X)))


def test_radius_neighbors_and_kneighbors_without_X():
    """Check the shared neighbour queries work on the regressor as in sklearn."""
    rng = np.random.default_rng(3)
    X, y, Q = _codes(rng, 120, 33, 20)
    X[7] = X[2]  # a duplicate pair
    reg = SignKNNRegressor(4).fit(X, y)
    ref = NearestNeighbors(n_neighbors=4, metric="hamming").fit(X)
    dist, ind = reg.kneighbors()
    np.testing.assert_array_equal(dist, ref.kneighbors()[0])
    assert not np.any(ind == np.arange(len(X))[:, None])
    assert ind[2, 0] == 7
    assert ind[7, 0] == 2
    for query in (Q, None):
        d, i = reg.radius_neighbors(query, radius=0.4, sort_results=True)
        rd, ri = ref.radius_neighbors(query, radius=0.4, sort_results=True)
        for a, b, c, e in zip(d, i, rd, ri):
            np.testing.assert_array_equal(np.sort(b), np.sort(e))
            np.testing.assert_array_equal(a, np.sort(c))
    with pytest.raises(ValueError, match="radius"):
        reg.radius_neighbors(Q)


def test_batches_threads_and_iterators():
    """Check results do not depend on batch_size or threads, and streaming works."""
    rng = np.random.default_rng(4)
    X, y, Q = _codes(rng, 300, 100, 90, n_outputs=2)
    ref = SignKNNRegressor(5, weights="distance").fit(X, y)
    expected = ref.predict(Q)
    other = SignKNNRegressor(5, weights="distance", batch_size=7, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(other.predict(Q), expected)
    batches = (Q[s : s + 25] for s in range(0, len(Q), 25))
    parts = ref.predict(batches)  # a generator: one array per batch
    assert not isinstance(parts, np.ndarray)
    np.testing.assert_array_equal(np.concatenate(list(parts)), expected)
    for method in ("fit", "kneighbors", "score"):
        args = (iter([X]), y) if method in ("fit", "score") else (iter([X]),)
        with pytest.raises(TypeError, match=rf"SignKNNRegressor\.{method} needs all"):
            getattr(ref, method)(*args)


def _snapshot(est):
    return {
        k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()
    }


def _assert_unchanged(est, before):
    after = vars(est)
    assert after.keys() == before.keys()
    for key, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(after[key], value)
        else:
            assert after[key] == value or after[key] is value


def test_bad_input_raises_clearly_and_leaves_fitted_model_unchanged():
    """Check each bad input raises a clear error and the fitted model stays."""
    rng = np.random.default_rng(6)
    X, y, Q = _codes(rng, 50, 20, 10)
    reg = SignKNNRegressor(3).fit(X, y)
    before, pred = _snapshot(reg), reg.predict(Q)

    for bad in (np.nan, np.inf, -np.inf):
        y_bad = y.copy()
        y_bad[4] = bad
        with pytest.raises(ValueError, match=r"y contains (NaN|infinity)"):
            reg.fit(X, y_bad)
        with pytest.raises(ValueError, match=r"y contains (NaN|infinity)"):
            reg.fit(X, np.column_stack([y, y_bad]))
    strings = np.array(["a", "b"])[rng.integers(0, 2, 50)]
    for y_str in (strings, strings.astype(object)):
        with pytest.raises(ValueError, match=r"numeric targets.*SignKNNClassifier"):
            reg.fit(X, y_str)
    with pytest.raises(ValueError, match="n_bits=7 does not match X"):
        reg.set_params(n_bits=7).fit(X[:, :10], y)
    reg.set_params(n_bits=None)
    with pytest.raises(ValueError, match="X has 21 features, but SignKNNRegressor"):
        reg.predict(np.ones((3, 21)))
    msg = "Expected n_neighbors <= n_samples_fit, but n_neighbors = 51, n_samples_fit"
    with pytest.raises(ValueError, match=msg):
        reg.set_params(n_neighbors=51).predict(Q)
    with pytest.raises(ValueError, match=msg):
        reg.set_params(n_neighbors=3).kneighbors(Q, n_neighbors=51)
    reg.set_params(n_neighbors=3)
    _assert_unchanged(reg, before)
    np.testing.assert_array_equal(reg.predict(Q), pred)

    packed = SignKNNRegressor(3, packed=True, n_bits=20).fit(pack_bits(X), y)
    before, pred = _snapshot(packed), packed.predict(pack_bits(Q))
    with pytest.raises(TypeError, match="uint8"):
        packed.fit(pack_bits(X).astype(np.int64), y)
    with pytest.raises(TypeError, match="uint8"):
        packed.predict(pack_bits(Q).astype(np.int64))
    with pytest.raises(ValueError, match="X has 2 features, but SignKNNRegressor"):
        packed.predict(pack_bits(Q[:, :16]))  # 16 bits in 2 bytes, 20 expected
    with pytest.raises(ValueError, match=r"17 <= n_bits <= 24"):
        packed.set_params(n_bits=30).fit(pack_bits(X), y)
    packed.set_params(n_bits=20)
    with pytest.raises(ValueError, match="approximate=True needs"):
        packed.set_params(algorithm="popcount", approximate=True).fit(pack_bits(X), y)
    packed.set_params(algorithm="auto", approximate=False)
    _assert_unchanged(packed, before)
    np.testing.assert_array_equal(packed.predict(pack_bits(Q)), pred)


def test_unfitted_raises_not_fitted_error():
    """Check every query method of an unfitted regressor says it is not fitted."""
    reg = SignKNNRegressor()
    X = np.zeros((2, 4), dtype=np.uint8)
    for call in (
        lambda: reg.predict(X),
        lambda: reg.kneighbors(X),
        lambda: reg.radius_neighbors(X, radius=0.5),
        lambda: reg.score(X, [0.0, 1.0]),
    ):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            call()


@pytest.mark.parametrize(
    "params",
    [
        {"weights": "distance"},
        {"packed": True, "n_bits": 13},
        pytest.param({"algorithm": "faiss"}, marks=needs_faiss),
    ],
)
def test_pickle_round_trip(params):
    """Check a pickled regressor predicts identically, and the original too."""
    rng = np.random.default_rng(7)
    X, y, Q = _codes(rng, 100, 13, 20, n_outputs=2)
    if params.get("packed"):
        X, Q = pack_bits(X), pack_bits(Q)
    reg = SignKNNRegressor(3, **params).fit(X, y)
    expected = reg.predict(Q)
    clone = pickle.loads(pickle.dumps(reg, protocol=pickle.HIGHEST_PROTOCOL))
    np.testing.assert_array_equal(clone.predict(Q), expected)
    np.testing.assert_array_equal(reg.predict(Q), expected)
    assert clone.n_bits_ == reg.n_bits_ == 13


def test_skops_round_trip_trusts_only_sksign_and_numpy(tmp_path):
    """Check skops loads the regressor with only its own type trusted."""
    sio = pytest.importorskip("skops.io")
    rng = np.random.default_rng(8)
    X, y, Q = _codes(rng, 60, 21, 10, n_outputs=2)
    reg = SignKNNRegressor(3).fit(X, y)
    path = tmp_path / "knn.skops"
    sio.dump(reg, path)
    untrusted = sio.get_untrusted_types(file=path)
    assert untrusted == ["sksign.estimators._sign_knn_regressor.SignKNNRegressor"]
    loaded = sio.load(path, trusted=untrusted)
    np.testing.assert_array_equal(loaded.predict(Q), reg.predict(Q))


@needs_faiss
def test_faiss_backends():
    """Check the exact faiss index gives the popcount predictions, and HNSW runs."""
    rng = np.random.default_rng(9)
    X, y, Q = _codes(rng, 500, 65, 50)
    expected = SignKNNRegressor(7).fit(X, y).predict(Q)
    flat = SignKNNRegressor(7, algorithm="faiss").fit(X, y)
    np.testing.assert_array_equal(flat.predict(Q), expected)
    approx = SignKNNRegressor(7, approximate=True).fit(X, y).predict(Q)
    assert approx.shape == expected.shape
    assert np.isfinite(approx).all()


@pytest.mark.parametrize("n_outputs", [None, 2])
def test_pipeline_after_htaf_net_regressor(n_outputs):
    """Check sign codes of a fitted HTAFNetRegressor feed the regressor."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6)).astype(np.float32)
    coef = rng.normal(size=(6,) if n_outputs is None else (6, n_outputs))
    y = (X @ coef).astype(np.float32)
    net = HTAFNetRegressor((16,), max_epochs=2, random_state=0).fit(X, y)
    pipe = Pipeline(
        [
            ("codes", SignCodeTransformer(net, prefit=True)),
            ("knn", SignKNNRegressor(n_neighbors=5)),
        ]
    ).fit(X, y)
    pred = pipe.predict(X[:30])
    assert pred.shape == y[:30].shape
    assert np.isfinite(pred).all()
    assert pipe.named_steps["knn"].n_bits_ == 16
    assert np.isfinite(pipe.score(X[:30], y[:30]))
