"""Gate dominance of the last hidden layer (the Sign Code paper, Theorem 6.1).

:func:`gate_dominance_from_activations` is the computation, on numpy arrays;
:func:`gate_dominance_report` reads a fitted net (through
:mod:`sksign._adapter`), captures its last hidden layer with
:func:`sksign.nn.capture_activations` and hands the arrays to it;
:func:`gate_dominance` is the scorer (the median Z1) and
:func:`make_gate_dominance_scorer` fixes its reference data.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.utils.validation import check_array, column_or_1d
from torch import nn

from sksign._adapter import as_torch_classifier
from sksign._compat import validate_params
from sksign.nn import capture_activations, resolve_layers, temporarily_eval

__all__ = [
    "GateDominanceReport",
    "gate_dominance",
    "gate_dominance_from_activations",
    "gate_dominance_report",
    "make_gate_dominance_scorer",
]

_GATE_DEFINITION = (
    "gate_dominance/theorem6.1: last hidden layer h = S * M (S = +1 iff z > 0), "
    "mu_j(s) = E[M_j | S_j = s] on X_ref (0 for a sign a unit never takes), "
    "f~_c = sum_j w_cj S_j mu_j(S_j) + b_c, R_c = f_c - f~_c, yhat = argmax f~, "
    "r_c^2 = mean of (R_yhat - R_c)^2 over the samples sharing yhat, "
    "Z1 = min_{c != yhat} |f~_yhat - f~_c| / r_c"
)


@dataclass(repr=False)
class GateDominanceReport:
    """Everything :func:`gate_dominance_report` computes.

    Attributes
    ----------
    definition : str
        The definitions used (the Sign Code paper, Theorem 6.1).
    layer : str
        Name of the last hidden (activation) layer.
    readout : str
        Name of the readout ``nn.Linear`` (W, b).
    d : int
        Width of the last hidden layer.
    C : int
        Number of classes (logits).
    mu : ndarray of shape (d, 2)
        ``mu[:, 0] = mu_j(-1)``, ``mu[:, 1] = mu_j(+1)``, on X_ref.
    mu_counts : ndarray of shape (d, 2)
        Reference samples with each sign; a unit with count 0 for a sign has
        ``mu = 0`` for it.
    delta_bar : float
        ``(1/d') sum_j (mu_j(+1) - mu_j(-1)) / (mu_j(+1) + mu_j(-1))`` over the
        d' units with ``mu_j(+1) + mu_j(-1) > 0`` (NaN if none).
    signs : ndarray of shape (n_samples, d), dtype int8
        ``S`` in {-1, +1}.
    magnitudes : ndarray of shape (n_samples, d)
        ``M = |h|``.
    logits : ndarray of shape (n_samples, C)
        ``f = W h + b`` (float64).
    pure_sign_logits : ndarray of shape (n_samples, C)
        ``f~``.
    residuals : ndarray of shape (n_samples, C)
        ``R``; ``logits == pure_sign_logits + residuals`` to float precision.
    y_pred_sign : ndarray of shape (n_samples,)
        ``yhat = argmax f~`` (class indices).
    y_pred : ndarray of shape (n_samples,)
        ``argmax f`` (class indices).
    margins : ndarray of shape (n_samples, C)
        ``M~_{yhat,c} = f~_yhat - f~_c`` (0 at ``c = yhat``).
    r2 : ndarray of shape (n_samples, C)
        ``r_c^2(x)`` (0 at ``c = yhat``).
    Z1 : ndarray of shape (n_samples,)
        Gate-dominance score per sample (inf where every ``r_c = 0 < |M~|``,
        0 where some ``M~ = 0``).
    median_Z1 : float
    agreement : float
        Rate of ``argmax f == argmax f~``.
    eps_1 : float
        ``1 - agreement``.
    bound : float
        ``(C - 1) * E[Z1^-2]``; Theorem 6.1 says ``eps_1 <= bound``.
    union_bound : float
        ``E[min(1, sum_{c != yhat} r_c^2 / M~_{yhat,c}^2)]``, also ``>= eps_1``.
    m : ndarray of shape (n_samples, C)
        ``m_c = M~_{yhat,c} / d``: the mean per-unit vote of the pure-sign
        margin (NaN at ``c = yhat``).
    sigma : ndarray of shape (n_samples, C)
        ``sigma_c = r_c / sqrt(d)``: the per-unit residual spread (NaN at
        ``c = yhat``). With these, ``Z1 = min_c |m_c| / sigma_c * sqrt(d)``
        exactly; width helps when m_c stays O(1) and sigma_c bounded.

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.metrics import gate_dominance_from_activations
    >>> z = np.array([[1.0, -1.0], [2.0, -2.0], [-1.0, 1.0], [-3.0, 3.0]])
    >>> report = gate_dominance_from_activations(
    ...     z, np.maximum(z, 0), np.eye(2), [0.0, 0.5], layer="act0", readout="out"
    ... )
    >>> report
    GateDominanceReport(layer='act0', d=2, C=2, n_samples=4, median_Z1=2.25, \
delta_bar=1, agreement=1, eps_1=0, bound=0.205, union_bound=0.205)
    >>> report.Z1
    array([2. , 2. , 2.5, 2.5])
    """

    definition: str
    layer: str
    readout: str
    d: int
    C: int
    mu: np.ndarray
    mu_counts: np.ndarray
    delta_bar: float
    signs: np.ndarray
    magnitudes: np.ndarray
    logits: np.ndarray
    pure_sign_logits: np.ndarray
    residuals: np.ndarray
    y_pred_sign: np.ndarray
    y_pred: np.ndarray
    margins: np.ndarray
    r2: np.ndarray
    Z1: np.ndarray
    median_Z1: float
    agreement: float
    eps_1: float
    bound: float
    union_bound: float
    m: np.ndarray = field(default=None)
    sigma: np.ndarray = field(default=None)

    def __repr__(self):
        return (
            f"GateDominanceReport(layer={self.layer!r}, d={self.d}, C={self.C}, "
            f"n_samples={len(self.Z1)}, median_Z1={self.median_Z1:.4g}, "
            f"delta_bar={self.delta_bar:.4g}, agreement={self.agreement:.4g}, "
            f"eps_1={self.eps_1:.4g}, bound={self.bound:.4g}, "
            f"union_bound={self.union_bound:.4g})"
        )


def _mu_table(z, h):
    pos = z > 0
    M = np.abs(h)
    counts = np.stack([(~pos).sum(0), pos.sum(0)], axis=1)
    sums = np.stack([(M * ~pos).sum(0), (M * pos).sum(0)], axis=1)
    mu = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    return mu, counts


def _safe_ratio(num, den, zero_zero):
    """num / den elementwise with x / 0 = inf (x > 0) and 0 / 0 = zero_zero."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den
    out = np.where((den == 0) & (num > 0), np.inf, out)
    return np.where((den == 0) & (num == 0), zero_zero, out)


@validate_params(
    {
        "z": ["array-like"],
        "h": ["array-like"],
        "W": ["array-like"],
        "b": ["array-like", None],
        "z_ref": ["array-like", None],
        "h_ref": ["array-like", None],
        "layer": [str],
        "readout": [str],
    },
    prefer_skip_nested_validation=True,
)
def gate_dominance_from_activations(
    z, h, W, b=None, *, z_ref=None, h_ref=None, layer="hidden", readout="readout"
):
    """Gate dominance (Theorem 6.1) from a layer's captured activations.

    The computation behind :func:`gate_dominance_report`, on numpy arrays: the
    last hidden layer's pre-activations `z` and activations ``h = phi(z)``
    (width d, ``h = S * M`` with ``S = +1 iff z > 0`` and ``M = |h|``) and its
    readout ``f = W h + b``. With ``mu_j(s) = E[M_j | S_j = s]`` on the
    reference activations, the logits split exactly as ``f = f~ + R``::

        f~_c = sum_j w_cj S_j mu_j(S_j) + b_c       (pure-sign logit)
        R_c  = sum_j w_cj S_j (M_j - mu_j(S_j))     (magnitude residual)

    With ``yhat = argmax f~``, the pure-sign margins ``M~_{yhat,c} = f~_yhat -
    f~_c`` and ``r_c^2(x)`` the mean of ``(R_yhat - R_c)^2`` over the samples
    that share x's ``yhat`` (uncentred), the score is ``Z1(x) = min_{c !=
    yhat} |M~_{yhat,c}(x)| / r_c(x)``.

    Parameters
    ----------
    z : array-like of shape (n_samples, d)
        Pre-activations of the last hidden layer.
    h : array-like of shape (n_samples, d)
        Its activations, the readout's input.
    W : array-like of shape (C, d)
        Readout weights (one row per logit, as ``nn.Linear.weight``).
    b : array-like of shape (C,), default=None
        Readout bias; None means zeros.
    z_ref, h_ref : array-like of shape (n_ref, d), default=None
        Activations on which ``mu`` is estimated (the paper uses the training
        set); None uses `z` and `h`. Give both or neither.
    layer : str, default="hidden"
        Name of the hidden layer, recorded in the report.
    readout : str, default="readout"
        Name of the readout, recorded in the report.

    Returns
    -------
    report : GateDominanceReport
        See its attributes; ``report.definition`` names the definitions.

    See Also
    --------
    gate_dominance_report : The same on a fitted net and data.

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.metrics import gate_dominance_from_activations
    >>> z = np.array([[1.0, -1.0], [2.0, -2.0], [-1.0, 1.0], [-3.0, 3.0]])
    >>> report = gate_dominance_from_activations(z, np.maximum(z, 0), np.eye(2),
    ...                                          [0.0, 0.5])
    >>> report.mu
    array([[0. , 1.5],
           [0. , 2. ]])
    >>> report.Z1, report.median_Z1
    (array([2. , 2. , 2.5, 2.5]), 2.25)
    """
    z = check_array(z, dtype=np.float64, input_name="z")
    h = check_array(h, dtype=np.float64, input_name="h")
    if z.shape != h.shape:
        raise ValueError(
            f"z and h must have the same shape; got {z.shape} and {h.shape}."
        )
    if (z_ref is None) != (h_ref is None):
        raise ValueError("z_ref and h_ref must be given together (or neither).")
    if z_ref is None:
        z_ref, h_ref = z, h
    else:
        z_ref = check_array(z_ref, dtype=np.float64, input_name="z_ref")
        h_ref = check_array(h_ref, dtype=np.float64, input_name="h_ref")
        if z_ref.shape != h_ref.shape or z_ref.shape[1] != z.shape[1]:
            raise ValueError(
                f"z_ref and h_ref must have the shape (n_ref, {z.shape[1]}); got "
                f"{z_ref.shape} and {h_ref.shape}."
            )
    W = check_array(W, dtype=np.float64, input_name="W")
    b = np.zeros(W.shape[0]) if b is None else column_or_1d(b, dtype=np.float64)
    if b.shape[0] != W.shape[0]:
        raise ValueError(
            f"b has {b.shape[0]} entries but W has {W.shape[0]} rows (logits)."
        )
    n, d = h.shape
    C = W.shape[0]
    if W.shape[1] != d:
        raise ValueError(
            f"readout {readout!r} has {W.shape[1]} inputs but layer {layer!r} "
            f"has {d} units."
        )
    if C < 2:
        raise ValueError(
            f"gate dominance needs a classifier with >= 2 logits; the readout "
            f"{readout!r} has {C} output."
        )
    mu, counts = _mu_table(z_ref, h_ref)
    denom = mu[:, 0] + mu[:, 1]
    ok = denom > 0
    delta_bar = (
        float(np.mean((mu[ok, 1] - mu[ok, 0]) / denom[ok])) if ok.any() else math.nan
    )

    pos = z > 0
    S = np.where(pos, 1.0, -1.0)
    M = np.abs(h)
    mu_S = np.where(pos, mu[:, 1], mu[:, 0])
    f_tilde = (S * mu_S) @ W.T + b
    R = (S * (M - mu_S)) @ W.T
    f = h @ W.T + b

    yhat = f_tilde.argmax(axis=1)
    y_full = f.argmax(axis=1)
    rows = np.arange(n)
    margins = f_tilde[rows, yhat][:, None] - f_tilde
    D = R[rows, yhat][:, None] - R
    r2 = np.zeros((n, C))
    for g in np.unique(yhat):
        sel = yhat == g
        r2[sel] = np.mean(D[sel] ** 2, axis=0)
    other = np.ones((n, C), dtype=bool)
    other[rows, yhat] = False

    ratio = _safe_ratio(np.abs(margins), np.sqrt(r2), zero_zero=0.0)
    Z1 = np.where(other, ratio, np.inf).min(axis=1)
    with np.errstate(divide="ignore"):
        inv2 = np.where(Z1 == np.inf, 0.0, 1.0 / Z1**2)
    terms = _safe_ratio(r2, margins**2, zero_zero=np.inf)
    union = np.minimum(1.0, np.where(other, terms, 0.0).sum(axis=1))
    agreement = float(np.mean(yhat == y_full))
    m = np.where(other, margins / d, np.nan)
    sigma = np.where(other, np.sqrt(r2) / math.sqrt(d), np.nan)
    return GateDominanceReport(
        definition=_GATE_DEFINITION,
        layer=layer,
        readout=readout,
        d=int(d),
        C=int(C),
        mu=mu,
        mu_counts=counts,
        delta_bar=delta_bar,
        signs=S.astype(np.int8),
        magnitudes=M,
        logits=f,
        pure_sign_logits=f_tilde,
        residuals=R,
        y_pred_sign=yhat,
        y_pred=y_full,
        margins=margins,
        r2=r2,
        Z1=Z1,
        median_Z1=float(np.median(Z1)),
        agreement=agreement,
        eps_1=1.0 - agreement,
        bound=float((C - 1) * np.mean(inv2)),
        union_bound=float(np.mean(union)),
        m=m,
        sigma=sigma,
    )


def _readout(module: nn.Module, layer: str):
    """The last nn.Linear in ``named_modules()`` order after `layer`."""
    names = [n for n, _ in module.named_modules()]
    pos = names.index(layer)
    linears = [
        (n, m)
        for i, (n, m) in enumerate(module.named_modules())
        if i > pos and isinstance(m, nn.Linear)
    ]
    if not linears:
        raise ValueError(
            f"gate dominance needs a readout nn.Linear after the last hidden layer "
            f"{layer!r}; {type(module).__name__} has none."
        )
    return linears[-1]


def _pooled_positions(h: torch.Tensor, u: torch.Tensor) -> int:
    """P when `u` is the global average over the P positions of the map `h`
    (``(N, C, *spatial)`` -> ``(N, C)``), 1 when `u` is `h` itself, else 0."""
    if h.shape == u.shape and torch.equal(h, u):
        return 1
    if h.ndim > 2 and u.ndim == 2 and u.shape == h.shape[:2]:
        pooled = h.flatten(2).to(torch.float64).mean(2)
        if torch.allclose(pooled, u.to(torch.float64), rtol=1e-5, atol=1e-6):
            return h[0, 0].numel()
    return 0


def _capture_last(net, X, layer, act, readout_name, readout):
    """(z, h, P) of the activation `act` on X.

    The readout must read h directly (P = 1) or its global average over P
    positions (a conv map through average pooling), which is the linear map
    ``W / P`` on every position of the flattened map.
    """
    zs, hs = [], []
    positions = set()
    with capture_activations(
        {layer: act, readout_name: readout}, inputs=True, outputs=True
    ) as cap:
        for xb in net.batches(X):
            cap.clear()
            out = net.module(xb)
            reads = cap.inputs[readout_name]
            if any(not torch.isfinite(u).all() for u in reads):
                raise ValueError(
                    f"layer {layer!r} produced NaN or infinite values, so gate "
                    "dominance is undefined; check the input and the weights."
                )
            if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
                raise ValueError(
                    "The net's output contains NaN or infinity on X; gate "
                    "dominance needs finite logits."
                )
            if not cap.outputs[layer]:
                raise ValueError(f"layer {layer!r} was not called in the forward pass.")
            h_map = cap.outputs[layer][-1]
            positions.update(_pooled_positions(h_map, u) for u in reads)
            z = cap.inputs[layer][-1].reshape(len(xb), -1)
            h = h_map.reshape(len(xb), -1)
            zs.append(z.to("cpu", torch.float64).numpy())
            hs.append(h.to("cpu", torch.float64).numpy())
    if len(positions) != 1 or 0 in positions:
        raise ValueError(
            f"gate dominance needs the readout Linear {readout_name!r} to read the "
            f"output of the last hidden layer {layer!r} directly (logits = W h + b) "
            "or its global average pool; something else lies between them in "
            "this net."
        )
    return np.concatenate(zs), np.concatenate(hs), positions.pop()


def gate_dominance_report(estimator, X, y=None, *, X_ref=None):
    """Gate dominance of the last hidden layer (Theorem 6.1), in full.

    On the last hidden layer (width d, ``h = S * M``, ``S = +1 iff z > 0``)
    and its readout Linear (W, b), with ``mu_j(s) = E[M_j | S_j = s]`` on
    `X_ref`, the logits split exactly as ``f = f~ + R``::

        f~_c = sum_j w_cj S_j mu_j(S_j) + b_c       (pure-sign logit)
        R_c  = sum_j w_cj S_j (M_j - mu_j(S_j))     (magnitude residual)

    With ``yhat = argmax f~``, the pure-sign margins ``M~_{yhat,c} = f~_yhat -
    f~_c`` and ``r_c^2(x)`` the mean of ``(R_yhat - R_c)^2`` over the
    evaluated samples that share x's ``yhat`` (uncentred), the score is
    ``Z1(x) = min_{c != yhat} |M~_{yhat,c}(x)| / r_c(x)``; the disagreement
    rate ``eps_1`` of ``argmax f`` and ``argmax f~`` satisfies
    ``eps_1 <= (C - 1) E[Z1^-2]`` and ``eps_1 <= E[min(1, sum_c r_c^2 /
    M~^2)]``.

    A conv net whose readout reads the global average pool of the last
    activation's map (ResNet-18, WideResNet) is the same linear readout on
    the flattened map: every unit is one channel at one position
    (``d = C * H * W``) and its weights are ``W[:, channel] / (H * W)``.

    Parameters
    ----------
    estimator : estimator or nn.Module
        As in :func:`intervention_score`. For an ``MLPClassifier`` the
        readout is ``coefs_[-1]``, ``intercepts_[-1]`` (a binary one gets the
        logits ``(0, z)``).
    X : array-like of shape (n_samples, n_features)
        Samples evaluated.
    y : None
        Ignored; present for the scorer signature.
    X_ref : array-like of shape (n_ref, n_features), default=None
        Data on which ``mu`` is estimated (the paper uses the training set);
        None uses X.

    Returns
    -------
    report : GateDominanceReport
        See its attributes; ``report.definition`` names the definitions.

    See Also
    --------
    gate_dominance_from_activations : The same from captured activations.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from torch import nn
    >>> from sksign.metrics import gate_dominance_report
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    >>> X = np.random.RandomState(0).randn(50, 4)
    >>> report = gate_dominance_report(net, X)
    >>> report.layer, report.readout, report.d, report.C
    ('1', '2', 16, 3)
    >>> bool(np.allclose(report.logits, report.pure_sign_logits + report.residuals))
    True
    """
    net = as_torch_classifier(estimator, X, X_ref=X_ref, caller="gate_dominance")
    ((layer, act),) = resolve_layers(net.module, "last").items()
    readout_name, readout = _readout(net.module, layer)
    z_ref = h_ref = None
    with temporarily_eval(net.module), torch.no_grad():
        z, h, n_pos = _capture_last(net, net.X, layer, act, readout_name, readout)
        if net.X_ref is not None:
            z_ref, h_ref, _ = _capture_last(
                net, net.X_ref, layer, act, readout_name, readout
            )
    W = readout.weight.detach().to("cpu", torch.float64).numpy()
    if n_pos > 1:  # logits = W mean_p h[:, :, p] = (W / P) on the flattened map
        W = np.repeat(W, n_pos, axis=1) / n_pos
    b = (
        readout.bias.detach().to("cpu", torch.float64).numpy()
        if readout.bias is not None
        else None
    )
    return gate_dominance_from_activations(
        z, h, W, b, z_ref=z_ref, h_ref=h_ref, layer=layer, readout=readout_name
    )


def gate_dominance(estimator, X, y=None, *, X_ref=None):
    """Median gate-dominance score Z1 on X (larger: signs dominate more).

    A scorer (``scorer(estimator, X, y)``); see :func:`gate_dominance_report`
    for the definitions (Theorem 6.1 of the Sign Code paper, with
    ``yhat = argmax f~`` and ``r_c^2`` the uncentred second moment of the
    residual margin over the samples sharing ``yhat``).

    Parameters
    ----------
    estimator : estimator or nn.Module
        As in :func:`intervention_score`.
    X : array-like of shape (n_samples, n_features)
        Samples.
    y : None
        Ignored.
    X_ref : array-like, default=None
        Data for ``mu_j(s)``; None uses X.

    Returns
    -------
    score : float
        ``median(Z1)`` (may be inf when the residuals vanish, e.g. step nets).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.neural_network import MLPClassifier
    >>> from sksign.metrics import gate_dominance
    >>> X, y = load_iris(return_X_y=True)
    >>> mlp = MLPClassifier((16,), max_iter=500, random_state=0).fit(X, y)
    >>> gate_dominance(mlp, X) > 0
    True
    """
    return gate_dominance_report(estimator, X, y, X_ref=X_ref).median_Z1


class _GateDominanceScorer:
    """``scorer(estimator, X, y)`` computing :func:`gate_dominance` with X_ref."""

    __name__ = "gate_dominance"

    def __init__(self, X_ref):
        self.X_ref = X_ref

    def __call__(self, estimator, X, y=None, **kwargs):
        return gate_dominance(estimator, X, y, X_ref=self.X_ref)

    def __repr__(self):
        ref = "None"
        if self.X_ref is not None:
            ref = f"<array of shape {np.shape(self.X_ref)}>"
        return f"make_gate_dominance_scorer(gate_dominance, X_ref={ref})"


def make_gate_dominance_scorer(*, X_ref=None):
    """A :func:`gate_dominance` scorer with fixed reference data.

    Parameters
    ----------
    X_ref : array-like of shape (n_ref, n_features), default=None
        Data for ``mu_j(s)`` (e.g. the training set); None uses the scored X.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``, picklable.

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.metrics import make_gate_dominance_scorer
    >>> make_gate_dominance_scorer(X_ref=np.zeros((10, 4)))
    make_gate_dominance_scorer(gate_dominance, X_ref=<array of shape (10, 4)>)
    """
    return _GateDominanceScorer(X_ref)
