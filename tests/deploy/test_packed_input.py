"""The packed estimators' input checks: a fast path for plain float rows that
gives what scikit-learn's validate_data gives, and the BLAS library held at
one thread during a call, its count restored afterwards."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np
import pytest
from sklearn.utils.validation import validate_data
from threadpoolctl import threadpool_info, threadpool_limits

from sksign.deploy import pack
from sksign.deploy._estimators import _plain_rows
from sksign.estimators import HTAFNetClassifier

N_FEATURES = 5


@pytest.fixture(scope="module")
def packed():
    rng = np.random.RandomState(0)
    X = rng.randn(60, N_FEATURES)
    y = (X[:, 0] > 0).astype(int)
    net = HTAFNetClassifier((16,), max_epochs=3, random_state=0).fit(X, y)
    return pack(net)


def _reference(est, X):
    """What the checks gave before the fast path: validate_data, float32, C order."""
    return np.ascontiguousarray(
        validate_data(est, X, reset=False, dtype=np.float32), dtype=np.float32
    )


def _inputs():
    rng = np.random.RandomState(1)
    base = rng.randn(7, N_FEATURES)
    wide = rng.randn(7, 2 * N_FEATURES)
    return {
        "float64": base,
        "float32": base.astype(np.float32),
        "one row": base[:1],
        "fortran": np.asfortranarray(base),
        "strided": wide[:, ::2],
        "int": (10 * base).astype(np.int64),
        "bool": base > 0,
        "list": base.tolist(),
        "float16": base.astype(np.float16),
    }


@pytest.mark.parametrize("name", list(_inputs()))
def test_rows_equal_validate_data(packed, name):
    """Check every valid input comes out as validate_data makes it."""
    X = _inputs()[name]
    got = packed._rows(X)
    want = _reference(packed, X)
    assert got.dtype == np.float32
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (np.full((3, N_FEATURES), np.nan), "NaN"),
        (np.full((3, N_FEATURES), np.inf), "infinity"),
        (np.full((3, N_FEATURES), 1e39), "too large for dtype\\('float32'\\)"),
        (np.zeros((0, N_FEATURES)), "0 sample"),
        (np.zeros((3, N_FEATURES + 1)), f"expecting {N_FEATURES} features"),
        (np.zeros(N_FEATURES), "Expected 2D array, got 1D array"),
        (np.zeros((3, N_FEATURES), dtype=complex), "[Cc]omplex"),
    ],
)
def test_bad_rows_get_scikit_learns_message(packed, bad, match):
    """Check the fast path declines what validate_data refuses, which then
    raises its own message."""
    if bad.ndim == 2 and bad.dtype.kind == "f":
        assert _plain_rows(bad, N_FEATURES) is None
    with pytest.raises(ValueError, match=match):
        packed.predict(bad)
    with pytest.raises(ValueError, match=match):
        _reference(packed, bad)


def test_feature_names_are_still_compared():
    """Check a net fitted on a DataFrame warns on an array as scikit-learn does
    (the fast path is not taken when there are names to compare)."""
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(0)
    X = pd.DataFrame(rng.randn(40, 3), columns=["a", "b", "c"])
    y = (X["a"] > 0).astype(int)
    packed = pack(HTAFNetClassifier((8,), max_epochs=2, random_state=0).fit(X, y))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        packed.predict(X.to_numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        packed.predict(X)


def _blas_threads():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_blas_runs_on_one_thread_in_a_call_and_is_restored(packed, n_jobs, monkeypatch):
    """Check the BLAS library runs on one thread of its own during a forward
    (the float products split over the net's threads instead), and the
    user's count comes back after it, also when the forward raises."""
    before = _blas_threads()
    if not before:
        pytest.skip("no BLAS library found by threadpoolctl")
    packed.set_params(n_jobs=n_jobs)
    X = np.zeros((4, N_FEATURES))
    seen = []
    net = packed.net_
    forward = type(net)._forward

    def spy(self, *args, **kwargs):
        seen.append(_blas_threads())
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(type(net), "_forward", spy)
    with threadpool_limits(3, user_api="blas"):
        outside = _blas_threads()
        packed.predict(X)
        assert seen == [[1] * len(before)]
        assert _blas_threads() == outside

        def broken(self, *args, **kwargs):
            raise RuntimeError("boom")

        monkeypatch.setattr(type(net), "_forward", broken)
        with pytest.raises(RuntimeError, match="boom"):
            packed.predict(X)
        assert _blas_threads() == outside
    assert _blas_threads() == before
    packed.set_params(n_jobs=None)
