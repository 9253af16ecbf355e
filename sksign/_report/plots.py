"""Matplotlib figures of the reports (Agg backend, no display needed)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import LogFormatter

from sksign.nn import htaf, htaf_alpha0_min

__all__ = [
    "plot_gate_dominance_width",
    "plot_grid_search",
    "plot_htaf_shape",
    "plot_interventions",
]

_MARKERS = "osd^v<>pPX*"
_LINESTYLES = ("-", "--", ":", "-.")
# The panels of plot_interventions, in the order the captions name them.
_KIND_ORDER = ("sign_flip", "magnitude")


def _ticks_at(axis, values):
    """Tick a log `axis` at `values` only, labelled as plain numbers.

    A log axis labels 1, 2, 3 as ``10^0, 2x10^0, 3x10^0`` and crowds its minor
    labels together (``3x10^1 4x10^1``); an axis over a handful of settings
    (widths, alpha0) reads best with one tick per setting used.
    """
    values = sorted({float(v) for v in values})
    axis.set_ticks(values, labels=[f"{v:g}" for v in values])
    axis.set_ticks([], minor=True)


class _PlainLogFormatter(LogFormatter):
    """The labels LogFormatter picks, written as plain numbers (0.1, 20)."""

    def __call__(self, x, pos=None):
        return f"{x:g}" if super().__call__(x, pos) else ""


def _plain_log_labels(axis):
    """Label a log `axis` with plain numbers (``20``, ``0.1``), not ``2x10^1``.

    Decades are labelled; so are the minor ticks when the axis spans too few
    decades to show one, as matplotlib's own log labels do.
    """
    axis.set_major_formatter(_PlainLogFormatter())
    axis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False))


def htaf_and_derivative(x, alpha0, alpha1):
    """HTAF and its derivative (through the library's closed-form backward)."""
    t = torch.as_tensor(np.asarray(x, dtype=np.float64)).requires_grad_(True)
    y = htaf(t, alpha0, alpha1)
    (g,) = torch.autograd.grad(y.sum(), t)
    return y.detach().numpy(), g.numpy()


def plot_htaf_shape(
    pairs=((0.5, 44.0), (1.0, 22.0), (2.0, 11.0), (3.0, 22 / 3)), k=22.0, eps=0.1
):
    """HTAF on the 22-manifold and its derivative against sigmoid(k x)."""
    x = np.linspace(-3, 3, 1201)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    ax0.step(
        x,
        (x >= 0).astype(float),
        where="post",
        color="k",
        lw=1,
        ls=":",
        label="step H(x)",
    )
    for a0, a1 in pairs:
        y, g = htaf_and_derivative(x, a0, a1)
        label = f"HTAF a0={a0:g}, a1={a1:.3g}"
        ax0.plot(x, y, label=label)
        ax1.semilogy(x, np.maximum(g, 1e-30), label=label)
    s = 1.0 / (1.0 + np.exp(-k * x))
    ax0.plot(x, s, "k--", label=f"sigmoid({k:g} x)")
    ax1.semilogy(
        x, np.maximum(k * s * (1 - s), 1e-30), "k--", label=f"sigmoid({k:g} x)"
    )
    ax0.axhspan(1 - eps, 1, color="tab:green", alpha=0.08)
    ax0.axhspan(0, eps, color="tab:green", alpha=0.08)
    ax0.axvspan(-eps, eps, color="tab:red", alpha=0.08)
    ax0.set(
        xlabel="x",
        ylabel="activation",
        title=f"HTAF vs step; eps-band = {eps:g} (shaded)",
    )
    ax1.set(
        xlabel="x",
        ylabel="derivative (log scale)",
        ylim=(1e-12, 30),
        title="Derivative: HTAF tail decays like exp(-2 a0 |x|)",
    )
    ax0.legend(fontsize=7, loc="upper left")
    ax1.legend(fontsize=7, loc="lower center")
    fig.tight_layout()
    return fig


def plot_epsilon_bound(eps_values=(0.05, 0.1, 0.2)):
    """alpha0_min(alpha1) of Proposition 3.1 and the product limit."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for eps in eps_values:
        L = np.log((1 - eps) / eps)
        a1 = np.geomspace(L * 1.01, 500, 300)
        ax.loglog(a1, htaf_alpha0_min(eps, a1), label=f"eps={eps:g}")
    ax.set(xlabel="alpha1", ylabel="alpha0_min", title="Proposition 3.1")
    ax.legend()
    fig.tight_layout()
    return fig


def plot_interventions(curves, alphas):
    """Accuracy vs alpha; `curves` maps (activation, kind, definition) -> accs.

    One panel per kind (sign flip first); the colour is the activation, the
    line style and the marker the definition, so that the legend tells the two
    definitions of a kind apart.
    """
    present = {k for _, k, _ in curves}
    kinds = [k for k in _KIND_ORDER if k in present]
    kinds += sorted(present - set(_KIND_ORDER))
    fig, axes = plt.subplots(
        1, len(kinds), figsize=(5.5 * len(kinds), 4), squeeze=False
    )
    acts = sorted({a for a, _, _ in curves})
    colors = {a: f"C{i}" for i, a in enumerate(acts)}
    for ax, kind in zip(axes[0], kinds):
        defs = sorted({d for _, k, d in curves if k == kind})
        styles = {
            d: (_LINESTYLES[i % len(_LINESTYLES)], _MARKERS[i % len(_MARKERS)])
            for i, d in enumerate(defs)
        }
        for (act, k, d), accs in curves.items():
            if k != kind:
                continue
            ls, marker = styles[d]
            ax.plot(
                alphas,
                accs,
                ls=ls,
                marker=marker,
                ms=4,
                color=colors[act],
                label=f"{act}, {d}",
            )
        ax.axhline(0.1, color="grey", lw=0.8, ls=":")
        ax.set(
            xlabel="alpha (share of units intervened on)",
            ylabel="accuracy",
            title=f"intervention: {kind.replace('_', ' ')}",
            ylim=(0, 1.02),
        )
        # a longer handle than the default shows the dashes next to the marker
        ax.legend(fontsize=7, handlelength=3.5)
    fig.tight_layout()
    return fig


def plot_gate_dominance_width(rows):
    """Median Z1 against width; `rows` maps activation -> (widths, z1)."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for i, (act, (widths, z1)) in enumerate(sorted(rows.items())):
        ax.loglog(widths, z1, marker=_MARKERS[i % len(_MARKERS)], label=act)
    all_w = np.array(sorted({w for ws, _ in rows.values() for w in ws}), float)
    if len(all_w):
        ref = np.sqrt(all_w / all_w[0])
        first = [z[0] for _, z in rows.values() if len(z) and z[0] > 0]
        if first:
            ax.loglog(all_w, ref * max(first), "k:", lw=1, label="~ sqrt(width)")
    ax.set(
        xlabel="width of the last hidden layer",
        ylabel="median Z1",
        title="Gate dominance vs width",
    )
    if len(all_w):
        _ticks_at(ax.xaxis, all_w)
    _plain_log_labels(ax.yaxis)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_grid_search(alpha0, scores, stds):
    """Cross-validated accuracy along the manifold alpha0 * alpha1 = const."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.errorbar(alpha0, scores, yerr=stds, marker="o", capsize=3)
    ax.set_xscale("log")
    _ticks_at(ax.xaxis, alpha0)
    ax.set(
        xlabel="alpha0 (alpha1 = 22 / alpha0)",
        ylabel="CV accuracy",
        title="GridSearchCV on the 22-manifold",
    )
    fig.tight_layout()
    return fig
