"""``python -m sksign reproduce signcode|htaf``: the papers' tables at this scale.

Each table has the rows and columns of the paper's headline table, with the
paper's numbers (CIFAR-10) next to ours, so a reader can put them
side by side. The scale differs (digits / MNIST-5k on a CPU instead of CIFAR
on GPUs), so compare the orderings and gaps, not the absolute accuracies.

Columns the papers' tables do not have come after the papers' columns, and
quantities the papers report without a table get tables of their own:
training accuracy, leave-one-out purity and its Spearman correlation with
accuracy, both definitions of each intervention, gate dominance (Z1, delta_bar,
eps_1 and its two bounds), DHN depth 4 vs 8, the first-layer gradient norms,
and the ICBM accuracy difference. This module is the one place these tables
are computed; ``docs/_static/*_table.md`` are its output.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sksign._report._common import fmt, markdown_table, optional, progress

__all__ = [
    "HTAF_FULL",
    "HTAF_QUICK",
    "SIGNCODE_FULL",
    "SIGNCODE_QUICK",
    "HTAFConfig",
    "SignCodeConfig",
    "reproduce_htaf",
    "reproduce_signcode",
    "run_reproduce",
]

# -- the papers' numbers --------------------------------------------------
#: Sign Code paper, FFNN w=1024 d=6 on CIFAR-10: (full net, sign-kNN) accuracy %.
PAPER_SIGNCODE = {
    "relu": (57.30, 55.82),
    "silu": (58.42, 57.18),
    "gelu": (58.15, 56.90),
    "tanh": (56.70, 55.45),
}
#: Sign Code paper, FFNN: accuracy % clean -> magnitude randomisation alpha=1.
PAPER_MAGNITUDE = {
    "relu": (80.5, 44.3),
    "silu": (82.6, 50.4),
    "gelu": (81.9, 48.2),
    "tanh": (80.2, 78.2),
}
#: HTAF paper, CIFAR-10 / CIFAR-100, mean of 5 runs: (HTAF, STE, SS) accuracy %.
PAPER_HTAF = {
    "SNN": {"C10": (91.0, 91.2, 90.6), "C100": (66.9, 63.9, 66.2)},
    "BNN": {"C10": (75.8, 75.3, 60.6), "C100": (46.1, 45.2, 31.3)},
    "DHN": {"C10": (88.6, 83.3, 74.5), "C100": (57.6, 56.7, 45.6)},
}
#: HTAF paper, ICBM: (backbone, data, before, after) accuracy %.
PAPER_ICBM = (
    ("ResNet-18", "CIFAR-10", 94.6, 94.6),
    ("ResNet-18", "CIFAR-100", 80.0, 80.8),
    ("ResNet-18", "CUB", 74.5, 74.8),
    ("ViT-B", "CUB", 87.1, 88.5),
)
_PAPER_ARCH = {
    "SNN": "SEW-ResNet",
    "BNN": "Bi-Real Net",
    "DHN": "WideResNet",
}


#: Sign Code paper, gate dominance of FFNNs on CIFAR-10.
PAPER_GATE = {
    "silu": "Z1 ~ 4..10, δ̄ 0.4..0.94",
    "tanh": "Z1 ~ 0.4..0.6, δ̄ ~ 0",
}
#: HTAF paper: first-layer gradient norm of a scaled-sigmoid DHN.
PAPER_GRAD = {"scaled_sigmoid": "< 1e-5"}

_NAMES = {"relu": "ReLU", "silu": "SiLU", "gelu": "GELU", "tanh": "tanh",
          "htaf": "HTAF", "ste": "STE", "scaled_sigmoid": "SS"}
_OURS_ARCH = {"snn": "spiking MLP (IF neurons)", "bnn": "Bi-Real binary MLP",
              "mlp": "Heaviside MLP"}


@dataclass(frozen=True)
class SignCodeConfig:
    """Settings of ``reproduce signcode``.

    One FFNN per activation, width and seed; the paper's headline setting is
    the largest width. Several widths give the purity-accuracy correlation a
    spread of models.
    """

    dataset: str = "digits"
    widths: tuple = (32, 128, 512)
    depth: int = 3
    epochs: int = 40
    batch_size: int = 128
    lr: float = 1e-3
    seeds: int = 3
    n_neighbors: int = 5
    purity_k: int = 10
    activations: tuple = ("relu", "silu", "gelu", "tanh")
    flip_alpha: float = 0.2
    magnitude_alpha: float = 1.0
    n_repeats: int = 3


@dataclass(frozen=True)
class HTAFConfig:
    """Settings of ``reproduce htaf``.

    `models` holds ``(row label, architecture, number of hidden layers)``;
    every hidden layer has `width` units.
    """

    dataset: str = "digits"
    width: int = 128
    models: tuple = (("SNN", "snn", 2), ("BNN", "bnn", 4), ("DHN", "mlp", 4),
                     ("DHN", "mlp", 8))
    epochs: int = 20
    batch_size: int = 128
    lr: float = 1e-3
    seeds: int = 3
    time_steps: int = 4
    alpha0: float = 2.0
    alpha1: float = 11.0
    activations: tuple = ("htaf", "ste", "scaled_sigmoid")
    grad_depth: int = 8
    grad_steps: int = 20
    icbm_hidden: tuple = (256,)
    n_concepts: int = 64
    icbm_backbones: tuple = ("mlp", "cnn")


SIGNCODE_QUICK = SignCodeConfig(seeds=1)
SIGNCODE_FULL = SignCodeConfig(
    dataset="mnist5k", widths=(64, 256, 1024), depth=6, epochs=100
)
HTAF_QUICK = HTAFConfig()
HTAF_FULL = HTAFConfig(
    dataset="mnist5k",
    width=1024,
    models=(("SNN", "snn", 4), ("BNN", "bnn", 6), ("DHN", "mlp", 4),
            ("DHN", "mlp", 8)),
    epochs=100,
    icbm_hidden=(1024, 1024),
    n_concepts=256,
)


class Table(NamedTuple):
    """One table: Markdown columns/cells, and the CSV with the raw numbers."""

    title: str
    caption: str
    cols: list
    rows: list
    csv_cols: list
    csv_rows: list
    note: str = ""


def _load(dataset):
    """70/30 stratified split, features in [0, 1]."""
    from sklearn.model_selection import train_test_split

    from sksign import datasets

    loader = {"digits": datasets.load_digits, "mnist5k": datasets.load_mnist5k}
    X, y = loader[dataset]()
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def _pm(values, scale=100.0, digits=2):
    """'mean' or 'mean ± std' (percent by default); '' for no values."""
    v = np.asarray(values, dtype=float) * scale
    if v.size == 0:
        return ""

    def num(x):
        if np.isfinite(x) and x != 0 and (abs(x) >= 1e4 or abs(x) < 10.0**-digits):
            return f"{x:.2e}"
        return f"{x:.{digits}f}" if np.isfinite(x) else fmt(float(x))

    if v.size == 1:
        return num(v[0])
    return f"{num(v.mean())} ± {num(v.std(ddof=1))}"


def _mean_std(values):
    """[mean, std] as the markdown's 'mean ± std' shows them (ddof=1; NaN std
    for a single value)."""
    v = np.asarray(values, dtype=float)
    return [float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else float("nan")]


def _paper_fractions(values, head):
    """The paper's percentages as fractions (the unit of our columns), on the
    rows of the headline width only; None elsewhere."""
    return [v / 100 if head and v is not None else None for v in values]


def _leaders(names, means):
    """The names with the best mean; several when they tie (equal means, e.g.
    the same number of correct test samples), never the first by accident."""
    top = max(means)
    return [n for n, m in zip(names, means) if np.isclose(m, top, rtol=0, atol=1e-12)]


def _human(seconds):
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _estimate(fits, n_train, epochs, batch_size, stream):
    """Time short fits and extrapolate to the whole run; print the estimate.

    `fits` is a list of ``(fit_one, count)``: ``fit_one(n, n_epochs)`` fits
    one net on n samples, and the run fits `count` such nets. A fit of one
    epoch and one of three split the time into a fixed cost and a cost per
    sample and epoch.
    """
    n = 3 * batch_size
    total, n_fits = 0.0, 0
    for fit_one, count in fits:
        times = []
        for n_epochs in (1, 1, 3):
            t0 = time.perf_counter()
            fit_one(n, n_epochs)
            times.append(time.perf_counter() - t0)
        one = min(times[:2])  # the first fit may pay for warming up
        per_epoch = max((times[2] - one) / 2, 0.0)
        fixed = max(one - per_epoch, 0.0)
        total += count * (fixed + per_epoch * epochs * n_train / n) * 1.15
        n_fits += count
    print(
        f"Expected run time: about {_human(total)} ({n_fits:g} nets x {epochs} "
        f"epochs x {n_train} samples; estimated from timed short fits).",
        file=stream,
        flush=True,
    )
    return total


def _net(cfg, hidden, activation, seed, device, epochs=None, **kw):
    from sksign.estimators import HTAFNetClassifier

    return HTAFNetClassifier(
        hidden,
        activation=activation,
        max_epochs=epochs or cfg.epochs,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        random_state=seed,
        device=device,
        **kw,
    )


# ---------------------------------------------------------------------------
# Sign Code paper
# ---------------------------------------------------------------------------
_INTERVENTIONS = (
    ("flip_literal", "sign_flip", {"flip": "literal"}),
    ("flip_gate", "sign_flip", {"flip": "gate"}),
    ("mag_standard", "magnitude", {"noise": "standard"}),
    ("mag_matched", "magnitude", {"noise": "matched"}),
)
_GATE_KEYS = ("Z1", "delta_bar", "eps_1", "bound", "union_bound")


def signcode_diagnostics(net, data, cfg, seed):
    """Every Sign Code quantity of one fitted net, as a dict of floats.

    Test and train accuracy; the four interventions on every hidden layer
    (mean of ``cfg.n_repeats``); gate dominance of the last hidden layer (mu on
    the training set, scored on the test set); sign-kNN accuracy on the last
    hidden layer's bits; leave-one-out purity of the test codes.
    """
    from sksign.metrics._geometry import loo_purity
    from sksign.metrics._scorers import gate_dominance_report, intervention_score
    from sksign.transformers._sign_codes import SignCodeTransformer

    X_train, X_test, y_train, y_test = data
    row = {"net": net.score(X_test, y_test), "train": net.score(X_train, y_train)}
    for key, kind, opt in _INTERVENTIONS:
        alpha = cfg.flip_alpha if kind == "sign_flip" else cfg.magnitude_alpha
        row[key] = intervention_score(
            net, X_test, y_test, kind=kind, alpha=alpha, layers="all",
            n_repeats=cfg.n_repeats, random_state=seed, X_ref=X_train, **opt,
        )
    rep = gate_dominance_report(net, X_test, X_ref=X_train)
    row.update(Z1=rep.median_Z1, delta_bar=rep.delta_bar, eps_1=rep.eps_1,
               bound=rep.bound, union_bound=rep.union_bound)
    # sign-kNN and purity on the last hidden layer's bits
    from sksign.estimators._sign_knn import SignKNNClassifier

    sct = SignCodeTransformer(net, prefit=True).fit(X_train)
    c_train, c_test = sct.transform(X_train), sct.transform(X_test)
    knn = SignKNNClassifier(n_neighbors=cfg.n_neighbors).fit(c_train, y_train)
    row["knn"] = knn.score(c_test, y_test)
    row["gap"] = (1 - row["knn"]) - (1 - row["net"])
    row["purity"] = loo_purity(c_test, y_test, k=cfg.purity_k)
    return row


def reproduce_signcode(cfg, *, device="cpu", show_progress=True, stream=None):
    """Sign Code paper: full net vs sign-kNN, interventions, gate dominance."""
    from scipy.stats import spearmanr

    stream = stream or sys.stdout
    data = _load(cfg.dataset)
    X_train, X_test, y_train, _ = data
    n_fits = len(cfg.activations) * len(cfg.widths) * cfg.seeds
    _estimate(
        [(lambda n, e, w=w: _net(cfg, (w,) * cfg.depth, "relu", 0, device,
                                 epochs=e).fit(X_train[:n], y_train[:n]),
          len(cfg.activations) * cfg.seeds) for w in cfg.widths],
        len(X_train), cfg.epochs, cfg.batch_size, stream,
    )
    results = {}  # (activation, width) -> {quantity: [one value per seed]}
    with progress(total=n_fits, desc="signcode nets", enabled=show_progress) as bar:
        for act in cfg.activations:
            for width in cfg.widths:
                res = results.setdefault((act, width), {})
                for seed in range(cfg.seeds):
                    net = _net(cfg, (width,) * cfg.depth, act, seed, device)
                    net.fit(X_train, y_train)
                    for k, v in signcode_diagnostics(net, data, cfg, seed).items():
                        res.setdefault(k, []).append(v)
                    bar.update(1)
    purity = [p for r in results.values() for p in r["purity"]]
    accs = [a for r in results.values() for a in r["net"]]
    rho = float(spearmanr(purity, accs)[0]) if len(accs) > 2 else float("nan")

    headline = max(cfg.widths)
    setting = (
        f"FFNN widths {', '.join(map(str, cfg.widths))}, depth {cfg.depth}, "
        f"{cfg.epochs} epochs, Adam lr={cfg.lr:g}, batch {cfg.batch_size}, "
        f"{cfg.dataset} (70/30 stratified split, {len(X_train)} train / "
        f"{len(X_test)} test), {cfg.seeds} seed(s) (mean ± std)"
    )
    paper_note = (f"The paper's numbers stand on the rows of the largest width "
                  f"({headline}).")

    def label_rows(extra_cols, cells_of, csv_of):
        rows, csv_rows = [], []
        for (act, width), res in results.items():
            head = width == headline
            rows.append([_NAMES.get(act, act), *cells_of(act, res, head), str(width),
                         *[c(res) for c in extra_cols]])
            csv_rows.append([act, width, *csv_of(act, res, head)])
        return rows, csv_rows

    def mean_std_cols(names):
        return [c for n in names for c in (n, f"{n}_std")]

    def mean_std_cells(res, keys):
        return [c for k in keys for c in _mean_std(res[k])]

    # 1. full net vs sign-kNN (+ train accuracy and purity)
    def cells1(act, res, head):
        p = PAPER_SIGNCODE.get(act, (None, None)) if head else (None, None)
        return [_pm(res["net"]), _pm(res["knn"]), _pm(res["gap"]),
                *[f"{v:.2f}" if v is not None else "" for v in p]]

    rows1, csv1 = label_rows(
        [lambda r: _pm(r["train"]),
         lambda r: _pm(r["purity"], scale=1, digits=3)],
        cells1,
        lambda act, res, head: mean_std_cells(
            res, ("net", "knn", "gap", "train", "purity"))
        + _paper_fractions(PAPER_SIGNCODE.get(act, (None, None)), head),
    )
    t1 = Table(
        "Full net vs sign-kNN test accuracy",
        f"Ours: {setting}; sign-kNN k={cfg.n_neighbors} on the last hidden "
        "layer's bits, training codes as reference. Paper: FFNN w=1024, d=6 on "
        "CIFAR-10. Δsgn = sign-kNN error - full-net error, in points. Extra "
        f"columns: training accuracy; leave-one-out purity (k={cfg.purity_k}) "
        f"of the test codes in Hamming space. {paper_note} The CSV holds "
        "fractions (the paper's too) and a _std column per mean (ddof=1).",
        ["Activation", "Full net (%)", "Sign-kNN (%)", "Δsgn (pts)",
         "Paper full net (%)", "Paper sign-kNN (%)", "Width", "Train (%)",
         f"LOO purity (k={cfg.purity_k})"],
        rows1,
        ["activation", "width",
         *mean_std_cols(["net_acc", "sign_knn_acc", "sign_gap", "train_acc",
                         "loo_purity"]),
         "paper_net_acc", "paper_sign_knn_acc"],
        csv1,
        note=f"Spearman ρ(LOO purity, test accuracy) over {len(accs)} models: "
        f"{fmt(rho)} (paper: 0.834 over 540 models).",
    )

    # 2. interventions
    fa, ma = f"{cfg.flip_alpha:g}", f"{cfg.magnitude_alpha:g}"

    def cells2(act, res, head):
        p = PAPER_MAGNITUDE.get(act) if head else None
        return [_pm(res["net"]), *[_pm(res[k]) for k, _, _ in _INTERVENTIONS],
                f"{p[0]:.1f} → {p[1]:.1f}" if p else ""]

    rows2, csv2 = label_rows(
        [], cells2,
        lambda act, res, head: mean_std_cells(
            res, ("net", *(k for k, _, _ in _INTERVENTIONS)))
        + _paper_fractions(PAPER_MAGNITUDE.get(act, (None, None)), head),
    )
    t2 = Table(
        "Interventions",
        f"Ours: {setting}. On every hidden layer, mean of {cfg.n_repeats} "
        "repeats. Sign flip literal: h -> -h; gate: h -> phi(-z). Magnitude: M -> "
        "|eta| projected onto the clean signs (h = S_clean * M); standard: eta ~ "
        "N(0, 1); matched: |eta| rescaled to the unit's mean magnitude mu_j(S) on "
        f"the training set. Paper: FFNN (the paper does not name the data set "
        f"of these numbers), standard noise. {paper_note}",
        ["Activation", "Clean (%)", f"Sign flip α={fa}, literal (%)",
         f"Sign flip α={fa}, gate (%)", f"Magnitude α={ma}, standard (%)",
         f"Magnitude α={ma}, matched (%)", "Paper clean → magnitude α=1 (%)",
         "Width"],
        rows2,
        ["activation", "width",
         *mean_std_cols(["clean", "flip_literal", "flip_gate",
                         "magnitude_standard", "magnitude_matched"]),
         "paper_clean", "paper_magnitude"],
        csv2,
    )

    # 3. gate dominance
    def cells3(act, res, head):
        return [*[_pm(res[k], scale=1, digits=3) for k in _GATE_KEYS],
                PAPER_GATE.get(act, "") if head else ""]

    rows3, csv3 = label_rows(
        [], cells3, lambda act, res, head: mean_std_cells(res, _GATE_KEYS)
    )
    t3 = Table(
        "Gate dominance (last hidden layer)",
        f"Ours: {setting}. mu_j(s) = E[M_j | S_j = s] on the training set, scored "
        "on the test set; yhat = argmax of the pure-sign logits f~; r_c^2 the "
        "uncentred second moment of R_yhat - R_c over the samples sharing yhat. "
        "Z1 = min_c |M~_yhat,c| / r_c (median over samples); δ̄ the sign "
        "asymmetry of mu; eps_1 the rate at which argmax f and argmax f~ "
        "disagree; it is bounded by (C-1) E[Z1^-2] and by the clipped union bound "
        f"E[min(1, sum_c r_c^2 / M~_c^2)]. Paper: FFNN, CIFAR-10. {paper_note}",
        ["Activation", "Median Z1", "δ̄", "eps_1", "(C-1) E[Z1^-2]",
         "E[min(1, Σ r²/M~²)]", "Paper", "Width"],
        rows3,
        ["activation", "width",
         *mean_std_cols(["median_Z1", "delta_bar", "eps_1", "bound",
                         "union_bound"])],
        csv3,
    )
    return [t1, t2, t3]


# ---------------------------------------------------------------------------
# HTAF paper
# ---------------------------------------------------------------------------
def first_layer_grad_norms(data, cfg, activation, seed, device):
    """||dL/dW_fc0|| (Frobenius) per step of a plain DHN (Adam, no batch norm)."""
    import torch

    from sksign.nn.modules import build_network

    X_train, _, y_train, _ = data
    torch.manual_seed(seed)
    net = build_network(
        "mlp", X_train.shape[1], len(np.unique(y_train)),
        hidden_layer_sizes=(cfg.width,) * cfg.grad_depth, activation=activation,
        alpha0=cfg.alpha0, alpha1=cfg.alpha1,
    ).to(device)
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    rng = np.random.default_rng(seed)
    classes = np.unique(y_train)
    norms = []
    for _ in range(cfg.grad_steps):
        idx = rng.choice(len(X_train), min(cfg.batch_size, len(X_train)),
                         replace=False)
        xb = torch.as_tensor(X_train[idx], device=device)
        yb = torch.as_tensor(np.searchsorted(classes, y_train[idx]),
                             dtype=torch.long, device=device)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(xb), yb).backward()
        norms.append(float(net.fc0.weight.grad.norm()))
        opt.step()
    return norms


def reproduce_htaf(cfg, *, device="cpu", show_progress=True, stream=None):
    """HTAF paper: HTAF vs STE vs SS (SNN/BNN/DHN), gradients, ICBM."""
    from sksign.nn.modules import ARCHITECTURES

    stream = stream or sys.stdout
    data = _load(cfg.dataset)
    X_train, X_test, y_train, y_test = data
    models = [m for m in cfg.models if m[1] in ARCHITECTURES]
    for name, arch, _ in cfg.models:
        if arch not in ARCHITECTURES:
            print(f"[skipped] {name}: architecture {arch!r} not available", file=stream)
    icbm, why = optional(
        ("sksign.estimators", "sksign.estimators._icbm"), "ICBMClassifier"
    )
    if icbm is None:
        print(f"[skipped] ICBM: {why}", file=stream)
    n_fits = len(models) * len(cfg.activations) * cfg.seeds
    n_icbm = 2 * len(cfg.icbm_backbones) * cfg.seeds if icbm else 0

    def kw(arch, depth):
        return {"hidden": (cfg.width,) * depth, "architecture": arch,
                "alpha0": cfg.alpha0, "alpha1": cfg.alpha1,
                "time_steps": cfg.time_steps}

    def fit_net(arch, depth, act, seed, n=None, epochs=None):
        k = kw(arch, depth)
        net = _net(cfg, k.pop("hidden"), act, seed, device, epochs=epochs, **k)
        return net.fit(X_train[:n], y_train[:n])

    _estimate(
        [(lambda n, e, a=a, d=d: fit_net(a, d, "htaf", 0, n, epochs=e),
          len(cfg.activations) * cfg.seeds + n_icbm / max(len(models), 1))
         for _, a, d in models],
        len(X_train), cfg.epochs, cfg.batch_size, stream,
    )
    acc, grads, icbm_rows = {}, {}, []
    with progress(total=n_fits + n_icbm, desc="htaf nets",
                  enabled=show_progress) as bar:
        for i, (_, arch, depth) in enumerate(models):
            for act in cfg.activations:
                for seed in range(cfg.seeds):
                    net = fit_net(arch, depth, act, seed)
                    acc.setdefault((i, act), []).append(net.score(X_test, y_test))
                    bar.update(1)
        for act in cfg.activations:
            grads[act] = [first_layer_grad_norms(data, cfg, act, s, device)
                          for s in range(cfg.seeds)]
        if icbm:
            (ICBMClassifier,) = icbm
            for backbone in cfg.icbm_backbones:
                res = {"relu": [], "htaf": []}
                for seed in range(cfg.seeds):
                    for concept_act, store in res.items():
                        clf = ICBMClassifier(
                            backbone=backbone,
                            hidden_layer_sizes=cfg.icbm_hidden,
                            n_concepts=cfg.n_concepts,
                            concept_activation=concept_act,
                            max_epochs=cfg.epochs,
                            batch_size=cfg.batch_size,
                            lr=cfg.lr,
                            random_state=seed,
                            device=device,
                        ).fit(X_train, y_train)
                        store.append(clf.score(X_test, y_test))
                        bar.update(1)
                icbm_rows.append((backbone, res["relu"], res["htaf"]))

    setting = (
        f"hidden width {cfg.width}, {cfg.epochs} epochs, Adam lr={cfg.lr:g}, "
        f"batch {cfg.batch_size}, {cfg.dataset} (70/30 stratified split, "
        f"{len(X_train)} train / {len(X_test)} test), alpha0={cfg.alpha0:g}, "
        f"alpha1={cfg.alpha1:g} (SS: k = alpha0 * alpha1; STE: clipped "
        f"identity), {cfg.seeds} seed(s) (mean ± std); exact step H at inference"
    )
    rows, csv_rows = [], []
    wins = dict.fromkeys(cfg.activations, 0)
    ties = 0
    for i, (name, arch, depth) in enumerate(models):
        means = [float(np.mean(acc[(i, a)])) for a in cfg.activations]
        leaders = _leaders(cfg.activations, means)
        if len(leaders) == 1:
            wins[leaders[0]] += 1
        else:
            ties += 1
        p = PAPER_HTAF[name]
        extra = f"T={cfg.time_steps}, " if arch == "snn" else ""
        rows.append([
            name, f"{_OURS_ARCH.get(arch, arch)}, {extra}{depth} hidden layers",
            *[_pm(acc[(i, a)]) for a in cfg.activations], _PAPER_ARCH[name],
            " / ".join(f"{v:.1f}" for v in p["C10"]),
            " / ".join(f"{v:.1f}" for v in p["C100"]),
            " = ".join(_NAMES.get(a, a) for a in leaders)
            + (" (tie)" if len(leaders) > 1 else ""),
        ])
        csv_rows.append([
            name, arch, depth,
            *[c for a in cfg.activations for c in _mean_std(acc[(i, a)])],
            *[v / 100 for v in (*p["C10"], *p["C100"])],
        ])
    tables = [Table(
        "HTAF vs STE vs scaled sigmoid (SS)",
        f"Ours: {setting}. Paper: CIFAR-10/100, mean of 5 runs. Extra column: "
        "the best of our three.",
        ["Model", "Ours: net", *[f"{_NAMES[a]} (%)" for a in cfg.activations],
         "Paper: net", "Paper C10 HTAF / STE / SS", "Paper C100 HTAF / STE / SS",
         "Best (ours)"],
        rows,
        ["model", "architecture", "depth",
         *[c for a in cfg.activations for c in (f"{a}_acc", f"{a}_acc_std")],
         "paper_c10_htaf", "paper_c10_ste", "paper_c10_ss", "paper_c100_htaf",
         "paper_c100_ste", "paper_c100_ss"],
        csv_rows,
        note="Best mean: " + ", ".join(f"{_NAMES[a]} in {n}"
                                       for a, n in wins.items())
        + (f", tied in {ties}" if ties else "")
        + f" of {len(models)} rows. A small-scale run, not the paper's CIFAR "
        "setting; the paper's ranking need not hold here. Differences within "
        "one std are not a ranking.",
    )]
    g_rows, g_csv = [], []
    for act, runs in grads.items():
        first = [r[0] for r in runs]
        med = [float(np.median(r)) for r in runs]
        g_rows.append([_NAMES.get(act, act), _pm(first, 1, 3), _pm(med, 1, 3),
                       PAPER_GRAD.get(act, "")])
        g_csv.append([act, *_mean_std(first), *_mean_std(med)])
    tables.append(Table(
        "First-layer gradient norm",
        f"Frobenius norm of dL/dW_fc0 in a DHN (Heaviside MLP, {cfg.grad_depth} "
        f"hidden layers of {cfg.width}, PyTorch's default init, no batch norm) "
        f"on {cfg.dataset}, Adam, batches of {cfg.batch_size}: at step 1 and the "
        f"median over steps 1-{cfg.grad_steps}.",
        ["Activation", "Step 1", f"Median steps 1-{cfg.grad_steps}", "Paper"],
        g_rows,
        ["activation", "grad_norm_step1", "grad_norm_step1_std",
         "grad_norm_median", "grad_norm_median_std"],
        g_csv,
    ))
    if icbm:
        rows2, csv2 = [], []
        for backbone, before, after in icbm_rows:
            label = f"{backbone.upper()} {cfg.icbm_hidden} + {cfg.n_concepts} concepts"
            diff = 100 * (np.mean(after) - np.mean(before))
            rows2.append([label, cfg.dataset, _pm(before), _pm(after), f"{diff:+.2f}"])
            csv2.append([backbone, cfg.dataset, *_mean_std(before),
                         *_mean_std(after)])
        for bb, data_name, b, a in PAPER_ICBM:
            rows2.append([f"{bb} (paper)", data_name, f"{b:.1f}", f"{a:.1f}",
                          f"{a - b:+.1f}"])
            csv2.append([f"{bb} (paper)", data_name, b / 100, None, a / 100, None])
        tables.append(Table(
            "ICBM before/after",
            "Before: the same net with a ReLU layer in place of the concept layer; "
            "after: HTAF concept layer, exact step at inference (binary concepts).",
            ["Backbone", "Data", "Before (%)", "After, ICBM (%)",
             "Difference (pts)"],
            rows2,
            ["backbone", "data", "before_acc", "before_acc_std", "after_acc",
             "after_acc_std"], csv2,
        ))
    return tables


def write_tables(tables, out, name, header, stream, footer=""):
    """Write ``<name>_table.md`` and one CSV per table to `out`; echo the md."""
    import csv

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md = [f"# {header}", ""]
    for i, t in enumerate(tables):
        md += [f"## {t.title}", "", t.caption, "", markdown_table(t.cols, t.rows), ""]
        if t.note:
            md += [t.note, ""]
        suffix = "" if i == 0 else f"_{i + 1}"
        with open(out / f"{name}_table{suffix}.csv", "w", newline="",
                  encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(t.csv_cols)
            w.writerows([[fmt(v) for v in r] for r in t.csv_rows])
    if footer:
        md += [footer, ""]
    path = out / f"{name}_table.md"
    path.write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md), file=stream)
    print(f"Written: {path.resolve()}", file=stream)
    return path


def run_reproduce(table, *, full=False, dataset=None, device="cpu",
                  out="sksign-report", epochs=None, seeds=None, progress=True,
                  stream=None):
    """Build one of the papers' tables; return the exit status."""
    import platform

    import torch

    stream = stream or sys.stdout
    if table == "signcode":
        cfg = SIGNCODE_FULL if full else SIGNCODE_QUICK
    else:
        cfg = HTAF_FULL if full else HTAF_QUICK
    changes = {k: v for k, v in (("dataset", dataset), ("epochs", epochs),
                                 ("seeds", seeds)) if v is not None}
    cfg = replace(cfg, **changes)
    mode = "full" if full else "quick"
    print(f"sksign reproduce {table} ({mode}): {cfg}", file=stream, flush=True)
    t0 = time.perf_counter()
    fn = reproduce_signcode if table == "signcode" else reproduce_htaf
    tables = fn(cfg, device=device, show_progress=progress, stream=stream)
    title = {"signcode": "The Sign Code paper's tables at this scale",
             "htaf": "The HTAF paper's tables at this scale"}[table]
    opts = " ".join(f"--{k} {v}" for k, v in changes.items())
    took = _human(time.perf_counter() - t0)
    footer = (
        f"Made by `python -m sksign reproduce {table} --{mode}"
        f"{' ' + opts if opts else ''}` in {took} on {platform.machine()} "
        f"({torch.backends.cpu.get_cpu_capability()} kernels; device {device}, "
        f"{torch.get_num_threads()} torch thread(s)), torch {torch.__version__}. "
        "The same seeds give the same numbers on the same kind of CPU; other "
        "vector kernels (AVX2 vs AVX-512) round differently and can move the "
        "last digits."
    )
    write_tables(tables, out, table, f"{title} ({mode} mode)", stream, footer)
    print(f"Took {took}.", file=stream)
    return 0
