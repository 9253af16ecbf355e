"""
=========================
Gate dominance and width
=========================

On the last hidden layer (width ``d``, readout ``W, b``) each logit splits
exactly into a *pure-sign* part and a *magnitude residual*:

.. math::

    f_c(x) = \\underbrace{\\sum_j w_{cj} S_j \\mu_j(S_j) + b_c}_{\\tilde f_c}
           + \\underbrace{\\sum_j w_{cj} S_j (M_j - \\mu_j(S_j))}_{R_c},

with ``mu_j(s) = E[M_j | S_j = s]`` on the training set. The gate-dominance
score ``Z1(x) = min_c |f~_yhat - f~_c| / r_c`` compares the pure-sign margin
with the root mean square of the residual margin; the rate ``eps_1`` at which
``argmax f`` and ``argmax f~`` disagree is bounded by ``(C - 1) E[Z1^-2]``
(Theorem 6.1). The sign margin grows like ``d`` and the residual like
``sqrt(d)``, so Z1 should grow with width where the signs carry the class.

:func:`~sksign.metrics.gate_dominance_report` returns all of it. The
asymmetry ``delta_bar`` shows why tanh (odd, ``delta_bar ~ 0``) and
SiLU/ReLU (``delta_bar > 0``) behave differently. At this small scale (8x8
digits, a few epochs) the numbers differ from the paper's CIFAR nets: read
them as a measurement, not a reproduction.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import LogLocator, NullFormatter
from sklearn.model_selection import train_test_split

from sksign.datasets import load_digits
from sksign.estimators import HTAFNetClassifier
from sksign.metrics import gate_dominance_report

RANDOM_STATE = 0

X, y = load_digits()
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.3, stratify=y, random_state=RANDOM_STATE
)

# %%
# Z1 against width
# ----------------
rows = []
for act in ("silu", "tanh"):
    for width in (16, 64, 256, 512):
        net = HTAFNetClassifier(
            (width, width), activation=act, max_epochs=15, random_state=RANDOM_STATE
        ).fit(X_train, y_train)
        rep = gate_dominance_report(net, X_test, y_test, X_ref=X_train)
        rows.append(
            {
                "activation": act,
                "width": width,
                "test acc": net.score(X_test, y_test),
                "median Z1": rep.median_Z1,
                "delta_bar": rep.delta_bar,
                "agreement": rep.agreement,
                "eps_1": rep.eps_1,
                "bound": rep.bound,
                "union bound": rep.union_bound,
            }
        )
table = pd.DataFrame(rows)
print(table.round(4).to_string(index=False))

# %%
fig, ax = plt.subplots(figsize=(5.5, 4))
for act, part in table.groupby("activation"):
    ax.loglog(part["width"], part["median Z1"], marker="o", label=act)
ax.set(
    xlabel="width of the last hidden layer",
    ylabel="median Z1",
    title="Gate dominance vs width",
)
# one tick per width used, as plain numbers (a log axis would write 2x10^1)
widths = sorted(table["width"].unique())
ax.set_xticks(widths, [str(w) for w in widths])
ax.set_xticks([], minor=True)
ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 3, 5)))  # 0.1, 0.2, 0.3, 0.5, 1, ...
ax.yaxis.set_major_formatter("{x:g}")
ax.yaxis.set_minor_formatter(NullFormatter())
ax.legend()
fig.tight_layout()

# %%
# The report of the last net in detail: the logits split exactly into the
# pure-sign logits and the residuals.
import numpy as np

print(rep)
print(
    "max |f - (f~ + R)|:",
    float(np.abs(rep.logits - rep.pure_sign_logits - rep.residuals).max()),
)
plt.show()
