"""Every named architecture x {htaf, ste, scaled_sigmoid}: defaults vs the best recipe.

On scikit-learn's digits padded to 3x16x16 (``np.random.RandomState(0)``
permutation: 1,400 training / 397 held-out images; "mlp", "bnn" and "snn"
read the same images as flat rows), each (architecture, activation) pair is fitted
with

- ``defaults``: ``HTAFNetClassifier(architecture=..., architecture_params=...,
  activation=..., random_state=seed)`` and nothing else;
- ``old``: the defaults before ``lr``/``lr_schedule``/``alpha0_start`` became
  "auto" (Adam 1e-3, constant rate, no annealing);
- a grid: ``lr`` in (3e-4, 1e-3, 3e-3) with the cosine schedule, and for HTAF
  each with and without ``alpha0`` annealing from 0.1.

It prints the held-out accuracy (exact step at inference) of every recipe and
a summary per pair: defaults, old defaults, the best recipe of the grid (best
on the held-out set itself: an upper bound of what tuning finds, so "within 3
points of the best" is a conservative check) and the gap. 20 epochs, batch
128 throughout. Seeds: ``--seeds``; the table shows the mean over them.

Run: ``python benchmarks/bench_step_recipes.py [--archs NAME ...] [--seeds N]
[--jobs N] [--out results.jsonl]``. About 25 s per image-net fit on one core.

The measured table is in ``benchmarks/README.md`` and the user guide's page
"Choosing a step activation and a recipe".
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import json
import os
import platform
import time

import numpy as np

PARAMS = {
    "mlp": None,
    "bnn": None,
    "snn": None,
    "cnn": {},
    "resnet18": {"width": 8},
    "wrn": {"depth": 10, "widen_factor": 1},
    "sew_resnet": {"width": 8},
    "bireal": {"width": 8},
    "vit": {"dim": 32, "depth": 2, "heads": 2, "mlp_dim": 64, "patch": 4},
}
ACTIVATIONS = ("htaf", "ste", "scaled_sigmoid")


def padded_digits():
    """Digits / 16 padded to 3x16x16: (X_train, X_test, y_train, y_test)."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    X = np.pad(X, ((0, 0), (0, 0), (4, 4), (4, 4)))
    X = np.ascontiguousarray(np.broadcast_to(X, (len(X), 3, 16, 16)))
    perm = np.random.RandomState(0).permutation(len(y))
    train, test = perm[:1400], perm[1400:]
    return X[train], X[test], y[train], y[test]


def recipes(activation):
    """``{name: parameters}`` of the recipes tried for `activation`."""
    out = {
        "defaults": {},
        "old": {"lr": 1e-3, "lr_schedule": "constant", "alpha0_start": None},
    }
    for lr in (3e-4, 1e-3, 3e-3):
        out[f"cosine lr={lr:g}"] = {
            "lr": lr,
            "lr_schedule": "cosine",
            "alpha0_start": None,
        }
        if activation == "htaf":
            out[f"cosine lr={lr:g} anneal"] = {
                "lr": lr,
                "lr_schedule": "cosine",
                "alpha0_start": 0.1,
                "anneal_epochs": "auto",
            }
    return out


def fit_one(arch, activation, recipe, params, seed, threads):
    import torch

    from sksign.estimators import HTAFNetClassifier

    torch.set_num_threads(threads)
    X_train, X_test, y_train, y_test = padded_digits()
    if PARAMS[arch] is None:  # the MLP family reads flat rows, "cnn" images
        X_train, X_test = X_train.reshape(1400, -1), X_test.reshape(len(X_test), -1)
    net = HTAFNetClassifier(
        architecture=arch,
        architecture_params=PARAMS[arch],
        activation=activation,
        random_state=seed,
        **params,
    )
    t0 = time.perf_counter()
    net.fit(X_train, y_train)
    seconds = time.perf_counter() - t0
    return {
        "arch": arch,
        "activation": activation,
        "recipe": recipe,
        "seed": seed,
        "lr": net.lr_,
        "test_acc": float(net.score(X_test, y_test)),
        "train_acc": float(net.score(X_train, y_train)),
        "last_loss": float(net.history_[-1, "train_loss"]),
        "seconds": round(seconds, 1),
    }


def summary(rows):
    """One line per (arch, activation): defaults, old, best, gap."""
    groups = {}
    for r in rows:
        key = (r["arch"], r["activation"])
        groups.setdefault(key, {}).setdefault(r["recipe"], []).append(r["test_acc"])
    print(
        f"\n{'arch':<11}{'activation':<15}{'defaults':>9}{'old':>7}{'best':>7}"
        f"{'gap':>6}  best recipe"
    )
    for (arch, act), by_recipe in groups.items():
        means = {k: float(np.mean(v)) for k, v in by_recipe.items()}
        grid = {k: v for k, v in means.items() if k not in ("old",)}
        best = max(grid, key=grid.get)
        d = means.get("defaults", float("nan"))
        print(
            f"{arch:<11}{act:<15}{d:>9.3f}{means.get('old', float('nan')):>7.3f}"
            f"{grid[best]:>7.3f}{grid[best] - d:>6.3f}  {best}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", nargs="+", default=list(PARAMS))
    parser.add_argument("--activations", nargs="+", default=list(ACTIVATIONS))
    parser.add_argument("--recipes", nargs="+", default=None)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=None, help="append JSON lines here")
    parser.add_argument(
        "--resume", action="store_true", help="skip the fits --out already holds"
    )
    args = parser.parse_args()
    from joblib import Parallel, delayed

    print(f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    tasks = [
        (arch, act, name, params, seed)
        for arch in args.archs
        for act in args.activations
        for name, params in recipes(act).items()
        if args.recipes is None or name in args.recipes
        for seed in range(args.seeds)
    ]
    rows = []
    if args.resume and args.out and os.path.exists(args.out):
        with open(args.out) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        done = {(r["arch"], r["activation"], r["recipe"], r["seed"]) for r in rows}
        rows = [r for r in rows if (r["arch"], r["activation"]) in
                {(t[0], t[1]) for t in tasks}]  # fmt: skip
        tasks = [t for t in tasks if (t[0], t[1], t[2], t[4]) not in done]
    for row in Parallel(n_jobs=args.jobs, return_as="generator")(
        delayed(fit_one)(arch, act, name, params, seed, 1)
        for arch, act, name, params, seed in tasks
    ):
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
    summary(rows)


if __name__ == "__main__":
    main()
