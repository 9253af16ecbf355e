"""``reproduce signcode``: the Sign Code paper's tables at this scale.

One FFNN per activation, width and seed; for each, every quantity of the
paper (:func:`signcode_diagnostics`), then three tables: full net vs sign-kNN
(+ training accuracy and leave-one-out purity), the interventions with both
definitions each, and gate dominance of the last hidden layer.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
from functools import partial

from scipy.stats import spearmanr

from sksign._report._common import load_split, progress
from sksign._report.fitting import estimate_run_time, make_classifier
from sksign._report.papers import (
    ACTIVATION_NAMES,
    PAPER_GATE,
    PAPER_MAGNITUDE,
    PAPER_SIGNCODE,
)
from sksign._report.tables import (
    Table,
    fmt,
    mean_std,
    mean_std_columns,
    paper_fractions,
    pm,
)
from sksign.estimators import SignKNNClassifier
from sksign.metrics import gate_dominance_report, intervention_score, loo_purity
from sksign.transformers import SignCodeTransformer

__all__ = ["reproduce_signcode", "signcode_diagnostics"]

#: (result key, kind, options) of the four interventions.
INTERVENTIONS = (
    ("flip_literal", "sign_flip", {"flip": "literal"}),
    ("flip_gate", "sign_flip", {"flip": "gate"}),
    ("mag_standard", "magnitude", {"noise": "standard"}),
    ("mag_matched", "magnitude", {"noise": "matched"}),
)
#: The gate dominance quantities, in table order.
GATE_KEYS = ("Z1", "delta_bar", "eps_1", "bound", "union_bound")


def signcode_diagnostics(net, data, cfg, seed):
    """Every Sign Code quantity of one fitted net, as a dict of floats.

    Test and train accuracy; the four interventions on every hidden layer
    (mean of ``cfg.n_repeats``); gate dominance of the last hidden layer (mu on
    the training set, scored on the test set); sign-kNN accuracy on the last
    hidden layer's bits; leave-one-out purity of the test codes.
    """
    X_train, X_test, y_train, y_test = data
    row = {"net": net.score(X_test, y_test), "train": net.score(X_train, y_train)}
    for key, kind, opt in INTERVENTIONS:
        alpha = cfg.flip_alpha if kind == "sign_flip" else cfg.magnitude_alpha
        row[key] = intervention_score(
            net,
            X_test,
            y_test,
            kind=kind,
            alpha=alpha,
            layers="all",
            n_repeats=cfg.n_repeats,
            random_state=seed,
            X_ref=X_train,
            **opt,
        )
    rep = gate_dominance_report(net, X_test, X_ref=X_train)
    row.update(
        Z1=rep.median_Z1,
        delta_bar=rep.delta_bar,
        eps_1=rep.eps_1,
        bound=rep.bound,
        union_bound=rep.union_bound,
    )
    # sign-kNN and purity on the last hidden layer's bits
    sct = SignCodeTransformer(net, prefit=True).fit(X_train)
    c_train, c_test = sct.transform(X_train), sct.transform(X_test)
    knn = SignKNNClassifier(n_neighbors=cfg.n_neighbors).fit(c_train, y_train)
    row["knn"] = knn.score(c_test, y_test)
    row["gap"] = (1 - row["knn"]) - (1 - row["net"])
    row["purity"] = loo_purity(c_test, y_test, k=cfg.purity_k)
    return row


def fit_relu_net(cfg, X, y, width, device, n, epochs):
    """A ReLU FFNN of `width` fitted on the first `n` samples (for the estimate)."""
    net = make_classifier(cfg, (width,) * cfg.depth, "relu", 0, device, epochs=epochs)
    return net.fit(X[:n], y[:n])


def fit_and_diagnose(cfg, data, device, show_progress, run=None):
    """Fit every net of `cfg`; ``{(activation, width): {quantity: [per seed]}}``.

    With a :class:`~sksign._report._resume.ResumableRun`, finished nets are
    read back and the net in training checkpoints every epoch.
    """
    X_train, _, y_train, _ = data
    n_fits = len(cfg.activations) * len(cfg.widths) * cfg.seeds
    results = {}

    def diagnose(act, width, seed, cell):
        checkpoint = run.checkpoint_dir(cell) if run is not None else None
        net = make_classifier(
            cfg, (width,) * cfg.depth, act, seed, device, checkpoint_dir=checkpoint
        )
        net.fit(X_train, y_train)
        return {
            k: float(v) for k, v in signcode_diagnostics(net, data, cfg, seed).items()
        }

    with progress(total=n_fits, desc="signcode nets", enabled=show_progress) as bar:
        for act in cfg.activations:
            for width in cfg.widths:
                res = results.setdefault((act, width), {})
                for seed in range(cfg.seeds):
                    cell = f"{act}-w{width}-s{seed}"
                    compute = partial(diagnose, act, width, seed, cell)
                    row = run.cell(cell, compute) if run is not None else compute()
                    for k, v in row.items():
                        res.setdefault(k, []).append(v)
                    bar.update(1)
    return results


def label_rows(results, headline, cells_of, csv_of, extra_of=None):
    """Markdown and CSV rows, one per (activation, width).

    A Markdown row is the activation's name, ``cells_of(act, res, head)``, the
    width and ``extra_of(res)``; a CSV row is the activation, the width and
    ``csv_of(act, res, head)``. `head` is True on the rows of the headline
    width, where the paper's numbers stand.
    """
    rows, csv_rows = [], []
    for (act, width), res in results.items():
        head = width == headline
        extra = extra_of(res) if extra_of is not None else []
        rows.append(
            [
                ACTIVATION_NAMES.get(act, act),
                *cells_of(act, res, head),
                str(width),
                *extra,
            ]
        )
        csv_rows.append([act, width, *csv_of(act, res, head)])
    return rows, csv_rows


def mean_std_cells(res, keys):
    """The mean and std of each quantity in `keys`, flat."""
    return [c for k in keys for c in mean_std(res[k])]


def setting_text(cfg, data):
    """The setting of the run, as the captions describe it."""
    X_train, X_test, _, _ = data
    return (
        f"FFNN widths {', '.join(map(str, cfg.widths))}, depth {cfg.depth}, "
        f"{cfg.epochs} epochs, Adam lr={cfg.lr:g}, batch {cfg.batch_size}, "
        f"{cfg.dataset} (70/30 stratified split, {len(X_train)} train / "
        f"{len(X_test)} test), {cfg.seeds} seed(s) (mean ± std)"
    )


def paper_note(headline):
    return f"The paper's numbers stand on the rows of the largest width ({headline})."


# -- 1. full net vs sign-kNN (+ train accuracy and purity) -------------------
def accuracy_cells(act, res, head):
    p = PAPER_SIGNCODE.get(act, (None, None)) if head else (None, None)
    return [
        pm(res["net"]),
        pm(res["knn"]),
        pm(res["gap"]),
        *[f"{v:.2f}" if v is not None else "" for v in p],
    ]


def accuracy_extra_cells(res):
    return [pm(res["train"]), pm(res["purity"], scale=1, digits=3)]


def accuracy_csv(act, res, head):
    return mean_std_cells(res, ("net", "knn", "gap", "train", "purity")) + (
        paper_fractions(PAPER_SIGNCODE.get(act, (None, None)), head)
    )


def accuracy_table(results, cfg, setting, headline):
    rows, csv_rows = label_rows(
        results, headline, accuracy_cells, accuracy_csv, accuracy_extra_cells
    )
    purity = [p for r in results.values() for p in r["purity"]]
    accs = [a for r in results.values() for a in r["net"]]
    rho = float(spearmanr(purity, accs)[0]) if len(accs) > 2 else float("nan")
    return Table(
        "Full net vs sign-kNN test accuracy",
        f"Ours: {setting}; sign-kNN k={cfg.n_neighbors} on the last hidden "
        "layer's bits, training codes as reference. Paper: FFNN w=1024, d=6 on "
        "CIFAR-10. Δsgn = sign-kNN error - full-net error, in points. Extra "
        f"columns: training accuracy; leave-one-out purity (k={cfg.purity_k}) "
        f"of the test codes in Hamming space. {paper_note(headline)} The CSV "
        "holds fractions (the paper's too) and a _std column per mean (ddof=1).",
        [
            "Activation",
            "Full net (%)",
            "Sign-kNN (%)",
            "Δsgn (pts)",
            "Paper full net (%)",
            "Paper sign-kNN (%)",
            "Width",
            "Train (%)",
            f"LOO purity (k={cfg.purity_k})",
        ],
        rows,
        [
            "activation",
            "width",
            *mean_std_columns(
                ["net_acc", "sign_knn_acc", "sign_gap", "train_acc", "loo_purity"]
            ),
            "paper_net_acc",
            "paper_sign_knn_acc",
        ],
        csv_rows,
        note=f"Spearman ρ(LOO purity, test accuracy) over {len(accs)} models: "
        f"{fmt(rho)} (paper: 0.834 over 540 models).",
    )


# -- 2. interventions --------------------------------------------------------
def intervention_cells(act, res, head):
    p = PAPER_MAGNITUDE.get(act) if head else None
    return [
        pm(res["net"]),
        *[pm(res[k]) for k, _, _ in INTERVENTIONS],
        f"{p[0]:.1f} → {p[1]:.1f}" if p else "",
    ]


def intervention_csv(act, res, head):
    return mean_std_cells(res, ("net", *(k for k, _, _ in INTERVENTIONS))) + (
        paper_fractions(PAPER_MAGNITUDE.get(act, (None, None)), head)
    )


def interventions_table(results, cfg, setting, headline):
    rows, csv_rows = label_rows(results, headline, intervention_cells, intervention_csv)
    fa, ma = f"{cfg.flip_alpha:g}", f"{cfg.magnitude_alpha:g}"
    return Table(
        "Interventions",
        f"Ours: {setting}. On every hidden layer, mean of {cfg.n_repeats} "
        "repeats. Sign flip literal: h -> -h; gate: h -> phi(-z). Magnitude: M -> "
        "|eta| projected onto the clean signs (h = S_clean * M); standard: eta ~ "
        "N(0, 1); matched: |eta| rescaled to the unit's mean magnitude mu_j(S) on "
        f"the training set. Paper: FFNN (the paper does not name the data set "
        f"of these numbers), standard noise. {paper_note(headline)}",
        [
            "Activation",
            "Clean (%)",
            f"Sign flip α={fa}, literal (%)",
            f"Sign flip α={fa}, gate (%)",
            f"Magnitude α={ma}, standard (%)",
            f"Magnitude α={ma}, matched (%)",
            "Paper clean → magnitude α=1 (%)",
            "Width",
        ],
        rows,
        [
            "activation",
            "width",
            *mean_std_columns(
                [
                    "clean",
                    "flip_literal",
                    "flip_gate",
                    "magnitude_standard",
                    "magnitude_matched",
                ]
            ),
            "paper_clean",
            "paper_magnitude",
        ],
        csv_rows,
    )


# -- 3. gate dominance -------------------------------------------------------
def gate_cells(act, res, head):
    return [
        *[pm(res[k], scale=1, digits=3) for k in GATE_KEYS],
        PAPER_GATE.get(act, "") if head else "",
    ]


def gate_csv(act, res, head):
    return mean_std_cells(res, GATE_KEYS)


def gate_table(results, cfg, setting, headline):
    rows, csv_rows = label_rows(results, headline, gate_cells, gate_csv)
    return Table(
        "Gate dominance (last hidden layer)",
        f"Ours: {setting}. mu_j(s) = E[M_j | S_j = s] on the training set, scored "
        "on the test set; yhat = argmax of the pure-sign logits f~; r_c^2 the "
        "uncentred second moment of R_yhat - R_c over the samples sharing yhat. "
        "Z1 = min_c |M~_yhat,c| / r_c (median over samples); δ̄ the sign "
        "asymmetry of mu; eps_1 the rate at which argmax f and argmax f~ "
        "disagree; it is bounded by (C-1) E[Z1^-2] and by the clipped union bound "
        f"E[min(1, sum_c r_c^2 / M~_c^2)]. Paper: FFNN, CIFAR-10. "
        f"{paper_note(headline)}",
        [
            "Activation",
            "Median Z1",
            "δ̄",
            "eps_1",
            "(C-1) E[Z1^-2]",
            "E[min(1, Σ r²/M~²)]",
            "Paper",
            "Width",
        ],
        rows,
        [
            "activation",
            "width",
            *mean_std_columns(
                ["median_Z1", "delta_bar", "eps_1", "bound", "union_bound"]
            ),
        ],
        csv_rows,
    )


def reproduce_signcode(cfg, *, device="cpu", show_progress=True, stream=None, run=None):
    """Sign Code paper: full net vs sign-kNN, interventions, gate dominance.

    Prints the run-time estimate to `stream` (default: stdout), fits every net
    (reusing the finished cells of `run`, a
    :class:`~sksign._report._resume.ResumableRun`) and returns the three tables.
    """
    stream = stream or sys.stdout
    data = load_split(cfg.dataset)
    X_train, _, y_train, _ = data
    estimate_run_time(
        [
            (
                partial(fit_relu_net, cfg, X_train, y_train, w, device),
                len(cfg.activations) * cfg.seeds,
            )
            for w in cfg.widths
        ],
        len(X_train),
        cfg.epochs,
        cfg.batch_size,
        stream,
    )
    results = fit_and_diagnose(cfg, data, device, show_progress, run)
    headline = max(cfg.widths)
    setting = setting_text(cfg, data)
    return [
        accuracy_table(results, cfg, setting, headline),
        interventions_table(results, cfg, setting, headline),
        gate_table(results, cfg, setting, headline),
    ]
