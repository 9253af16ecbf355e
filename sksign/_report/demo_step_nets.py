"""Sections 1, 2 and 6 of ``python -m sksign demo``: nets with step units.

1. HTAF net: exact-step inference vs the smooth net, binarization rate,
   against STE and scaled-sigmoid nets; the epsilon bound.
2. GridSearchCV over (alpha0, alpha1) on the manifold alpha0 * alpha1 = 22.
6. ICBM: accuracy before/after and the concept table.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import torch
from sklearn.model_selection import GridSearchCV
from skorch.callbacks import Callback

from sksign._report._common import SEED, Report
from sksign._report.demo_setup import DemoContext, add_figure
from sksign._report.tables import fmt
from sksign.estimators import ICBMClassifier
from sksign.nn import (
    StepActivation,
    capture_activations,
    force_step_mode,
    htaf,
    htaf_alpha0_min,
    htaf_grid,
    htaf_product_limit,
)

__all__ = ["section_grid", "section_htaf", "section_icbm"]


def binarization_rate(net, X, tol=0.1):
    """Share of smooth step-activation outputs within `tol` of 0 or 1 on X."""
    module = net.module_
    layers = {
        name: m for name, m in module.named_modules() if isinstance(m, StepActivation)
    }
    with (
        capture_activations(layers, inputs=False, outputs=True) as cap,
        force_step_mode(module, "smooth"),
        torch.no_grad(),
    ):
        net.predict_proba(X)
    outs = [o for calls in cap.outputs.values() for o in calls]
    near = sum(int(((o <= tol) | (o >= 1.0 - tol)).sum()) for o in outs)
    total = sum(o.numel() for o in outs)
    return near / total if total else float("nan")


def section_htaf(rep: Report, ctx: DemoContext) -> None:
    """1. HTAF net vs STE / scaled sigmoid: exact step vs smooth; the bound."""
    cfg = ctx.cfg
    rep.section(
        "1. HTAF deep Heaviside net: exact step at inference",
        f"An MLP {cfg.hidden} trained {cfg.epochs} epochs with HTAF(alpha0=2, "
        "alpha1=11) in the forward and backward pass, then evaluated with every "
        "HTAF swapped for the exact step H(x) = 1[x >= 0] (what `predict` does) "
        "and with the smooth HTAF kept (`force_step_mode(net.module_, "
        '"smooth")`). STE (clipped-identity surrogate) and the scaled sigmoid '
        "sigmoid(22 x) are trained the same way. *Binarization rate*: share of "
        "the smooth activations' outputs on the test set within 0.1 of 0 or 1.",
    )
    rows = []
    acts = ("htaf", *cfg.step_baselines)
    for act in ctx.bar(acts, desc="step nets"):
        net = ctx.net(act)
        acc_step = net.score(ctx.X_test, ctx.y_test)
        with force_step_mode(net.module_, "smooth"):
            acc_smooth = net.score(ctx.X_test, ctx.y_test)
        rate = binarization_rate(net, ctx.X_test)
        rows.append([act, acc_step, acc_smooth, acc_smooth - acc_step, rate])
    rep.table(
        "htaf_step_vs_smooth",
        [
            "activation",
            "test_acc_step",
            "test_acc_smooth",
            "relaxation_gap",
            "binarization_rate",
        ],
        rows,
        "Test accuracy with the exact step (inference) and with the smooth "
        "training function; relaxation gap = smooth - step.",
    )
    h = rows[0]
    rep.summarize(
        "HTAF net",
        "test accuracy, exact step H",
        h[1],
        "accuracy of predict() (every HTAF -> 1[x >= 0])",
    )
    rep.summarize(
        "HTAF net",
        "test accuracy, smooth HTAF",
        h[2],
        "same net, HTAF kept smooth at inference",
    )
    rep.summarize(
        "HTAF net",
        "binarization rate",
        h[4],
        "share of smooth HTAF outputs within 0.1 of {0, 1}",
    )

    # The epsilon bound, checked on a grid of x.
    eps_rows = []
    x = torch.linspace(-50, 50, 200_001, dtype=torch.float64)
    for eps, a1 in ((0.1, 11.0), (0.1, 22.0), (0.1, 44.0), (0.05, 30.0)):
        a0 = htaf_alpha0_min(eps, a1)
        xf = x[x.abs() >= eps]
        err = (htaf(xf, a0, a1) - (xf >= 0).double()).abs().max().item()
        err_below = (htaf(xf, 0.99 * a0, a1) - (xf >= 0).double()).abs().max().item()
        eps_rows.append([eps, a1, a0, a0 * a1, f"{err:.6f}", f"{err_below:.6f}"])
    rep.table(
        "epsilon_bound",
        [
            "eps",
            "alpha1",
            "alpha0_min",
            "alpha0_min_x_alpha1",
            "max_err_at_alpha0_min",
            "max_err_at_0.99_alpha0_min",
        ],
        eps_rows,
        "Proposition 3.1: with alpha0 >= alpha0_min(eps, alpha1), "
        "|HTAF(x) - H(x)| <= eps for |x| >= eps; the bound is tight (just "
        "below it the error exceeds eps). Errors are maxima over a grid of "
        f"|x| in [eps, 50]. Theorem 3.2: alpha1 * alpha0_min -> "
        f"{htaf_product_limit(0.1):.4f} for eps = 0.1 (the 22-manifold).",
    )
    rep.summarize(
        "HTAF bound",
        "alpha0_min(eps=0.1, alpha1=11)",
        eps_rows[0][2],
        "Prop. 3.1: least alpha0 with abs(HTAF - H) <= eps for abs(x) >= eps",
    )
    add_figure(
        rep,
        "plot_htaf_shape",
        (),
        "htaf_shape",
        "HTAF on the 22-manifold and its derivative against the scaled "
        "sigmoid sigmoid(22 x): same slope at 0, but the HTAF derivative decays "
        "like exp(-2 alpha0 |x|) instead of exp(-22 |x|).",
    )


class _FitTick(Callback):
    """A skorch callback that advances the progress bar ``_FitTick.bar``."""

    bar = None

    def on_train_end(self, net, **kwargs):
        if _FitTick.bar is not None:
            _FitTick.bar.update(1)


def section_grid(rep: Report, ctx: DemoContext) -> None:
    """2. GridSearchCV over (alpha0, alpha1) on the 22-manifold."""
    cfg = ctx.cfg
    grid = htaf_grid(22.0, alpha0=cfg.grid_alpha0)
    rep.section(
        "2. GridSearchCV on the 22-manifold",
        f"`GridSearchCV(HTAFNetClassifier({cfg.grid_hidden}), "
        f"htaf_grid(22.0, alpha0={cfg.grid_alpha0}), cv={cfg.cv})`: each "
        "candidate pairs alpha0 with alpha1 = 22 / alpha0, so alpha0 * alpha1 "
        "stays on the manifold of Theorem 3.2. Scores are cross-validated "
        "accuracies on the training split (exact step at inference); the best "
        "candidate is refitted and scored on the test split.",
    )
    net = ctx.make_net(
        cfg.grid_hidden, "htaf", cfg.grid_epochs, callbacks=[("tick", _FitTick())]
    )
    search = GridSearchCV(net, grid, cv=cfg.cv)
    n_fits = len(grid) * cfg.cv + 1
    with ctx.bar(total=n_fits, desc="GridSearchCV fits") as bar:
        _FitTick.bar = bar
        try:
            search.fit(ctx.X_train, ctx.y_train)
        finally:
            _FitTick.bar = None
    res = search.cv_results_
    rows = []
    for i, params in enumerate(res["params"]):
        a0, a1 = params["alpha0"], params["alpha1"]
        rows.append(
            [
                a0,
                a1,
                a0 * a1,
                res["mean_test_score"][i],
                res["std_test_score"][i],
                int(res["rank_test_score"][i]),
            ]
        )
    rep.table(
        "grid_search",
        [
            "alpha0",
            "alpha1",
            "alpha0_x_alpha1",
            "mean_cv_accuracy",
            "std_cv_accuracy",
            "rank",
        ],
        rows,
        f"{cfg.cv}-fold cross-validated accuracy per (alpha0, alpha1).",
    )
    best = search.best_params_
    test = search.score(ctx.X_test, ctx.y_test)
    rep.text(
        f"Best: alpha0 = {fmt(best['alpha0'])}, alpha1 = {fmt(best['alpha1'])}; "
        f"test accuracy of the refitted best net: {fmt(test)}."
    )
    rep.summarize(
        "GridSearchCV",
        "best alpha0 (alpha1 = 22/alpha0)",
        best["alpha0"],
        f"highest {cfg.cv}-fold CV accuracy on the 22-manifold",
    )
    rep.summarize(
        "GridSearchCV",
        "test accuracy of best",
        test,
        "refitted best candidate, exact step at inference",
    )
    add_figure(
        rep,
        "plot_grid_search",
        ([r[0] for r in rows], [r[3] for r in rows], [r[4] for r in rows]),
        "grid_search",
        "Cross-validated accuracy along alpha0 * alpha1 = 22.",
    )


def section_icbm(rep: Report, ctx: DemoContext) -> None:
    """6. ICBM: accuracy before/after the concept layer and the concept table."""
    cfg = ctx.cfg
    rep.section(
        "6. ICBM: an implicit concept bottleneck",
        f"The same MLP backbone {cfg.icbm_hidden} with, as its last hidden "
        f"layer, {cfg.n_concepts} ReLU units (*before*) or {cfg.n_concepts} HTAF "
        "units that become exact steps at inference (*after*: the ICBM, whose "
        "representation is a binary concept vector). Each concept is explained "
        "by the classes on which it fires (activated group) and those on "
        "which it does not (non-activated group); no concept labels are used. "
        "*Specificity* is the one reported by `explain_concepts`.",
    )
    fitted = {}
    for concept_act in ctx.bar(("relu", "htaf"), desc="ICBM"):
        fitted[concept_act] = ICBMClassifier(
            backbone="mlp",
            hidden_layer_sizes=cfg.icbm_hidden,
            n_concepts=cfg.n_concepts,
            concept_activation=concept_act,
            max_epochs=cfg.icbm_epochs,
            random_state=SEED,
            device=ctx.device,
        ).fit(ctx.X_train, ctx.y_train)
    icbm = fitted["htaf"]
    acc_before = fitted["relu"].score(ctx.X_test, ctx.y_test)
    acc_after = icbm.score(ctx.X_test, ctx.y_test)
    concepts = np.asarray(icbm.transform(ctx.X_test))
    rep.table(
        "icbm_accuracy",
        ["model", "concept_layer", "test_acc"],
        [
            ["before", f"{cfg.n_concepts} ReLU units", acc_before],
            ["after (ICBM)", f"{cfg.n_concepts} binary HTAF concepts", acc_after],
        ],
        "Test accuracy before and after the concept bottleneck "
        '(`ICBMClassifier(concept_activation="relu")` vs the default "htaf").',
    )
    rep.text(
        f"Concept matrix `icbm.transform(X_test)`: shape {concepts.shape}, values "
        f"{sorted(np.unique(concepts).tolist())}, mean firing rate "
        f"{fmt(float(concepts.mean()))}."
    )
    records = icbm.explain_concepts(ctx.X_test, ctx.y_test)
    status = {}
    for rec in records:
        status[rec.status] = status.get(rec.status, 0) + 1
    records = sorted(records, key=lambda r: (-r.specificity, r.index))
    rows = [
        [
            rec.index,
            rec.status,
            " ".join(str(c) for c in rec.activated),
            " ".join(str(c) for c in rec.non_activated),
            rec.firing_rate,
            rec.specificity,
        ]
        for rec in records[: cfg.n_concept_rows]
    ]
    rep.table(
        "icbm_concepts",
        [
            "concept",
            "status",
            "activated_classes",
            "non_activated_classes",
            "firing_rate",
            "specificity",
        ],
        rows,
        f"The {len(rows)} most class-specific concepts on the test set "
        "(`icbm.explain_concepts(X_test, y_test)`): a class is activated when "
        "the concept fires on at least half of its samples; specificity = mean "
        "firing rate over the activated classes - mean over the others.",
    )
    rep.text(
        "Concepts by status: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(status.items()))
        + ". Naming prompt of the most specific concept (give `explain_concepts` "
        "a `namer`, e.g. an LLM client, to name them):\n\n> "
        + records[0].prompt.replace("\n", " ")
    )
    rep.summarize(
        "ICBM",
        "test accuracy before -> after",
        f"{fmt(acc_before)} -> {fmt(acc_after)}",
        f"ReLU layer vs {cfg.n_concepts} binary HTAF concepts",
    )
