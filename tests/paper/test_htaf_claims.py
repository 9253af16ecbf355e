"""The HTAF paper's claims, checked at this scale (PAPERS.md part A).

Slow: each test trains a few small nets on scikit-learn's digits (X / 16),
mean of 3 seeds. `python -m sksign reproduce htaf` prints the full comparison
(digits and MNIST-5k, DHN / BNN / SNN, ICBM) into docs/_static/htaf_table.md.
Claims that do not hold at this scale are strict xfails with the measured
numbers in the reason, or, where the order of two close numbers moves with
the split or the thread count, assertions of the measured values with a
tolerance.
"""

import numpy as np
import pytest
import torch

from sksign.estimators import HTAFNetClassifier, ICBMClassifier
from sksign.nn import build_network

pytestmark = pytest.mark.slow

SEEDS = (0, 1, 2)


def _mean_score(digits, **params):
    Xtr, Xte, ytr, yte = digits
    return np.mean(
        [
            HTAFNetClassifier(**params, random_state=s).fit(Xtr, ytr).score(Xte, yte)
            for s in SEEDS
        ]
    )


def _first_layer_grad(digits, activation, depth=8, width=128, seed=0):
    Xtr, _, ytr, _ = digits
    torch.manual_seed(seed)
    net = build_network(
        "mlp", 64, 10, hidden_layer_sizes=(width,) * depth, activation=activation
    ).train()
    loss = torch.nn.functional.cross_entropy(
        net(torch.as_tensor(Xtr[:128])), torch.as_tensor(ytr[:128])
    )
    loss.backward()
    return float(net.fc0.weight.grad.norm())


_DEPTH8 = {
    "hidden_layer_sizes": (128,) * 8,
    "max_epochs": 15,
    "lr": 1e-3,
    "relaxation_gap": False,
}


def test_dhn_depth8_trains_without_batch_norm(digits):
    """Check a depth-8 DHN without BN trains well above chance with HTAF."""
    assert _mean_score(digits, activation="htaf", **_DEPTH8) > 0.6


def test_dhn_depth8_htaf_and_scaled_sigmoid_train_alike(digits):
    """Check a depth-8 DHN (no BN) trains alike with HTAF and with SS.

    Paper: HTAF beats SS on deep DHNs. At this scale it does not hold either
    way: the order depends on the split and on the thread count. Measured
    (depth 8, width 128, 15 epochs, 3 seeds, the tests' 75/25 split): HTAF
    0.862 vs SS 0.869 on one thread, 0.817 vs 0.829 on two, 0.80 vs 0.85 in
    an earlier run; HTAF 0.82 vs SS 0.75 on the benchmark's 80/20 split.
    Checked: both train (> 0.75) and lie within 7 points of each other.
    """
    htaf = _mean_score(digits, activation="htaf", **_DEPTH8)
    ss = _mean_score(digits, activation="scaled_sigmoid", **_DEPTH8)
    assert min(htaf, ss) > 0.75
    assert htaf == pytest.approx(ss, abs=0.07)


def test_htaf_gradient_does_not_vanish_at_depth8(digits):
    """Check the first-layer gradient of a depth-8 HTAF DHN is not vanishing."""
    assert _first_layer_grad(digits, "htaf") > 1e-3


@pytest.mark.xfail(
    strict=True,
    reason=(
        "Paper: scaled-sigmoid first-layer gradient norms < 1e-5 at depth 8. "
        "With PyTorch's default init (width 128, no BN) they are ~1, as large "
        "as HTAF's: measured 1.13 for SS vs 1.09 for HTAF (seed 0, 128 digits; "
        "python -m sksign reproduce htaf)."
    ),
)
def test_scaled_sigmoid_gradient_vanishes_at_depth8(digits):
    """Check the paper's claim that SS first-layer gradients vanish (< 1e-5)."""
    assert _first_layer_grad(digits, "scaled_sigmoid") < 1e-5


@pytest.fixture(scope="module")
def htaf_history(digits):
    Xtr, _, ytr, _ = digits
    clf = HTAFNetClassifier(
        (128, 128), max_epochs=15, lr=1e-3, relaxation_gap=True, random_state=0
    )
    return clf.fit(Xtr, ytr).history_


def test_exact_step_loses_little(htaf_history):
    """Check the exact step at inference costs < 3 points vs the smooth net."""
    assert abs(htaf_history[-1, "relaxation_gap"]) < 0.03
    assert htaf_history[-1, "binarization_rate"] > 0.8


@pytest.mark.xfail(
    strict=True,
    reason=(
        "Paper: > 98% of HTAF outputs within 0.1 of 0/1 with alpha0 * alpha1 "
        "~ 22. Measured 84.8% on digits after 15 epochs (width 128, depth 2, "
        "seed 0)."
    ),
)
def test_htaf_binarization_rate_above_98_percent(htaf_history):
    """Check the paper's binarization rate > 98% (alpha0 = 2, alpha1 = 11)."""
    assert htaf_history[-1, "binarization_rate"] > 0.98


@pytest.mark.parametrize("arch", ["bnn", "snn"])
def test_binary_and_spiking_nets_with_htaf_learn(digits, arch):
    """Check HTAF BNN and SNN (T = 4) reach > 90% on digits with exact steps."""
    score = _mean_score(
        digits,
        hidden_layer_sizes=(128,) * (4 if arch == "bnn" else 2),
        architecture=arch,
        max_epochs=15,
        lr=1e-3,
        relaxation_gap=False,
    )
    assert score > 0.9


def test_icbm_keeps_accuracy(digits):
    """Check ICBM's binary concepts cost at most 1 point vs a ReLU feature layer."""
    Xtr, Xte, ytr, yte = digits

    def score(concept_activation):
        return np.mean(
            [
                ICBMClassifier(
                    n_concepts=64,
                    hidden_layer_sizes=(256,),
                    concept_activation=concept_activation,
                    max_epochs=15,
                    random_state=s,
                )
                .fit(Xtr, ytr)
                .score(Xte, yte)
                for s in SEEDS
            ]
        )

    assert score("htaf") >= score("relu") - 0.01
