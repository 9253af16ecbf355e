"""Weights in the classifier nets: sample_weight, class_weight, and the
inference mode and dtype of ICBMClassifier."""

import numpy as np
import pytest
import torch
from sklearn.utils.class_weight import compute_class_weight, compute_sample_weight
from skorch.callbacks import Callback
from skorch.dataset import ValidSplit

from sksign._compat import InvalidParameterError
from sksign.estimators import HTAFNetClassifier, ICBMClassifier
from sksign.nn import force_step_mode


def _htaf(**kw):
    return HTAFNetClassifier((8,), **kw)


def _icbm(**kw):
    return ICBMClassifier(n_concepts=6, hidden_layer_sizes=(8,), **kw)


CLASSIFIERS = {"htaf": _htaf, "icbm": _icbm}


def _exact(make, **kw):
    """A full-batch, unshuffled float64 net: its fit repeats to rounding."""
    params = {
        "max_epochs": 6,
        "lr": 1e-2,
        "batch_size": -1,
        "iterator_train__shuffle": False,
        "dtype": "float64",
        "random_state": 0,
    }
    return make(**{**params, **kw})


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(45, 5))
    y = np.array(["a", "b", "c"])[rng.integers(0, 3, len(X))]
    y[:3] = ["a", "b", "c"]  # every class present
    return X, y


class _RecordWeights(Callback):
    """The weights column of every training batch (None when unweighted)."""

    def __init__(self):
        self.weights = []

    def on_batch_begin(self, net, batch=None, training=False, **kwargs):
        if training:
            _, weight = net._targets_and_weights(batch[1])
            self.weights.append(None if weight is None else weight.numpy())


def _trained_weights(make, X, y, class_weight=None, **fit_kw):
    """The rows' weights the loss saw, in row order (one full batch)."""
    record = _RecordWeights()
    net = _exact(
        make, max_epochs=1, class_weight=class_weight, callbacks=[("record", record)]
    )
    net.fit(X, y, **fit_kw)
    assert len(record.weights) == 1
    return net, record.weights[0]


# -- sample_weight ----------------------------------------------------------------
@pytest.mark.parametrize("name", CLASSIFIERS)
def test_integer_weights_equal_repeated_rows(data, name):
    """Check a weighted fit equals the fit on rows repeated by their weights
    (zero: the row dropped), in float64 and on one full batch."""
    X, y = data
    make = CLASSIFIERS[name]
    w = np.random.default_rng(1).integers(0, 4, len(X))
    w[:3] = 1
    weighted = _exact(make).fit(X, y, sample_weight=w)
    repeated = _exact(make).fit(X.repeat(w, 0), y.repeat(w, 0))
    np.testing.assert_allclose(
        weighted.predict_proba(X), repeated.predict_proba(X), rtol=1e-9, atol=1e-12
    )
    np.testing.assert_array_equal(weighted.predict(X), repeated.predict(X))
    assert weighted.classes_.tolist() == ["a", "b", "c"]


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_real_weights_are_the_normalised_weighted_mean(data, name):
    """Check the loss is sum(w_i l_i) / sum(w_i): scaling every weight by a
    constant changes nothing, and weights of ones equal no weights."""
    X, y = data
    make = CLASSIFIERS[name]
    w = np.random.default_rng(2).uniform(0.1, 3.0, len(X))
    once = _exact(make).fit(X, y, sample_weight=w).predict_proba(X)
    scaled = _exact(make).fit(X, y, sample_weight=7.5 * w).predict_proba(X)
    np.testing.assert_allclose(once, scaled, rtol=1e-9, atol=1e-12)
    ones = _exact(make).fit(X, y, sample_weight=np.ones(len(X))).predict_proba(X)
    plain = _exact(make).fit(X, y).predict_proba(X)
    np.testing.assert_allclose(ones, plain, rtol=1e-9, atol=1e-12)


def test_weighted_loss_is_the_hand_written_one(data):
    """Check get_loss of a weighted batch is sum_i w_i CE_i / sum_i w_i."""
    X, y = data
    w = np.random.default_rng(3).uniform(0, 2, len(X))
    net, seen = _trained_weights(_htaf, X, y, sample_weight=w)
    np.testing.assert_allclose(seen, w, rtol=1e-15)
    logits = torch.randn(len(X), 3, dtype=torch.float64)
    labels = torch.as_tensor(net.label_encoder_.transform(y))
    targets = torch.column_stack([labels.double(), torch.as_tensor(w)])
    per_row = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    expected = (torch.as_tensor(w) * per_row).sum() / w.sum()
    net._weighted_training = True
    try:
        got = net.get_loss(logits, targets)
    finally:
        net._weighted_training = False
    assert float(got) == pytest.approx(float(expected), rel=1e-12)
    assert net.get_loss(logits, labels) == pytest.approx(float(per_row.mean()))


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_unweighted_fit_keeps_plain_labels(data, name):
    """Check a fit without weights trains on the labels alone, as before."""
    X, y = data
    net, seen = _trained_weights(CLASSIFIERS[name], X, y)
    assert seen is None
    assert not net._weighted_training


@pytest.mark.parametrize("name", CLASSIFIERS)
@pytest.mark.parametrize(
    ("weight", "match"),
    [
        (-np.ones(45), "Negative"),
        (np.ones(44), "shape"),
        (np.zeros(45), "non-zero"),
        (np.full(45, np.nan), "NaN"),
        (np.ones((45, 2)), "1D"),
    ],
    ids=["negative", "length", "zeros", "nan", "2d"],
)
def test_bad_sample_weight_is_refused_and_leaves_the_fitted_net(
    data, name, weight, match
):
    """Check bad weights raise scikit-learn's ValueError before anything
    changes: predictions, history, classes and input width stay."""
    X, y = data
    net = CLASSIFIERS[name](max_epochs=2, random_state=0).fit(X, y)
    before = net.predict_proba(X)
    with pytest.raises(ValueError, match=match):
        net.fit(np.hstack([X, X]), np.where(y == "a", "z", y), sample_weight=weight)
    np.testing.assert_array_equal(net.predict_proba(X), before)
    assert len(net.history_) == 2
    assert net.classes_.tolist() == ["a", "b", "c"]
    assert net.n_features_in_ == 5
    assert net._sample_weight_in is None
    assert not net._weighted_training


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_weights_on_one_class_only_are_refused(data, name):
    """Check weights that leave a single class with weight name the classes
    (scikit-learn's check_classifiers_one_label_sample_weights)."""
    X, y = data
    w = (y == "b").astype(float)
    with pytest.raises(ValueError, match=r"2 classes .*\['b'\]"):
        CLASSIFIERS[name](max_epochs=1).fit(X, y, sample_weight=w)
    # classes given up front: the net trains on what is weighted
    net = CLASSIFIERS[name](max_epochs=1, classes=["a", "b", "c"])
    assert net.fit(X, y, sample_weight=w).classes_.tolist() == ["a", "b", "c"]


# -- class_weight -------------------------------------------------------------------
@pytest.mark.parametrize("name", CLASSIFIERS)
def test_balanced_class_weight_is_compute_sample_weight(data, name):
    """Check "balanced" weighs the rows exactly as scikit-learn's
    compute_sample_weight, times sample_weight when given."""
    X, y = data
    make = CLASSIFIERS[name]
    _, seen = _trained_weights(make, X, y, class_weight="balanced")
    expected = compute_sample_weight("balanced", y)
    assert len(np.unique(expected)) == 3  # the classes are unbalanced
    np.testing.assert_array_equal(seen, expected)
    w = np.random.default_rng(4).uniform(0, 2, len(X))
    _, seen = _trained_weights(make, X, y, class_weight="balanced", sample_weight=w)
    np.testing.assert_allclose(seen, w * expected, rtol=1e-15)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_balanced_fit_equals_its_sample_weight(data, name):
    """Check class_weight="balanced" trains as sample_weight=the same weights."""
    X, y = data
    make = CLASSIFIERS[name]
    balanced = _exact(make, class_weight="balanced").fit(X, y)
    weighted = _exact(make).fit(
        X, y, sample_weight=compute_sample_weight("balanced", y)
    )
    np.testing.assert_allclose(
        balanced.predict_proba(X), weighted.predict_proba(X), rtol=1e-12
    )


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_dict_class_weight_weighs_each_class(data, name):
    """Check a dict weighs the rows of each class (classes left out weigh 1),
    and integer class weights train as the class's rows repeated."""
    X, y = data
    make = CLASSIFIERS[name]
    class_weight = {"a": 3.0, "c": 0.5}
    _, seen = _trained_weights(make, X, y, class_weight=class_weight)
    expected = np.array([class_weight.get(label, 1.0) for label in y])
    np.testing.assert_array_equal(seen, expected)
    np.testing.assert_array_equal(seen, compute_sample_weight(class_weight, y))
    w = np.random.default_rng(5).uniform(0, 2, len(X))
    _, seen = _trained_weights(make, X, y, class_weight=class_weight, sample_weight=w)
    np.testing.assert_allclose(seen, w * expected, rtol=1e-15)

    reps = np.where(y == "a", 3, 1)
    weighted = _exact(make, class_weight={"a": 3}).fit(X, y)
    repeated = _exact(make).fit(X.repeat(reps, 0), y.repeat(reps, 0))
    np.testing.assert_allclose(
        weighted.predict_proba(X), repeated.predict_proba(X), rtol=1e-9, atol=1e-12
    )


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_bad_class_weight_is_refused(data, name):
    """Check values other than None, "balanced" or a dict, negative weights
    and dicts naming unknown classes are refused before the fit changes."""
    X, y = data
    make = CLASSIFIERS[name]
    with pytest.raises(InvalidParameterError, match="class_weight"):
        make(class_weight="auto").fit(X, y)
    net = make(max_epochs=1, random_state=0).fit(X, y)
    before = net.predict_proba(X)
    with pytest.raises(ValueError, match="non-negative"):
        net.set_params(class_weight={"a": -1.0}).fit(X, y)
    with pytest.raises(ValueError, match="not in class_weight"):
        net.set_params(class_weight={"a": 2.0, "zz": 1.0}).fit(X, y)
    np.testing.assert_array_equal(net.predict_proba(X), before)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_partial_fit_takes_weights_but_not_balanced(data, name):
    """Check partial_fit weighs rows like fit, weighs a dict over the classes
    of the first call, and refuses "balanced" (one batch cannot estimate it)."""
    X, y = data
    make = CLASSIFIERS[name]
    w = np.random.default_rng(6).integers(0, 4, len(X))
    w[:3] = 1
    once = _exact(make).partial_fit(X, y, sample_weight=w)
    fitted = _exact(make).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(
        once.predict_proba(X), fitted.predict_proba(X), rtol=1e-12
    )
    net = make(max_epochs=1, random_state=0, class_weight={"a": 2.0, "c": 2.0})
    keep = y != "c"  # a dict over all classes, though this batch lacks one
    net.partial_fit(X, y).partial_fit(X[keep], y[keep], sample_weight=w[keep])
    assert len(net.history_) == 2
    bal = compute_class_weight("balanced", classes=np.unique(y), y=y)
    net = make(max_epochs=1, random_state=0, class_weight="balanced")
    with pytest.raises(ValueError, match="partial_fit"):
        net.partial_fit(X, y)
    net.set_params(class_weight=dict(zip(np.unique(y), bal, strict=True)))
    assert len(net.partial_fit(X, y).history_) == 1


def test_weights_reach_the_split_scores_and_repulsion(data):
    """Check a weighted fit with a stratified split, the relaxation gap and
    sign repulsion: the split stratifies by label, the scores are weighted."""
    X, y = data
    w = np.random.default_rng(7).uniform(0.5, 2, len(X))
    net = HTAFNetClassifier(
        (8,),
        activation="tanh",
        sign_repulsion=1.0,
        repulsion_warmup=0,
        repulsion_ramp=1,
        train_split=ValidSplit(3, stratified=True),
        relaxation_gap=True,
        max_epochs=2,
        random_state=0,
    )
    net.fit(X, y, sample_weight=w)
    row = net.history_[-1]
    assert 0.0 <= row["valid_acc"] <= 1.0
    assert "repulsion_loss" in row["batches"][0]
    assert np.isfinite(row["valid_loss"])
    icbm = _icbm(
        train_split=ValidSplit(3, stratified=True),
        relaxation_gap=True,
        max_epochs=2,
        random_state=0,
    ).fit(X, y, sample_weight=w)
    row = icbm.history_[-1]
    assert 0.0 <= row["valid_acc_step"] <= 1.0
    # the valid_acc of the last epoch is the weighted accuracy on its split
    icbm._weighted_training = True  # the split of the weighted fit
    try:
        _, valid = icbm.get_split_datasets(
            X.astype(np.float32),
            np.column_stack([icbm.label_encoder_.transform(y), w]).astype(np.float32),
        )
    finally:
        icbm._weighted_training = False
    Xv = np.stack([valid[i][0] for i in range(len(valid))])
    yw = np.stack([valid[i][1] for i in range(len(valid))])
    hits = icbm.predict(Xv) == icbm.classes_[yw[:, 0].astype(int)]
    assert row["valid_acc"] == pytest.approx(np.average(hits, weights=yw[:, 1]))


# -- ICBMClassifier: inference and dtype ----------------------------------------------
def test_icbm_inference_step_and_smooth(data):
    """Check "step" predicts through the concept bits and "smooth" through
    HTAF itself, switchable after fit without refitting."""
    X, y = data
    icbm = _icbm(max_epochs=3, random_state=0).fit(X, y)
    module = icbm.module_.eval()
    x = torch.as_tensor(X, dtype=torch.float32)
    with torch.no_grad():
        z = module.concept_logits(x)
        step = torch.softmax(module.head((z >= 0).float()), 1).double().numpy()
        with force_step_mode(module, "smooth"):
            smooth = torch.softmax(module(x), 1).double().numpy()
        htaf = torch.sigmoid(11.0 * torch.tanh(2.0 * z))
        by_hand = torch.softmax(module.head(htaf), 1).double().numpy()
    np.testing.assert_allclose(smooth, by_hand, rtol=1e-5)
    np.testing.assert_allclose(icbm.predict_proba(X), step, rtol=1e-5)
    assert not np.allclose(smooth, step)
    bits = icbm.transform(X)
    icbm.set_params(inference="smooth")
    np.testing.assert_allclose(icbm.predict_proba(X), smooth, rtol=1e-5)
    np.testing.assert_array_equal(icbm.transform(X), bits)  # always the bits
    icbm.set_params(inference="step")
    np.testing.assert_allclose(icbm.predict_proba(X), step, rtol=1e-5)
    with pytest.raises(InvalidParameterError, match="inference"):
        icbm.set_params(inference="soft").fit(X, y)


def test_icbm_smooth_inference_reaches_the_validation_loss(data):
    """Check the validation loss is computed with the inference function."""
    X, y = data
    kw = {"train_split": ValidSplit(3), "max_epochs": 2, "random_state": 0}
    step = _icbm(**kw).fit(X, y).history_
    smooth = _icbm(inference="smooth", **kw).fit(X, y).history_
    assert step[:, "train_loss"] == smooth[:, "train_loss"]  # training alike
    assert step[:, "valid_loss"] != smooth[:, "valid_loss"]


def test_icbm_dtype_is_honoured(data):
    """Check dtype="float64" gives float64 weights and rows, equals the
    float32 net up to float32 rounding after one epoch, and is validated."""
    X, y = data
    icbm = _icbm(max_epochs=1, dtype="float64", random_state=0).fit(X, y)
    assert {p.dtype for p in icbm.module_.parameters()} == {torch.float64}
    assert icbm._rows(X).dtype == np.float64
    f32 = _icbm(max_epochs=1, random_state=0).fit(X, y)
    assert {p.dtype for p in f32.module_.parameters()} == {torch.float32}
    np.testing.assert_allclose(icbm.predict_proba(X), f32.predict_proba(X), rtol=1e-3)
    assert icbm.transform(X).dtype == np.uint8
    with pytest.raises(InvalidParameterError, match="dtype"):
        _icbm(dtype="float16").fit(X, y)


def test_parameters_are_documented():
    """Check the new parameters stand in both classifiers' docstrings."""
    for cls in (HTAFNetClassifier, ICBMClassifier):
        doc = cls.__doc__
        assert 'class_weight : dict, "balanced" or None, default=None' in doc
        assert 'inference : {"step", "smooth"}, default="step"' in doc
        assert 'dtype : {"float32", "float64"}, default="float32"' in doc
        assert "sample_weight : array-like" in cls.fit.__doc__
        assert "sample_weight : array-like" in cls.partial_fit.__doc__
