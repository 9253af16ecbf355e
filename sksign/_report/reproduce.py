"""``python -m sksign reproduce signcode|htaf``: the papers' tables at this scale.

Each table has the rows and columns of the paper's headline table, with the
paper's numbers (CIFAR-10, PAPERS.md) next to ours, so a reader can put them
side by side. The scale differs (digits / MNIST-5k on a CPU instead of CIFAR
on GPUs), so compare the orderings and gaps, not the absolute accuracies.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from sksign._report._common import fmt, markdown_table, optional, progress

__all__ = [
    "HTAF_FULL",
    "HTAF_QUICK",
    "SIGNCODE_FULL",
    "SIGNCODE_QUICK",
    "run_reproduce",
]

# -- the papers' numbers (PAPERS.md) ----------------------------------------
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


@dataclass(frozen=True)
class SignCodeConfig:
    dataset: str = "digits"
    width: int = 256
    depth: int = 3
    epochs: int = 40
    batch_size: int = 128
    lr: float = 1e-3
    seeds: int = 1
    n_neighbors: int = 5
    activations: tuple = ("relu", "silu", "gelu", "tanh")
    flip_alpha: float = 0.2
    magnitude_alpha: float = 1.0


@dataclass(frozen=True)
class HTAFConfig:
    dataset: str = "digits"
    hidden: tuple = (256, 256)
    epochs: int = 30
    batch_size: int = 128
    lr: float = 1e-3
    seeds: int = 1
    time_steps: int = 4
    alpha0: float = 2.0
    alpha1: float = 11.0
    models: tuple = (("SNN", "snn"), ("BNN", "bnn"), ("DHN", "mlp"))
    activations: tuple = ("htaf", "ste", "scaled_sigmoid")
    icbm_hidden: tuple = (256,)
    n_concepts: int = 64
    icbm_backbones: tuple = ("mlp", "cnn")


SIGNCODE_QUICK = SignCodeConfig()
SIGNCODE_FULL = SignCodeConfig(
    dataset="mnist5k", width=1024, depth=6, epochs=100, seeds=3
)
HTAF_QUICK = HTAFConfig()
HTAF_FULL = HTAFConfig(
    dataset="mnist5k",
    hidden=(1024,) * 6,
    epochs=100,
    seeds=3,
    icbm_hidden=(1024, 1024),
    n_concepts=256,
)


def _load(dataset):
    from sklearn.model_selection import train_test_split

    from sksign import datasets

    loader = {"digits": datasets.load_digits, "mnist5k": datasets.load_mnist5k}
    X, y = loader[dataset]()
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def _pm(values, scale=100.0):
    """'mean' or 'mean ± std' in percent."""
    v = np.asarray(values, dtype=float) * scale
    if len(v) == 1:
        return f"{v[0]:.2f}"
    return f"{v.mean():.2f} ± {v.std(ddof=1):.2f}"


def _estimate(fit_one, n_fits, n_train, epochs, batch_size, stream):
    """Time one short fit and extrapolate to the whole run; print the estimate."""
    n_batches = 3
    t0 = time.perf_counter()
    fit_one(n_batches * batch_size)
    per_sample_epoch = (time.perf_counter() - t0) / (n_batches * batch_size)
    total = per_sample_epoch * n_train * epochs * n_fits * 1.15
    print(
        f"Expected run time: about {_human(total)} ({n_fits} nets x {epochs} epochs "
        f"x {n_train} samples; estimated from a timed short fit).",
        file=stream,
        flush=True,
    )
    return total


def _human(seconds):
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


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
def reproduce_signcode(cfg, *, device="cpu", show_progress=True, stream=None):
    """Sign Code paper: full net vs sign-kNN, and the interventions."""
    stream = stream or sys.stdout
    got, why = optional(
        ("sksign.transformers", "sksign.transformers._sign_codes"),
        "SignCodeTransformer",
    )
    got2, why2 = optional(
        ("sksign.estimators", "sksign.estimators._sign_knn"), "SignKNNClassifier"
    )
    if got is None or got2 is None:
        raise ImportError(f"the sign-code table needs {why or why2}")
    (SignCodeTransformer,), (SignKNNClassifier,) = got, got2
    scorer, why_i = optional(
        ("sksign.metrics", "sksign.metrics._scorers"), "intervention_score"
    )
    X_train, X_test, y_train, y_test = _load(cfg.dataset)
    hidden = (cfg.width,) * cfg.depth

    n_fits = len(cfg.activations) * cfg.seeds
    _estimate(
        lambda n: _net(cfg, hidden, "relu", 0, device, epochs=1).fit(
            X_train[:n], y_train[:n]
        ),
        n_fits, len(X_train), cfg.epochs, cfg.batch_size, stream,
    )
    results = {}
    bar = progress(total=n_fits, desc="signcode nets", enabled=show_progress)
    with bar:
        for act in cfg.activations:
            res = results.setdefault(act, {"net": [], "knn": [], "flip_literal": [],
                                           "flip_gate": [], "mag_standard": [],
                                           "mag_matched": []})
            for seed in range(cfg.seeds):
                net = _net(cfg, hidden, act, seed, device).fit(X_train, y_train)
                res["net"].append(net.score(X_test, y_test))
                sct = SignCodeTransformer(net, prefit=True)
                c_train = sct.fit_transform(X_train)
                knn = SignKNNClassifier(n_neighbors=cfg.n_neighbors).fit(
                    c_train, y_train
                )
                res["knn"].append(knn.score(sct.transform(X_test), y_test))
                if scorer is not None:
                    (score,) = scorer
                    kw = {"n_repeats": 1, "random_state": seed}
                    for key, opt in (
                        ("flip_literal", {"kind": "sign_flip", "flip": "literal",
                                          "alpha": cfg.flip_alpha}),
                        ("flip_gate", {"kind": "sign_flip", "flip": "gate",
                                       "alpha": cfg.flip_alpha}),
                        ("mag_standard", {"kind": "magnitude", "noise": "standard",
                                          "alpha": cfg.magnitude_alpha}),
                        ("mag_matched", {"kind": "magnitude", "noise": "matched",
                                         "alpha": cfg.magnitude_alpha,
                                         "X_ref": X_train}),
                    ):
                        res[key].append(score(net, X_test, y_test, **kw, **opt))
                bar.update(1)

    setting = (
        f"FFNN w={cfg.width}, d={cfg.depth}, {cfg.epochs} epochs, "
        f"{cfg.dataset} ({len(X_train)} train / {len(X_test)} test), "
        f"sign-kNN k={cfg.n_neighbors} on the last hidden layer, "
        f"{cfg.seeds} seed(s) (mean ± std)"
    )
    cols = ["Activation", "Full net (%)", "Sign-kNN (%)", "Δsgn (pts)",
            "Paper full net (%)", "Paper sign-kNN (%)"]
    rows, csv_rows = [], []
    for act, res in results.items():
        net, knn = np.asarray(res["net"]), np.asarray(res["knn"])
        gap = (1 - knn) - (1 - net)
        p = PAPER_SIGNCODE.get(act, (None, None))
        rows.append([_NAMES.get(act, act), _pm(net), _pm(knn), _pm(gap),
                     fmt(p[0]), fmt(p[1])])
        csv_rows.append([act, net.mean(), knn.mean(), gap.mean(), net.std(),
                         knn.std(), p[0], p[1]])
    tables = [(
        "Full net vs sign-kNN test accuracy",
        f"Ours: {setting}. Paper: FFNN w=1024, d=6 on CIFAR-10. "
        "Δsgn = sign-kNN error - full-net error, in points.",
        cols, rows,
        ["activation", "net_acc", "sign_knn_acc", "sign_gap", "net_acc_std",
         "sign_knn_acc_std", "paper_net_acc", "paper_sign_knn_acc"],
        csv_rows,
    )]
    if scorer is not None:
        cols2 = ["Activation", "Clean (%)",
                 f"Sign flip α={cfg.flip_alpha:g}, literal (%)",
                 f"Sign flip α={cfg.flip_alpha:g}, gate (%)",
                 f"Magnitude α={cfg.magnitude_alpha:g}, standard (%)",
                 f"Magnitude α={cfg.magnitude_alpha:g}, matched (%)",
                 "Paper clean → magnitude α=1 (%)"]
        rows2, csv2 = [], []
        for act, res in results.items():
            p = PAPER_MAGNITUDE.get(act)
            rows2.append([_NAMES.get(act, act), _pm(res["net"]),
                          _pm(res["flip_literal"]), _pm(res["flip_gate"]),
                          _pm(res["mag_standard"]), _pm(res["mag_matched"]),
                          f"{p[0]:.1f} → {p[1]:.1f}" if p else ""])
            csv2.append([act] + [np.mean(res[k]) for k in (
                "net", "flip_literal", "flip_gate", "mag_standard", "mag_matched")]
                + [p[0] if p else None, p[1] if p else None])
        tables.append((
            "Interventions",
            f"Ours: {setting}. Sign flip literal: h -> -h; gate: h -> phi(-z). "
            "Magnitude: M -> |eta| with the clean sign kept; standard: eta ~ "
            "N(0, 1); matched: |eta| rescaled to the unit's mean magnitude "
            "mu_j(S). Paper: FFNN, standard noise.",
            cols2, rows2,
            ["activation", "clean", "flip_literal", "flip_gate", "magnitude_standard",
             "magnitude_matched", "paper_clean", "paper_magnitude"],
            csv2,
        ))
    else:
        print(f"[skipped] interventions: {why_i}", file=stream)
    return tables


_NAMES = {"relu": "ReLU", "silu": "SiLU", "gelu": "GELU", "tanh": "tanh",
          "htaf": "HTAF", "ste": "STE", "scaled_sigmoid": "SS"}


def reproduce_htaf(cfg, *, device="cpu", show_progress=True, stream=None):
    """HTAF paper: HTAF vs STE vs SS for SNN/BNN/DHN, and ICBM before/after."""
    from sksign.nn.modules import ARCHITECTURES

    stream = stream or sys.stdout
    X_train, X_test, y_train, y_test = _load(cfg.dataset)
    models = [(name, arch) for name, arch in cfg.models if arch in ARCHITECTURES]
    for name, arch in cfg.models:
        if arch not in ARCHITECTURES:
            print(f"[skipped] {name}: architecture {arch!r} not available", file=stream)
    icbm, why = optional(
        ("sksign.estimators", "sksign.estimators._icbm"), "ICBMClassifier"
    )
    if icbm is None:
        print(f"[skipped] ICBM: {why}", file=stream)
    n_fits = len(models) * len(cfg.activations) * cfg.seeds
    n_icbm = 2 * len(cfg.icbm_backbones) * cfg.seeds if icbm else 0
    _estimate(
        lambda n: [
            _net(cfg, cfg.hidden, "htaf", 0, device, epochs=1, architecture=a,
                 time_steps=cfg.time_steps).fit(X_train[:n], y_train[:n])
            for _, a in models
        ],
        (n_fits + n_icbm) / max(len(models), 1), len(X_train), cfg.epochs,
        cfg.batch_size, stream,
    )
    acc = {}
    with progress(total=n_fits + n_icbm, desc="htaf nets",
                  enabled=show_progress) as bar:
        for name, arch in models:
            for act in cfg.activations:
                for seed in range(cfg.seeds):
                    net = _net(cfg, cfg.hidden, act, seed, device, architecture=arch,
                               alpha0=cfg.alpha0, alpha1=cfg.alpha1,
                               time_steps=cfg.time_steps).fit(X_train, y_train)
                    acc.setdefault((name, act), []).append(net.score(X_test, y_test))
                    bar.update(1)
        icbm_rows = []
        if icbm:
            (ICBMClassifier,) = icbm
            for backbone in cfg.icbm_backbones:
                before, after = [], []
                for seed in range(cfg.seeds):
                    for concept_act, store in (("relu", before), ("htaf", after)):
                        clf = ICBMClassifier(
                            backbone=backbone,
                            hidden_layer_sizes=cfg.icbm_hidden,
                            n_concepts=cfg.n_concepts,
                            concept_activation=concept_act,
                            max_epochs=cfg.epochs,
                            batch_size=cfg.batch_size,
                            random_state=seed,
                            device=device,
                        ).fit(X_train, y_train)
                        store.append(clf.score(X_test, y_test))
                        bar.update(1)
                icbm_rows.append((backbone, before, after))

    setting = (
        f"MLP-sized nets {cfg.hidden}, {cfg.epochs} epochs, {cfg.dataset} "
        f"({len(X_train)} train / {len(X_test)} test), alpha0={cfg.alpha0:g}, "
        f"alpha1={cfg.alpha1:g} (SS: k = alpha0 * alpha1), SNN T={cfg.time_steps}, "
        f"{cfg.seeds} seed(s) (mean ± std); exact step H at inference"
    )
    cols = ["Model", "Ours: net", "HTAF (%)", "STE (%)", "SS (%)",
            "Paper: net", "Paper C10 HTAF / STE / SS", "Paper C100 HTAF / STE / SS"]
    rows, csv_rows = [], []
    ours_arch = {"snn": "spiking MLP (IF, T steps)", "bnn": "Bi-Real binary MLP",
                 "mlp": "Heaviside MLP"}
    for name, arch in models:
        cells = [_pm(acc[(name, a)]) for a in cfg.activations]
        p = PAPER_HTAF[name]
        rows.append([name, ours_arch.get(arch, arch), *cells, _PAPER_ARCH[name],
                     " / ".join(f"{v:.1f}" for v in p["C10"]),
                     " / ".join(f"{v:.1f}" for v in p["C100"])])
        csv_rows.append([name, arch, *[np.mean(acc[(name, a)]) for a in
                                       cfg.activations], *p["C10"]])
    tables = [(
        "HTAF vs STE vs scaled sigmoid (SS)",
        f"Ours: {setting}. Paper: CIFAR-10/100, mean of 5 runs.",
        cols, rows,
        ["model", "architecture", "htaf_acc", "ste_acc", "ss_acc", "paper_c10_htaf",
         "paper_c10_ste", "paper_c10_ss"],
        csv_rows,
    )]
    if icbm:
        cols2 = ["Backbone", "Data", "Before (%)", "After, ICBM (%)"]
        rows2, csv2 = [], []
        for backbone, before, after in icbm_rows:
            label = f"{backbone.upper()} {cfg.icbm_hidden} + {cfg.n_concepts} concepts"
            rows2.append([label, cfg.dataset, _pm(before), _pm(after)])
            csv2.append([backbone, cfg.dataset, np.mean(before), np.mean(after)])
        for bb, data, b, a in PAPER_ICBM:
            rows2.append([f"{bb} (paper)", data, f"{b:.1f}", f"{a:.1f}"])
            csv2.append([f"{bb} (paper)", data, b / 100, a / 100])
        tables.append((
            "ICBM before/after",
            "Before: the same net with a ReLU layer in place of the concept layer; "
            "after: HTAF concept layer, exact step at inference.",
            cols2, rows2,
            ["backbone", "data", "before_acc", "after_acc"], csv2,
        ))
    return tables


def write_tables(tables, out, name, header, stream):
    import csv

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md = [f"# {header}", ""]
    for i, (title, caption, cols, rows, csv_cols, csv_rows) in enumerate(tables):
        md += [f"## {title}", "", caption, "", markdown_table(cols, rows), ""]
        suffix = "" if i == 0 else f"_{i + 1}"
        with open(out / f"{name}_table{suffix}.csv", "w", newline="",
                  encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(csv_cols)
            w.writerows([[fmt(v) for v in r] for r in csv_rows])
    path = out / f"{name}_table.md"
    path.write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md), file=stream)
    print(f"\nWritten: {path.resolve()}", file=stream)
    return path


def run_reproduce(table, *, full=False, dataset=None, device="cpu",
                  out="sksign-report", epochs=None, seeds=None, progress=True,
                  stream=None):
    """Build one of the papers' tables; return the exit status."""
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
    write_tables(tables, out, table, f"{title} ({mode} mode)", stream)
    print(f"Took {_human(time.perf_counter() - t0)}.", file=stream)
    return 0
