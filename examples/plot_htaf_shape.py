"""
====================================
HTAF, its tail and the epsilon bound
====================================

The heavy-tailed activation ``HTAF(x) = sigmoid(alpha1 * tanh(alpha0 * x))``
approximates the Heaviside step ``H(x) = 1[x >= 0]`` while keeping gradients
alive far from 0. This example

* plots HTAF on the manifold ``alpha0 * alpha1 = 22`` against the scaled
  sigmoid ``sigmoid(22 x)`` (same slope at 0),
* plots the derivatives: the HTAF tail decays like ``exp(-2 alpha0 |x|)``, the
  sigmoid's like ``exp(-22 |x|)``,
* checks Proposition 3.1 numerically: with ``alpha0 >= alpha0_min(eps,
  alpha1)``, ``|HTAF(x) - H(x)| <= eps`` for every ``|x| >= eps``, and the bound
  is tight,
* shows that ``alpha1 * alpha0_min(alpha1)`` tends to
  ``(1 / eps) log((1 - eps) / eps)``, about 21.97 for ``eps = 0.1``
  (Theorem 3.2): the "22-manifold".
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import matplotlib.pyplot as plt
import numpy as np
import torch

from sksign.nn.activations import htaf, htaf_alpha0_min, htaf_product_limit

RANDOM_STATE = 0
torch.manual_seed(RANDOM_STATE)

# %%
# HTAF and its derivative against the scaled sigmoid
# --------------------------------------------------
# The derivative comes from the closed-form backward of
# :func:`sksign.nn.activations.htaf` through autograd.

x = torch.linspace(-3, 3, 1201, dtype=torch.float64, requires_grad=True)
pairs = [(0.5, 44.0), (1.0, 22.0), (2.0, 11.0), (3.0, 22.0 / 3.0)]

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
xs = x.detach().numpy()
for a0, a1 in pairs:
    y = htaf(x, a0, a1)
    (dy,) = torch.autograd.grad(y.sum(), x)
    label = f"HTAF a0={a0:g}, a1={a1:.3g}"
    ax0.plot(xs, y.detach().numpy(), label=label)
    ax1.semilogy(xs, dy.numpy(), label=label)
s = torch.sigmoid(22.0 * x).detach().numpy()
ax0.plot(xs, s, "k--", label="sigmoid(22 x)")
ax1.semilogy(xs, np.maximum(22.0 * s * (1 - s), 1e-30), "k--", label="sigmoid(22 x)")
ax0.set(xlabel="x", title="Activation")
ax1.set(xlabel="x", title="Derivative (log scale)", ylim=(1e-12, 30))
ax0.legend(fontsize=8)
ax1.legend(fontsize=8, loc="lower center")
fig.tight_layout()

# %%
# All the curves have the same slope ``alpha0 * alpha1 / 4 = 5.5`` at 0. Far
# from 0 the scaled sigmoid's derivative falls like ``22 exp(-22 |x|)``, while
# HTAF's falls like ``C(alpha0, alpha1) exp(-2 alpha0 |x|)``: the decay rate is
# set by alpha0 alone. The constant shrinks like ``exp(-alpha1)``, so a very
# large alpha1 (``alpha0 = 0.5, alpha1 = 44``) saturates the outer sigmoid;
# the paper's best pairs sit in between, ``alpha0 = 1.5..3``.

for xv in (1.0, 2.0, 5.0):
    row = []
    for a0, a1 in pairs:
        xt = torch.tensor([xv], dtype=torch.float64, requires_grad=True)
        (g,) = torch.autograd.grad(htaf(xt, a0, a1).sum(), xt)
        row.append(f"{g.item():.1e}")
    sig = 22.0 * np.exp(-22.0 * xv) / (1.0 + np.exp(-22.0 * xv)) ** 2
    print(f"x={xv:g}: HTAF derivative {' / '.join(row)}; sigmoid(22 x): {sig:.1e}")

# %%
# The epsilon bound (Proposition 3.1) and its tightness
# -----------------------------------------------------
# For each ``alpha1`` we take ``alpha0 = alpha0_min(eps, alpha1)`` and measure
# the largest error over ``|x| >= eps``; 1% below the bound the error exceeds
# eps.

eps = 0.1
grid = torch.linspace(-50, 50, 200_001, dtype=torch.float64)
far = grid[grid.abs() >= eps]
step = (far >= 0).double()
for a1 in (5.0, 11.0, 22.0, 44.0, 220.0):
    a0 = htaf_alpha0_min(eps, a1)
    err = (htaf(far, a0, a1) - step).abs().max().item()
    err_below = (htaf(far, 0.99 * a0, a1) - step).abs().max().item()
    print(
        f"alpha1={a1:6.1f}  alpha0_min={a0:.4f}  alpha0*alpha1={a0 * a1:6.2f}  "
        f"max error={err:.4f} (<= {eps})  at 0.99*alpha0_min: {err_below:.4f}"
    )

# %%
# The 22-manifold (Theorem 3.2)
# -----------------------------
# ``alpha1 * alpha0_min(alpha1)`` decreases to ``htaf_product_limit(eps)``:
# any pair with ``alpha0 * alpha1`` a little above 22 and a large enough
# ``alpha1`` keeps HTAF within 0.1 of the step outside ``[-0.1, 0.1]``.

L = np.log((1 - eps) / eps)
a1 = np.geomspace(L * 1.05, 1000, 200)
prod = a1 * htaf_alpha0_min(eps, a1)
fig, ax = plt.subplots(figsize=(5.5, 4))
ax.semilogx(a1, prod, label="alpha1 * alpha0_min(alpha1)")
ax.axhline(
    htaf_product_limit(eps),
    color="k",
    ls=":",
    label=f"limit = {htaf_product_limit(eps):.2f}",
)
ax.set(xlabel="alpha1", ylabel="product", title=f"eps = {eps}")
ax.legend()
fig.tight_layout()
plt.show()
