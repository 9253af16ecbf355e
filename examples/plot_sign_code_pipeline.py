"""
==================================================
Sign codes and sign-kNN in a scikit-learn pipeline
==================================================

Every hidden unit of a sign-preserving activation splits as
``h = S * M``: a sign bit ``S`` (1 iff the pre-activation is positive) and a
magnitude ``M``. :class:`~sksign.transformers.SignCodeTransformer` reads the
sign bits of the last hidden layer of a net, and
:class:`~sksign.estimators.SignKNNClassifier` classifies with k nearest
neighbours under the Hamming distance on those bits alone (XOR + popcount).

Put together in a :class:`~sklearn.pipeline.Pipeline`, the transformer fits
the net, the k-NN fits on the training codes, and ``predict`` never uses a
single magnitude. The *sign gap* is the test error of the sign-kNN minus that
of the full net.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline

from sksign.datasets import load_digits
from sksign.estimators import HTAFNetClassifier, SignKNNClassifier
from sksign.metrics import loo_purity
from sksign.transformers import SignCodeTransformer

RANDOM_STATE = 0

X, y = load_digits()
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.3, stratify=y, random_state=RANDOM_STATE
)

# %%
# The pipeline
# ------------
# The transformer clones and fits the ReLU net (``prefit=False``), then turns
# every sample into the 256 sign bits of the last hidden layer.
net = HTAFNetClassifier(
    (256, 256), activation="relu", max_epochs=30, random_state=RANDOM_STATE
)
pipe = Pipeline(
    [
        ("codes", SignCodeTransformer(net, layers="last")),
        ("knn", SignKNNClassifier(n_neighbors=5)),
    ]
)
pipe.fit(X_train, y_train)

codes = pipe.named_steps["codes"]
fitted_net = codes.estimator_
acc_net = fitted_net.score(X_test, y_test)
acc_knn = pipe.score(X_test, y_test)
print(
    f"bits per sample: {codes.n_bits_}  (first names: "
    f"{list(codes.get_feature_names_out()[:3])})"
)
print(f"full net accuracy:  {acc_net:.4f}")
print(f"sign-kNN accuracy:  {acc_knn:.4f}")
print(f"sign gap err(kNN) - err(net): {(1 - acc_knn) - (1 - acc_net):+.4f}")

# %%
# Class-coherent sign geometry
# ----------------------------
# The codes of one class sit close together in Hamming space. The
# leave-one-out purity is the share of each code's 10 nearest codes that
# carry its own label.
C_test = codes.transform(X_test)
print(f"mean LOO 10-NN purity of the test codes: {loo_purity(C_test, y_test):.4f}")

order = np.argsort(y_test, kind="stable")
unit_order = np.argsort(
    [
        np.argmax([C_test[y_test == c, j].mean() for c in range(10)])
        for j in range(C_test.shape[1])
    ],
    kind="stable",
)
fig, ax = plt.subplots(figsize=(8, 4.5))
ax.imshow(
    C_test[order][:, unit_order].T,
    aspect="auto",
    cmap="gray_r",
    interpolation="nearest",
)
bounds = np.flatnonzero(np.diff(y_test[order])) + 0.5
for b in bounds:
    ax.axvline(b, color="tab:red", lw=0.6)
# one tick per class, in the middle of its block
edges = np.concatenate([[-0.5], bounds, [len(order) - 0.5]])
ax.set_xticks((edges[:-1] + edges[1:]) / 2, np.unique(y_test))
ax.set(
    xlabel="test samples, grouped by class (red lines)",
    ylabel="hidden unit (sorted)",
    title="Sign bits of the last hidden layer (black = 1)",
)
fig.tight_layout()

# %%
# The net alone can be read as well: with ``prefit=True`` the transformer
# reads an already fitted net without refitting it, and ``output="packed"``
# stores 8 bits per byte, which the k-NN reads with ``packed=True``.
packed = SignCodeTransformer(fitted_net, prefit=True, output="packed")
P_train = packed.fit_transform(X_train)
knn = SignKNNClassifier(n_neighbors=5, packed=True, n_bits=packed.n_bits_)
knn.fit(P_train, y_train)
print(
    f"packed codes: {P_train.shape[1]} bytes per sample; "
    f"accuracy {knn.score(packed.transform(X_test), y_test):.4f}"
)
plt.show()
