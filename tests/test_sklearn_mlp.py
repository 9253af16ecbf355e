"""Tests for sksign._sklearn_mlp: scikit-learn MLPs as float64 torch modules."""

import numpy as np
import pytest
import torch
from scipy.special import expit, softmax
from sklearn.exceptions import NotFittedError
from sklearn.neural_network import MLPClassifier, MLPRegressor
from torch import nn

from sksign._sklearn_mlp import hidden_layer_names, mlp_module
from sksign.metrics import gate_dominance_report, intervention_score
from sksign.transformers import SignCodeTransformer

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

ACTIVATIONS = ["relu", "tanh", "identity", "logistic"]


def _data(n_classes=3, n=60, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 7)
    y = rng.randint(0, n_classes, n)
    return X, y


def _numpy_forward(mlp, X):
    """Pre-activations of every hidden layer and the output, in float64 numpy."""
    act = {
        "relu": lambda z: np.maximum(z, 0.0),
        "tanh": np.tanh,
        "identity": lambda z: z,
        "logistic": expit,
    }[mlp.activation]
    a, zs = X.astype(np.float64), []
    for W, b in zip(mlp.coefs_, mlp.intercepts_):
        z = a @ W + b
        zs.append(z)
        a = act(z)
    return zs


def _forward(module, X):
    with torch.no_grad():
        return module(torch.from_numpy(np.asarray(X, dtype=np.float64))).numpy()


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_classifier_module_gives_sklearn_probabilities(activation):
    """Check softmax of the module's logits equals predict_proba (float64)."""
    X, y = _data()
    mlp = MLPClassifier((6, 5), activation=activation, max_iter=30, random_state=0)
    mlp.fit(X, y)
    module = mlp_module(mlp)
    assert [n for n, _ in module.named_children()] == [
        "fc0",
        "hidden0",
        "fc1",
        "hidden1",
        "out",
    ]
    assert all(p.dtype == torch.float64 for p in module.parameters())
    assert not any(p.requires_grad for p in module.parameters())
    logits = _forward(module, X)
    np.testing.assert_allclose(
        softmax(logits, axis=1), mlp.predict_proba(X), rtol=1e-12, atol=1e-15
    )
    np.testing.assert_array_equal(mlp.classes_[logits.argmax(1)], mlp.predict(X))


def test_binary_classifier_gets_two_logits():
    """Check a binary MLPClassifier's one output z becomes the logits (0, z)."""
    X, y = _data(n_classes=2)
    mlp = MLPClassifier((4,), max_iter=30, random_state=0).fit(X, y)
    logits = _forward(mlp_module(mlp), X)
    assert logits.shape == (len(X), 2)
    np.testing.assert_array_equal(logits[:, 0], 0.0)
    np.testing.assert_allclose(expit(logits[:, 1]), mlp.predict_proba(X)[:, 1])
    np.testing.assert_array_equal(mlp.classes_[logits.argmax(1)], mlp.predict(X))


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_regressor_module_gives_predictions(n_outputs):
    """Check an MLPRegressor's module outputs its predictions (one or more targets)."""
    X, _ = _data()
    y = np.random.RandomState(1).randn(len(X), n_outputs).squeeze()
    reg = MLPRegressor(
        hidden_layer_sizes=(5,), activation="tanh", max_iter=30, random_state=0
    ).fit(X, y)
    out = _forward(mlp_module(reg), X)
    np.testing.assert_allclose(out.squeeze(), reg.predict(X), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_truncated_module_hidden_inputs_are_pre_activations(activation):
    """Check hidden{i}'s input is z_i for a module cut after any hidden layer."""
    X, y = _data()
    mlp = MLPClassifier((6, 5, 4), activation=activation, max_iter=20, random_state=0)
    mlp.fit(X, y)
    zs = _numpy_forward(mlp, X)
    for n_hidden in range(4):
        module = mlp_module(mlp, n_hidden=n_hidden, readout=False)
        names = [n for n, _ in module.named_children()]
        assert names == [f"{k}{i}" for i in range(n_hidden) for k in ("fc", "hidden")]
        seen = {}
        handles = [
            module.get_submodule(f"hidden{i}").register_forward_pre_hook(
                lambda m, inp, i=i, seen=seen: seen.__setitem__(i, inp[0].numpy())
            )
            for i in range(n_hidden)
        ]
        _forward(module, X)
        for h in handles:
            h.remove()
        for i in range(n_hidden):
            np.testing.assert_allclose(seen[i], zs[i], rtol=1e-12, atol=1e-14)


def test_bad_calls():
    """Check unfitted MLPs and impossible cuts raise clear errors."""
    with pytest.raises(NotFittedError):
        mlp_module(MLPClassifier())
    with pytest.raises(NotFittedError):
        hidden_layer_names(MLPRegressor())
    X, y = _data()
    mlp = MLPClassifier((4, 3), max_iter=5, random_state=0).fit(X, y)
    assert hidden_layer_names(mlp) == ["hidden0", "hidden1"]
    with pytest.raises(ValueError, match=r"n_hidden must be in \[0, 2\]; got 3"):
        mlp_module(mlp, n_hidden=3, readout=False)
    with pytest.raises(ValueError, match="readout=True needs every hidden layer"):
        mlp_module(mlp, n_hidden=1)
    assert isinstance(mlp_module(mlp, n_hidden=0, readout=False), nn.Sequential)


def test_transformer_and_scorers_name_layers_alike():
    """Check SignCodeTransformer and the scorers read the same hidden{i} layers."""
    X, y = _data()
    mlp = MLPClassifier((6, 5), max_iter=40, random_state=0).fit(X, y)
    zs = _numpy_forward(mlp, X)
    codes = SignCodeTransformer(mlp, prefit=True, layers="hidden0").fit_transform(X)
    np.testing.assert_array_equal(codes, zs[0] > 0)
    # flipping every sign of hidden0 alone changes the accuracy; naming a
    # layer that is not there fails with the available names
    clean = intervention_score(mlp, X, y, alpha=0.0, layers=["hidden0"])
    assert clean == mlp.score(X, y)
    assert intervention_score(mlp, X, y, alpha=1.0, layers=["hidden0"]) != clean
    with pytest.raises(ValueError, match=r"'act0' was not found.*hidden0"):
        intervention_score(mlp, X, y, layers=["act0"])
    rep = gate_dominance_report(mlp, X)
    assert rep.layer == "hidden1"
    assert rep.readout == "out"
