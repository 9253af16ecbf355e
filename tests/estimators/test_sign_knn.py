"""Tests for SignKNNClassifier (sign-kNN on packed bit codes)."""

import importlib
import pickle

import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors
from sklearn.utils.estimator_checks import (
    check_param_validation,
    parametrize_with_checks,
)

from sksign.estimators import SignKNNClassifier
from sksign.kernels import pack_bits

try:
    import faiss  # noqa: F401

    HAS_FAISS = True
except ImportError:
    HAS_FAISS = False

needs_faiss = pytest.mark.skipif(not HAS_FAISS, reason="faiss is not installed")


def _clustered_codes(rng, n, n_bits, n_classes=3, flip=0.15, n_queries=None):
    """Codes around one random centre per class, with bits flipped at random.

    With `n_queries`, also return that many query codes around the same centres.
    """
    n_total = n + (n_queries or 0)
    centres = rng.integers(0, 2, size=(n_classes, n_bits), dtype=np.uint8)
    y = rng.integers(0, n_classes, size=n_total)
    X = centres[y] ^ (rng.random((n_total, n_bits)) < flip).astype(np.uint8)
    if n_queries is None:
        return X, y
    return X[:n], y[:n], X[n:]


class RealsAsBitsKNNClassifier(SignKNNClassifier):
    """SignKNNClassifier reading any real feature as the bit ``x > 0``.

    scikit-learn's common checks feed continuous data (Gaussian blobs), which
    the estimator refuses: a code holds 0/1, -1/+1 or bool values. This
    subclass thresholds the validated rows just before they are encoded, so
    that everything else (parameter and input validation, the search, the
    vote, pickling) meets the checks as it is.
    """

    def _encode(self, X, n_bits):
        return super()._encode(X > 0, n_bits)


@parametrize_with_checks([RealsAsBitsKNNClassifier()], expected_failed_checks={})
def test_sklearn_compatible(estimator, check):
    """Check scikit-learn's API conventions, with no expected failures."""
    check(estimator)


def test_continuous_features_are_refused():
    """Check that the common checks' kind of data is refused by the estimator
    itself (the reason for RealsAsBitsKNNClassifier above)."""
    X = np.random.default_rng(0).normal(size=(20, 4))
    y = np.arange(20) % 2
    with pytest.raises(ValueError, match="one value per bit"):
        SignKNNClassifier().fit(X, y)
    ref = SignKNNClassifier().fit(X > 0, y)
    np.testing.assert_array_equal(
        RealsAsBitsKNNClassifier().fit(X, y).predict_proba(X), ref.predict_proba(X > 0)
    )


def test_param_validation():
    """Check that every constructor parameter is validated."""
    check_param_validation("SignKNNClassifier", SignKNNClassifier())


@pytest.mark.parametrize("n_bits", [1, 7, 63, 65, 1000])
@pytest.mark.parametrize("weights", ["uniform", "distance"])
def test_matches_sklearn_hamming_knn(n_bits, weights):
    """Check distances equal sklearn's, and votes agree where no tie decides."""
    rng = np.random.default_rng(n_bits)
    k = 5
    X, y, Q = _clustered_codes(rng, 300, n_bits, flip=0.3, n_queries=80)
    ours = SignKNNClassifier(k, weights=weights).fit(X, y)
    ref = KNeighborsClassifier(k, weights=weights, metric="hamming")
    ref.set_params(algorithm="brute").fit(X, y)
    dist, _ind = ours.kneighbors(Q)
    ref_dist, _ = ref.kneighbors(Q)
    np.testing.assert_array_equal(dist, ref_dist)
    # Rows where the k nearest are unique (no tie at the k-th distance) and the
    # vote has a unique winner.
    full = np.sort(np.mean(Q[:, None, :] != X[None, :, :], axis=-1), axis=1)
    unique_set = full[:, k - 1] < full[:, k]
    proba = ours.predict_proba(Q)
    top2 = np.sort(proba, axis=1)[:, -2:]
    decided = unique_set & (top2[:, 1] > top2[:, 0])
    if n_bits >= 63:
        assert decided.sum() >= 10
    np.testing.assert_allclose(proba[unique_set], ref.predict_proba(Q)[unique_set])
    np.testing.assert_array_equal(ours.predict(Q)[decided], ref.predict(Q)[decided])


def test_kneighbors_without_X_leaves_each_sample_out():
    """Check kneighbors(None) matches sklearn's and never returns the sample."""
    rng = np.random.default_rng(0)
    X, y = _clustered_codes(rng, 200, 40)
    X[5] = X[3]  # a duplicate pair: each is the other's neighbour at 0
    ours = SignKNNClassifier(4).fit(X, y)
    ref = NearestNeighbors(n_neighbors=4, metric="hamming").fit(X)
    dist, ind = ours.kneighbors()
    np.testing.assert_array_equal(dist, ref.kneighbors()[0])
    assert not np.any(ind == np.arange(len(X))[:, None])
    assert ind[3, 0] == 5
    assert ind[5, 0] == 3
    msg = "Expected n_neighbors < n_samples_fit, but n_neighbors = 200"
    with pytest.raises(ValueError, match=msg):
        ours.kneighbors(n_neighbors=200)


def test_kneighbors_without_X_with_many_duplicates():
    """Check that the sample is dropped even when duplicates outnumber k."""
    X = np.zeros((6, 3), dtype=np.uint8)
    clf = SignKNNClassifier(2).fit(X, np.arange(6) % 2)
    ind = clf.kneighbors(return_distance=False)
    np.testing.assert_array_equal(ind[0], [1, 2])
    np.testing.assert_array_equal(ind[1], [0, 2])
    np.testing.assert_array_equal(ind[5], [0, 1])


def test_ties_broken_by_training_index():
    """Check that equally distant training codes come in index order."""
    X = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 0], [0, 1, 1, 0]])
    y = np.array([0, 1, 2, 1, 2])
    clf = SignKNNClassifier(3).fit(X, y)
    dist, ind = clf.kneighbors([[1, 1, 1, 0]])
    np.testing.assert_array_equal(ind, [[1, 2, 3]])
    np.testing.assert_array_equal(dist, [[0.25, 0.25, 0.25]])
    # 1-NN: four codes at distance 0.25... the first one (index 1) decides.
    assert SignKNNClassifier(1).fit(X, y).predict([[1, 1, 1, 0]])[0] == 1


def test_distance_weights_give_exact_matches_all_the_weight():
    """Check that neighbours at distance 0 take the whole vote (as sklearn)."""
    X = np.array([[1, 1, 1, 1], [0, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1]])
    y = np.array([0, 1, 1, 1])
    clf = SignKNNClassifier(4, weights="distance").fit(X, y)
    np.testing.assert_array_equal(clf.predict_proba([[1, 1, 1, 1]]), [[1.0, 0.0]])
    np.testing.assert_array_equal(clf.predict([[1, 1, 1, 1]]), [0])
    assert SignKNNClassifier(4).fit(X, y).predict([[1, 1, 1, 1]])[0] == 1


@pytest.mark.parametrize("n_bits", [5, 64, 130])
def test_packed_and_unpacked_input_agree(n_bits):
    """Check that packed uint8 rows give identical results (padding bits are
    checked to be zero: see test_sign_knn_input.py)."""
    rng = np.random.default_rng(0)
    X, y, Q = _clustered_codes(rng, 150, n_bits, n_queries=30)
    Xp, Qp = pack_bits(X), pack_bits(Q)
    plain = SignKNNClassifier(3).fit(2 * X.astype(np.int8) - 1, y)
    packed = SignKNNClassifier(3, packed=True, n_bits=n_bits).fit(Xp, y)
    assert packed.n_bits_ == plain.n_bits_ == n_bits
    assert packed.n_features_in_ == Xp.shape[1]
    for a, b in zip(plain.kneighbors(Q.astype(bool)), packed.kneighbors(Qp)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(plain.predict_proba(Q), packed.predict_proba(Qp))
    np.testing.assert_array_equal(plain.kneighbors()[1], packed.kneighbors()[1])
    # The model holds the packed words, never a float per bit.
    assert packed._fit_words.nbytes == 150 * 8 * (-(-n_bits // 64))


def test_one_sample():
    """Check fitting and predicting with a single sample."""
    clf = SignKNNClassifier(1).fit([[1, -1, 1]], ["a"])
    np.testing.assert_array_equal(clf.predict([[1, 1, 1]]), ["a"])
    np.testing.assert_array_equal(clf.kneighbors([[1, 1, 1]])[0], [[1 / 3]])
    with pytest.raises(ValueError, match="n_neighbors < n_samples_fit"):
        clf.kneighbors()


def test_radius_neighbors_matches_sklearn():
    """Check radius_neighbors returns sklearn's neighbour sets and distances."""
    rng = np.random.default_rng(1)
    X, y, Q = _clustered_codes(rng, 120, 33, n_queries=20)
    ours = SignKNNClassifier().fit(X, y)
    ref = NearestNeighbors(metric="hamming").fit(X)
    for query in (Q, None):
        d, i = ours.radius_neighbors(query, radius=0.25, sort_results=True)
        rd, ri = ref.radius_neighbors(query, radius=0.25, sort_results=True)
        for a, b, c, e in zip(d, i, rd, ri):
            np.testing.assert_array_equal(np.sort(b), np.sort(e))
            np.testing.assert_array_equal(a, np.sort(c))
            assert np.all(np.diff(a) >= 0)
    with pytest.raises(ValueError, match="radius"):
        ours.radius_neighbors(Q)


def test_batch_size_threads_memmap_and_iterators(tmp_path):
    """Check results are the same in batches, on threads, from memmap and iterators."""
    rng = np.random.default_rng(2)
    X, y, Q = _clustered_codes(rng, 400, 100, n_queries=90)
    ref = SignKNNClassifier(5).fit(X, y)
    expected = ref.kneighbors(Q)
    other = SignKNNClassifier(5, batch_size=7, n_jobs=2).fit(X, y)
    for a, b in zip(expected, other.kneighbors(Q)):
        np.testing.assert_array_equal(a, b)
    path = tmp_path / "q.i8"
    mm = np.memmap(path, dtype=np.int8, mode="w+", shape=Q.shape)
    mm[:] = 2 * Q.astype(np.int8) - 1
    mm.flush()
    ro = np.memmap(path, dtype=np.int8, mode="r", shape=Q.shape)
    np.testing.assert_array_equal(other.predict(ro), ref.predict(Q))
    batches = (Q[s : s + 25] for s in range(0, len(Q), 25))
    parts = ref.predict(batches)  # a generator: one array per batch
    np.testing.assert_array_equal(np.concatenate(list(parts)), ref.predict(Q))


def test_pickle_round_trip():
    """Check that a pickled model predicts identically."""
    rng = np.random.default_rng(3)
    X, y = _clustered_codes(rng, 100, 70)
    clf = SignKNNClassifier(3, weights="distance").fit(X, y)
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clone.predict_proba(X), clf.predict_proba(X))


def _snapshot(clf):
    return {
        k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(clf).items()
    }


def _assert_unchanged(clf, before, X):
    after = vars(clf)
    assert after.keys() == before.keys()
    for key, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(after[key], value)
        else:
            assert after[key] == value or after[key] is value


def test_bad_input_raises_and_leaves_fitted_model_unchanged():
    """Check each bad input raises a clear error and predictions stay the same."""
    rng = np.random.default_rng(4)
    X, y = _clustered_codes(rng, 50, 20)
    clf = SignKNNClassifier(3).fit(X, y)
    before, pred = _snapshot(clf), clf.predict(X)

    X_nan = X.astype(float)
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.fit(X_nan, y)
    with pytest.raises(ValueError, match="NaN"):
        clf.predict(X_nan)
    msg = "Expected n_neighbors <= n_samples_fit, but n_neighbors = 60, n_samples_fit"
    with pytest.raises(ValueError, match=msg):
        clf.kneighbors(X, n_neighbors=60)
    with pytest.raises(ValueError, match="n_bits=7 does not match X"):
        clf.set_params(n_bits=7).fit(X, y)
    clf.set_params(n_bits=None)
    _assert_unchanged(clf, before, X)
    np.testing.assert_array_equal(clf.predict(X), pred)

    packed = SignKNNClassifier(3, packed=True, n_bits=20).fit(pack_bits(X), y)
    before, pred = _snapshot(packed), packed.predict(pack_bits(X))
    with pytest.raises(TypeError, match="uint8"):
        packed.fit(pack_bits(X).astype(np.int64), y)
    with pytest.raises(TypeError, match="uint8"):
        packed.predict(pack_bits(X).astype(np.int64))
    for n_bits in (16, 25):
        with pytest.raises(ValueError, match=r"17 <= n_bits <= 24"):
            packed.set_params(n_bits=n_bits).fit(pack_bits(X), y)
    packed.set_params(n_bits=20)
    with pytest.raises(ValueError, match="n_neighbors = 100"):
        packed.set_params(n_neighbors=100).predict(pack_bits(X))
    packed.set_params(n_neighbors=3)
    with pytest.raises(ValueError, match="approximate=True needs"):
        packed.set_params(algorithm="popcount", approximate=True).fit(pack_bits(X), y)
    packed.set_params(algorithm="auto", approximate=False)
    _assert_unchanged(packed, before, X)
    np.testing.assert_array_equal(packed.predict(pack_bits(X)), pred)


def test_faiss_missing_raises_import_error_naming_the_extra(monkeypatch):
    """Check the ImportError when algorithm='faiss' and faiss is missing."""
    real = importlib.import_module

    def fake(name, *args, **kwargs):
        if name == "faiss":
            raise ImportError("No module named 'faiss'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", fake)
    with pytest.raises(ImportError, match=r"pip install sksign\[faiss\]"):
        SignKNNClassifier(algorithm="faiss").fit([[0, 1]] * 5, [0, 1, 0, 1, 0])


@needs_faiss
@pytest.mark.parametrize("n_bits", [7, 65, 256])
def test_faiss_backend_matches_popcount_kernel(n_bits):
    """Check IndexBinaryFlat returns the same neighbours, in the same tie order."""
    rng = np.random.default_rng(n_bits)
    X, y, Q = _clustered_codes(rng, 800, n_bits, flip=0.3, n_queries=100)
    ours = SignKNNClassifier(10).fit(X, y)
    flat = SignKNNClassifier(10, algorithm="faiss", n_jobs=2).fit(X, y)
    for a, b in zip(ours.kneighbors(Q), flat.kneighbors(Q)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(ours.kneighbors(), flat.kneighbors()):
        np.testing.assert_array_equal(a, b)
    clone = pickle.loads(pickle.dumps(flat))
    np.testing.assert_array_equal(clone.predict(Q), ours.predict(Q))


@needs_faiss
def test_faiss_approximate_index_finds_most_neighbours():
    """Check the HNSW index recalls most of the exact neighbours."""
    rng = np.random.default_rng(0)
    X, y, Q = _clustered_codes(rng, 2000, 128, n_classes=20, flip=0.1, n_queries=100)
    exact = SignKNNClassifier(5).fit(X, y)
    approx = SignKNNClassifier(5, approximate=True).fit(X, y)
    d_exact = exact.kneighbors(Q)[0]
    d_approx = approx.kneighbors(Q)[0]
    assert np.all(d_approx >= d_exact - 1e-12)
    assert np.mean(np.isclose(d_approx, d_exact)) > 0.9
    clone = pickle.loads(pickle.dumps(approx))
    np.testing.assert_array_equal(clone.kneighbors(Q)[0], d_approx)


@needs_faiss
@pytest.mark.parametrize("n_neighbors", [100, 120])
def test_faiss_approximate_never_returns_placeholder_neighbours(n_neighbors):
    """Check HNSW's -1 padding (too few codes found) never reaches the user."""
    # many identical codes: the graph walk finds fewer than k of them
    X = np.zeros((n_neighbors + 20, 64), dtype=np.uint8)
    X[-5:, :3] = 1
    y = np.arange(len(X)) % 3
    exact = SignKNNClassifier(n_neighbors).fit(X, y)
    approx = SignKNNClassifier(n_neighbors, approximate=True).fit(X, y)
    for query in (X[:30], None):
        d, ind = approx.kneighbors(query)
        assert (ind >= 0).all()
        assert (d >= 0).all()
        assert (np.diff(d, axis=1) >= 0).all()  # ascending, as documented
        d_exact, _ = exact.kneighbors(query)
        np.testing.assert_array_equal(d, d_exact)
        assert all(len(set(row)) == n_neighbors for row in ind)  # distinct codes
    # the vote counts the returned neighbours only (a -1 read as y[-1] before)
    _, ind = approx.kneighbors(X[:30])
    votes = np.stack([np.bincount(y[row], minlength=3) for row in ind]) / n_neighbors
    np.testing.assert_allclose(approx.predict_proba(X[:30]), votes)
