"""
=======================================
ICBM: binary concepts without labels
=======================================

An implicit concept bottleneck model (ICBM) turns the last activation of a
feature extractor into an HTAF during training and the exact step at
inference, so the representation the classifier head reads is a binary
concept vector. :class:`~sksign.estimators.ICBMClassifier` builds
``backbone -> concept layer -> linear head``; ``transform`` returns the
concept bits and ``explain_concepts`` describes each concept by the classes
it fires on (activated group) and those it does not (non-activated group),
with a contrastive naming prompt for a language model. No concept labels are
used anywhere.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import train_test_split

from sksign.datasets import load_digits
from sksign.estimators import ICBMClassifier

RANDOM_STATE = 0

X, y = load_digits()
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.3, stratify=y, random_state=RANDOM_STATE
)

# %%
# Accuracy before and after the bottleneck
# ----------------------------------------
# "Before" is the same net with ReLU units in place of the concepts.
common = {
    "backbone": "mlp",
    "hidden_layer_sizes": (256,),
    "n_concepts": 32,
    "max_epochs": 40,
    "random_state": RANDOM_STATE,
}
before = ICBMClassifier(concept_activation="relu", **common).fit(X_train, y_train)
icbm = ICBMClassifier(**common).fit(X_train, y_train)
print(f"before (ReLU layer):      {before.score(X_test, y_test):.4f}")
print(f"after (binary concepts):  {icbm.score(X_test, y_test):.4f}")

concepts = icbm.transform(X_test)
print("concept matrix:", concepts.shape, "values:", np.unique(concepts))

# %%
# The concept table
# -----------------
records = icbm.explain_concepts(X_test, y_test)
records = sorted(records, key=lambda r: -r.specificity)
for r in records[:8]:
    print(
        f"concept {r.index:2d} [{r.status}] specificity {r.specificity:.2f}: "
        f"fires on {r.activated}, not on {r.non_activated}"
    )
print()
print("naming prompt of the most specific concept:")
print(records[0].prompt)

# %%
# Firing rate of every concept on every class, and what the top concepts
# look at: the mean test image where the concept fires minus where it does
# not.
classes = sorted(records[0].class_rates)
rates = np.array([[r.class_rates[c] for c in classes] for r in records])
fig, (ax0, *axes) = plt.subplots(
    1,
    5,
    figsize=(14, 3.5),
    gridspec_kw={"width_ratios": [3, 1, 1, 1, 1]},
    layout="constrained",
)
im = ax0.imshow(rates.T, aspect="auto", cmap="viridis", vmin=0, vmax=1)
ax0.set_yticks(range(len(classes)), classes)
ax0.set(
    xlabel="concept rank (most specific first)",
    ylabel="class",
    title="firing rate per class",
)
fig.colorbar(im, ax=ax0, label="firing rate")
for ax, r in zip(axes, records[:4]):
    on = concepts[:, r.index] == 1
    diff = (
        X_test[on].mean(0) - X_test[~on].mean(0)
        if on.any() and (~on).any()
        else np.zeros(X_test.shape[1])
    )
    im = ax.imshow(diff.reshape(8, 8), cmap="RdBu_r", vmin=-0.5, vmax=0.5)
    ax.set(title=f"concept {r.index}", xticks=[], yticks=[])
fig.colorbar(im, ax=axes, label="fires minus not (mean pixel)")

# %%
# A namer turns each record into a name; any callable works, an LLM client
# that answers ``record.prompt`` included. Here a rule of thumb stands in.
named = icbm.explain_concepts(
    X_test, y_test, namer=lambda r: "digits " + "/".join(map(str, r.activated))
)
print([r.name for r in named[:5]])
plt.show()
