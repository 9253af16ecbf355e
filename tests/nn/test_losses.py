"""Tests for the intra-class sign repulsion loss and its schedule."""

import numpy as np
import pytest
import torch

from sksign.estimators import HTAFNetClassifier
from sksign.nn.layers.losses import repulsion_lambda, sign_repulsion_loss


def test_repulsion_loss_hand_made_batch():
    """Check the loss on a batch computed by hand (float64 numpy)."""
    z = torch.tensor([[1.0, -1.0, 2.0], [0.5, 0.5, -3.0], [-1.0, 1.0, 1.0]])
    y = torch.tensor([0, 0, 1])
    tau = 0.5
    g = 1 / (1 + np.exp(-z.numpy().astype(np.float64) / tau))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    expected = (g[0] @ g[1]) ** 2  # the only same-class pair (both orders)
    got = sign_repulsion_loss(z, y, tau=tau)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    gt = np.tanh(z.numpy().astype(np.float64) / tau)
    gt /= np.linalg.norm(gt, axis=1, keepdims=True)
    got_t = sign_repulsion_loss(z, y, tau=tau, gate="tanh")
    assert got_t.item() == pytest.approx((gt[0] @ gt[1]) ** 2, rel=1e-6)


def test_repulsion_loss_all_off_gates_are_no_escape():
    """Check units all far below 0 (gates underflow) still give the penalty."""
    z = torch.full((2, 5), -10.0)
    z[:, 0] = -9.0  # the least negative unit dominates the direction
    y = torch.tensor([3, 3])
    assert torch.sigmoid(z / 0.005).max().item() == 0.0  # underflows in float32
    assert sign_repulsion_loss(z, y, tau=0.005).item() == pytest.approx(1.0)


def test_repulsion_loss_no_pairs_is_zero():
    """Check a batch without same-class pairs gives 0."""
    z = torch.randn(3, 4)
    assert sign_repulsion_loss(z, torch.tensor([0, 1, 2])).item() == 0.0


def test_repulsion_schedule():
    """Check lambda is 0 in warm-up, then ramps linearly to its final value."""
    assert repulsion_lambda(50, 500.0, 50, 200) == 0.0
    assert repulsion_lambda(150, 500.0, 50, 200) == 250.0
    assert repulsion_lambda(250, 500.0, 50, 200) == 500.0
    assert repulsion_lambda(900, 500.0, 50, 200) == 500.0


def test_classifier_applies_repulsion(digits):
    """Check the classifier adds the penalty after warm-up and records lambda."""
    X_train, _, y_train, _ = digits
    clf = HTAFNetClassifier(
        (32,),
        activation="relu",
        max_epochs=3,
        random_state=0,
        sign_repulsion=10.0,
        repulsion_warmup=1,
        repulsion_ramp=2,
    ).fit(X_train[:300], y_train[:300])
    lams = clf.history_[:, "repulsion_lambda"]
    assert lams == [0.0, 5.0, 10.0]
    assert "repulsion_loss" in clf.history_[-1]["batches"][0]
    assert not clf.module_.act0._forward_pre_hooks
