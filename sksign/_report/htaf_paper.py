"""``reproduce htaf``: the HTAF paper's tables at this scale.

HTAF vs STE vs scaled sigmoid for the SNN, BNN and DHN rows (and a step
ResNet-18), each method tuned on a validation split of the training set and
refitted with several seeds (:mod:`sksign._report.htaf_protocol`; exact step
at inference), the first-layer gradient norms of a deep Heaviside net, and
the ICBM accuracy before/after its concept layer.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
from functools import partial
from typing import NamedTuple

import numpy as np
import torch

from sksign._report._common import load_split, progress
from sksign._report.fitting import (
    estimate_run_time,
    inputs_for,
    recipe_of,
    recipe_params,
)
from sksign._report.htaf_protocol import (
    candidates,
    clear_winner,
    fit_row,
    n_fits,
    protocol_net,
    protocol_text,
    winner_text,
)
from sksign._report.papers import (
    ACTIVATION_NAMES,
    ARCH_NAMES,
    OURS_ARCH,
    PAPER_ARCH,
    PAPER_GRAD,
    PAPER_HTAF,
    PAPER_ICBM,
)
from sksign._report.tables import Table, mean_std, pm
from sksign.estimators import ICBMClassifier
from sksign.nn import ARCHITECTURES, build_network

__all__ = [
    "Model",
    "estimate_htaf",
    "first_layer_grad_norms",
    "models_of",
    "reproduce_htaf",
]


class Model(NamedTuple):
    """One row of the first table: an MLP-family net (`depth` hidden layers
    of the config's width) or an image net (`spec`)."""

    name: str
    architecture: str
    depth: int | None
    spec: object  # NetSpec or None

    @property
    def key(self):
        if self.spec is None:
            return f"{self.architecture}{self.depth}"
        return f"{self.architecture}-w{self.spec.width}"

    def epochs(self, cfg):
        return (self.spec.epochs if self.spec is not None else None) or cfg.epochs


def models_of(cfg):
    """The rows of `cfg`'s first table as :class:`Model` s."""
    out = []
    for m in cfg.models:
        if len(m) == 2:
            out.append(Model(m[0], m[1].architecture, None, m[1]))
        else:
            out.append(Model(m[0], m[1], m[2], None))
    return out


def first_layer_grad_norms(data, cfg, activation, seed, device):
    """||dL/dW_fc0|| (Frobenius) per step of a plain DHN (Adam, no batch norm).

    The net is built here and trained in ``train()`` mode; it is not returned.
    """
    X_train, _, y_train, _ = data
    X_train = inputs_for("mlp", X_train)
    # seeded on a fork of torch's CPU generator: the caller's stream is left as it was
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = build_network(
            "mlp",
            X_train.shape[1],
            len(np.unique(y_train)),
            hidden_layer_sizes=(cfg.width,) * cfg.grad_depth,
            activation=activation,
            alpha0=cfg.alpha0,
            alpha1=cfg.alpha1,
        ).to(device)
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    rng = np.random.default_rng(seed)
    classes = np.unique(y_train)
    norms = []
    for _ in range(cfg.grad_steps):
        idx = rng.choice(len(X_train), min(cfg.batch_size, len(X_train)), replace=False)
        xb = torch.as_tensor(X_train[idx], device=device)
        yb = torch.as_tensor(
            np.searchsorted(classes, y_train[idx]), dtype=torch.long, device=device
        )
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(xb), yb).backward()
        norms.append(float(net.fc0.weight.grad.norm()))
        opt.step()
    return norms


def fit_estimate_net(cfg, data, model, device, n, epochs):
    """An HTAF net of one row (its first candidate), for the run-time estimate."""
    X_train, _, y_train, _ = data
    cand = candidates(cfg, "htaf")[0]
    net = protocol_net(cfg, model, "htaf", cand, 0, device, epochs=epochs)
    return net.fit(inputs_for(model.architecture, X_train[:n]), y_train[:n])


def icbm_spec(cfg, backbone):
    """The NetSpec of an image backbone of the ICBM, or None."""
    return next((s for s in cfg.icbm_nets if s.architecture == backbone), None)


def fit_icbm_pair(cfg, data, backbone, seed, device, bar, run=None):
    """Test accuracy of the ReLU-layer net and of the ICBM: ``(before, after)``."""
    X_train, X_test, y_train, y_test = data
    spec = icbm_spec(cfg, backbone)
    epochs = (spec.epochs if spec is not None else None) or cfg.epochs
    image = spec is not None or backbone == "cnn"
    if not image:
        X_train, X_test = inputs_for("mlp", X_train), inputs_for("mlp", X_test)
    scores = []
    for concept_act in ("relu", "htaf"):
        cell = f"icbm-{backbone}-{concept_act}-s{seed}"

        def score(concept_act=concept_act, cell=cell):
            clf = ICBMClassifier(
                checkpoint_dir=run.checkpoint_dir(cell) if run is not None else None,
                backbone=backbone,
                backbone_params=dict(spec.params) if spec is not None else None,
                hidden_layer_sizes=cfg.icbm_hidden,
                n_concepts=cfg.n_concepts,
                concept_activation=concept_act,
                max_epochs=epochs,
                batch_size=cfg.batch_size,
                random_state=seed,
                device=device,
                **recipe_params(
                    recipe_of(cfg, backbone if spec is not None else "mlp"),
                    epochs,
                    device,
                ),
            ).fit(X_train, y_train)
            return float(clf.score(X_test, y_test))

        scores.append(run.cell(cell, score) if run is not None else score())
        bar.update(1)
    return scores


def _paper_text(values) -> str:
    """The paper's HTAF / STE / SS numbers of a row, "-" where it has none."""
    if all(v is None for v in values):
        return "-"
    return " / ".join("-" if v is None else f"{v:.1f}" for v in values)


def _net_text(cfg, model) -> str:
    """The "Ours: net" cell of a row."""
    _, arch, depth, spec = model
    steps = f"T={cfg.time_steps}" if arch in ("snn", "sew_resnet") else ""
    if spec is None:
        parts = (OURS_ARCH.get(arch, arch), steps)
        return ", ".join(p for p in parts if p) + f", {depth} hidden layers"
    return spec.describe() + (f", {steps}" if steps else "")


def _loss_note(cfg, models, results) -> str:
    """How often HTAF's mean is below STE's, said plainly."""
    if not {"htaf", "ste"} <= set(cfg.activations):
        return ""
    lost = clearly = 0
    for i in range(len(models)):
        htaf, ste = results[(i, "htaf")].test_scores, results[(i, "ste")].test_scores
        if np.mean(htaf) < np.mean(ste):
            lost += 1
            clearly += clear_winner(["htaf", "ste"], [htaf, ste]) == "ste"
        # equal means are no loss
    return (
        f"HTAF loses to STE (a lower mean) in {lost} of {len(models)} rows, "
        f"by more than the larger std in {clearly} of them. "
    )


def activations_table(cfg, models, results, caption):
    """HTAF vs STE vs SS: one row per model, the papers' numbers alongside.

    `results` maps ``(row index, activation)`` to the
    :class:`~sksign._report.htaf_protocol.RowResult` of the protocol.
    """
    acts = cfg.activations
    rows, csv_rows = [], []
    wins = dict.fromkeys((*acts, None), 0)
    for i, model in enumerate(models):
        res = [results[(i, a)] for a in acts]
        test = [r.test_scores for r in res]
        best = clear_winner(list(acts), test)
        wins[best] += 1
        p = PAPER_HTAF.get(model.name, {"C10": (None,) * 3, "C100": (None,) * 3})
        rows.append(
            [
                model.name,
                _net_text(cfg, model),
                *[pm(t) for t in test],
                PAPER_ARCH.get(model.name, "-"),
                _paper_text(p["C10"]),
                _paper_text(p["C100"]),
                winner_text(list(acts), test),
                *[r.chosen.describe(a, cfg) for a, r in zip(acts, res)],
            ]
        )
        csv_rows.append(
            [
                model.name,
                model.architecture,
                model.depth if model.spec is None else None,
                *[c for t in test for c in mean_std(t)],
                *[None if v is None else v / 100 for v in (*p["C10"], *p["C100"])],
                best,
                *[
                    v
                    for a, r in zip(acts, res)
                    for v in (
                        r.chosen.describe(a, cfg),
                        r.chosen.lr,
                        r.chosen.alpha0,
                        r.chosen.alpha1,
                        r.chosen.alpha0_start,
                        r.val_scores[r.best],
                    )
                ],
            ]
        )
    names = [ACTIVATION_NAMES.get(a, a) for a in acts]
    return Table(
        "HTAF vs STE vs scaled sigmoid (SS)",
        f"{caption} Paper: CIFAR-10/100, mean of 5 runs. Best (ours): the "
        "method whose mean beats the runner-up's by more than the larger of "
        "their two stds; the last columns name each method's chosen candidate.",
        [
            "Model",
            "Ours: net",
            *[f"{n} (%)" for n in names],
            "Paper: net",
            "Paper C10 HTAF / STE / SS",
            "Paper C100 HTAF / STE / SS",
            "Best (ours)",
            *[f"{n}: chosen" for n in names],
        ],
        rows,
        [
            "model",
            "architecture",
            "depth",
            *[c for a in acts for c in (f"{a}_acc", f"{a}_acc_std")],
            "paper_c10_htaf",
            "paper_c10_ste",
            "paper_c10_ss",
            "paper_c100_htaf",
            "paper_c100_ste",
            "paper_c100_ss",
            "best",
            *[
                f"{a}_{c}"
                for a in acts
                for c in (
                    "chosen",
                    "lr",
                    "alpha0",
                    "alpha1",
                    "alpha0_start",
                    "val_acc",
                )
            ],
        ],
        csv_rows,
        note=_loss_note(cfg, models, results)
        + "Clear winner: "
        + ", ".join(f"{ACTIVATION_NAMES[a]} in {wins[a]}" for a in acts)
        + f"; no clear winner in {wins[None]} of {len(models)} "
        "rows. A small-scale run, not the paper's CIFAR setting; the paper's "
        "ranking need not hold here.",
    )


def gradients_table(cfg, grads):
    """First-layer gradient norm at step 1 and its median over the steps."""
    rows, csv_rows = [], []
    for act, runs in grads.items():
        first = [r[0] for r in runs]
        med = [float(np.median(r)) for r in runs]
        rows.append(
            [
                ACTIVATION_NAMES.get(act, act),
                pm(first, 1, 3),
                pm(med, 1, 3),
                PAPER_GRAD.get(act, ""),
            ]
        )
        csv_rows.append([act, *mean_std(first), *mean_std(med)])
    return Table(
        "First-layer gradient norm",
        f"Frobenius norm of dL/dW_fc0 in a DHN (Heaviside MLP, {cfg.grad_depth} "
        f"hidden layers of {cfg.width}, PyTorch's default init, no batch norm) "
        f"on {cfg.dataset}, Adam, batches of {cfg.batch_size}: at step 1 and the "
        f"median over steps 1-{cfg.grad_steps}.",
        ["Activation", "Step 1", f"Median steps 1-{cfg.grad_steps}", "Paper"],
        rows,
        [
            "activation",
            "grad_norm_step1",
            "grad_norm_step1_std",
            "grad_norm_median",
            "grad_norm_median_std",
        ],
        csv_rows,
    )


def icbm_table(cfg, icbm_rows):
    """ICBM before/after: ours per backbone, then the paper's rows."""
    rows, csv_rows = [], []
    for backbone, before, after in icbm_rows:
        spec = icbm_spec(cfg, backbone)
        if spec is None:
            label = f"{backbone.upper()} {cfg.icbm_hidden} + {cfg.n_concepts} concepts"
        else:
            label = (
                f"{ARCH_NAMES.get(backbone, backbone)} "
                f"({', '.join(f'{k}={v}' for k, v in spec.params)}) + "
                f"{cfg.n_concepts} concepts"
            )
        diff = 100 * (np.mean(after) - np.mean(before))
        rows.append([label, cfg.dataset, pm(before), pm(after), f"{diff:+.2f}"])
        csv_rows.append([backbone, cfg.dataset, *mean_std(before), *mean_std(after)])
    for bb, data_name, b, a in PAPER_ICBM:
        rows.append(
            [f"{bb} (paper)", data_name, f"{b:.1f}", f"{a:.1f}", f"{a - b:+.1f}"]
        )
        csv_rows.append([f"{bb} (paper)", data_name, b / 100, None, a / 100, None])
    return Table(
        "ICBM before/after",
        "Before: the same net with a ReLU layer in place of the concept layer; "
        "after: HTAF concept layer, exact step at inference (binary concepts).",
        ["Backbone", "Data", "Before (%)", "After, ICBM (%)", "Difference (pts)"],
        rows,
        [
            "backbone",
            "data",
            "before_acc",
            "before_acc_std",
            "after_acc",
            "after_acc_std",
        ],
        csv_rows,
    )


def estimate_htaf(cfg, data, models, device, stream):
    """Print (and return, in seconds) the run-time estimate of the nets.

    Per row: its tuning fits (on ``1 - validation_fraction`` of the training
    set), its refits and its share of the ICBM nets, timed on the row's net.
    """
    n_tune, n_refit = n_fits(cfg)
    per_row_icbm = 2 * len(cfg.icbm_backbones) * cfg.seeds / max(len(models), 1)
    count = n_tune + n_refit + per_row_icbm
    share = ((1 - cfg.validation_fraction) * n_tune + n_refit + per_row_icbm) / count
    fits = [
        (partial(fit_estimate_net, cfg, data, m, device), count, m.epochs(cfg), share)
        for m in models
    ]
    return estimate_run_time(fits, len(data[0]), cfg.batch_size, stream)


def reproduce_htaf(
    cfg, *, device="cpu", show_progress=True, stream=None, run=None, data=None
):
    """HTAF paper: HTAF vs STE vs SS (SNN/BNN/DHN/...), gradients, ICBM.

    Prints the run-time estimate to `stream` (default: stdout), fits every net
    and returns the three tables. `data` is ``(X_train, X_test, y_train,
    y_test)``; None loads ``cfg.dataset``.
    """
    stream = stream or sys.stdout
    if data is None:
        data = load_split(cfg.dataset, max_train=cfg.max_train, max_test=cfg.max_test)
    models = [m for m in models_of(cfg) if m.architecture in ARCHITECTURES]
    for m in models_of(cfg):
        if m.architecture not in ARCHITECTURES:
            print(
                f"[skipped] {m.name}: architecture {m.architecture!r} not available",
                file=stream,
            )
    estimate_htaf(cfg, data, models, device, stream)
    n_tune, n_refit = n_fits(cfg)
    n_icbm = 2 * len(cfg.icbm_backbones) * cfg.seeds
    results, grads, icbm_rows = {}, {}, []
    total = len(models) * (n_tune + n_refit) + n_icbm
    with progress(total=total, desc="htaf nets", enabled=show_progress) as bar:
        for i, model in enumerate(models):
            for act in cfg.activations:
                results[(i, act)] = fit_row(cfg, data, model, act, device, run, bar)
        for act in cfg.activations:
            grads[act] = [
                first_layer_grad_norms(data, cfg, act, s, device)
                for s in range(cfg.seeds)
            ]
        for backbone in cfg.icbm_backbones:
            pairs = [
                fit_icbm_pair(cfg, data, backbone, seed, device, bar, run)
                for seed in range(cfg.seeds)
            ]
            icbm_rows.append((backbone, [p[0] for p in pairs], [p[1] for p in pairs]))
    caption = protocol_text(cfg, data, models)
    return [
        activations_table(cfg, models, results, caption),
        gradients_table(cfg, grads),
        icbm_table(cfg, icbm_rows),
    ]
