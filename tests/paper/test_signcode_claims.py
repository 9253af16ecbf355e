"""Slow checks of the Sign Code paper's claims at this scale (PAPERS.md, part B).

(a) tanh / ReLU / SiLU / GELU FFNNs (depth 3, widths 32/128/512, 20 epochs) on
scikit-learn's digits, exactly the quick setting of
``python -m sksign reproduce signcode`` (see docs/_static/signcode_table.md):
sign flips hurt more than projected magnitude noise; tanh loses least under
magnitude noise; Z1 grows with width for SiLU/GELU; the sign-kNN gap is small
for wide nets; LOO purity correlates with test accuracy.
(b) Intra-class sign repulsion keeps training accuracy while test accuracy
drops well below the unregularised net's.

Each test asserts what was measured to hold and records in its docstring
what did not.
"""

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from sksign.estimators import HTAFNetClassifier
from sksign.inspection import loo_purity, sign_gap
from sksign.metrics import gate_dominance_report, intervention_score
from sksign.transformers import SignCodeTransformer

pytestmark = pytest.mark.slow

ACTIVATIONS = ("tanh", "relu", "silu", "gelu")
WIDTHS = (32, 128, 512)


@pytest.fixture(scope="module")
def split():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def ffnn_table(split):
    """Diagnostics of 12 FFNNs: activation x width, depth 3, 20 epochs."""
    torch.set_num_threads(2)
    X_train, X_test, y_train, y_test = split
    rows = {}
    for act in ACTIVATIONS:
        for width in WIDTHS:
            net = HTAFNetClassifier(
                (width,) * 3, activation=act, max_epochs=20, random_state=0
            ).fit(X_train, y_train)
            common = {"layers": "all", "random_state": 0, "n_repeats": 3}
            row = {"acc": net.score(X_test, y_test)}
            for flip in ("literal", "gate"):
                row[f"flip_{flip}"] = intervention_score(
                    net,
                    X_test,
                    y_test,
                    kind="sign_flip",
                    flip=flip,
                    alpha=0.2,
                    **common,
                )
            for noise in ("standard", "matched"):
                row[f"mag_{noise}"] = intervention_score(
                    net,
                    X_test,
                    y_test,
                    kind="magnitude",
                    noise=noise,
                    alpha=1.0,
                    X_ref=X_train,
                    **common,
                )
            rep = gate_dominance_report(net, X_test, X_ref=X_train)
            row["Z1"] = rep.median_Z1
            row["delta_bar"] = rep.delta_bar
            row["gap"] = sign_gap(net, X_train, y_train, X_test, y_test).gap
            codes = SignCodeTransformer(net, prefit=True).fit(X_train).transform(X_test)
            row["purity"] = loo_purity(codes, y_test, k=10)
            rows[act, width] = row
    return rows


def test_sign_flips_hurt_more_than_magnitude_noise(ffnn_table):
    """Check a literal flip of 20% of signs costs more than |N(0,1)| magnitudes.

    Asserted: averaged over the 12 models, the accuracy drop under
    sign_flip/literal at alpha=0.2 exceeds the drop under magnitude/standard
    at alpha=1.0 (every magnitude replaced, signs projected back); measured
    0.36 vs 0.25, and per model at widths 32 and 128.
    Not reproduced: the gate flip (h -> phi(-z)) at alpha=0.2 costs ReLU/SiLU/
    GELU only 0.3-3 points at width 512 (literal: 8-12), and magnitude/matched
    at alpha=1.0 costs ReLU 26 points at width 512, more than either flip.
    """
    drop = {
        key: (r["acc"] - r["flip_literal"], r["acc"] - r["mag_standard"])
        for key, r in ffnn_table.items()
    }
    assert np.mean([d[0] for d in drop.values()]) > np.mean(
        [d[1] for d in drop.values()]
    ), drop
    for (_, width), (flip, mag) in drop.items():
        if width < WIDTHS[-1]:
            assert flip > mag, drop


def test_tanh_loses_least_under_magnitude_noise(ffnn_table):
    """Check tanh loses the least under standard |N(0,1)| magnitude noise.

    The paper ties the loss to the activation's even part at z = 1 (tanh 0).
    Asserted at the widest width; measured: tanh -0.4, ReLU 6.8, SiLU 7.8,
    GELU 6.9 points (and tanh least at every width).
    """
    width = WIDTHS[-1]
    loss = {a: ffnn_table[a, width]["acc"] - ffnn_table[a, width]["mag_standard"]
            for a in ACTIVATIONS}  # fmt: skip
    assert min(loss, key=loss.get) == "tanh", loss


def test_z1_grows_with_width_for_silu_gelu(ffnn_table):
    """Check the median Z1 of SiLU and GELU nets is larger at the widest width.

    Measured (widths 32/128/512): SiLU 0.22/0.09/0.49, GELU 0.32/0.13/0.36:
    larger at 512 than at 32 and 128, but not monotone, and far below the
    paper's 4-10; tanh has the larger Z1 here (3-5; paper 0.4-0.6), while
    delta_bar matches the paper (tanh ~0, SiLU/GELU 0.8-0.93).
    """
    for act in ("silu", "gelu"):
        z = [ffnn_table[act, w]["Z1"] for w in WIDTHS]
        assert z[-1] > max(z[:-1]), (act, z)
        assert ffnn_table[act, WIDTHS[-1]]["delta_bar"] > 0.5
    assert abs(ffnn_table["tanh", WIDTHS[-1]]["delta_bar"]) < 0.05


def test_sign_gap_small_for_wide_nets(ffnn_table):
    """Check the sign-kNN gap of the widest nets is below 0.04.

    Measured at width 512: tanh -0.006, ReLU 0.014, SiLU 0.017, GELU 0.014;
    on an AMD EPYC (Zen 4, AVX-512) tanh 0.011, ReLU 0.031, SiLU 0.011, GELU
    0.014 (one seed; 360 test digits, so one sample is 0.003 and the standard
    error of a gap about 0.01). At width 32 the gap is 0.18-0.24 for
    ReLU/SiLU/GELU.
    """
    gaps = {a: ffnn_table[a, WIDTHS[-1]]["gap"] for a in ACTIVATIONS}
    assert all(g < 0.04 for g in gaps.values()), gaps


def test_purity_correlates_with_accuracy(ffnn_table):
    """Check LOO purity and test accuracy are positively rank-correlated.

    Measured Spearman rho = 0.71 over the 12 models (paper: 0.834).
    """
    rows = list(ffnn_table.values())
    rho = spearmanr([r["purity"] for r in rows], [r["acc"] for r in rows])[0]
    assert rho > 0.5, rho


@pytest.mark.xfail(
    strict=True,
    reason=(
        "Not reproduced at this scale (measured 2026-12, digits, ReLU (256, 256), "
        "warm-up 20, ramp 40, 80 epochs; unregularised train 1.00 / test 0.97): "
        "the penalty stops the net from fitting instead of only hurting test "
        "accuracy. lambda=500: train 0.47 / test 0.48; lambda=50: train 0.82 / "
        "test 0.80. With the paper's schedule (warm-up 50, ramp 200, 300 "
        "epochs): lambda=5: 0.998 / 0.964, 20: 0.994 / 0.958, 100: 0.877 / "
        "0.831, 500: 0.611 / 0.581 -- no lambda keeps train >= 0.97 while test "
        "drops. (Before the log-space normalisation of the gate proxy the net "
        "escaped by switching every gate off: train 0.39.)"
    ),
)
def test_sign_repulsion_breaks_generalisation(split):
    """Check sign repulsion keeps train accuracy >= 0.97 but hurts test accuracy.

    ReLU (256, 256) on digits, lambda = 500 after 20 warm-up epochs and a
    40-epoch ramp, 80 epochs; tau = 0.005 as in the paper.
    """
    torch.set_num_threads(2)
    X_train, X_test, y_train, y_test = split
    common = {"activation": "relu", "max_epochs": 80, "random_state": 0}
    plain = HTAFNetClassifier((256, 256), **common).fit(X_train, y_train)
    rep = HTAFNetClassifier(
        (256, 256),
        sign_repulsion=500.0,
        repulsion_warmup=20,
        repulsion_ramp=40,
        **common,
    ).fit(X_train, y_train)
    assert rep.history[-1, "repulsion_lambda"] == 500.0
    assert rep.score(X_train, y_train) >= 0.97
    assert rep.score(X_test, y_test) < plain.score(X_test, y_test) - 0.1
