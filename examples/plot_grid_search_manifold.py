"""
======================================================
GridSearchCV over alpha0 and alpha1 on the 22-manifold
======================================================

``alpha0`` and ``alpha1`` are top-level parameters of
:class:`~sksign.estimators.HTAFNetClassifier`, so scikit-learn's
:class:`~sklearn.model_selection.GridSearchCV` tunes them directly.
:func:`~sksign.nn.activations.htaf_grid` builds a grid that stays on the
manifold ``alpha0 * alpha1 = 22`` (Theorem 3.2): each candidate pairs one
``alpha0`` with ``alpha1 = 22 / alpha0``, so every candidate has the same slope
at 0 and stays close to the step outside ``[-0.1, 0.1]`` (within 0.1 exactly
once ``alpha1`` is large enough, Proposition 3.1; (2, 11) is within 0.103),
and mainly the tail changes. One
off-manifold pair (``alpha0 * alpha1 = 4``, a soft step) is added for
contrast. Accuracies are measured with the exact Heaviside step at inference.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import matplotlib.pyplot as plt
import pandas as pd
from sklearn.model_selection import GridSearchCV, train_test_split

from sksign.datasets import load_digits
from sksign.estimators import HTAFNetClassifier
from sksign.nn.activations import htaf_grid

RANDOM_STATE = 0

X, y = load_digits()
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.3, stratify=y, random_state=RANDOM_STATE
)

# %%
# The grid
# --------
grid = htaf_grid(22.0, alpha0=(0.5, 1.0, 2.0, 3.0, 5.0))
grid.append({"alpha0": [1.0], "alpha1": [4.0]})  # off the manifold
print(grid)

# %%
# The search
# ----------
# A one-hidden-layer deep Heaviside network, 10 epochs per fit, 3-fold CV.
# ``n_jobs`` runs the fits in parallel (see the "Scaling out" guide).
net = HTAFNetClassifier((64,), max_epochs=10, random_state=RANDOM_STATE)
search = GridSearchCV(net, grid, cv=3, n_jobs=1)
search.fit(X_train, y_train)

results = pd.DataFrame(
    {
        "alpha0": [p["alpha0"] for p in search.cv_results_["params"]],
        "alpha1": [p["alpha1"] for p in search.cv_results_["params"]],
        "mean CV accuracy": search.cv_results_["mean_test_score"],
        "std": search.cv_results_["std_test_score"],
    }
)
results["alpha0 * alpha1"] = results["alpha0"] * results["alpha1"]
print(results.round(4).to_string(index=False))
print("best:", search.best_params_)
print(f"test accuracy of the refitted best net: {search.score(X_test, y_test):.4f}")

# %%
# Accuracy along the manifold
# ---------------------------
on = results[results["alpha0 * alpha1"] > 20]
off = results[results["alpha0 * alpha1"] < 20]
fig, ax = plt.subplots(figsize=(5.5, 4))
ax.errorbar(
    on["alpha0"],
    on["mean CV accuracy"],
    yerr=on["std"],
    marker="o",
    capsize=3,
    label="alpha0 * alpha1 = 22",
)
ax.errorbar(
    off["alpha0"],
    off["mean CV accuracy"],
    yerr=off["std"],
    marker="s",
    ls="none",
    capsize=3,
    label="alpha0 * alpha1 = 4 (soft step)",
)
ax.set_xscale("log")
# one tick per alpha0 used, as plain numbers (a log axis would write 2x10^0)
alpha0 = sorted(results["alpha0"].unique())
ax.set_xticks(alpha0, [f"{a:g}" for a in alpha0])
ax.set_xticks([], minor=True)
ax.set(xlabel="alpha0", ylabel="3-fold CV accuracy (exact step)")
ax.legend()
fig.tight_layout()
plt.show()
