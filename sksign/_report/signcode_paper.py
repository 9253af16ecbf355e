"""``reproduce signcode``: the Sign Code paper's tables at this scale.

One FFNN per activation, width and seed; for each, every quantity of the
paper (:func:`signcode_diagnostics`), then three tables: full net vs sign-kNN
(+ training accuracy and leave-one-out purity), the interventions with both
definitions each, and gate dominance of the last hidden layer.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
import sys
from functools import partial
from typing import NamedTuple

from scipy.stats import spearmanr

from sksign._report._common import load_split, progress, subset
from sksign._report.fitting import (
    estimate_run_time,
    inputs_for,
    make_classifier,
    recipes_text,
)
from sksign._report.papers import (
    ACTIVATION_NAMES,
    ARCH_NAMES,
    PAPER_GATE,
    PAPER_MAGNITUDE,
    PAPER_SIGNCODE,
    PAPER_SIGNCODE_NETS,
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

__all__ = ["NetRow", "net_rows", "reproduce_signcode", "signcode_diagnostics"]

#: (result key, kind, options) of the four interventions.
INTERVENTIONS = (
    ("flip_literal", "sign_flip", {"flip": "literal"}),
    ("flip_gate", "sign_flip", {"flip": "gate"}),
    ("mag_standard", "magnitude", {"noise": "standard"}),
    ("mag_matched", "magnitude", {"noise": "matched"}),
)
#: The gate dominance quantities, in table order.
GATE_KEYS = ("Z1", "delta_bar", "eps_1", "bound", "union_bound")


class NetRow(NamedTuple):
    """One net of the tables: its key, architecture, spec and width."""

    key: str
    architecture: str
    spec: object  # NetSpec, or None for an FFNN of cfg.depth layers
    width: int
    label: str


def net_rows(cfg):
    """The nets of `cfg`, in table order: the FFNNs, then ``cfg.nets``."""
    rows = [NetRow(f"w{w}", "mlp", None, w, f"FFNN d={cfg.depth}") for w in cfg.widths]
    rows += [
        NetRow(
            f"{s.architecture}-w{s.width}",
            s.architecture,
            s,
            s.width,
            ARCH_NAMES.get(s.architecture, s.architecture),
        )
        for s in cfg.nets
    ]
    return rows


def signcode_diagnostics(net, data, cfg, seed, token_pool=None):
    """Every Sign Code quantity of one fitted net, as a dict of floats.

    Test accuracy and training accuracy (on the reference samples: the
    training set, or a stratified subset of ``cfg.n_ref`` of them); the four
    interventions on every hidden layer (mean of ``cfg.n_repeats``) and gate
    dominance of the last hidden layer (mu on the reference samples) on the
    evaluation samples (the test set, or a stratified subset of ``cfg.n_eval``
    of it), with the clean accuracy there; NaN gate dominance where the
    readout is not a
    linear map of that layer, as in a ViT whose LayerNorm comes between);
    sign-kNN accuracy on the last hidden layer's bits (`token_pool` for a
    net with a token axis: "first" reads a ViT's class token, the one its
    readout sees); leave-one-out purity of the test codes.
    """
    X_train, X_test, y_train, y_test = data
    X_ref, y_ref = subset(X_train, y_train, cfg.n_ref)
    X_eval, y_eval = subset(X_test, y_test, cfg.n_eval)
    row = {"net": net.score(X_test, y_test), "train": net.score(X_ref, y_ref)}
    row["clean"] = row["net"] if cfg.n_eval is None else net.score(X_eval, y_eval)
    for key, kind, opt in INTERVENTIONS:
        alpha = cfg.flip_alpha if kind == "sign_flip" else cfg.magnitude_alpha
        row[key] = intervention_score(
            net,
            X_eval,
            y_eval,
            kind=kind,
            alpha=alpha,
            layers="all",
            n_repeats=cfg.n_repeats,
            random_state=seed,
            X_ref=X_ref,
            **opt,
        )
    try:
        rep = gate_dominance_report(net, X_eval, X_ref=X_ref)
    except ValueError as exc:
        if "global average pool" not in str(exc):
            raise
        row.update(dict.fromkeys(GATE_KEYS, math.nan))
    else:
        row.update(
            Z1=rep.median_Z1,
            delta_bar=rep.delta_bar,
            eps_1=rep.eps_1,
            bound=rep.bound,
            union_bound=rep.union_bound,
        )
    # sign-kNN and purity on the last hidden layer's bits
    sct = SignCodeTransformer(net, prefit=True, token_pool=token_pool).fit(X_train)
    c_train, c_test = sct.transform(X_train), sct.transform(X_test)
    knn = SignKNNClassifier(n_neighbors=cfg.n_neighbors).fit(c_train, y_train)
    row["knn"] = knn.score(c_test, y_test)
    row["gap"] = (1 - row["knn"]) - (1 - row["net"])
    row["purity"] = loo_purity(c_test, y_test, k=cfg.purity_k)
    return row


def fit_relu_net(cfg, data, row, device, n, epochs):
    """A ReLU net of `row` fitted on the first `n` samples (for the estimate)."""
    X_train, _, y_train, _ = data
    net = make_classifier(
        cfg, (row.width,) * cfg.depth, "relu", 0, device, epochs=epochs, spec=row.spec
    )
    return net.fit(inputs_for(row.architecture, X_train[:n]), y_train[:n])


def fit_and_diagnose(cfg, data, device, show_progress, run=None):
    """Fit every net of `cfg`; ``{(activation, row key): {quantity: [per seed]}}``.

    With a :class:`~sksign._report._resume.ResumableRun`, finished nets are
    read back and the net in training checkpoints every epoch.
    """
    rows = net_rows(cfg)
    n_fits = len(cfg.activations) * len(rows) * cfg.seeds
    results = {}

    def diagnose(act, row, seed, cell):
        checkpoint = run.checkpoint_dir(cell) if run is not None else None
        net = make_classifier(
            cfg,
            (row.width,) * cfg.depth,
            act,
            seed,
            device,
            spec=row.spec,
            checkpoint_dir=checkpoint,
        )
        X_train, X_test, y_train, y_test = data
        arch = row.architecture
        own = (inputs_for(arch, X_train), inputs_for(arch, X_test), y_train, y_test)
        net.fit(own[0], y_train)
        pool = "first" if arch == "vit" else None
        row = signcode_diagnostics(net, own, cfg, seed, token_pool=pool)
        return {k: float(v) for k, v in row.items()}

    with progress(total=n_fits, desc="signcode nets", enabled=show_progress) as bar:
        for act in cfg.activations:
            for row in rows:
                res = results.setdefault((act, row.key), {})
                for seed in range(cfg.seeds):
                    cell = (
                        f"{act}-w{row.width}-s{seed}"
                        if row.spec is None
                        else f"{act}-{row.key}-s{seed}"
                    )
                    compute = partial(diagnose, act, row, seed, cell)
                    value = run.cell(cell, compute) if run is not None else compute()
                    for k, v in value.items():
                        res.setdefault(k, []).append(v)
                    bar.update(1)
    return results


def paper_numbers(act, row, head):
    """The paper's (full net, sign-kNN) of `row`'s net and `act`, on the
    headline rows; ``(None, None)`` where the paper has none."""
    if not head:
        return (None, None)
    if row.spec is None:
        return PAPER_SIGNCODE.get(act, (None, None))
    return PAPER_SIGNCODE_NETS.get(row.architecture, {}).get(act, (None, None))


def label_rows(results, cfg, cells_of, csv_of, extra_of=None):
    """Markdown and CSV rows, one per (activation, net).

    A Markdown row is the activation's name, ``cells_of(act, row, res,
    head)``, the width, ``extra_of(res)`` and the net; a CSV row is the
    activation, the width, ``csv_of(act, row, res, head)`` and the net.
    `head` is True on the rows where the paper's numbers stand: the largest
    FFNN width and every image net.
    """
    by_key = {r.key: r for r in net_rows(cfg)}
    headline = max(cfg.widths)
    rows, csv_rows = [], []
    for (act, key), res in results.items():
        row = by_key[key]
        head = row.spec is not None or row.width == headline
        extra = extra_of(res) if extra_of is not None else []
        rows.append(
            [
                ACTIVATION_NAMES.get(act, act),
                *cells_of(act, row, res, head),
                str(row.width),
                *extra,
                row.label,
            ]
        )
        csv_rows.append([act, row.width, *csv_of(act, row, res, head), row.label])
    return rows, csv_rows


def mean_std_cells(res, keys):
    """The mean and std of each quantity in `keys`, flat."""
    return [c for k in keys for c in mean_std(res[k])]


def setting_text(cfg, data):
    """The setting of the run, as the captions describe it."""
    X_train, X_test, _, _ = data
    own_test = cfg.dataset in ("digits", "mnist5k")
    split = "70/30 stratified split, " if own_test else "its own test set, "
    nets = f"FFNN widths {', '.join(map(str, cfg.widths))}, depth {cfg.depth}"
    for spec in cfg.nets:
        nets += f"; {spec.describe()}"
    recipes = recipes_text(cfg, [(r.label, r.architecture) for r in net_rows(cfg)])
    epochs = f"{cfg.epochs} epochs" + "".join(
        f", {ARCH_NAMES.get(s.architecture, s.architecture)} {s.epochs}"
        for s in cfg.nets
        if s.epochs
    )
    return (
        f"{nets}; {epochs}; {recipes}; batch {cfg.batch_size}, "
        f"{cfg.dataset} ({split}{len(X_train)} train / {len(X_test)} test), "
        f"{cfg.seeds} seed(s) (mean ± std)"
    )


def ref_text(cfg):
    """Where mu_j(s) is estimated, for the captions."""
    if cfg.n_ref is None:
        return "the training set"
    return f"a stratified subset of {cfg.n_ref:,} training samples"


def eval_text(cfg):
    """Where the interventions and gate dominance are scored."""
    if cfg.n_eval is None:
        return "the test set"
    return f"a stratified subset of {cfg.n_eval:,} test samples"


def paper_note():
    return (
        "The paper's numbers stand on the rows of the largest FFNN width and of "
        "the image nets (ResNet-18: SiLU, ReLU; ViT: GELU)."
    )


# -- 1. full net vs sign-kNN (+ train accuracy and purity) -------------------
def accuracy_cells(act, row, res, head):
    p = paper_numbers(act, row, head)
    return [
        pm(res["net"]),
        pm(res["knn"]),
        pm(res["gap"]),
        *[f"{v:.2f}" if v is not None else "" for v in p],
    ]


def accuracy_extra_cells(res):
    return [pm(res["train"]), pm(res["purity"], scale=1, digits=3)]


def accuracy_csv(act, row, res, head):
    return mean_std_cells(res, ("net", "knn", "gap", "train", "purity")) + (
        paper_fractions(paper_numbers(act, row, head), head)
    )


def accuracy_table(results, cfg, setting):
    rows, csv_rows = label_rows(
        results, cfg, accuracy_cells, accuracy_csv, accuracy_extra_cells
    )
    purity = [p for r in results.values() for p in r["purity"]]
    accs = [a for r in results.values() for a in r["net"]]
    rho = float(spearmanr(purity, accs)[0]) if len(accs) > 2 else float("nan")
    return Table(
        "Full net vs sign-kNN test accuracy",
        f"Ours: {setting}; sign-kNN k={cfg.n_neighbors} on the last hidden "
        "layer's bits, training codes as reference. Paper: FFNN w=1024, d=6, "
        "ResNet-18 and ViT (w=256, d=6, h=8) on CIFAR-10. Δsgn = sign-kNN error "
        f"- full-net error, in points. Extra columns: training accuracy (on "
        f"{ref_text(cfg)}); "
        f"leave-one-out purity (k={cfg.purity_k}) of the test codes in Hamming "
        f"space; the net. {paper_note()} The CSV holds fractions (the paper's "
        "too) and a _std column per mean (ddof=1).",
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
            "Net",
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
            "net",
        ],
        csv_rows,
        note=f"Spearman ρ(LOO purity, test accuracy) over {len(accs)} models: "
        f"{fmt(rho)} (paper: 0.834 over 540 models).",
    )


# -- 2. interventions --------------------------------------------------------
def intervention_cells(act, row, res, head):
    p = PAPER_MAGNITUDE.get(act) if head and row.spec is None else None
    return [
        pm(res["clean"]),
        *[pm(res[k]) for k, _, _ in INTERVENTIONS],
        f"{p[0]:.1f} → {p[1]:.1f}" if p else "",
    ]


def intervention_csv(act, row, res, head):
    head = head and row.spec is None
    return mean_std_cells(res, ("clean", *(k for k, _, _ in INTERVENTIONS))) + (
        paper_fractions(PAPER_MAGNITUDE.get(act, (None, None)), head)
    )


def interventions_table(results, cfg, setting):
    rows, csv_rows = label_rows(results, cfg, intervention_cells, intervention_csv)
    fa, ma = f"{cfg.flip_alpha:g}", f"{cfg.magnitude_alpha:g}"
    return Table(
        "Interventions",
        f"Ours: {setting}. On every hidden layer, mean of {cfg.n_repeats} "
        f"repeats, on {eval_text(cfg)} (Clean: the accuracy there). Sign flip "
        "literal: h -> -h; gate: h -> phi(-z). Magnitude: M -> "
        "|eta| projected onto the clean signs (h = S_clean * M); standard: eta ~ "
        "N(0, 1); matched: |eta| rescaled to the unit's mean magnitude mu_j(S) on "
        f"{ref_text(cfg)}. Paper: FFNN (the paper does not name the data set "
        "of these numbers), standard noise, on the rows of the largest FFNN "
        "width.",
        [
            "Activation",
            "Clean (%)",
            f"Sign flip α={fa}, literal (%)",
            f"Sign flip α={fa}, gate (%)",
            f"Magnitude α={ma}, standard (%)",
            f"Magnitude α={ma}, matched (%)",
            "Paper clean → magnitude α=1 (%)",
            "Width",
            "Net",
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
            "net",
        ],
        csv_rows,
    )


# -- 3. gate dominance -------------------------------------------------------
def gate_cells(act, row, res, head):
    if all(math.isnan(v) for v in res["Z1"]):
        return ["n/a"] * len(GATE_KEYS) + [""]
    return [
        *[pm(res[k], scale=1, digits=3) for k in GATE_KEYS],
        PAPER_GATE.get(act, "") if head and row.spec is None else "",
    ]


def gate_csv(act, row, res, head):
    return mean_std_cells(res, GATE_KEYS)


def gate_table(results, cfg, setting):
    rows, csv_rows = label_rows(results, cfg, gate_cells, gate_csv)
    return Table(
        "Gate dominance (last hidden layer)",
        f"Ours: {setting}. mu_j(s) = E[M_j | S_j = s] on {ref_text(cfg)}, scored "
        f"on {eval_text(cfg)}; yhat = argmax of the pure-sign logits f~; r_c^2 the "
        "uncentred second moment of R_yhat - R_c over the samples sharing yhat. "
        "Z1 = min_c |M~_yhat,c| / r_c (median over samples); δ̄ the sign "
        "asymmetry of mu; eps_1 the rate at which argmax f and argmax f~ "
        "disagree; it is bounded by (C-1) E[Z1^-2] and by the clipped union bound "
        "E[min(1, sum_c r_c^2 / M~_c^2)]. A conv map read through global "
        "average pooling counts each channel at each position as a unit (the "
        "readout is linear in them); n/a: the readout is not linear in the last "
        "hidden layer (the ViT's LayerNorm lies between). Paper: FFNN, "
        "CIFAR-10, on the rows of the largest FFNN width.",
        [
            "Activation",
            "Median Z1",
            "δ̄",
            "eps_1",
            "(C-1) E[Z1^-2]",
            "E[min(1, Σ r²/M~²)]",
            "Paper",
            "Width",
            "Net",
        ],
        rows,
        [
            "activation",
            "width",
            *mean_std_columns(
                ["median_Z1", "delta_bar", "eps_1", "bound", "union_bound"]
            ),
            "net",
        ],
        csv_rows,
    )


def reproduce_signcode(
    cfg, *, device="cpu", show_progress=True, stream=None, run=None, data=None
):
    """Sign Code paper: full net vs sign-kNN, interventions, gate dominance.

    Prints the run-time estimate to `stream` (default: stdout), fits every net
    (reusing the finished cells of `run`, a
    :class:`~sksign._report._resume.ResumableRun`) and returns the three tables.
    `data` is ``(X_train, X_test, y_train, y_test)``; None loads ``cfg.dataset``.
    """
    stream = stream or sys.stdout
    if data is None:
        data = load_split(cfg.dataset, max_train=cfg.max_train, max_test=cfg.max_test)
    X_train = data[0]
    estimate_run_time(
        [
            (
                partial(fit_relu_net, cfg, data, row, device),
                len(cfg.activations) * cfg.seeds,
                (row.spec.epochs if row.spec is not None else None) or cfg.epochs,
            )
            for row in net_rows(cfg)
        ],
        len(X_train),
        cfg.batch_size,
        stream,
    )
    results = fit_and_diagnose(cfg, data, device, show_progress, run)
    setting = setting_text(cfg, data)
    return [
        accuracy_table(results, cfg, setting),
        interventions_table(results, cfg, setting),
        gate_table(results, cfg, setting),
    ]
