"""The values the sign-kNN estimators read as codes, and those they refuse.

With ``packed=False`` a code holds one value per bit: 0/1, -1/+1 or bool (of
any numeric dtype). Anything else is refused by every method that takes `X`,
above all the uint8 bytes of packed codes, which read as bits ``x > 0`` would
give a silently wrong answer. With ``packed=True`` the rows must have
``ceil(n_bits / 8)`` bytes and zero padding bits. A refused call changes
nothing in a fitted estimator.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.datasets import load_digits

from sksign.estimators import HTAFNetClassifier, SignKNNClassifier, SignKNNRegressor
from sksign.kernels import pack_bits
from sksign.transformers import SignCodeTransformer

ESTIMATORS = [SignKNNClassifier, SignKNNRegressor]


def _codes(seed=0, n=60, n_bits=21, n_queries=15):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, size=(n, n_bits), dtype=np.uint8)
    Q = rng.integers(0, 2, size=(n_queries, n_bits), dtype=np.uint8)
    return X, rng.integers(0, 3, size=n), Q


def _encodings(bits):
    """The same 0/1 bits in each accepted encoding."""
    bits = np.asarray(bits, dtype=np.uint8)
    return {
        "uint8 0/1": bits,
        "bool": bits.astype(bool),
        "int8 +-1": 2 * bits.astype(np.int8) - 1,
        "float 0/1": bits.astype(np.float64),
        "float32 +-1": 2 * bits.astype(np.float32) - 1,
    }


def _query_methods(est):
    """The methods of a fitted estimator that take X, each as ``f(X)``."""
    methods = {
        "predict": est.predict,
        "kneighbors": est.kneighbors,
        "radius_neighbors": lambda X: est.radius_neighbors(X, radius=0.3),
        "score": lambda X: est.score(X, np.zeros(len(X), dtype=est._y.dtype)),
    }
    if hasattr(est, "predict_proba"):
        methods["predict_proba"] = est.predict_proba
    return methods


def _answers(est, Q):
    """Everything the estimator says about the queries `Q` (and training set)."""
    dist, ind = est.kneighbors(Q)
    rdist, rind = est.radius_neighbors(Q, radius=0.4, sort_results=True)
    out = {
        "predict": est.predict(Q),
        "kneighbors": (dist, ind),
        "kneighbors(None)": est.kneighbors(),
        "radius": [np.concatenate(rdist), np.concatenate(rind)],
    }
    if hasattr(est, "predict_proba"):
        out["predict_proba"] = est.predict_proba(Q)
    return out


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        for x, y in zip(np.atleast_1d(a[key]), np.atleast_1d(b[key]), strict=True):
            np.testing.assert_array_equal(x, y, err_msg=key)


@pytest.fixture(scope="module")
def digits_codes():
    """Sign codes of digits, as bits and packed, from a small ReLU net."""
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    net = HTAFNetClassifier((32,), activation="relu", max_epochs=2, random_state=0)
    net.fit(X[:1200], y[:1200])
    bits = SignCodeTransformer(net, prefit=True, output="bits").fit(X)
    packed = SignCodeTransformer(net, prefit=True, output="packed").fit(X)
    return bits.transform(X), packed.transform(X), packed.n_bits_, y


# ------------------------------------------------------------ packed as bits
@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_packed_codes_given_as_bits_are_refused(Estimator, digits_codes):
    """Check the silent mistake of the bug report is refused, naming the fix:
    packed digits codes given without packed=True."""
    bits, packed, n_bits, y = digits_codes
    assert packed.dtype == np.uint8
    assert packed.max() > 1
    msg = r"looks like packed bytes.*packed=True, n_bits="
    with pytest.raises(ValueError, match=msg):
        Estimator().fit(packed[:1200], y[:1200])
    # Fitted on the bits, packed bytes in queries of the same width are
    # refused by every method that takes X, and nothing changes.
    est = Estimator().fit(bits[:1200], y[:1200])
    before = _answers(est, bits[1200:])
    bytes_as_bits = np.resize(packed[1200:], bits[1200:].shape)
    for method in _query_methods(est).values():
        with pytest.raises(ValueError, match=msg):
            method(bytes_as_bits)
    _assert_same(_answers(est, bits[1200:]), before)
    # The right call gives the answers of the bits.
    right = Estimator(packed=True, n_bits=n_bits).fit(packed[:1200], y[:1200])
    _assert_same(_answers(right, packed[1200:]), before)


def test_packed_digits_codes_score_as_their_bits(digits_codes):
    """Check the accuracy of the bug report: packed codes with packed=True
    score exactly as their bits (not as bytes read x > 0)."""
    bits, packed, n_bits, y = digits_codes
    ref = SignKNNClassifier().fit(bits[:1200], y[:1200]).score(bits[1200:], y[1200:])
    clf = SignKNNClassifier(packed=True, n_bits=n_bits).fit(packed[:1200], y[:1200])
    assert clf.score(packed[1200:], y[1200:]) == ref
    assert ref > 0.5


def test_random_packed_bits_refused_with_the_message():
    """Check the message on pack_bits output: the values, the uint8 hint and
    the parameters to pass."""
    X, y, _ = _codes(n_bits=64)
    P = pack_bits(X)
    with pytest.raises(ValueError, match="other values") as info:
        SignKNNClassifier().fit(P, y)
    message = str(info.value)
    shown = message[message.index("[") + 1 : message.index("]")].split(", ")
    assert 1 <= len([v for v in shown if v != "..."]) <= 5
    assert all(int(v) > 1 for v in shown if v != "...")
    assert f"values up to {P.max()}" in message
    assert 'SignCodeTransformer(output="packed")' in message
    assert "packed=True, n_bits=" in message


# ---------------------------------------------------------------- encodings
@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_the_accepted_encodings_give_identical_answers(Estimator):
    """Check uint8 0/1, bool, int8 +-1, float 0/1 and float +-1 codes (and
    queries in another encoding than the fit) all give the same answers."""
    X, y, Q = _codes()
    ref = None
    queries = list(_encodings(Q).values())
    for i, Xe in enumerate(_encodings(X).values()):
        est = Estimator(n_neighbors=4).fit(Xe, y)
        answers = _answers(est, queries[(i + 1) % len(queries)])
        if ref is None:
            ref = answers
        _assert_same(answers, ref)


@given(
    bits=st.integers(1, 40).flatmap(
        lambda n_bits: hnp.arrays(np.uint8, (12, n_bits), elements=st.integers(0, 1))
    ),
    fit_encoding=st.sampled_from(list(_encodings(np.zeros((1, 1))))),
    query_encoding=st.sampled_from(list(_encodings(np.zeros((1, 1))))),
)
def test_property_any_encoding_gives_the_same_neighbours(
    bits, fit_encoding, query_encoding
):
    """Check any 0/1 array, in any accepted encoding for the fit and any for
    the queries, gives the kneighbors of the uint8 bits."""
    X, Q = bits[:8], bits[8:]
    ref = SignKNNClassifier(3).fit(X, np.arange(8) % 2).kneighbors(Q)
    est = SignKNNClassifier(3).fit(_encodings(X)[fit_encoding], np.arange(8) % 2)
    got = est.kneighbors(_encodings(Q)[query_encoding])
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])


# --------------------------------------------------------------- bad values
BAD = {
    "2": (lambda X: X.astype(np.int64) * 2, r"other values: \[2\]"),
    "0.5": (lambda X: X * 0.5, r"other values: \[0\.5\]"),
    "-3": (lambda X: X.astype(np.int16) * -3 + 1, r"other values: \[-2\]"),
    "NaN": (lambda X: np.where(X == 1, np.nan, 0.0), "NaN"),
    "inf": (lambda X: np.where(X == 1, np.inf, 0.0), "infinity"),
    "0 and -1": (lambda X: X.astype(np.int8) - (X[::-1] == 0), r"mixes .*0 and -1"),
}


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("bad", list(BAD))
def test_values_that_are_no_bits_are_refused_by_every_method(Estimator, bad):
    """Check fit and every query method refuse a value that is no bit, naming
    it, and leave the fitted estimator as it was."""
    X, y, Q = _codes()
    make, match = BAD[bad]
    Xbad, Qbad = make(X), make(Q)
    est = Estimator(n_neighbors=3).fit(X, y)
    before = _answers(est, Q)
    fitted_words = est._fit_words.copy()
    with pytest.raises(ValueError, match=match):
        est.fit(Xbad, y)
    for method in _query_methods(est).values():
        with pytest.raises(ValueError, match=match):
            method(Qbad)
    np.testing.assert_array_equal(est._fit_words, fitted_words)
    _assert_same(_answers(est, Q), before)


def test_one_stray_value_is_found_among_valid_bits():
    """Check a single bad value in a large array is found (and named)."""
    X, y, _ = _codes(n=400, n_bits=100)
    X = X.astype(np.float32)
    X[397, 61] = 0.999
    with pytest.raises(ValueError, match=r"\[0\.99"):
        SignKNNClassifier().fit(X, y)
    X[397, 61] = 1.0
    X[12, 3] = -1.0  # -1 among 0/1: two encodings at once
    with pytest.raises(ValueError, match="mixes"):
        SignKNNClassifier().fit(X, y)


def test_plus_minus_one_reads_minus_one_as_zero():
    """Check -1 is bit 0, as 0 is: +-1 codes match their 0/1 codes."""
    X, y, _ = _codes()
    signs = SignKNNClassifier().fit(2 * X.astype(np.int8) - 1, y)
    zeros = SignKNNClassifier().fit(X, y)
    np.testing.assert_array_equal(signs._fit_words, zeros._fit_words)
    # all -1 or all 0 columns are valid too
    np.testing.assert_array_equal(
        SignKNNClassifier(1).fit(-np.ones((3, 4)), [0, 1, 2]).kneighbors()[0], 0.0
    )


# ------------------------------------------------------------- packed width
@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_packed_rows_of_the_wrong_width_are_refused(Estimator):
    """Check rows that are not ceil(n_bits / 8) bytes are refused, in fit and
    in queries, with a message naming n_bits and the byte count."""
    X, y, Q = _codes(n_bits=21)
    P = pack_bits(X)  # 3 bytes
    for n_bits in (16, 25):
        nbytes = -(-n_bits // 8)
        msg = rf"n_bits={n_bits} .*ceil\({n_bits} / 8\) = {nbytes} bytes"
        with pytest.raises(ValueError, match=msg):
            Estimator(packed=True, n_bits=n_bits).fit(P, y)
    est = Estimator(packed=True, n_bits=21).fit(P, y)
    before = _answers(est, pack_bits(Q))
    wide = np.zeros((len(Q), 4), dtype=np.uint8)
    wide[:, :3] = pack_bits(Q)
    msg = r"X has 4 features, .*n_bits_=21 bits .*ceil\(21 / 8\) = 3 bytes"
    for method in _query_methods(est).values():
        with pytest.raises(ValueError, match=msg):
            method(wide)
        with pytest.raises(ValueError, match=r"X has 2 features"):
            method(wide[:, :2])
    _assert_same(_answers(est, pack_bits(Q)), before)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_nonzero_padding_bits_are_refused(Estimator):
    """Check set padding bits past n_bits are refused in fit and in queries,
    naming n_bits, the byte count and the rows."""
    X, y, Q = _codes(n_bits=21)
    P, PQ = pack_bits(X), pack_bits(Q)
    bad = P.copy()
    bad[[4, 9], -1] |= 0b0000_0100  # bit 22 of 24
    msg = r"nonzero padding bits: with n_bits=21.*3 bytes.*rows \[4, 9\]"
    with pytest.raises(ValueError, match=msg):
        Estimator(packed=True, n_bits=21).fit(bad, y)
    # 8 * n_bytes bits (n_bits=None, or 24) have no padding: the same rows fit.
    assert Estimator(packed=True).fit(bad, y).n_bits_ == 24
    est = Estimator(packed=True, n_bits=21).fit(P, y)
    before = _answers(est, PQ)
    bad_q = PQ.copy()
    bad_q[0, -1] |= 1
    for method in _query_methods(est).values():
        with pytest.raises(ValueError, match=r"nonzero padding bits.*rows \[0\]"):
            method(bad_q)
    _assert_same(_answers(est, PQ), before)


# --------------------------------------------------------------------- Dask
def test_dask_arrays_get_the_same_checks():
    """Check Dask fits and queries refuse packed bytes and bad padding too
    (the workers encode with the estimator's own checks)."""
    da = pytest.importorskip("dask.array")
    X, y, Q = _codes(n_bits=21)
    P = pack_bits(X)
    with pytest.raises(ValueError, match="looks like packed bytes"):
        SignKNNClassifier().fit(da.from_array(P, chunks=20), y)
    bad = P.copy()
    bad[30, -1] |= 1
    with pytest.raises(ValueError, match="nonzero padding bits"):
        SignKNNClassifier(packed=True, n_bits=21).fit(da.from_array(bad, chunks=20), y)
    sharded = SignKNNClassifier(3).fit(da.from_array(X, chunks=20), y)
    local = SignKNNClassifier(3).fit(X, y)
    Qbad = Q * 2
    for est in (sharded, local):
        with pytest.raises(ValueError, match=r"other values: \[2\]"):
            est.predict(da.from_array(Qbad, chunks=5)).compute()
    with pytest.raises(ValueError, match=r"other values: \[2\]"):
        sharded.predict(Qbad)
    np.testing.assert_array_equal(sharded.predict(Q), local.predict(Q))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("packed", [False, True])
def test_plain_query_arrays_answer_as_validated_ones(Estimator, packed, monkeypatch):
    """Check that plain ndarray queries, which skip scikit-learn's validation,
    get the answers of the same rows validated, also strided or in Fortran
    order, and that their values are still checked."""
    X, y, Q = _codes(seed=3)
    if packed:
        X, Q = pack_bits(X), pack_bits(Q)
    est = Estimator(n_neighbors=3, packed=packed, n_bits=21 if packed else None)
    est.fit(X, y)
    with monkeypatch.context() as m:
        m.setattr(Estimator, "_plain_query", lambda self, X: False)
        expected = est.predict(Q)
        dist, ind = est.kneighbors(Q)
    assert est._plain_query(Q)
    for view in (Q, np.asfortranarray(Q), np.repeat(Q, 2, axis=0)[::2]):
        np.testing.assert_array_equal(est.predict(view), expected)
        got = est.kneighbors(view)
        np.testing.assert_array_equal(got[0], dist)
        np.testing.assert_array_equal(got[1], ind)
    bad = Q.copy()
    if packed:
        bad[0, -1] |= 1  # a padding bit of the 21-bit codes
        match = "padding"
    else:
        bad[0, 0] = 2
        match = "0/1"
    with pytest.raises(ValueError, match=match):
        est.predict(bad)
    with pytest.raises(ValueError, match="features"):
        est.predict(Q[:, :-1])
