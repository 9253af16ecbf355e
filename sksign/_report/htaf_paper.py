"""``reproduce htaf``: the HTAF paper's tables at this scale.

HTAF vs STE vs scaled sigmoid for the SNN, BNN and DHN rows (exact step at
inference), the first-layer gradient norms of a deep Heaviside net, and the
ICBM accuracy before/after its concept layer.
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
    make_classifier,
    recipe_of,
    recipe_params,
    recipes_text,
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
from sksign._report.tables import Table, leaders, mean_std, pm
from sksign.estimators import ICBMClassifier
from sksign.nn import ARCHITECTURES, build_network

__all__ = ["Model", "first_layer_grad_norms", "models_of", "reproduce_htaf"]


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


def fit_net(cfg, data, model, act, seed, device, n=None, epochs=None, checkpoint=None):
    """One net of a row of the first table, fitted on the first `n` samples."""
    X_train, _, y_train, _ = data
    hidden = (cfg.width,) * (model.depth or 1)
    net = make_classifier(
        cfg,
        hidden,
        act,
        seed,
        device,
        epochs=epochs,
        spec=model.spec,
        architecture=model.architecture,
        alpha0=cfg.alpha0,
        alpha1=cfg.alpha1,
        time_steps=cfg.time_steps,
        checkpoint_dir=checkpoint,
    )
    return net.fit(inputs_for(model.architecture, X_train[:n]), y_train[:n])


def fit_htaf_net(cfg, data, model, device, n, epochs):
    """An HTAF net of one row, for the run-time estimate."""
    return fit_net(cfg, data, model, "htaf", 0, device, n, epochs=epochs)


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


def setting_text(cfg, data, models):
    """The setting of the run, as the first caption describes it."""
    X_train, X_test, _, _ = data
    own_test = cfg.dataset in ("digits", "mnist5k")
    split = "70/30 stratified split, " if own_test else "its own test set, "
    recipes = recipes_text(cfg, [(m.name, m.architecture) for m in models])
    epochs = sorted({m.epochs(cfg) for m in models})
    return (
        f"hidden width {cfg.width} (MLP family), "
        f"{'-'.join(map(str, sorted({epochs[0], epochs[-1]})))} epochs, "
        f"{recipes}; batch {cfg.batch_size}, {cfg.dataset} ({split}"
        f"{len(X_train)} train / {len(X_test)} test), alpha0={cfg.alpha0:g}, "
        f"alpha1={cfg.alpha1:g} (SS: k = alpha0 * alpha1; STE: clipped "
        f"identity), {cfg.seeds} seed(s) (mean ± std); exact step H at inference"
    )


def activations_table(cfg, models, acc, setting):
    """HTAF vs STE vs SS: one row per model, the papers' numbers alongside."""
    rows, csv_rows = [], []
    wins = dict.fromkeys(cfg.activations, 0)
    ties = 0
    for i, (name, arch, depth, spec) in enumerate(models):
        means = [float(np.mean(acc[(i, a)])) for a in cfg.activations]
        best = leaders(cfg.activations, means)
        if len(best) == 1:
            wins[best[0]] += 1
        else:
            ties += 1
        p = PAPER_HTAF[name]
        steps = f"T={cfg.time_steps}" if arch in ("snn", "sew_resnet") else ""
        if spec is None:
            ours = (
                ", ".join(p for p in (OURS_ARCH.get(arch, arch), steps) if p)
                + f", {depth} hidden layers"
            )
        else:
            ours = spec.describe() + (f", {steps}" if steps else "")
        rows.append(
            [
                name,
                ours,
                *[pm(acc[(i, a)]) for a in cfg.activations],
                PAPER_ARCH[name],
                " / ".join(f"{v:.1f}" for v in p["C10"]),
                " / ".join(f"{v:.1f}" for v in p["C100"]),
                " = ".join(ACTIVATION_NAMES.get(a, a) for a in best)
                + (" (tie)" if len(best) > 1 else ""),
            ]
        )
        csv_rows.append(
            [
                name,
                arch,
                depth if spec is None else None,
                *[c for a in cfg.activations for c in mean_std(acc[(i, a)])],
                *[v / 100 for v in (*p["C10"], *p["C100"])],
            ]
        )
    return Table(
        "HTAF vs STE vs scaled sigmoid (SS)",
        f"Ours: {setting}. Paper: CIFAR-10/100, mean of 5 runs. Extra column: "
        "the best of our three.",
        [
            "Model",
            "Ours: net",
            *[f"{ACTIVATION_NAMES[a]} (%)" for a in cfg.activations],
            "Paper: net",
            "Paper C10 HTAF / STE / SS",
            "Paper C100 HTAF / STE / SS",
            "Best (ours)",
        ],
        rows,
        [
            "model",
            "architecture",
            "depth",
            *[c for a in cfg.activations for c in (f"{a}_acc", f"{a}_acc_std")],
            "paper_c10_htaf",
            "paper_c10_ste",
            "paper_c10_ss",
            "paper_c100_htaf",
            "paper_c100_ste",
            "paper_c100_ss",
        ],
        csv_rows,
        note="Best mean: "
        + ", ".join(f"{ACTIVATION_NAMES[a]} in {n}" for a, n in wins.items())
        + (f", tied in {ties}" if ties else "")
        + f" of {len(models)} rows. A small-scale run, not the paper's CIFAR "
        "setting; the paper's ranking need not hold here. Differences within "
        "one std are not a ranking.",
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


def reproduce_htaf(
    cfg, *, device="cpu", show_progress=True, stream=None, run=None, data=None
):
    """HTAF paper: HTAF vs STE vs SS (SNN/BNN/DHN), gradients, ICBM.

    Prints the run-time estimate to `stream` (default: stdout), fits every net
    and returns the three tables. `data` is ``(X_train, X_test, y_train,
    y_test)``; None loads ``cfg.dataset``.
    """
    stream = stream or sys.stdout
    if data is None:
        data = load_split(cfg.dataset, max_train=cfg.max_train, max_test=cfg.max_test)
    X_train, X_test, _, y_test = data
    models = [m for m in models_of(cfg) if m.architecture in ARCHITECTURES]
    for m in models_of(cfg):
        if m.architecture not in ARCHITECTURES:
            print(
                f"[skipped] {m.name}: architecture {m.architecture!r} not available",
                file=stream,
            )
    n_fits = len(models) * len(cfg.activations) * cfg.seeds
    n_icbm = 2 * len(cfg.icbm_backbones) * cfg.seeds
    estimate_run_time(
        [
            (
                partial(fit_htaf_net, cfg, data, m, device),
                len(cfg.activations) * cfg.seeds + n_icbm / max(len(models), 1),
                m.epochs(cfg),
            )
            for m in models
        ],
        len(X_train),
        cfg.batch_size,
        stream,
    )
    acc, grads, icbm_rows = {}, {}, []
    with progress(
        total=n_fits + n_icbm, desc="htaf nets", enabled=show_progress
    ) as bar:
        for i, model in enumerate(models):
            for act in cfg.activations:
                for seed in range(cfg.seeds):
                    cell = f"{model.key}-{act}-s{seed}"

                    def score(model=model, act=act, seed=seed, cell=cell):
                        checkpoint = run.checkpoint_dir(cell) if run else None
                        net = fit_net(
                            cfg, data, model, act, seed, device, checkpoint=checkpoint
                        )
                        X = inputs_for(model.architecture, X_test)
                        return float(net.score(X, y_test))

                    value = run.cell(cell, score) if run is not None else score()
                    acc.setdefault((i, act), []).append(value)
                    bar.update(1)
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
    setting = setting_text(cfg, data, models)
    return [
        activations_table(cfg, models, acc, setting),
        gradients_table(cfg, grads),
        icbm_table(cfg, icbm_rows),
    ]
