"""
======================================================
Tabular regression: HTAF nets against MLP and ridge
======================================================

:class:`~sksign.estimators.HTAFNetRegressor` is a deep Heaviside network for
regression: it trains with HTAF and predicts with exact steps, so every hidden
unit is a bit. On two small tabular data sets (diabetes from scikit-learn,
auto-mpg from mlxtend) we compare it with scikit-learn's
:class:`~sklearn.neural_network.MLPRegressor` (ReLU) and
:class:`~sklearn.linear_model.Ridge` in one 5-fold cross-validated table.

The features are standardised by a
:class:`~sklearn.preprocessing.StandardScaler` in each pipeline (the net
does not scale X itself). The raw targets go straight in:
``HTAFNetRegressor`` standardises them inside (``standardize_target=True``,
its default) and maps its predictions back, so it runs with its defaults
and needs no :class:`~sklearn.compose.TransformedTargetRegressor`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge
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
    "HTAFNetRegressor (defaults)": make_pipeline(
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
cv = KFold(5, shuffle=True, random_state=RANDOM_STATE)
rows = []
for data_name, (X, y) in data.items():
    for model_name, model in models.items():
        res = cross_validate(
            model,
            X.astype(np.float32),
            y,
            cv=cv,
            scoring=("r2", "neg_root_mean_squared_error"),
        )
        rows.append(
            {
                "data": data_name,
                "model": model_name,
                "R2 mean": res["test_r2"].mean(),
                "R2 std": res["test_r2"].std(),
                "RMSE mean": -res["test_neg_root_mean_squared_error"].mean(),
                "fit time (s)": res["fit_time"].mean(),
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
