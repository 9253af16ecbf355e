"""
======================================================
Tabular regression: HTAF nets, exact step and smooth
======================================================

:class:`~sksign.estimators.HTAFNetRegressor` is a deep Heaviside network for
regression: it trains with HTAF and, by default, predicts with exact steps
(``inference="step"``), so every hidden unit is a bit and the prediction is
piecewise constant. ``inference="smooth"`` predicts with the HTAF function it
trained with instead.

We compare both modes with scikit-learn's
:class:`~sklearn.neural_network.MLPRegressor` (ReLU) and
:class:`~sklearn.linear_model.Ridge` on two small tables (diabetes from
scikit-learn, auto-mpg from mlxtend) in 5-fold cross-validation, then watch
the error fall as the training set grows on ``make_friedman1``: the learning
rate in log-log axes.

The features are standardised by a
:class:`~sklearn.preprocessing.StandardScaler` in each pipeline (the net
does not scale X itself). The raw targets go straight in: the regressor
standardises them inside (``standardize_target=True``) and maps its
predictions back. Its other defaults: width (512, 512), 20 epochs of Adam
(``lr=1e-3``, shuffled batches of 128), and ``alpha0`` annealed from 0.05 to
2 over the first 16 epochs (``alpha0_start``), which trains the step net
better than a fixed ``alpha0`` (``benchmarks/README.md``).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import LogLocator, NullFormatter
from sklearn.base import clone
from sklearn.datasets import make_friedman1
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, cross_validate
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sksign.datasets import load_autompg, load_diabetes
from sksign.estimators import HTAFNetRegressor

RANDOM_STATE = 0
# MLPRegressor stops at max_iter=1000 on some folds before its tolerance is
# met; the table below shows how well it does anyway.
warnings.filterwarnings("ignore", category=ConvergenceWarning)

# %%
# The models
# ----------
# Every model sees standardised features; the targets (disease progression,
# miles per gallon) stay in their own units.
models = {
    "HTAF, exact step (defaults)": make_pipeline(
        StandardScaler(), HTAFNetRegressor(random_state=RANDOM_STATE)
    ),
    "MLPRegressor": make_pipeline(
        StandardScaler(), MLPRegressor(max_iter=1000, random_state=RANDOM_STATE)
    ),
    "Ridge": make_pipeline(StandardScaler(), Ridge(alpha=1.0)),
}
data = {"diabetes": load_diabetes(), "auto-mpg": load_autompg()}

# %%
# Cross-validation
# ----------------
# The smooth mode is scored on the same fitted nets as the exact step
# (``set_params(inference="smooth")`` on each fold's net), so both rows come
# from one training per fold.
cv = KFold(5, shuffle=True, random_state=RANDOM_STATE)
rows = []
for data_name, (X, y) in data.items():
    X = X.astype(np.float32)
    for model_name, model in models.items():
        res = cross_validate(
            model,
            X,
            y,
            cv=cv,
            scoring=("r2", "neg_root_mean_squared_error"),
            return_estimator=True,
            return_indices=True,
        )
        scores = {
            model_name: (res["test_r2"], -res["test_neg_root_mean_squared_error"])
        }
        if model_name.startswith("HTAF"):
            smooth_r2, smooth_rmse = [], []
            for net, test in zip(res["estimator"], res["indices"]["test"]):
                net.set_params(htafnetregressor__inference="smooth")
                pred = net.predict(X[test])
                smooth_r2.append(r2_score(y[test], pred))
                smooth_rmse.append(np.sqrt(np.mean((pred - y[test]) ** 2)))
            scores['HTAF, inference="smooth"'] = (
                np.array(smooth_r2),
                np.array(smooth_rmse),
            )
        for name, (r2, rmse) in scores.items():
            rows.append(
                {
                    "data": data_name,
                    "model": name,
                    "R2 mean": r2.mean(),
                    "R2 std": r2.std(),
                    "RMSE mean": rmse.mean(),
                }
            )
table = pd.DataFrame(rows)
print(table.round(3).to_string(index=False))

# %%
# The same numbers as a plot
# --------------------------
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for ax, (data_name, part) in zip(axes, table.groupby("data", sort=False)):
    ax.barh(part["model"], part["R2 mean"], xerr=part["R2 std"], capsize=3)
    ax.set(title=data_name, xlabel="5-fold CV R2")
fig.tight_layout()
plt.show()

# %%
# The learning rate on make_friedman1
# -----------------------------------
# The excess risk is the test MSE against the noiseless function ``f`` (the
# noise variance is 1). Its slope against ``n`` in log-log axes is the rate
# exponent: -1 would be the parametric rate. Both HTAF modes come from one fit
# per ``n`` (``set_params`` switches the mode). This runs up to 2,000 rows;
# ``benchmarks/bench_regression_rates.py`` runs 500 to 20,000 rows on all
# three Friedman problems.
sizes = np.array([250, 500, 1000, 2000])
X_test, f_test = make_friedman1(n_samples=2000, noise=0.0, random_state=1)
rate_models = {
    "HTAF": models["HTAF, exact step (defaults)"],
    "MLPRegressor": models["MLPRegressor"],
    "HistGradientBoosting": HistGradientBoostingRegressor(random_state=RANDOM_STATE),
}
risks = {name: [] for name in ("HTAF, step", "HTAF, smooth", "MLPRegressor", "HGB")}
for n in sizes:
    X, y = make_friedman1(n_samples=int(n), noise=1.0, random_state=RANDOM_STATE)
    htaf = clone(rate_models["HTAF"]).fit(X, y)
    risks["HTAF, step"].append(np.mean((htaf.predict(X_test) - f_test) ** 2))
    htaf.set_params(htafnetregressor__inference="smooth")
    risks["HTAF, smooth"].append(np.mean((htaf.predict(X_test) - f_test) ** 2))
    mlp = clone(rate_models["MLPRegressor"]).fit(X, y)
    risks["MLPRegressor"].append(np.mean((mlp.predict(X_test) - f_test) ** 2))
    hgb = clone(rate_models["HistGradientBoosting"]).fit(X, y)
    risks["HGB"].append(np.mean((hgb.predict(X_test) - f_test) ** 2))

fig, ax = plt.subplots(figsize=(5.5, 4))
for name, values in risks.items():
    rate = np.polyfit(np.log(sizes), np.log(values), 1)[0]
    ax.loglog(sizes, values, "o-", label=f"{name} (slope {rate:.2f})")
ax.set(xlabel="training rows n", ylabel="excess risk", title="make_friedman1")
# one tick per n used, and plain numbers on both axes (not 2x10^3)
ax.set_xticks(sizes, [str(n) for n in sizes])
ax.set_xticks([], minor=True)
ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 3, 5)))  # 0.1, 0.2, 0.3, 0.5, 1, ...
ax.yaxis.set_major_formatter("{x:g}")
ax.yaxis.set_minor_formatter(NullFormatter())
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.tight_layout()
plt.show()
