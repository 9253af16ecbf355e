"""HTAFNetRegressor's defaults on raw tabular targets, against MLPRegressor.

Prints one table: 5-fold cross-validated R2 (``KFold(shuffle=True,
random_state=0)``) of

- ``make_pipeline(StandardScaler(), HTAFNetRegressor(random_state=0))``: the
  defaults, predicting with the exact step and (same defaults)
  ``inference="smooth"``;
- ``make_pipeline(StandardScaler(), MLPRegressor(max_iter=1000,
  random_state=0))``: the reference, and ``HistGradientBoostingRegressor``;

on diabetes (scikit-learn), auto-mpg (``sksign.datasets.load_autompg``) and
``make_friedman1(n_samples=3000, noise=1.0, random_state=0)``, all on the raw
targets. ``--variants`` adds HTAFNetRegressor rows with one change each to
the defaults (the candidates measured when the defaults were chosen);
``--grid`` adds a ``GridSearchCV`` over ``alpha0`` on the ``alpha0 * alpha1 =
22`` manifold and the width (3-fold inner CV; slow).

Run: ``python benchmarks/bench_regression_defaults.py [--threads N]
[--variants NAME ...] [--grid] [--data NAME ...]``

The measured table and what it says are in ``benchmarks/README.md``.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from skorch.callbacks import EarlyStopping
from skorch.dataset import ValidSplit

from sksign.datasets import load_autompg
from sksign.estimators import HTAFNetRegressor
from sksign.nn import htaf_grid

RANDOM_STATE = 0


def _early_stopping(max_epochs, patience):
    return {
        "max_epochs": max_epochs,
        "train_split": ValidSplit(0.1, random_state=RANDOM_STATE),
        "callbacks": [EarlyStopping(patience=patience, load_best=True)],
    }


#: One change each to HTAFNetRegressor's defaults (name -> parameters).
VARIANTS = {
    "old-defaults (raw y)": {"standardize_target": False, "alpha0_start": None},
    "no annealing": {"alpha0_start": None},
    "anneal to alpha0=4": {"alpha0": 4.0, "alpha1": 5.5},
    "early_stopping, 200 epochs": {"early_stopping": True, "max_epochs": 200},
    "epochs=100": {"max_epochs": 100},
    "epochs=200+es": _early_stopping(200, 20),
    "width=(128,128)": {"hidden_layer_sizes": (128, 128)},
    "width=(256,256)": {"hidden_layer_sizes": (256, 256)},
    "width=(1024,1024)": {"hidden_layer_sizes": (1024, 1024)},
    "width=(1024,)": {"hidden_layer_sizes": (1024,)},
    "width=(2048,)": {"hidden_layer_sizes": (2048,)},
    "width=(512,512,512)": {"hidden_layer_sizes": (512, 512, 512)},
    "adamw-wd=1e-1": {"optimizer": torch.optim.AdamW, "optimizer__weight_decay": 0.1},
    "adamw-wd=1e-2": {"optimizer": torch.optim.AdamW, "optimizer__weight_decay": 1e-2},
    "epochs=40": {"max_epochs": 40},
    "lr=3e-3": {"lr": 3e-3},
    "lr=3e-4": {"lr": 3e-4},
    "batch=32": {"batch_size": 32},
}

#: GridSearchCV (--grid): alpha0 on the alpha0 * alpha1 = 22 manifold, and width.
GRID = [
    {
        **{f"htafnetregressor__{k}": v for k, v in point.items()},
        "htafnetregressor__hidden_layer_sizes": [(512, 512), (1024, 1024)],
    }
    for point in htaf_grid(22.0, alpha0=(1.0, 2.0, 4.0))
]


def datasets(names):
    loaders = {
        "diabetes": lambda: load_diabetes(return_X_y=True),
        "auto-mpg": load_autompg,
        "friedman1": lambda: make_friedman1(
            n_samples=3000, noise=1.0, random_state=RANDOM_STATE
        ),
    }
    return {name: loaders[name]() for name in names}


def models(variants, grid=False):
    out = {
        "HTAFNetRegressor (defaults, exact step)": make_pipeline(
            StandardScaler(), HTAFNetRegressor(random_state=RANDOM_STATE)
        ),
        'HTAFNetRegressor (defaults, inference="smooth")': make_pipeline(
            StandardScaler(),
            HTAFNetRegressor(inference="smooth", random_state=RANDOM_STATE),
        ),
        "MLPRegressor": make_pipeline(
            StandardScaler(), MLPRegressor(max_iter=1000, random_state=RANDOM_STATE)
        ),
        "HistGradientBoostingRegressor": HistGradientBoostingRegressor(
            random_state=RANDOM_STATE
        ),
    }
    for name in variants:
        params = VARIANTS[name]
        out[f"HTAFNetRegressor {name}"] = make_pipeline(
            StandardScaler(), HTAFNetRegressor(random_state=RANDOM_STATE, **params)
        )
    if grid:
        base = make_pipeline(
            StandardScaler(), HTAFNetRegressor(random_state=RANDOM_STATE)
        )
        inner = KFold(3, shuffle=True, random_state=RANDOM_STATE)
        out["GridSearchCV(HTAF: alpha0/alpha1, width; exact step)"] = GridSearchCV(
            base, GRID, cv=inner
        )
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument(
        "--variants", nargs="*", default=[], choices=sorted(VARIANTS), help="extra rows"
    )
    parser.add_argument(
        "--grid",
        action="store_true",
        help="add a GridSearchCV row (3-fold inner CV; slow)",
    )
    parser.add_argument(
        "--data",
        nargs="*",
        default=["diabetes", "auto-mpg", "friedman1"],
        choices=["diabetes", "auto-mpg", "friedman1"],
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # MLPRegressor reaches max_iter=1000 on some folds; the table says enough
    warnings.filterwarnings("ignore", category=ConvergenceWarning)

    cv = KFold(5, shuffle=True, random_state=RANDOM_STATE)
    data = datasets(args.data)
    print(f"| model | {' | '.join(data)} | fit time (s) |")
    print(f"|---|{'---|' * len(data)}---|")
    for model_name, model in models(args.variants, args.grid).items():
        cells, t0 = [], time.perf_counter()
        for X, y in data.values():
            res = cross_validate(model, np.asarray(X, np.float32), y, cv=cv)
            r2 = res["test_score"]
            cells.append(f"{r2.mean():.3f} +- {r2.std():.3f}")
        elapsed = time.perf_counter() - t0
        print(f"| {model_name} | {' | '.join(cells)} | {elapsed:.1f} |", flush=True)


if __name__ == "__main__":
    main()
