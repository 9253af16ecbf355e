"""
==================================================
Interventions: destroy the signs or the magnitudes
==================================================

The Sign Code paper tests which half of ``h = S * M`` a net relies on by
corrupting one of them in every hidden layer, with probability ``alpha`` per
unit and per sample, and measuring the accuracy that is left
(:func:`~sksign.metrics.intervention_score`). Each intervention has two
definitions, and they can give very different numbers, so every curve below
is labelled with the one it used:

* **sign flip** (destroy routing, keep magnitude)

  - ``flip="literal"``: ``h -> -h`` (the sign bit flips, ``|h|`` is kept; a
    ReLU unit at 0 stays at 0);
  - ``flip="gate"``: ``h -> phi(-z)``, the output the unit would give had its
    pre-activation the other sign (an inactive ReLU unit opens with ``|z|``).

* **magnitude randomisation** (destroy magnitude, keep routing): the
  magnitude becomes ``|eta|`` and the sign is forced back to the clean sign
  of that unit (a projection, so noise cannot flip later signs)

  - ``noise="standard"``: ``eta ~ N(0, 1)``;
  - ``noise="matched"``: ``|eta|`` rescaled per unit and per sign to the
    mean magnitude ``mu_j(S)`` measured on reference data (``X_ref``).

Tanh is odd, so its two sign flips coincide; ReLU's differ most.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import matplotlib.pyplot as plt
from sklearn.model_selection import train_test_split

from sksign.datasets import load_digits
from sksign.estimators import HTAFNetClassifier
from sksign.metrics import intervention_score

RANDOM_STATE = 0

X, y = load_digits()
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.3, stratify=y, random_state=RANDOM_STATE
)
nets = {
    act: HTAFNetClassifier(
        (256, 256), activation=act, max_epochs=30, random_state=RANDOM_STATE
    ).fit(X_train, y_train)
    for act in ("relu", "tanh")
}

# %%
# Accuracy against alpha
# ----------------------
alphas = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0]
definitions = [
    ("sign_flip", {"flip": "literal"}),
    ("sign_flip", {"flip": "gate"}),
    ("magnitude", {"noise": "standard"}),
    ("magnitude", {"noise": "matched", "X_ref": X_train}),
]
curves = {}
for act, net in nets.items():
    for kind, options in definitions:
        label = f"{kind}/{options.get('flip', options.get('noise'))}"
        curves[act, label] = [
            intervention_score(
                net,
                X_test,
                y_test,
                kind=kind,
                alpha=a,
                n_repeats=2,
                random_state=RANDOM_STATE,
                **options,
            )
            for a in alphas
        ]
        print(f"{act:5s} {label:19s}", " ".join(f"{v:.3f}" for v in curves[act, label]))

fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
styles = {"relu": "-", "tanh": "--"}
for (act, label), accs in curves.items():
    ax = axes[0] if label.startswith("sign_flip") else axes[1]
    ax.plot(alphas, accs, styles[act], marker="o", ms=3, label=f"{act}, {label}")
for ax, title in zip(axes, ("sign flip", "magnitude randomisation")):
    ax.axhline(0.1, color="grey", ls=":", lw=0.8)
    ax.set(xlabel="alpha", title=title, ylim=(0, 1.02))
    ax.legend(fontsize=8)
axes[0].set_ylabel("test accuracy")
fig.tight_layout()

# %%
# A scorer for model selection
# ----------------------------
# :func:`~sksign.metrics.make_intervention_scorer` fixes the settings, so the
# same number can drive ``GridSearchCV`` or ``cross_validate``; its
# ``definition`` says which one it is.
from sksign.metrics import make_intervention_scorer

scorer = make_intervention_scorer(
    kind="sign_flip", flip="gate", alpha=0.2, random_state=RANDOM_STATE
)
print(scorer, "->", round(scorer(nets["relu"], X_test, y_test), 4))
plt.show()
