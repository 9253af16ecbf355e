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
Features are standardised inside the pipeline, and the target is
standardised with :class:`~sklearn.compose.TransformedTargetRegressor`, so
all nets see unit-scale inputs and outputs.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.compose import TransformedTargetRegressor
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold, cross_validate
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sksign.datasets import load_autompg, load_diabetes
from sksign.estimators import HTAFNetRegressor

RANDOM_STATE = 0


def standardised(model):
    """Standardise X (in the pipeline) and y (around the model)."""
    return TransformedTargetRegressor(
        regressor=make_pipeline(StandardScaler(), model), transformer=StandardScaler()
    )


models = {
    "HTAFNetRegressor (64, 64)": standardised(
        HTAFNetRegressor(
            (64, 64),
            max_epochs=60,
            batch_size=64,
            lr=2e-3,
            random_state=RANDOM_STATE,
        )
    ),
    "MLPRegressor (64, 64)": standardised(
        MLPRegressor(
            hidden_layer_sizes=(64, 64),
            max_iter=1000,
            early_stopping=True,
            random_state=RANDOM_STATE,
        )
    ),
    "Ridge": standardised(Ridge(alpha=1.0)),
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
