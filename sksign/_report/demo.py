"""``python -m sksign demo``: one report that walks through the whole package.

Sections (each skipped with a note when its pieces are not available):

1. HTAF net: exact-step inference vs the smooth net, binarization rate,
   against STE and scaled-sigmoid nets; the epsilon bound.
2. GridSearchCV over (alpha0, alpha1) on the manifold alpha0 * alpha1 = 22.
3. Sign codes + sign-kNN vs the full net (sign gap), per activation.
4. Both interventions (two definitions each) over a range of alpha.
5. Gate dominance Z1 vs width.
6. ICBM: accuracy before/after and the concept table.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from skorch.callbacks import Callback

from sksign._report._common import Report, fmt, optional, progress

__all__ = ["DEFAULT", "QUICK", "DemoConfig", "run_demo"]


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the demo; ``QUICK`` is the test-sized version."""

    hidden: tuple = (256, 256)
    epochs: int = 40
    step_baselines: tuple = ("ste", "scaled_sigmoid")
    grid_alpha0: tuple = (0.5, 1.0, 2.0, 3.0)
    grid_hidden: tuple = (128,)
    grid_epochs: int = 20
    cv: int = 3
    sign_activations: tuple = ("relu", "silu", "gelu", "tanh", "htaf")
    n_neighbors: int = 5
    purity_k: int = 10
    alphas: tuple = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
    intervention_activations: tuple = ("relu", "silu", "gelu", "tanh")
    n_repeats: int = 3
    widths: tuple = (16, 64, 256, 512)
    width_activations: tuple = ("relu", "silu", "tanh")
    width_depth: int = 2
    width_epochs: int = 20
    n_concepts: int = 32
    icbm_hidden: tuple = (256,)
    icbm_epochs: int = 40
    n_concept_rows: int = 10
    extra: dict = field(default_factory=dict)


DEFAULT = DemoConfig()
QUICK = replace(
    DEFAULT,
    hidden=(128, 128),
    epochs=15,
    grid_alpha0=(1.0, 2.0, 3.0),
    grid_hidden=(64,),
    grid_epochs=8,
    sign_activations=("relu", "silu", "tanh", "htaf"),
    alphas=(0.0, 0.1, 0.2, 0.5, 1.0),
    intervention_activations=("relu", "silu", "tanh"),
    n_repeats=1,
    widths=(16, 64, 256),
    width_activations=("relu", "silu", "tanh"),
    width_epochs=10,
    n_concepts=16,
    icbm_hidden=(128,),
    icbm_epochs=15,
    n_concept_rows=8,
)

_SEED = 0


class _Context:
    """Data, settings and fitted nets shared by the sections."""

    def __init__(self, cfg, dataset, device, show_progress):
        from sklearn.model_selection import train_test_split

        from sksign import datasets

        loader = {"digits": datasets.load_digits, "mnist5k": datasets.load_mnist5k}
        X, y = loader[dataset]()
        self.dataset = dataset
        self.X_train, self.X_test, self.y_train, self.y_test = train_test_split(
            X, y, test_size=0.3, random_state=_SEED, stratify=y
        )
        self.cfg = cfg
        self.device = device
        self.show_progress = show_progress
        self.nets = {}

    def bar(self, iterable=None, *, total=None, desc=None):
        return progress(iterable, total=total, desc=desc, enabled=self.show_progress)

    def make_net(self, hidden, activation, epochs, **kw):
        from sksign.estimators import HTAFNetClassifier

        return HTAFNetClassifier(
            hidden,
            activation=activation,
            max_epochs=epochs,
            random_state=_SEED,
            device=self.device,
            **kw,
        )

    def net(self, activation):
        """The main-size net with `activation`, fitted once and cached."""
        if activation not in self.nets:
            cfg = self.cfg
            net = self.make_net(cfg.hidden, activation, cfg.epochs)
            self.nets[activation] = net.fit(self.X_train, self.y_train)
        return self.nets[activation]


# ---------------------------------------------------------------------------
def _binarization_rate(net, X, tol=0.1):
    """Share of smooth step-activation outputs within `tol` of 0 or 1 on X."""
    import torch

    from sksign.nn.activations import StepActivation, force_step_mode

    module = net.module_
    acts = [m for m in module.modules() if isinstance(m, StepActivation)]
    counts = [0, 0]

    def hook(_m, _inp, out):
        o = out.detach()
        counts[0] += int(((o <= tol) | (o >= 1.0 - tol)).sum())
        counts[1] += o.numel()

    handles = [a.register_forward_hook(hook) for a in acts]
    try:
        with force_step_mode(module, "smooth"), torch.no_grad():
            net.predict_proba(X)
    finally:
        for h in handles:
            h.remove()
    return counts[0] / counts[1] if counts[1] else float("nan")


def section_htaf(rep: Report, ctx: _Context) -> None:
    from sksign._report import plots
    from sksign.nn.activations import (
        force_step_mode,
        htaf,
        htaf_alpha0_min,
        htaf_product_limit,
    )

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
        rate = _binarization_rate(net, ctx.X_test)
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
    rep.summarize("HTAF net", "test accuracy, exact step H", h[1],
                  "accuracy of predict() (every HTAF -> 1[x >= 0])")
    rep.summarize("HTAF net", "test accuracy, smooth HTAF", h[2],
                  "same net, HTAF kept smooth at inference")
    rep.summarize("HTAF net", "binarization rate", h[4],
                  "share of smooth HTAF outputs within 0.1 of {0, 1}")

    # The epsilon bound, checked on a grid of x.
    eps_rows = []
    import torch

    x = torch.linspace(-50, 50, 200_001, dtype=torch.float64)
    far = x.abs() >= 0.1
    for eps, a1 in ((0.1, 11.0), (0.1, 22.0), (0.1, 44.0), (0.05, 30.0)):
        a0 = htaf_alpha0_min(eps, a1)
        xf = x[x.abs() >= eps]
        err = (htaf(xf, a0, a1) - (xf >= 0).double()).abs().max().item()
        err_below = (htaf(xf, 0.99 * a0, a1) - (xf >= 0).double()).abs().max().item()
        eps_rows.append([eps, a1, a0, a0 * a1, f"{err:.6f}", f"{err_below:.6f}"])
    del far
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
    rep.summarize("HTAF bound", "alpha0_min(eps=0.1, alpha1=11)", eps_rows[0][2],
                  "Prop. 3.1: least alpha0 with abs(HTAF - H) <= eps for abs(x) >= eps")
    rep.figure(
        plots.plot_htaf_shape(),
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


def section_grid(rep: Report, ctx: _Context) -> None:
    from sklearn.model_selection import GridSearchCV

    from sksign._report import plots
    from sksign.nn.activations import htaf_grid

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
        rows.append([a0, a1, a0 * a1, res["mean_test_score"][i],
                     res["std_test_score"][i], int(res["rank_test_score"][i])])
    rep.table(
        "grid_search",
        ["alpha0", "alpha1", "alpha0_x_alpha1", "mean_cv_accuracy", "std_cv_accuracy",
         "rank"],
        rows,
        f"{cfg.cv}-fold cross-validated accuracy per (alpha0, alpha1).",
    )
    best = search.best_params_
    test = search.score(ctx.X_test, ctx.y_test)
    rep.text(
        f"Best: alpha0 = {fmt(best['alpha0'])}, alpha1 = {fmt(best['alpha1'])}; "
        f"test accuracy of the refitted best net: {fmt(test)}."
    )
    rep.summarize("GridSearchCV", "best alpha0 (alpha1 = 22/alpha0)", best["alpha0"],
                  f"highest {cfg.cv}-fold CV accuracy on the 22-manifold")
    rep.summarize("GridSearchCV", "test accuracy of best", test,
                  "refitted best candidate, exact step at inference")
    rep.figure(
        plots.plot_grid_search(
            [r[0] for r in rows], [r[3] for r in rows], [r[4] for r in rows]
        ),
        "grid_search",
        "Cross-validated accuracy along alpha0 * alpha1 = 22.",
    )


def section_sign_codes(rep: Report, ctx: _Context) -> None:
    got, why = optional(
        ("sksign.transformers", "sksign.transformers._sign_codes"),
        "SignCodeTransformer",
    )
    got2, why2 = optional(
        ("sksign.estimators", "sksign.estimators._sign_knn"), "SignKNNClassifier"
    )
    rep.section(
        "3. Sign codes and sign-kNN vs the full net",
        "For each activation an MLP of the same size is trained; "
        "`SignCodeTransformer(net, prefit=True)` reads the last hidden layer's "
        "sign bits (bit = 1 iff the pre-activation z > 0) and "
        f"`SignKNNClassifier(n_neighbors={ctx.cfg.n_neighbors})` classifies "
        "test codes against the training codes under the normalised Hamming "
        "distance. *Sign gap* = (test error of sign-kNN) - (test error of the "
        f"full net). *Purity* = mean leave-one-out {ctx.cfg.purity_k}-NN label "
        "purity of the test codes in Hamming space.",
    )
    if got is None or got2 is None:
        rep.skip("sign codes", why or why2)
        return
    (SignCodeTransformer,), (SignKNNClassifier,) = got, got2
    purity_fn, _ = optional(
        ("sksign.metrics", "sksign.metrics._geometry"), "loo_purity"
    )
    rows = []
    for act in ctx.bar(ctx.cfg.sign_activations, desc="sign codes"):
        net = ctx.net(act)
        acc_net = net.score(ctx.X_test, ctx.y_test)
        sct = SignCodeTransformer(net, prefit=True)
        c_train = sct.fit_transform(ctx.X_train)
        c_test = sct.transform(ctx.X_test)
        knn = SignKNNClassifier(n_neighbors=ctx.cfg.n_neighbors).fit(
            c_train, ctx.y_train
        )
        acc_knn = knn.score(c_test, ctx.y_test)
        purity = (
            float(purity_fn[0](c_test, ctx.y_test, k=ctx.cfg.purity_k))
            if purity_fn
            else float("nan")
        )
        rows.append([act, c_train.shape[1], acc_net, acc_knn,
                     (1 - acc_knn) - (1 - acc_net), purity])
    rep.table(
        "sign_codes",
        ["activation", "n_bits", "net_test_acc", "sign_knn_test_acc", "sign_gap",
         "loo_purity"],
        rows,
        "Full net vs sign-kNN on the last hidden layer's bits.",
    )
    for r in rows:
        rep.summarize("sign codes", f"sign gap, {r[0]}", r[4],
                      "err(sign-kNN on last-layer bits) - err(full net)")


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


def section_interventions(rep: Report, ctx: _Context) -> None:
    from sksign._report import plots

    got, why = optional(
        ("sksign.metrics", "sksign.metrics._scorers"), "intervention_score"
    )
    cfg = ctx.cfg
    rep.section(
        "4. Interventions: destroy routing or destroy magnitude",
        "Test accuracy of the nets of section 3 under each intervention, "
        "applied with probability alpha per unit and per sample in every hidden "
        "layer (`intervention_score(net, X, y, kind=..., alpha=...)`, "
        f"mean of {cfg.n_repeats} repeat(s)). Definitions:\n\n"
        + "\n".join(
            f"- `kind=\"{k}\"`, `{'flip' if k == 'sign_flip' else 'noise'}=\"{d}\"`:"
            f" {text}"
            for k, d, text in _INTERVENTIONS
        )
        + "\n\nChance is 0.1.",
    )
    if got is None:
        rep.skip("interventions", why)
        return
    (intervention_score,) = got
    rows, curves = [], {}
    acts = cfg.intervention_activations
    total = len(acts) * len(_INTERVENTIONS)
    with ctx.bar(total=total, desc="interventions") as bar:
        for act in acts:
            net = ctx.net(act)
            for kind, definition, _ in _INTERVENTIONS:
                opt = {"flip": definition} if kind == "sign_flip" else {
                    "noise": definition}
                if kind == "magnitude" and definition == "matched":
                    opt["X_ref"] = ctx.X_train
                accs = [
                    intervention_score(
                        net, ctx.X_test, ctx.y_test, kind=kind, alpha=a,
                        n_repeats=cfg.n_repeats, random_state=_SEED, **opt,
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
    rep.figure(
        plots.plot_interventions(curves, list(cfg.alphas)),
        "interventions",
        "Accuracy vs alpha: sign flip (literal / gate) and magnitude "
        "randomisation (standard / matched noise).",
    )


def section_gate_dominance(rep: Report, ctx: _Context) -> None:
    from sksign._report import plots

    got, why = optional(
        ("sksign.metrics", "sksign.metrics._scorers"), "gate_dominance_report"
    )
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
    if got is None:
        rep.skip("gate dominance", why)
        return
    (gate_dominance_report,) = got
    rows, series = [], {}
    combos = [(a, w) for a in cfg.width_activations for w in cfg.widths]
    for act, w in ctx.bar(combos, desc="Z1 vs width"):
        net = ctx.make_net((w,) * cfg.width_depth, act, cfg.width_epochs)
        net.fit(ctx.X_train, ctx.y_train)
        r = gate_dominance_report(net, ctx.X_test, ctx.y_test, X_ref=ctx.X_train)
        z1 = float(r.median_Z1)
        row = [act, w, net.score(ctx.X_test, ctx.y_test), z1, r.delta_bar,
               r.agreement, r.eps_1, r.bound, r.union_bound]
        rows.append(row)
        series.setdefault(act, ([], []))
        series[act][0].append(w)
        series[act][1].append(z1)
    rep.table(
        "gate_dominance",
        ["activation", "width", "test_acc", "median_z1", "delta_bar", "agreement",
         "eps_1", "bound", "union_bound"],
        rows,
        "Gate dominance on the last hidden layer vs width.",
    )
    for act, (ws, zs) in series.items():
        rep.summarize("gate dominance", f"median Z1, {act}, w={ws[0]} -> {ws[-1]}",
                      f"{fmt(zs[0])} -> {fmt(zs[-1])}",
                      "min_c pure-sign margin / residual rms (median over test)")
    rep.figure(plots.plot_gate_dominance_width(series), "gate_dominance_width",
               "Median Z1 against width (log-log), with a sqrt(width) guide.")


def section_icbm(rep: Report, ctx: _Context) -> None:
    got, why = optional(
        ("sksign.estimators", "sksign.estimators._icbm"), "ICBMClassifier"
    )
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
    if got is None:
        rep.skip("ICBM", why)
        return
    (ICBMClassifier,) = got
    fitted = {}
    for concept_act in ctx.bar(("relu", "htaf"), desc="ICBM"):
        fitted[concept_act] = ICBMClassifier(
            backbone="mlp",
            hidden_layer_sizes=cfg.icbm_hidden,
            n_concepts=cfg.n_concepts,
            concept_activation=concept_act,
            max_epochs=cfg.icbm_epochs,
            random_state=_SEED,
            device=ctx.device,
        ).fit(ctx.X_train, ctx.y_train)
    icbm = fitted["htaf"]
    acc_before = fitted["relu"].score(ctx.X_test, ctx.y_test)
    acc_after = icbm.score(ctx.X_test, ctx.y_test)
    concepts = np.asarray(icbm.transform(ctx.X_test))
    rep.table(
        "icbm_accuracy",
        ["model", "concept_layer", "test_acc"],
        [["before", f"{cfg.n_concepts} ReLU units", acc_before],
         ["after (ICBM)", f"{cfg.n_concepts} binary HTAF concepts", acc_after]],
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
        [rec.index, rec.status, " ".join(str(c) for c in rec.activated),
         " ".join(str(c) for c in rec.non_activated), rec.firing_rate,
         rec.specificity]
        for rec in records[: cfg.n_concept_rows]
    ]
    rep.table(
        "icbm_concepts",
        ["concept", "status", "activated_classes", "non_activated_classes",
         "firing_rate", "specificity"],
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
    rep.summarize("ICBM", "test accuracy before -> after",
                  f"{fmt(acc_before)} -> {fmt(acc_after)}",
                  f"ReLU layer vs {cfg.n_concepts} binary HTAF concepts")


SECTIONS = (
    ("HTAF net", section_htaf),
    ("GridSearchCV", section_grid),
    ("sign codes", section_sign_codes),
    ("interventions", section_interventions),
    ("gate dominance", section_gate_dominance),
    ("ICBM", section_icbm),
)


def run_demo(out="sksign-report", *, quick=False, dataset="digits", device="cpu",
             progress=True, sections=None, config=None, stream=None):
    """Build the demo report in `out`; return ``(report_path, n_failed)``."""
    import torch

    import sksign

    stream = stream or sys.stdout
    cfg = config or (QUICK if quick else DEFAULT)
    t0 = time.perf_counter()
    ctx = _Context(cfg, dataset, device, progress)
    rep = Report(out, "sksign demo report")
    failed = []
    wanted = SECTIONS if sections is None else [s for s in SECTIONS if s[0] in sections]
    for name, fn in wanted:
        print(f"== {name}", file=stream, flush=True)
        with rep.timed(name):
            try:
                fn(rep, ctx)
            except Exception as exc:  # keep the rest of the report
                failed.append(name)
                traceback.print_exc()
                rep.text(f"> FAILED: {type(exc).__name__}: {exc}")
                rep.summarize(name, "FAILED", type(exc).__name__, str(exc)[:80])
    header = (
        f"sksign {sksign.__version__}; data: {dataset} "
        f"({len(ctx.X_train)} train / {len(ctx.X_test)} test samples, "
        f"{ctx.X_train.shape[1]} features, stratified 70/30 split, seed {_SEED}); "
        f"mode: {'quick' if quick else 'default'}; device: {device}; "
        f"torch threads: {torch.get_num_threads()}. All accuracies are on the "
        "held-out test split unless stated otherwise."
    )
    path = rep.write(header)
    elapsed = time.perf_counter() - t0
    print("", file=stream)
    print(rep.terminal_summary(), file=stream)
    print(f"Report: {Path(path).resolve()} ({elapsed:.0f} s)", file=stream)
    if failed:
        print(f"Failed sections: {', '.join(failed)}", file=stream)
    return path, len(failed)
