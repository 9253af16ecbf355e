"""Sections 3, 4 and 5 of ``python -m sksign demo``: what the sign bits carry.

3. Sign codes + sign-kNN vs the full net (sign gap), per activation.
4. Both interventions (two definitions each) over a range of alpha.
5. Gate dominance Z1 vs width.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sksign._report._common import SEED, Report
from sksign._report.demo_setup import DemoContext, add_figure
from sksign._report.tables import fmt
from sksign.estimators import SignKNNClassifier
from sksign.metrics import gate_dominance_report, intervention_score, loo_purity
from sksign.transformers import SignCodeTransformer

__all__ = ["section_gate_dominance", "section_interventions", "section_sign_codes"]


def section_sign_codes(rep: Report, ctx: DemoContext) -> None:
    """3. Sign codes + sign-kNN vs the full net (sign gap), per activation."""
    rep.section(
        "3. Sign codes and sign-kNN vs the full net",
        f"For each activation a deep MLP {ctx.cfg.sign_hidden} (the Sign "
        "Code paper's claims are about deep nets; its FFNNs have 6 hidden "
        f"layers) is trained {ctx.cfg.sign_epochs} epochs (HTAF at lr=3e-4, "
        "the others at the default rate); "
        "`SignCodeTransformer(net, prefit=True)` reads the last hidden layer's "
        "sign bits (bit = 1 iff the pre-activation z > 0) and "
        f"`SignKNNClassifier(n_neighbors={ctx.cfg.n_neighbors})` classifies "
        "test codes against the training codes under the normalised Hamming "
        "distance. *Sign gap* = (test error of sign-kNN) - (test error of the "
        f"full net). *Purity* = mean leave-one-out {ctx.cfg.purity_k}-NN label "
        "purity of the test codes in Hamming space.",
    )
    rows = []
    for act in ctx.bar(ctx.cfg.sign_activations, desc="sign codes"):
        net = ctx.sign_net(act)
        acc_net = net.score(ctx.X_test, ctx.y_test)
        sct = SignCodeTransformer(net, prefit=True)
        c_train = sct.fit_transform(ctx.X_train)
        c_test = sct.transform(ctx.X_test)
        knn = SignKNNClassifier(n_neighbors=ctx.cfg.n_neighbors).fit(
            c_train, ctx.y_train
        )
        acc_knn = knn.score(c_test, ctx.y_test)
        purity = float(loo_purity(c_test, ctx.y_test, k=ctx.cfg.purity_k))
        rows.append(
            [
                act,
                c_train.shape[1],
                acc_net,
                acc_knn,
                (1 - acc_knn) - (1 - acc_net),
                purity,
            ]
        )
    rep.table(
        "sign_codes",
        [
            "activation",
            "n_bits",
            "net_test_acc",
            "sign_knn_test_acc",
            "sign_gap",
            "loo_purity",
        ],
        rows,
        "Full net vs sign-kNN on the last hidden layer's bits.",
    )
    for r in rows:
        rep.summarize(
            "sign codes",
            f"sign gap, {r[0]}",
            r[4],
            "err(sign-kNN on last-layer bits) - err(full net)",
        )


_INTERVENTIONS = (
    ("sign_flip", "literal", "h -> -h (magnitude kept)"),
    ("sign_flip", "gate", "h -> phi(-z) (unit takes the other branch)"),
    ("magnitude", "standard", "M -> abs(eta), eta ~ N(0, 1); clean sign kept"),
    (
        "magnitude",
        "matched",
        "M -> abs(eta) rescaled to mean mu_j(S), mu estimated on the training "
        "set; clean sign kept",
    ),
)


_DEFINITIONS = {(k, d): t for k, d, t in _INTERVENTIONS}


def section_interventions(rep: Report, ctx: DemoContext) -> None:
    """4. Both interventions, two definitions each, over a range of alpha."""
    cfg = ctx.cfg
    rep.section(
        "4. Interventions: destroy routing or destroy magnitude",
        "Test accuracy of the nets of section 3 under each intervention, "
        "applied with probability alpha per unit and per sample in every hidden "
        "layer (`intervention_score(net, X, y, kind=..., alpha=...)`, "
        f"mean of {cfg.n_repeats} repeat(s)). Definitions:\n\n"
        + "\n".join(
            f'- `kind="{k}"`, `{"flip" if k == "sign_flip" else "noise"}="{d}"`: {text}'
            for k, d, text in _INTERVENTIONS
        )
        + "\n\nChance is 0.1.",
    )
    rows, curves = [], {}
    acts = cfg.intervention_activations
    total = len(acts) * len(_INTERVENTIONS)
    with ctx.bar(total=total, desc="interventions") as bar:
        for act in acts:
            net = ctx.sign_net(act)
            for kind, definition, _ in _INTERVENTIONS:
                opt = (
                    {"flip": definition}
                    if kind == "sign_flip"
                    else {"noise": definition}
                )
                if kind == "magnitude" and definition == "matched":
                    opt["X_ref"] = ctx.X_train
                accs = [
                    intervention_score(
                        net,
                        ctx.X_test,
                        ctx.y_test,
                        kind=kind,
                        alpha=a,
                        n_repeats=cfg.n_repeats,
                        random_state=SEED,
                        **opt,
                    )
                    for a in cfg.alphas
                ]
                curves[(act, kind, definition)] = accs
                rows.append([act, kind, definition, *accs])
                bar.update(1)
    rep.table(
        "interventions",
        ["activation", "kind", "definition", *[f"alpha={fmt(a)}" for a in cfg.alphas]],
        rows,
        "Test accuracy under each intervention and alpha.",
    )
    for act, kind, definition, *accs in rows:
        for a, acc in zip(cfg.alphas, accs):
            if (kind, a) in (("sign_flip", 0.2), ("magnitude", 1.0)):
                rep.summarize(
                    "interventions",
                    f"{act}, {kind} {definition}, alpha={a:g}",
                    acc,
                    _DEFINITIONS[(kind, definition)],
                )
    add_figure(
        rep,
        "plot_interventions",
        (curves, list(cfg.alphas)),
        "interventions",
        "Accuracy vs alpha: sign flip (literal / gate) and magnitude "
        "randomisation (standard / matched noise).",
    )


def section_gate_dominance(rep: Report, ctx: DemoContext) -> None:
    """5. Gate dominance (Z1, delta_bar, eps_1 and its bounds) vs width."""
    cfg = ctx.cfg
    rep.section(
        "5. Gate dominance vs width",
        f"MLPs of depth {cfg.width_depth} and width w in {cfg.widths}. On the "
        "last hidden layer, with mu_j(s) = E[M_j | S_j = s] from the training "
        "set, the logit splits into a pure-sign part f~ and a magnitude "
        "residual R. *Z1* = min over c != yhat of |f~_yhat - f~_c| / r_c, "
        "r_c^2 the uncentred second moment of R_yhat - R_c among samples with "
        "the same pure-sign prediction yhat = argmax f~ (median over the test "
        "set). *Agreement* = share of test samples where argmax f = argmax f~. "
        "*delta_bar* = mean over units of (mu(+1) - mu(-1)) / (mu(+1) + mu(-1)). "
        "*Bound* = (C - 1) E[Z1^-2] >= eps_1 (disagreement rate); *union "
        "bound* = E[min(1, sum_c r_c^2 / margin_c^2)] (the per-sample clipped union "
        "bound; both bound eps_1 = 1 - agreement).",
    )
    rows, series = [], {}
    combos = [(a, w) for a in cfg.width_activations for w in cfg.widths]
    for act, w in ctx.bar(combos, desc="Z1 vs width"):
        net = ctx.make_net((w,) * cfg.width_depth, act, cfg.width_epochs)
        net.fit(ctx.X_train, ctx.y_train)
        r = gate_dominance_report(net, ctx.X_test, ctx.y_test, X_ref=ctx.X_train)
        z1 = float(r.median_Z1)
        row = [
            act,
            w,
            net.score(ctx.X_test, ctx.y_test),
            z1,
            r.delta_bar,
            r.agreement,
            r.eps_1,
            r.bound,
            r.union_bound,
        ]
        rows.append(row)
        series.setdefault(act, ([], []))
        series[act][0].append(w)
        series[act][1].append(z1)
    rep.table(
        "gate_dominance",
        [
            "activation",
            "width",
            "test_acc",
            "median_z1",
            "delta_bar",
            "agreement",
            "eps_1",
            "bound",
            "union_bound",
        ],
        rows,
        "Gate dominance on the last hidden layer vs width.",
    )
    for act, (ws, zs) in series.items():
        rep.summarize(
            "gate dominance",
            f"median Z1, {act}, w={ws[0]} -> {ws[-1]}",
            f"{fmt(zs[0])} -> {fmt(zs[-1])}",
            "min_c pure-sign margin / residual rms (median over test)",
        )
    add_figure(
        rep,
        "plot_gate_dominance_width",
        (series,),
        "gate_dominance_width",
        "Median Z1 against width (log-log), with a sqrt(width) guide.",
    )
