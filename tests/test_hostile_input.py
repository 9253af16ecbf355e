"""Hostile input: every public estimator, scorer and pairwise function.

Each case must end in a clear exception that names the problem (checked with
``match=``), and a fitted estimator must give exactly the same outputs
afterwards. Estimators are fitted once per module; failing refits run on deep
copies (a refit replaces the fitted state by design, so the copy is what is
compared before and after).
"""

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.utils._param_validation import InvalidParameterError
from torch import nn

from sksign.estimators import (
    HTAFNetClassifier,
    HTAFNetRegressor,
    ICBMClassifier,
    SignKNNClassifier,
)
from sksign.metrics import (
    gate_dominance,
    gate_dominance_report,
    intervention_score,
    loo_purity,
    make_intervention_scorer,
    pack_bits,
    packed_hamming_distances,
    packed_kneighbors,
    sign_gap,
    unpack_bits,
)
from sksign.transformers import SignCodeTransformer

RANDOM_STATE = 0
N_FEATURES = 64

# -- messages ------------------------------------------------------------------
NAN = r"Input X contains NaN"
INF = r"Input X contains infinity"
# scikit-learn's messages, or SignCodeTransformer's own (which also names texts)
EMPTY = r"Found array with 0 sample\(s\)|X has no samples"
NO_FEATURES = r"Found array with 0 feature\(s\)"
STRINGS = (
    r"could not convert string to float|not compatible with arrays of bytes/strings"
    r"|reads numbers, but X holds text"
)
COMPLEX = r"Complex data not supported"
WRONG_WIDTH = r"X has 10 features, but \w+ is expecting \d+ features"
ONE_D = r"Expected 2D array, got 1D array"
LENGTHS = r"inconsistent numbers of samples"
NAN_OUTPUT = r"(?i)\bnan\b"


# ---------------------------------------------------------------------------
# fitted estimators (once per module) and their reference outputs
# ---------------------------------------------------------------------------
def _net_params():
    return {"hidden_layer_sizes": (16,), "max_epochs": 2, "random_state": RANDOM_STATE}


@pytest.fixture(scope="module")
def data(digits):
    X_train, _, y_train, _ = digits
    return X_train[:200], y_train[:200]


OUTPUT_METHODS = ("predict", "predict_proba", "decision_function", "transform")


def _outputs(est, X):
    out = {}
    for method in OUTPUT_METHODS:
        try:
            func = getattr(est, method)
        except AttributeError:
            continue
        out[method] = func(X)
    return out


class _Fitted:
    """A fitted estimator, its input format and its reference outputs."""

    def __init__(self, est, X, y):
        self.est, self.X, self.y = est, X, y
        self.reference = _outputs(est, X)

    def assert_unchanged(self, est=None):
        """The estimator (or a copy) still gives exactly the reference outputs."""
        now = _outputs(self.est if est is None else est, self.X)
        assert now.keys() == self.reference.keys()
        for method, value in self.reference.items():
            np.testing.assert_array_equal(now[method], value, err_msg=method)


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    clf = HTAFNetClassifier(**_net_params()).fit(X, y)
    sct = SignCodeTransformer(clf, prefit=True, layers="all").fit(X)
    codes = sct.transform(X)
    packed = np.packbits(codes[:, :13], axis=1)
    return {
        "HTAFNetClassifier": _Fitted(clf, X, y),
        "HTAFNetRegressor": _Fitted(
            HTAFNetRegressor(**_net_params()).fit(X, y / 9.0), X, y / 9.0
        ),
        "ICBMClassifier": _Fitted(
            ICBMClassifier(n_concepts=8, **_net_params()).fit(X, y), X, y
        ),
        "SignCodeTransformer": _Fitted(sct, X, y),
        "SignKNNClassifier": _Fitted(
            SignKNNClassifier(n_neighbors=3).fit(codes, y), codes, y
        ),
        "SignKNNClassifier-packed": _Fitted(
            SignKNNClassifier(n_neighbors=3, packed=True, n_bits=13).fit(packed, y),
            packed,
            y,
        ),
    }


ESTIMATORS = [
    "HTAFNetClassifier",
    "HTAFNetRegressor",
    "ICBMClassifier",
    "SignCodeTransformer",
    "SignKNNClassifier",
]
CLASSIFIERS = ["HTAFNetClassifier", "ICBMClassifier", "SignKNNClassifier"]


def _methods(f):
    return list(f.reference)


# ---------------------------------------------------------------------------
# hostile X at predict / transform time
# ---------------------------------------------------------------------------
def _hostile_X(case, X):
    """A hostile version of the valid input X (float rows or 0/1 codes)."""
    _n, d = X.shape
    Xf = X[:5].astype(np.float64)
    if case == "nan":
        Xf[2, 3] = np.nan
        return Xf
    if case == "inf":
        Xf[1, 0] = np.inf
        return Xf
    if case == "empty":
        return X[:0]
    if case == "no_features":
        return np.empty((5, 0), dtype=X.dtype)
    if case == "object_strings":
        Xo = X[:3].astype(object)
        Xo[1, 2] = "a"
        return Xo
    if case == "strings":
        return np.full((3, d), "x")
    if case == "complex":
        return X[:3].astype(np.complex128) + 1j
    if case == "wrong_width":
        return X[:5, :10]
    if case == "one_d":
        return X[0]
    raise AssertionError(case)


HOSTILE_X = {
    "nan": NAN,
    "inf": INF,
    "empty": EMPTY,
    "no_features": NO_FEATURES,
    "object_strings": STRINGS,
    "strings": STRINGS,
    "complex": COMPLEX,
    "wrong_width": WRONG_WIDTH,
    "one_d": ONE_D,
}


@pytest.mark.parametrize("case", list(HOSTILE_X))
@pytest.mark.parametrize("name", ESTIMATORS)
def test_hostile_X_raises_clearly_and_model_unchanged(name, case, fitted):
    """Check that each output method rejects hostile X by name, model unchanged."""
    f = fitted[name]
    bad = _hostile_X(case, f.X)
    for method in _methods(f):
        with pytest.raises(ValueError, match=HOSTILE_X[case]):
            getattr(f.est, method)(bad)
    f.assert_unchanged()


@pytest.mark.parametrize("name", ESTIMATORS)
def test_one_sample_is_fine(name, fitted):
    """Check that one sample is valid input and gives the first reference row."""
    f = fitted[name]
    for method, ref in f.reference.items():
        got = getattr(f.est, method)(f.X[:1])
        if ref.dtype.kind == "f":  # BLAS may sum a 1-row batch in another order
            np.testing.assert_allclose(got, ref[:1], rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(got, ref[:1])


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(ESTIMATORS),
    row=st.integers(0, 9),
    col=st.integers(0, 1000),
    value=st.sampled_from([np.nan, np.inf, -np.inf]),
)
def test_non_finite_anywhere_is_rejected(fitted, name, row, col, value):
    """Check that a NaN or inf at any position is rejected, not silently used."""
    f = fitted[name]
    bad = f.X[:10].astype(np.float32)
    bad[row, col % bad.shape[1]] = value
    match = NAN if np.isnan(value) else INF
    method = _methods(f)[0]
    with pytest.raises(ValueError, match=match):
        getattr(f.est, method)(bad)


@settings(max_examples=20, deadline=None)
@given(
    name=st.sampled_from(ESTIMATORS),
    width=st.integers(1, 200),
)
def test_any_wrong_width_is_rejected(fitted, name, width):
    """Check that any number of columns other than the fitted one is rejected."""
    f = fitted[name]
    d = f.X.shape[1]
    if width == d:
        width += 1
    bad = np.zeros((3, width), dtype=f.X.dtype)
    with pytest.raises(ValueError, match=rf"X has {width} features, but"):
        getattr(f.est, _methods(f)[0])(bad)


def test_packed_knn_rejects_wrong_dtype_and_width(fitted):
    """Check that packed codes of the wrong dtype or width are rejected by name."""
    f = fitted["SignKNNClassifier-packed"]
    with pytest.raises(TypeError, match=r"packed=True, X must hold bit-packed"):
        f.est.predict(f.X.astype(np.int64))
    with pytest.raises(ValueError, match=r"X has 3 features, but SignKNN"):
        f.est.predict(np.zeros((2, 3), dtype=np.uint8))
    f.assert_unchanged()


# ---------------------------------------------------------------------------
# hostile fit
# ---------------------------------------------------------------------------
def _fit_case(case, f, name):
    X, y = f.X, f.y
    if case == "lengths":
        return (X, y[:-3]), ValueError, LENGTHS
    if case == "y_none":
        return (X, None), ValueError, r"requires y to be passed"
    if case == "nan_X":
        Xn = X.astype(np.float64)
        Xn[7, 1] = np.nan
        return (Xn, y), ValueError, NAN
    if case == "nan_y":
        yn = y.astype(np.float64)
        yn[3] = np.nan
        return (X, yn), ValueError, r"Input y contains NaN"
    if case == "empty":
        return (X[:0], y[:0]), ValueError, EMPTY
    if case == "no_features":
        return (X[:, :0], y), ValueError, NO_FEATURES
    if case == "strings":
        return (np.full(X.shape, "x"), y), ValueError, STRINGS
    if case == "complex":
        return (X.astype(np.complex128), y), ValueError, COMPLEX
    if case == "one_class":
        return (X[:6], np.zeros(6, dtype=int)), ValueError, r"at least 2 classes"
    raise AssertionError(case)


FIT_CASES = [
    "lengths",
    "y_none",
    "nan_X",
    "nan_y",
    "empty",
    "no_features",
    "strings",
    "complex",
]


@pytest.mark.parametrize("case", FIT_CASES)
@pytest.mark.parametrize("name", [n for n in ESTIMATORS if n != "SignCodeTransformer"])
def test_hostile_fit_raises_clearly_and_model_unchanged(name, case, fitted):
    """Check that a failing refit raises by name and leaves the model as it was."""
    f = fitted[name]
    est = copy.deepcopy(f.est)
    args, exc, match = _fit_case(case, f, name)
    with pytest.raises(exc, match=match):
        est.fit(*args)
    f.assert_unchanged(est)


@pytest.mark.parametrize("case", [*FIT_CASES, "one_class"])
def test_sign_code_transformer_fit_hostile(case, fitted):
    """Check that fitting the transformer's own net rejects hostile data by name."""
    f = fitted["HTAFNetClassifier"]
    sct = SignCodeTransformer(HTAFNetClassifier(**_net_params()))
    args, exc, match = _fit_case(case, f, "SignCodeTransformer")
    with pytest.raises(exc, match=match):
        sct.fit(*args)
    assert not hasattr(sct, "estimator_")


@pytest.mark.parametrize("name", ["HTAFNetClassifier", "ICBMClassifier"])
def test_one_class_fit_is_rejected(name, fitted):
    """Check that a net classifier refuses data of a single class, by name."""
    f = fitted[name]
    est = copy.deepcopy(f.est)
    with pytest.raises(ValueError, match=r"at least 2 classes"):
        est.fit(f.X[:1], f.y[:1])
    f.assert_unchanged(est)


@pytest.mark.parametrize(
    "name", ["HTAFNetClassifier", "HTAFNetRegressor", "ICBMClassifier"]
)
def test_failed_refit_with_other_width_leaves_net_usable(name, fitted):
    """Check that a refit failing on y after a new X width keeps the old model."""
    f = fitted[name]
    est = copy.deepcopy(f.est)
    with pytest.raises(ValueError, match=LENGTHS):
        est.fit(f.X[:, :10], f.y[:-3])
    f.assert_unchanged(est)


def test_failed_prefit_refit_with_other_width_leaves_transformer_usable(fitted):
    """Check that a prefit refit on X of the wrong width keeps the old transformer."""
    f = fitted["SignCodeTransformer"]
    sct = copy.deepcopy(f.est)
    with pytest.raises(ValueError, match=r"X has 10 features, but the estimator"):
        sct.fit(f.X[:, :10])
    f.assert_unchanged(sct)


# ---------------------------------------------------------------------------
# hostile parameters
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("param", ["alpha0", "alpha1"])
@pytest.mark.parametrize("value", [-1.0, 0.0, np.nan, np.inf, "2", True])
@pytest.mark.parametrize(
    "name", ["HTAFNetClassifier", "HTAFNetRegressor", "ICBMClassifier"]
)
def test_bad_alpha_rejected(name, param, value, fitted):
    """Check that non-positive or non-real HTAF alphas are rejected by name."""
    f = fitted[name]
    est = copy.deepcopy(f.est).set_params(**{param: value})
    with pytest.raises(
        ValueError, match=rf"'{param}' parameter of \w+ must be a positive real"
    ):
        est.fit(f.X[:20], f.y[:20])


@settings(max_examples=25, deadline=None)
@given(
    alpha=st.one_of(
        st.floats(max_value=-1e-9, allow_nan=False),
        st.floats(min_value=1.0 + 1e-9, allow_nan=False),
        st.just(float("nan")),
    )
)
def test_intervention_alpha_outside_unit_interval(fitted, alpha):
    """Check that an intervention alpha outside [0, 1] is rejected by name."""
    f = fitted["HTAFNetClassifier"]
    with pytest.raises(
        InvalidParameterError, match=r"'alpha' parameter .* \[0.0, 1.0\]"
    ):
        intervention_score(f.est, f.X[:10], f.y[:10], alpha=alpha)
    with pytest.raises(
        InvalidParameterError, match=r"'alpha' parameter .* \[0.0, 1.0\]"
    ):
        make_intervention_scorer(alpha=alpha)


@pytest.mark.parametrize("n_neighbors", [201, 10**9])
def test_knn_huge_n_neighbors(n_neighbors, fitted):
    """Check that more neighbours than training codes is rejected by name."""
    f = fitted["SignKNNClassifier"]
    est = copy.deepcopy(f.est).set_params(n_neighbors=n_neighbors)
    est.fit(f.X, f.y)
    for method in ("predict", "predict_proba", "kneighbors"):
        with pytest.raises(ValueError, match=r"Expected n_neighbors <= n_samples_fit"):
            getattr(est, method)(f.X[:2])
    with pytest.raises(ValueError, match=r"Expected n_neighbors <= n_samples_fit"):
        f.est.kneighbors(f.X[:2], n_neighbors=n_neighbors)
    f.assert_unchanged()


@pytest.mark.parametrize(
    ("n_neighbors", "exc", "match"),
    [
        (0, ValueError, r"Expected n_neighbors > 0"),
        (-3, ValueError, r"Expected n_neighbors > 0"),
        (2.5, TypeError, r"n_neighbors must be an int"),
        (True, TypeError, r"n_neighbors must be an int"),
    ],
)
def test_knn_kneighbors_bad_k(n_neighbors, exc, match, fitted):
    """Check that kneighbors rejects a non-positive or non-integer k by name."""
    f = fitted["SignKNNClassifier"]
    with pytest.raises(exc, match=match):
        f.est.kneighbors(f.X[:2], n_neighbors=n_neighbors)
    f.assert_unchanged()


@pytest.mark.parametrize("n_bits", [8, 17, 100])
def test_knn_packed_n_bits_must_fit_width(n_bits, fitted):
    """Check that n_bits that do not fit the packed width are rejected by name."""
    f = fitted["SignKNNClassifier-packed"]
    with pytest.raises(ValueError, match=rf"n_bits={n_bits} does not fit packed rows"):
        SignKNNClassifier(packed=True, n_bits=n_bits).fit(f.X, f.y)
    with pytest.raises(ValueError, match=r"n_bits=5 does not match X"):
        SignKNNClassifier(n_bits=5).fit(np.unpackbits(f.X, axis=1), f.y)


@pytest.mark.parametrize("radius", [-0.5, float("nan")])
def test_knn_radius_must_be_a_distance(radius, fitted):
    """Check that a negative or NaN radius is rejected by name."""
    f = fitted["SignKNNClassifier"]
    with pytest.raises(ValueError, match=r"radius"):
        f.est.radius_neighbors(f.X[:2], radius=radius)


# ---------------------------------------------------------------------------
# pairwise functions
# ---------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(wa=st.integers(1, 20), wb=st.integers(1, 20), n=st.integers(1, 5))
def test_pairwise_mismatched_widths(wa, wb, n):
    """Check that packed codes of different widths are rejected by name."""
    if wa == wb:
        wb += 1
    A = np.zeros((n, wa), dtype=np.uint8)
    B = np.zeros((n + 1, wb), dtype=np.uint8)
    match = rf"same number of bytes per row; got {wa} and {wb}"
    with pytest.raises(ValueError, match=match):
        packed_hamming_distances(A, B)
    with pytest.raises(ValueError, match=match):
        packed_kneighbors(A, B, 1)


@settings(max_examples=30, deadline=None)
@given(n_bytes=st.integers(1, 16), n_bits=st.integers(1, 200))
def test_pairwise_n_bits_must_fit_width(n_bytes, n_bits):
    """Check that n_bits outside (8 * (n_bytes - 1), 8 * n_bytes] is rejected."""
    A = np.zeros((3, n_bytes), dtype=np.uint8)
    if 8 * (n_bytes - 1) < n_bits <= 8 * n_bytes:
        assert packed_hamming_distances(A, n_bits=n_bits).shape == (3, 3)
        assert unpack_bits(A, n_bits=n_bits).shape == (3, n_bits)
        return
    match = rf"n_bits={n_bits} does not fit packed rows of {n_bytes} bytes"
    with pytest.raises(ValueError, match=match):
        packed_hamming_distances(A, n_bits=n_bits)
    with pytest.raises(ValueError, match=match):
        packed_kneighbors(A, A, 1, n_bits=n_bits)
    with pytest.raises(ValueError, match=match):
        unpack_bits(A, n_bits=n_bits)


@pytest.mark.parametrize(
    "dtype", [np.float64, np.int64, np.int8, np.bool_, object, "<U1"]
)
def test_pairwise_rejects_unpacked_dtypes(dtype):
    """Check that anything but uint8 packed codes is rejected, naming the dtype."""
    A = np.zeros((3, 2)).astype(dtype)
    match = r"must be (bit-packed )?codes of dtype uint8"
    with pytest.raises(TypeError, match=match):
        packed_hamming_distances(A)
    with pytest.raises(TypeError, match=match):
        packed_kneighbors(A, A, 1)
    with pytest.raises(TypeError, match=match):
        unpack_bits(A)


@pytest.mark.parametrize(
    ("A", "match"),
    [
        (np.zeros((3, 2), dtype=np.complex64), COMPLEX),
        (np.zeros((0, 2), dtype=np.uint8), EMPTY),
        (np.zeros((3, 0), dtype=np.uint8), NO_FEATURES),
        (np.zeros(4, dtype=np.uint8), ONE_D),
    ],
)
def test_pairwise_rejects_bad_shapes(A, match):
    """Check that complex, empty, zero-width and 1-D codes are rejected by name."""
    with pytest.raises(ValueError, match=match):
        packed_hamming_distances(A)
    with pytest.raises(ValueError, match=match):
        packed_kneighbors(A, A, 1)


def test_packed_kneighbors_too_many_neighbours():
    """Check that k > n_samples_B is rejected by name."""
    A = np.zeros((3, 2), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"Expected n_neighbors <= n_samples_fit"):
        packed_kneighbors(A, A, 4)
    with pytest.raises(InvalidParameterError, match=r"'n_neighbors' parameter"):
        packed_kneighbors(A, A, 0)


@pytest.mark.parametrize(
    ("bits", "exc", "match"),
    [
        ([[1.0, np.nan, 0.0]], ValueError, r"bits contains NaN"),
        ([["a", "b"]], TypeError, r"must hold 0/1, \+-1 or bool values; got dtype <U1"),
        (np.array([[1 + 1j]]), TypeError, r"got dtype complex128"),
        (np.array([[1, None]], dtype=object), TypeError, r"got dtype object"),
    ],
)
def test_pack_bits_rejects_non_bits(bits, exc, match):
    """Check that pack_bits rejects NaN, strings, complex and objects by name."""
    with pytest.raises(exc, match=match):
        pack_bits(bits)


def test_pack_bits_rejects_inf():
    """Check that infinite values are not taken as bits."""
    with pytest.raises(ValueError, match=r"(?i)inf"):
        pack_bits([[1.0, np.inf, 0.0]])


# ---------------------------------------------------------------------------
# scorers
# ---------------------------------------------------------------------------
SCORERS = {
    "intervention_score": lambda est, X, y: intervention_score(
        est, X, y, random_state=0
    ),
    "gate_dominance": lambda est, X, y: gate_dominance(est, X, y),
    "sign_gap": lambda est, X, y: sign_gap(est, X, y, X, y, n_neighbors=1),
}


@pytest.mark.parametrize(
    "case", ["nan", "inf", "empty", "no_features", "strings", "complex", "wrong_width"]
)
@pytest.mark.parametrize("scorer", list(SCORERS))
def test_scorers_reject_hostile_X(scorer, case, fitted):
    """Check that the scorers reject hostile X by name and leave the net as it was."""
    f = fitted["HTAFNetClassifier"]
    bad = _hostile_X(case, f.X)
    y = f.y[: len(bad)]
    with pytest.raises(ValueError, match=HOSTILE_X[case]):
        SCORERS[scorer](f.est, bad, y)
    f.assert_unchanged()
    assert not f.est.module_.training


@pytest.mark.parametrize("scorer", ["intervention_score", "sign_gap"])
def test_scorers_reject_mismatched_lengths(scorer, fitted):
    """Check that len(X) != len(y) is rejected by name."""
    f = fitted["HTAFNetClassifier"]
    with pytest.raises(ValueError, match=LENGTHS):
        SCORERS[scorer](f.est, f.X[:20], f.y[:19])
    with pytest.raises(ValueError, match=r"requires y"):
        intervention_score(f.est, f.X[:20], None)
    f.assert_unchanged()


@pytest.mark.parametrize("scorer", list(SCORERS))
def test_scorers_reject_a_regressor(scorer, fitted):
    """Check that the scorers refuse a regressor by name."""
    f = fitted["HTAFNetRegressor"]
    with pytest.raises(TypeError, match=r"needs a classifier .* HTAFNetRegressor"):
        SCORERS[scorer](f.est, f.X[:20], np.arange(20) % 3)


@pytest.mark.parametrize("scorer", list(SCORERS))
def test_scorers_reject_a_non_net(scorer, fitted):
    """Check that the scorers refuse an estimator that is no net, by name."""
    f = fitted["SignKNNClassifier"]
    with pytest.raises(TypeError, match=r"needs a fitted sksign/skorch net"):
        SCORERS[scorer](f.est, f.X[:20], f.y[:20])


def test_gate_dominance_hostile_X_ref(fitted):
    """Check that a hostile X_ref is rejected by name."""
    f = fitted["HTAFNetClassifier"]
    with pytest.raises(ValueError, match=NAN):
        gate_dominance(f.est, f.X, X_ref=_hostile_X("nan", f.X))
    with pytest.raises(ValueError, match=EMPTY):
        gate_dominance_report(f.est, f.X, X_ref=f.X[:0])


@pytest.mark.parametrize(
    ("codes", "y", "kwargs", "exc", "match"),
    [
        ("nan", None, {}, ValueError, r"contains NaN"),
        ("empty", None, {}, ValueError, EMPTY),
        ("no_features", None, {}, ValueError, NO_FEATURES),
        ("strings", None, {}, TypeError, r"got dtype <U1"),
        ("complex", None, {}, ValueError, COMPLEX),
        (None, "short", {}, ValueError, LENGTHS),
        (None, None, {"k": 10**6}, ValueError, r"Expected k <= n_samples - 1"),
        (None, None, {"k": 0}, InvalidParameterError, r"'k' parameter"),
        (None, None, {"packed": True, "n_bits": 3}, ValueError, r"does not fit"),
        (None, "2d", {}, ValueError, r"y should be a 1d array"),
    ],
)
def test_loo_purity_hostile(codes, y, kwargs, exc, match, fitted):
    """Check that loo_purity rejects hostile codes, y and k by name."""
    f = fitted["SignKNNClassifier"]
    C, yy = f.X, f.y
    if codes is not None:
        C = _hostile_X(codes, f.X)
        yy = f.y[: len(C)]
    if kwargs.get("packed"):
        C = np.packbits(C, axis=1)
    if y == "short":
        yy = f.y[:-1]
    elif y == "2d":
        yy = np.c_[f.y, f.y]
    with pytest.raises(exc, match=match):
        loo_purity(C, yy, **kwargs)


def test_loo_purity_rejects_nan_labels(fitted):
    """Check that NaN labels are rejected by name."""
    f = fitted["SignKNNClassifier"]
    y = f.y.astype(np.float64)
    y[0] = np.nan
    with pytest.raises(ValueError, match=r"Input y contains NaN"):
        loo_purity(f.X, y, k=3)


# ---------------------------------------------------------------------------
# nets whose forward yields NaN
# ---------------------------------------------------------------------------
class _NaNOnLargeInput(nn.Module):
    """NaN wherever the input exceeds 2 in size (a layer that overflows).

    The nets below are fine on the training data (values in [0, 1]), so they
    fit; finite but large input rows then make their forward yield NaN.
    """

    def forward(self, x):
        return torch.where(x.abs() > 2, torch.full_like(x, float("nan")), x)


def _nan_preactivation_net():
    torch.manual_seed(0)
    return nn.Sequential(
        _NaNOnLargeInput(), nn.Linear(N_FEATURES, 8), nn.ReLU(), nn.Linear(8, 3)
    )


class _NaNLogitsNet(nn.Module):
    """A sound MLP whose logits are NaN on rows with an entry above 2 in size."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(N_FEATURES, 8)
        self.act = nn.ReLU()
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        logits = self.out(self.act(self.fc(x)))
        overflow = (x.abs() > 2).any(dim=1, keepdim=True)
        return torch.where(overflow, torch.full_like(logits, float("nan")), logits)


def _nan_logits_net():
    torch.manual_seed(0)
    return _NaNLogitsNet()


def _large_rows(X):
    """Finite rows (they pass input validation) on which the nets give NaN."""
    X = X[:20].copy()
    X[::2, 0] = 5.0
    return X


def _nan_weights(est, attr):
    est = copy.deepcopy(est)
    with torch.no_grad():
        getattr(est.module_, attr).weight.fill_(float("nan"))
    return est


@pytest.mark.parametrize("output", ["bits", "packed"])
def test_sign_code_transformer_nan_net_raises(output, data):
    """Check that a net with NaN pre-activations makes transform raise by name."""
    X, _ = data
    net = _nan_preactivation_net()
    sct = SignCodeTransformer(net, layers="all", output=output).fit(X)
    reference = sct.transform(X)
    with pytest.raises(ValueError, match=NAN_OUTPUT):
        sct.transform(_large_rows(X))
    assert all(not m._forward_pre_hooks for m in sct.estimator_.modules())
    np.testing.assert_array_equal(sct.transform(X), reference)


def test_sign_code_transformer_nan_sksign_net_raises(fitted):
    """Check that an sksign net with NaN weights makes transform raise by name."""
    f = fitted["HTAFNetClassifier"]
    bad = _nan_weights(f.est, "fc0")
    # the NaN may be caught by fit (it runs a probe batch) or by transform
    with pytest.raises(ValueError, match=NAN_OUTPUT):
        SignCodeTransformer(bad, prefit=True).fit(f.X).transform(f.X[:5])


def test_icbm_transform_nan_net_raises(fitted):
    """Check that an ICBM with NaN concept pre-activations makes transform raise."""
    f = fitted["ICBMClassifier"]
    bad = _nan_weights(f.est, "fc")
    with pytest.raises(ValueError, match=NAN_OUTPUT):
        bad.transform(f.X[:5])


@pytest.mark.parametrize("make_net", [_nan_preactivation_net, _nan_logits_net])
@pytest.mark.parametrize("kind", ["sign_flip", "magnitude"])
def test_intervention_score_nan_net_raises(make_net, kind, data):
    """Check that intervention_score on a NaN-producing net raises by name."""
    X, y = data
    net = make_net()
    assert 0.0 <= intervention_score(net, X[:20], y[:20] % 3, kind=kind) <= 1.0
    with pytest.raises(ValueError, match=NAN_OUTPUT):
        intervention_score(net, _large_rows(X), y[:20] % 3, kind=kind, random_state=0)


@pytest.mark.parametrize("make_net", [_nan_preactivation_net, _nan_logits_net])
def test_gate_dominance_nan_net_raises(make_net, data):
    """Check that gate_dominance on a NaN-producing net raises, naming NaN."""
    X, _ = data
    net = make_net()
    gate_dominance(net, X[:20])
    with pytest.raises(ValueError, match=NAN_OUTPUT):
        gate_dominance(net, _large_rows(X))


def test_sign_gap_nan_net_raises(data):
    """Check that sign_gap on a NaN-producing net raises by name."""
    X, y = data
    net = _nan_preactivation_net()
    with pytest.raises(ValueError, match=NAN_OUTPUT):
        sign_gap(net, X[:50], y[:50] % 3, _large_rows(X), y[:20] % 3)


def test_nan_net_leaves_no_hooks_and_mode(data):
    """Check that even the NaN nets leave no hooks behind and keep their mode."""
    X, y = data
    net = _nan_preactivation_net().train()
    sct = SignCodeTransformer(net, layers="all").fit(X)
    sct.estimator_.train()
    bad, yb = _large_rows(X), y[:20] % 3
    # each call fails on the NaN, naming it; the net must come out as it went in
    with pytest.raises(ValueError, match=r"layer '2' produced NaN pre-activations"):
        sct.transform(bad)
    with pytest.raises(ValueError, match=r"net's output contains NaN or infinity"):
        intervention_score(net, bad, yb)
    with pytest.raises(ValueError, match=r"layer '2' produced NaN or infinite"):
        gate_dominance(net, bad, yb)
    with pytest.raises(ValueError, match=r"net's output contains NaN or infinity"):
        sign_gap(net, X[:20], yb, bad, yb)
    for module in (net, sct.estimator_):
        assert module.training
        for m in module.modules():
            assert not m._forward_hooks
            assert not m._forward_pre_hooks


def test_knn_odd_but_valid_code_formats(fitted):
    """Check that bool, +-1, float and numeric object codes give the same votes."""
    f = fitted["SignKNNClassifier"]
    odd = [
        f.X[:3].astype(bool),
        (2 * f.X[:3].astype(np.int8) - 1),
        f.X[:3].astype(np.float32),
        f.X[:3].astype(object),  # numbers in an object array are fine
    ]
    ref = f.reference["predict"][:3]
    for X in odd:
        np.testing.assert_array_equal(f.est.predict(X), ref)
