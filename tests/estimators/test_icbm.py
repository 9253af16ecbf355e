"""Tests for ICBMClassifier and the ICBM net (PAPERS.md part A, ICBM)."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from torch import nn

from sksign.estimators._icbm import ConceptRecord, ICBMClassifier
from sksign.nn.activations import HTAF
from sksign.nn.architectures.icbm import ICBMNet
from sksign.nn.summary import binary_summary

SMALL = {"n_concepts": 16, "hidden_layer_sizes": (64,), "max_epochs": 15, "lr": 3e-3}


@pytest.fixture(scope="module")
def fitted(digits):
    Xtr, _, ytr, _ = digits
    return ICBMClassifier(**SMALL, random_state=0).fit(Xtr, ytr)


def test_icbm_net_children(fitted):
    """Check the net is backbone -> fc -> concepts (HTAF) -> head."""
    net = fitted.module_
    assert isinstance(net, ICBMNet)
    assert [n for n, _ in net.named_children()] == [
        "backbone",
        "fc",
        "concepts",
        "head",
    ]
    assert isinstance(net.concepts, HTAF)
    assert net.fc.out_features == net.head.in_features == 16


def test_icbm_accuracy_above_chance(fitted, digits):
    """Check the bottlenecked net classifies digits (exact step inside)."""
    _, Xte, _, yte = digits
    assert fitted.score(Xte, yte) > 0.85


def test_transform_is_exact_binary(fitted, digits):
    """Check transform gives exactly 0/1 uint8 equal to the step's eval output."""
    _, Xte, _, _ = digits
    C = fitted.transform(Xte)
    assert C.dtype == np.uint8
    assert C.shape == (len(Xte), 16)
    assert set(np.unique(C)) <= {0, 1}
    out = {}
    net = fitted.module_.eval()
    h = net.concepts.register_forward_hook(lambda _m, _i, o: out.setdefault("c", o))
    with torch.no_grad():
        net(torch.as_tensor(Xte))
    h.remove()
    np.testing.assert_array_equal(C, out["c"].numpy().astype(np.uint8))
    names = fitted.get_feature_names_out()
    assert list(names[:2]) == ["concept0", "concept1"]


def test_explain_concepts_consistent_with_matrix(fitted, digits):
    """Check firing rates, groups and specificity against the concept matrix."""
    _, Xte, _, yte = digits
    C = fitted.transform(Xte)
    records = fitted.explain_concepts(Xte, yte)
    assert len(records) == 16
    labels = np.unique(yte)
    for rec in records:
        assert isinstance(rec, ConceptRecord)
        j = rec.index
        rates = np.array([C[yte == c, j].mean() for c in labels])
        assert rec.firing_rate == pytest.approx(C[:, j].mean())
        np.testing.assert_allclose([rec.class_rates[c] for c in labels], rates)
        assert rec.activated == [int(c) for c in labels[rates >= 0.5]]
        assert rec.non_activated == [int(c) for c in labels[rates < 0.5]]
        on = rates >= 0.5
        if on.any() and (~on).any():
            assert rec.status == "contrastive"
            spec = rates[on].mean() - rates[~on].mean()
            assert rec.specificity == pytest.approx(spec)
            assert "What do " in rec.prompt
            assert " lack?" in rec.prompt
        else:
            assert rec.status in ("silent", "constant")
            assert rec.specificity == 0.0
        assert 0.0 <= rec.specificity <= 1.0
        assert rec.name is None
        assert rec.to_dict()["index"] == j
    # A trained bottleneck has class-level concepts.
    assert max(r.specificity for r in records) > 0.5


def test_explain_concepts_calls_namer_once_per_concept(fitted, digits):
    """Check a fake namer is called once per concept with its record."""
    _, Xte, _, yte = digits
    calls = []

    def namer(rec):
        calls.append(rec)
        assert rec.name is None
        return f"name-{rec.index}"

    names = {c: f"digit {c}" for c in range(10)}
    records = fitted.explain_concepts(Xte, yte, namer=namer, class_names=names)
    assert [r.index for r in calls] == list(range(16))
    assert all(a is b for a, b in zip(calls, records))
    assert [r.name for r in records] == [f"name-{j}" for j in range(16)]
    contrastive = [r for r in records if r.status == "contrastive"]
    assert contrastive
    rec = contrastive[0]
    assert f"digit {rec.activated[0]}" in rec.prompt
    assert f"digit {rec.non_activated[0]}" in rec.prompt


def test_explain_concepts_bad_input(fitted, digits):
    """Check explain_concepts rejects bad y, class_names, namer and threshold."""
    _, Xte, _, yte = digits
    with pytest.raises(ValueError, match="one label per sample"):
        fitted.explain_concepts(Xte, yte[:-1])
    with pytest.raises(ValueError, match="class_names has 3 names"):
        fitted.explain_concepts(Xte, yte, class_names=["a", "b", "c"])
    with pytest.raises(ValueError, match="lacks the labels"):
        fitted.explain_concepts(Xte, yte, class_names={0: "zero"})
    with pytest.raises(TypeError, match="namer"):
        fitted.explain_concepts(Xte, yte, namer="gpt")
    with pytest.raises(ValueError, match="threshold"):
        fitted.explain_concepts(Xte, yte, threshold=0.0)


def test_concept_report(fitted, digits):
    """Check the report is a readable table (str) and a DataFrame on request."""
    _, Xte, _, yte = digits
    text = fitted.concept_report(Xte, yte, max_concepts=5)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["concept", "firing_rate", "specificity"]
    assert len(lines) == 2 + 5
    specs = [float(line.split()[2]) for line in lines[2:]]
    assert specs == sorted(specs, reverse=True)
    df = fitted.concept_report(Xte, yte, sort_by="index", as_frame=True)
    assert list(df["concept"]) == list(range(16))
    with pytest.raises(ValueError, match="sort_by"):
        fitted.concept_report(Xte, yte, sort_by="nope")


def test_clone_and_pickle_give_identical_predictions(fitted, digits):
    """Check pickle round trip and clone+refit reproduce the predictions."""
    Xtr, Xte, ytr, _ = digits
    pred = fitted.predict(Xte)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict(Xte), pred)
    np.testing.assert_array_equal(again.transform(Xte), fitted.transform(Xte))
    refit = clone(fitted).fit(Xtr, ytr)
    np.testing.assert_array_equal(refit.predict(Xte), pred)


def test_string_labels(digits):
    """Check string class labels flow through predict and the records."""
    Xtr, Xte, ytr, yte = digits
    names = np.array([f"d{i}" for i in range(10)])
    clf = ICBMClassifier(
        n_concepts=8, hidden_layer_sizes=(32,), max_epochs=3, random_state=0
    ).fit(Xtr, names[ytr])
    assert clf.predict(Xte[:3]).dtype.kind == "U"
    rec = clf.explain_concepts(Xte, names[yte])[0]
    assert set(rec.class_rates) == set(names)


def test_identity_backbone_on_embeddings(digits):
    """Check backbone="identity" trains on precomputed embeddings."""
    Xtr, Xte, ytr, yte = digits
    rng = np.random.default_rng(0)
    proj = rng.standard_normal((64, 32)).astype(np.float32)
    Etr, Ete = np.tanh(Xtr @ proj), np.tanh(Xte @ proj)
    clf = ICBMClassifier(
        "identity", n_concepts=32, max_epochs=15, lr=3e-3, random_state=0
    ).fit(Etr, ytr)
    assert isinstance(clf.module_.backbone, nn.Identity)
    assert clf.module_.fc.in_features == 32
    assert clf.score(Ete, yte) > 0.7


def test_module_backbone_frozen_and_copied(digits):
    """Check a module backbone is copied, and frozen when asked."""
    Xtr, _, ytr, _ = digits
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Linear(64, 24), nn.BatchNorm1d(24), nn.ReLU())
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    clf = ICBMClassifier(
        backbone, n_concepts=8, freeze_backbone=True, max_epochs=2, random_state=0
    ).fit(Xtr, ytr)
    for k, v in clf.module_.backbone.state_dict().items():
        torch.testing.assert_close(v, before[k])  # weights and BN statistics
    for k, v in backbone.state_dict().items():
        torch.testing.assert_close(v, before[k])  # the user's module untouched
    assert clf.module_.backbone is not backbone
    assert not any(p.requires_grad for p in clf.module_.backbone.parameters())
    # Not frozen: the copy trains, the user's module still does not.
    clf = ICBMClassifier(backbone, n_concepts=8, max_epochs=2, random_state=0)
    clf.fit(Xtr, ytr)
    w = clf.module_.backbone[0].weight
    assert not torch.allclose(w, before["0.weight"])
    torch.testing.assert_close(backbone[0].weight, before["0.weight"])


def test_cnn_backbone_on_images(digits):
    """Check backbone="cnn" takes 4-D images and flat rows with input_shape."""
    Xtr, Xte, ytr, _ = digits
    kw = {"n_concepts": 8, "hidden_layer_sizes": (16,), "conv_channels": (4,)}
    clf = ICBMClassifier("cnn", **kw, max_epochs=1, random_state=0)
    clf.fit(Xtr.reshape(-1, 1, 8, 8), ytr)
    assert clf.input_shape_ == (1, 8, 8)
    assert clf.transform(Xte.reshape(-1, 1, 8, 8)).shape == (len(Xte), 8)
    flat = ICBMClassifier("cnn", **kw, input_shape=(1, 8, 8), max_epochs=1)
    assert flat.fit(Xtr, ytr).predict(Xte).shape == (len(Xte),)


def test_binary_summary_of_icbm(fitted, digits):
    """Check binary_summary reports the concept layer's bits and firing rate."""
    _, Xte, _, _ = digits
    rows, table = binary_summary(fitted.module_, Xte)
    row = next(r for r in rows if r["layer"] == "concepts")
    assert row["binary_units"] == 16
    assert row["firing_rate"] == pytest.approx(fitted.transform(Xte).mean())
    assert "concepts" in table


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_concepts": 0}, "n_concepts"),
        ({"n_concepts": 2.5}, "n_concepts"),
        ({"backbone": "resnet"}, "backbone"),
        ({"backbone": nn.Linear}, "instance, not the class"),
        ({"backbone_activation": "sigmoid"}, "backbone_activation"),
        ({"concept_activation": "nope"}, "concept_activation"),
        ({"alpha0": -1.0}, "alpha0"),
        ({"freeze_backbone": "yes"}, "freeze_backbone"),
        ({"backbone": nn.Linear(10, 4)}, "could not process input"),
        ({"backbone": nn.Unflatten(1, (8, 8))}, r"shape \(batch, features\)"),
    ],
)
def test_bad_parameters_raise(digits, params, match):
    """Check bad parameters and ill-fitting backbones raise clear ValueErrors."""
    Xtr, _, ytr, _ = digits
    clf = ICBMClassifier(**{"max_epochs": 1, **params})
    with pytest.raises(ValueError, match=match):
        clf.fit(Xtr, ytr)


def test_module_parameter_is_rejected():
    """Check module=... is refused (the net is built from backbone)."""
    with pytest.raises(ValueError, match="backbone="):
        ICBMClassifier(module=nn.Linear(3, 2))
