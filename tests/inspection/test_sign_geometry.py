"""Tests for sksign.inspection: loo_purity and sign_gap (sign geometry)."""

import numpy as np
import pytest
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import sksign.metrics
from sksign.estimators import HTAFNetClassifier, SignKNNClassifier
from sksign.inspection import loo_purity, sign_gap
from sksign.kernels import pack_bits
from sksign.transformers import SignCodeTransformer

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _purity_reference(codes, y, k):
    """Brute-force float64 leave-one-out purity, ties by smaller index."""
    bits = (np.asarray(codes) > 0).astype(np.float64)
    n = len(bits)
    D = np.abs(bits[:, None, :] - bits[None, :, :]).sum(-1)
    out = np.empty(n)
    for i in range(n):
        others = np.array([j for j in range(n) if j != i])
        order = others[np.argsort(D[i, others], kind="stable")]
        out[i] = np.mean(y[order[:k]] == y[i])
    return out


@pytest.mark.parametrize("n_bits", [5, 13, 70])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_loo_purity_matches_brute_force(n_bits, k):
    """Check loo_purity equals a float64 reference, ties and duplicates included."""
    rng = np.random.RandomState(n_bits * 100 + k)
    n = 60
    codes = rng.randint(0, 2, size=(n, n_bits))
    codes[10:20] = codes[0]  # exact duplicates at other indices
    y = rng.randint(0, 3, size=n)
    ref = _purity_reference(codes, y, k)
    np.testing.assert_array_equal(loo_purity(codes, y, k, per_sample=True), ref)
    assert loo_purity(codes, y, k) == pytest.approx(ref.mean(), abs=1e-15)
    # +-1 codes, and packed codes with a bit count that is not a multiple of 8
    signs = np.where(codes > 0, 1, -1)
    np.testing.assert_array_equal(loo_purity(signs, y, k, per_sample=True), ref)
    packed = pack_bits(codes, axis=1)
    np.testing.assert_array_equal(
        loo_purity(packed, y, k, packed=True, n_bits=n_bits, per_sample=True), ref
    )


def test_loo_purity_duplicates_are_neighbours():
    """Check only the sample itself is left out, not its exact duplicates."""
    codes = np.zeros((5, 4), dtype=np.uint8)  # five identical codes
    y = np.array([0, 0, 1, 1, 1])
    # i=0 -> {1, 2}; i=1 -> {0, 2}; i=2 -> {0, 1}; i=3 -> {0, 1}; i=4 -> {0, 1}
    np.testing.assert_array_equal(
        loo_purity(codes, y, k=2, per_sample=True), [0.5, 0.5, 0.0, 0.0, 0.0]
    )
    codes = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1], [0, 0, 1]])
    assert loo_purity(codes, [0, 0, 1, 1], k=1) == 1.0


def test_loo_purity_bad_input():
    """Check k too large, mismatched y, NaN and bad packed input raise."""
    codes = np.eye(4)
    with pytest.raises(ValueError, match="k <= n_samples - 1"):
        loo_purity(codes, [0, 1, 0, 1], k=4)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        loo_purity(codes, [0, 1, 0], k=1)
    with pytest.raises(ValueError, match="'k' parameter of loo_purity"):
        loo_purity(codes, [0, 1, 0, 1], k=0)
    bad = codes.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        loo_purity(bad, [0, 1, 0, 1], k=1)
    with pytest.raises(TypeError, match="uint8"):
        loo_purity(codes, [0, 1, 0, 1], k=1, packed=True)


@pytest.fixture(scope="module")
def fitted(digits):
    X_train, _, y_train, _ = digits
    return HTAFNetClassifier(
        (64,), activation="relu", max_epochs=5, lr=1e-2, random_state=0
    ).fit(X_train, y_train)


def test_sign_gap(fitted, digits):
    """Check sign_gap = err(sign-kNN on the codes) - err(net)."""
    X_train, X_test, y_train, y_test = digits
    res = sign_gap(fitted, X_train, y_train, X_test, y_test, n_neighbors=3)
    assert res.net_accuracy == fitted.score(X_test, y_test)
    sct = SignCodeTransformer(fitted, prefit=True).fit(X_train)
    knn = SignKNNClassifier(3).fit(sct.transform(X_train), y_train)
    assert res.knn_accuracy == knn.score(sct.transform(X_test), y_test)
    assert res.gap == pytest.approx(res.knn_error - res.net_error)
    assert res.n_bits == 64
    assert res.layers == ["act0"]
    assert "sign-kNN" in res.definition
    assert -1.0 <= res.gap <= 1.0


def test_sign_gap_pipeline_and_mlp(digits):
    """Check sign_gap works on a Pipeline and on scikit-learn's MLPClassifier."""
    X_train, X_test, y_train, y_test = digits
    pipe = make_pipeline(
        StandardScaler(),
        HTAFNetClassifier((32,), activation="relu", max_epochs=3, random_state=0),
    ).fit(X_train, y_train)
    res = sign_gap(pipe, X_train, y_train, X_test, y_test)
    assert res.net_accuracy == pipe.score(X_test, y_test)
    mlp = MLPClassifier(hidden_layer_sizes=(32,), max_iter=50, random_state=0)
    mlp.fit(X_train, y_train)
    res = sign_gap(mlp, X_train, y_train, X_test, y_test, layers="all")
    assert res.net_accuracy == mlp.score(X_test, y_test)
    assert res.n_bits == 32


def test_old_import_path_still_works():
    """Check sksign.metrics keeps re-exporting the sign geometry functions."""
    from sksign.metrics import loo_purity as old_purity
    from sksign.metrics import sign_gap as old_gap

    assert old_purity is loo_purity
    assert old_gap is sign_gap
    assert {"loo_purity", "sign_gap"} <= set(sksign.metrics.__all__)
