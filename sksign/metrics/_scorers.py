"""Causal sign diagnostics as scikit-learn scorers: interventions, gate dominance.

Every scorer has the signature ``scorer(estimator, X, y)``, returns a Python
float where larger is better, and never changes the model (hooks are removed
and every submodule's train/eval mode is restored, also after an exception).
It accepts a fitted sksign/skorch net (also mid-fit, inside skorch's
``EpochScoring``), a bare ``torch.nn.Module`` whose output is the logits,
scikit-learn's ``MLPClassifier``, and a ``Pipeline`` ending in one of these
(``X`` goes through ``estimator[:-1].transform`` first). The definitions are
those of the Sign Code paper.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import is_regressor
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import (
    Interval,
    StrOptions,
    validate_parameter_constraints,
    validate_params,
)
from sklearn.utils.validation import check_array, check_is_fitted
from skorch import NeuralNet, NeuralNetRegressor
from skorch.utils import data_from_dataset, to_numpy
from torch import nn
from torch.utils.data import Dataset

from sksign._sklearn_mlp import mlp_module
from sksign.nn.hooks import resolve_layers, temporarily_eval
from sksign.nn.interventions import (
    FLIPS,
    NOISES,
    magnitude_randomization,
    reference_magnitudes,
    sign_flip,
)

__all__ = [
    "GateDominanceReport",
    "gate_dominance",
    "gate_dominance_report",
    "intervention_score",
    "make_gate_dominance_scorer",
    "make_intervention_scorer",
]

KINDS = ("sign_flip", "magnitude")
# Rows sent through the net at once. Fixed (not the net's batch_size) so that a
# score depends only on the data, the model and random_state.
_BATCH_SIZE = 4096

_INTERVENTION_CONSTRAINTS: dict = {
    "estimator": "no_validation",
    "X": "no_validation",
    "y": "no_validation",
    "kind": [StrOptions(set(KINDS))],
    "alpha": [Interval(Real, 0, 1, closed="both")],
    "layers": "no_validation",
    "flip": [StrOptions(set(FLIPS))],
    "noise": [StrOptions(set(NOISES))],
    "n_repeats": [Interval(Integral, 1, None, closed="left")],
    "random_state": ["random_state"],
    "X_ref": "no_validation",
}


# ---------------------------------------------------------------------------
# Resolving an estimator into (module, rows, class indices)
# ---------------------------------------------------------------------------
@dataclass
class _Net:
    """What the scorers need from any supported estimator."""

    module: nn.Module
    X: np.ndarray
    X_ref: np.ndarray | None
    y: np.ndarray | None  # class indices into the logits; -1 for unknown labels
    device: torch.device
    dtype: torch.dtype
    # y was given as indices (bare modules, plain skorch nets, EpochScoring):
    # each must then index a logit
    y_are_indices: bool = False


_MLP_SIGN_PRESERVING = ("relu", "tanh")


def _mlp_module(mlp: MLPClassifier) -> nn.Module:
    check_is_fitted(mlp, "coefs_")
    if mlp.out_activation_ not in ("softmax", "logistic") or (
        mlp.out_activation_ == "logistic" and mlp.coefs_[-1].shape[1] != 1
    ):
        raise ValueError(
            "Only single-label MLPClassifier models are supported; got "
            f"out_activation_={mlp.out_activation_!r} with "
            f"{mlp.coefs_[-1].shape[1]} outputs."
        )
    if mlp.activation not in _MLP_SIGN_PRESERVING:
        raise ValueError(
            f"MLPClassifier(activation={mlp.activation!r}) is not a sign-preserving "
            "nonlinearity with a sign code to intervene on; use 'relu' or 'tanh'."
        )
    return mlp_module(mlp)


def _check_rows(X, dtype, name="X"):
    X = check_array(X, dtype=dtype, input_name=name, allow_nd=True)
    return np.ascontiguousarray(X)


def _class_indices(y, classes) -> np.ndarray:
    """Positions of the labels `y` in `classes` (-1 for a label not there)."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D class labels; got shape {y.shape}.")
    lookup = {label: i for i, label in enumerate(np.asarray(classes).tolist())}
    return np.array([lookup.get(v, -1) for v in y.tolist()], dtype=np.int64)


def _integer_targets(y, caller) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if (
        y.ndim != 1
        or y.dtype.kind not in "biuf"
        or (y.dtype.kind == "f" and not np.all(np.isfinite(y) & (y == np.round(y))))
    ):
        raise ValueError(
            f"{caller} on a bare nn.Module (or inside skorch's EpochScoring) needs "
            "y as integer class indices into the logits; got "
            f"y of dtype {y.dtype} and shape {y.shape}."
        )
    return y.astype(np.int64)


def _module_device_dtype(module: nn.Module):
    for p in module.parameters():
        return p.device, p.dtype
    return torch.device("cpu"), torch.float32


def _is_regressor(estimator) -> bool:
    try:
        return bool(is_regressor(estimator))
    except Exception:  # objects without scikit-learn tags
        return False


def _resolve(estimator, X, y, X_ref, caller, need_y) -> _Net:
    """Unwrap a Pipeline / skorch net / MLPClassifier / nn.Module."""
    if isinstance(estimator, Pipeline):
        check_is_fitted(estimator)
        head = estimator[:-1]
        X = head.transform(X)
        if X_ref is not None:
            X_ref = head.transform(X_ref)
        estimator = estimator[-1]
    if isinstance(estimator, NeuralNetRegressor) or (
        not isinstance(estimator, nn.Module) and _is_regressor(estimator)
    ):
        raise TypeError(
            f"{caller} needs a classifier (logits over classes); got the regressor "
            f"{type(estimator).__name__}."
        )
    labels_are_indices = False
    if isinstance(estimator, NeuralNet):
        check_is_fitted(estimator, "module_")
        module = estimator.module_
        device, dtype = _module_device_dtype(module)
        if isinstance(X, Dataset):
            # skorch's EpochScoring passes the (valid or train) Dataset and the
            # targets the net trains on, i.e. class indices.
            try:
                X_ds, y_ds = data_from_dataset(X)
            except AttributeError as exc:
                raise TypeError(
                    f"{caller} reads X and y from a skorch Dataset (as passed by "
                    f"EpochScoring); got a {type(X).__name__} without them."
                ) from exc
            X = to_numpy(X_ds) if isinstance(X_ds, torch.Tensor) else X_ds
            # Take y from the Dataset itself when it has one: with caching,
            # EpochScoring(on_train=True) passes y in the shuffled batch order.
            if y_ds is not None:
                y = to_numpy(y_ds) if isinstance(y_ds, torch.Tensor) else y_ds
            labels_are_indices = True
            X = _check_rows(X, np.float32)
        elif hasattr(estimator, "_as_rows"):
            X = estimator._as_rows(X, reset=False)
        else:
            X = _check_rows(X, np.float32)
        if X_ref is not None:
            X_ref = (
                estimator._as_rows(X_ref, reset=False)
                if hasattr(estimator, "_as_rows")
                else _check_rows(X_ref, np.float32, "X_ref")
            )
        # sksign nets predict their original labels (label_encoder_); a plain
        # skorch classifier trains on y as logit indices and predicts indices
        maps_labels = hasattr(estimator, "label_encoder_")
        classes = (
            estimator.classes_ if maps_labels and not labels_are_indices else None
        )
    elif isinstance(estimator, MLPClassifier):
        module = _mlp_module(estimator)
        device, dtype = torch.device("cpu"), torch.float64
        X = _check_rows(X, np.float64)
        if X.shape[1] != estimator.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but MLPClassifier is expecting "
                f"{estimator.n_features_in_} features as input."
            )
        if X_ref is not None:
            X_ref = _check_rows(X_ref, np.float64, "X_ref")
            if X_ref.shape[1] != estimator.n_features_in_:
                raise ValueError(
                    f"X_ref has {X_ref.shape[1]} features, but MLPClassifier is "
                    f"expecting {estimator.n_features_in_} features as input."
                )
        classes = estimator.classes_
    elif isinstance(estimator, nn.Module):
        module = estimator
        device, dtype = _module_device_dtype(module)
        np_dtype = np.float64 if dtype == torch.float64 else np.float32
        X = _check_rows(X, np_dtype)
        if X_ref is not None:
            X_ref = _check_rows(X_ref, np_dtype, "X_ref")
        classes = None
    else:
        raise TypeError(
            f"{caller} needs a fitted sksign/skorch net, a torch nn.Module, a "
            "scikit-learn MLPClassifier or a Pipeline ending in one; got "
            f"{type(estimator).__name__}."
        )
    if y is None:
        if need_y:
            raise ValueError(f"{caller} requires y (the true class labels).")
        y_idx = None
    else:
        if len(y) != len(X):
            raise ValueError(
                "Found input variables with inconsistent numbers of samples: "
                f"X has {len(X)}, y has {len(y)}."
            )
        y_arr = np.asarray(y)
        if y_arr.dtype.kind in "fc" and not np.all(np.isfinite(y_arr)):
            raise ValueError(f"{caller}: y contains NaN or infinity.")
        y_idx = (
            _integer_targets(y, caller)
            if classes is None
            else _class_indices(y, classes)
        )
    return _Net(
        module,
        X,
        X_ref,
        y_idx,
        torch.device(device),
        dtype,
        y_are_indices=y is not None and classes is None,
    )


def _batches(net: _Net, X: np.ndarray):
    for start in range(0, len(X), _BATCH_SIZE):
        chunk = torch.as_tensor(X[start : start + _BATCH_SIZE])
        yield chunk.to(device=net.device, dtype=net.dtype)


def _logits(net: _Net, X: np.ndarray) -> np.ndarray:
    out = []
    for xb in _batches(net, X):
        o = net.module(xb)
        out.append(o.detach().to("cpu", torch.float64).numpy())
    if not out:
        raise ValueError("X has 0 samples.")
    logits = np.concatenate(out)
    if not np.isfinite(logits).all():
        raise ValueError(
            "The net's output contains NaN or infinity on X, so no accuracy or "
            "margin can be read from it; check the input and the weights."
        )
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError(
            "The scorers need a classifier whose output has shape (n_samples, "
            f"n_classes) with n_classes >= 2; got an output of shape {logits.shape}."
        )
    if net.y_are_indices and X is net.X and len(net.y):
        bad = net.y[(net.y < 0) | (net.y >= logits.shape[1])]
        if bad.size:
            raise ValueError(
                f"y holds class indices into the {logits.shape[1]} logits of the "
                f"net, but contains {sorted(set(bad.tolist()))[:5]}; y must be in "
                f"[0, {logits.shape[1] - 1}] (a plain skorch net or bare module "
                "predicts logit indices)."
            )
    return logits


# ---------------------------------------------------------------------------
# Interventions
# ---------------------------------------------------------------------------
def _definition(kind, flip, noise) -> str:
    return f"sign_flip/{flip}" if kind == "sign_flip" else f"magnitude/{noise}"


@validate_params(_INTERVENTION_CONSTRAINTS, prefer_skip_nested_validation=True)
def intervention_score(
    estimator,
    X,
    y,
    *,
    kind="sign_flip",
    alpha=0.2,
    layers="all",
    flip="literal",
    noise="standard",
    n_repeats=1,
    random_state=None,
    X_ref=None,
):
    """Accuracy of a classifier under a sign or magnitude intervention.

    The Sign Code paper's causal test. Hidden units of
    sign-preserving activations split as ``h = S * M`` with ``S = +1 iff
    z > 0`` (else -1) and ``M = |h|``; the intervention corrupts one channel
    in the chosen layers, propagating forward, and the score is the accuracy
    of the corrupted net. The definition used is ``f"{kind}/{flip}"`` or
    ``f"{kind}/{noise}"``: "sign_flip/literal", "sign_flip/gate",
    "magnitude/standard" or "magnitude/matched".

    Parameters
    ----------
    estimator : estimator or nn.Module
        A fitted sksign/skorch classifier net, a bare ``nn.Module`` that maps
        rows to logits (then `y` holds class indices), a fitted
        ``MLPClassifier``, or a ``Pipeline`` ending in one of these.
    X : array-like of shape (n_samples, n_features)
        Samples (raw input of the Pipeline).
    y : array-like of shape (n_samples,)
        True labels.
    kind : {"sign_flip", "magnitude"}, default="sign_flip"
        "sign_flip": with probability `alpha` per unit and per sample, flip
        the unit's sign (see `flip`). "magnitude": projected magnitude
        randomisation: a clean pass caches the signs; in a second pass each
        magnitude is replaced with probability `alpha` by noise (see `noise`)
        and the sign is forced back to the clean one, ``h = S_clean * M``.
        Step-like units (HTAF, STE, scaled sigmoid) carry no magnitude and
        keep their clean output under "magnitude".
    alpha : float in [0, 1], default=0.2
        Corruption probability per unit and per sample.
    layers : "all", "last", list of str or type, default="all"
        Activation modules to corrupt (see
        :func:`sksign.nn.hooks.resolve_layers`). The hidden layers of a
        scikit-learn ``MLPClassifier`` are called ``hidden0``, ``hidden1``, ...
        (as in :class:`~sksign.transformers.SignCodeTransformer`).
    flip : {"literal", "gate"}, default="literal"
        Sign-flip definition: "literal" ``h -> -h`` (magnitude kept, an
        inactive ReLU unit stays 0); "gate" ``h -> phi(-z)`` (an inactive
        ReLU unit opens with ``|z|``).
    noise : {"standard", "matched"}, default="standard"
        Magnitude noise: "standard" ``|eta|``, ``eta ~ N(0, 1)``; "matched"
        ``|eta|`` rescaled per unit and per sign to mean ``mu_j(S) =
        E[M_j | S_j = S]`` measured on `X_ref` (a unit that never takes sign S
        there gets ``mu_j(S) = 0``).
    n_repeats : int, default=1
        Independent corruptions averaged; each costs at most two forward
        passes over X.
    random_state : int, RandomState instance or None, default=None
        Seeds the corruption (a ``torch.Generator`` per repeat; the global
        torch RNG is untouched). The same value gives the same score.
    X_ref : array-like of shape (n_ref, n_features), default=None
        Reference data for ``noise="matched"``; None uses X.

    Returns
    -------
    score : float
        Mean accuracy under the intervention, in [0, 1] (larger is better).

    See Also
    --------
    make_intervention_scorer : Fix the settings for GridSearchCV and friends.
    sksign.nn.interventions.sign_flip : The context manager behind "sign_flip".
    sksign.nn.interventions.magnitude_randomization : The one behind "magnitude".

    Notes
    -----
    Inside skorch's ``EpochScoring`` the scorer receives the net's Dataset: it
    then reads X and the encoded targets (class indices) from the Dataset
    (ignoring the cached, possibly shuffled `y`) and compares them with the
    logits' argmax; elsewhere `y` holds the original labels. With ``alpha=0`` both
    kinds return the clean accuracy exactly.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sksign.estimators import HTAFNetClassifier
    >>> from sksign.metrics._scorers import intervention_score
    >>> X, y = load_digits(return_X_y=True)
    >>> net = HTAFNetClassifier((32,), activation="relu", max_epochs=2,
    ...                         random_state=0).fit(X / 16, y)
    >>> s = intervention_score(net, X / 16, y, kind="sign_flip", random_state=0)
    >>> 0.0 <= s <= 1.0
    True
    """
    net = _resolve(estimator, X, y, X_ref, "intervention_score", need_y=True)
    named = resolve_layers(net.module, layers)
    seeds = check_random_state(random_state).randint(
        np.iinfo(np.int32).max, size=n_repeats
    )
    scores = []
    with temporarily_eval(net.module), torch.no_grad():
        mu = None
        if kind == "magnitude" and noise == "matched":
            ref = net.X if net.X_ref is None else net.X_ref
            mu, _ = reference_magnitudes(net.module, named, _batches(net, ref))
        for seed in seeds:
            gen = torch.Generator(device=net.device).manual_seed(int(seed))
            if kind == "sign_flip":
                ctx = sign_flip(
                    net.module, named, alpha=alpha, flip=flip, generator=gen
                )
            else:
                ctx = magnitude_randomization(
                    net.module, named, alpha=alpha, noise=noise, mu=mu, generator=gen
                )
            with ctx:
                pred = _logits(net, net.X).argmax(axis=1)
            scores.append(float(np.mean(pred == net.y)))
    return float(np.mean(scores))


class _InterventionScorer:
    """``scorer(estimator, X, y)`` with fixed :func:`intervention_score` settings."""

    def __init__(self, kwargs):
        self._kwargs = dict(kwargs)
        # skorch's EpochScoring names a callable scoring by its __name__.
        self.__name__ = "intervention_" + _definition(
            self._kwargs.get("kind", "sign_flip"),
            self._kwargs.get("flip", "literal"),
            self._kwargs.get("noise", "standard"),
        ).replace("/", "_")

    @property
    def definition(self) -> str:
        """The intervention definition, e.g. "sign_flip/literal"."""
        return _definition(
            self._kwargs.get("kind", "sign_flip"),
            self._kwargs.get("flip", "literal"),
            self._kwargs.get("noise", "standard"),
        )

    def __call__(self, estimator, X, y=None, **kwargs):
        return intervention_score(estimator, X, y, **self._kwargs)

    def __repr__(self):
        args = "".join(f", {k}={v!r}" for k, v in self._kwargs.items())
        return f"make_intervention_scorer(intervention_score{args})"


_SCORER_KEYS = ("kind", "alpha", "layers", "flip", "noise", "n_repeats",
                "random_state", "X_ref")  # fmt: skip


def make_intervention_scorer(**kwargs):
    """A scorer with fixed :func:`intervention_score` settings.

    Parameters
    ----------
    **kwargs
        Any keyword argument of :func:`intervention_score` (``kind``,
        ``alpha``, ``layers``, ``flip``, ``noise``, ``n_repeats``,
        ``random_state``, ``X_ref``); validated now.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``, picklable, usable as
        ``GridSearchCV(scoring={"flip": scorer, ...})``, in ``cross_validate``
        and as ``skorch.callbacks.EpochScoring(scorer, lower_is_better=False)``.
        Its ``definition`` attribute names the intervention.

    Examples
    --------
    >>> make_intervention_scorer(kind="magnitude", noise="matched", alpha=0.5)
    make_intervention_scorer(intervention_score, kind='magnitude', \
noise='matched', alpha=0.5)
    """
    unknown = sorted(set(kwargs) - set(_SCORER_KEYS))
    if unknown:
        raise TypeError(
            f"make_intervention_scorer got unexpected keyword argument(s) {unknown}; "
            f"valid ones are {list(_SCORER_KEYS)}."
        )
    validate_parameter_constraints(
        {k: _INTERVENTION_CONSTRAINTS[k] for k in kwargs},
        kwargs,
        caller_name="make_intervention_scorer",
    )
    return _InterventionScorer(kwargs)


# ---------------------------------------------------------------------------
# Gate dominance (Theorem 6.1)
# ---------------------------------------------------------------------------
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


def _capture_last(net: _Net, X, act, readout, layer, readout_name):
    """(z, h) of `act` on X, checking the readout reads h directly."""
    zs, hs, mismatch = [], [], []
    cur: dict = {}

    def _act_pre(_m, inp):
        cur["z"] = inp[0].detach().clone()

    def _act_post(_m, _inp, out):
        cur["h"] = out.detach().clone()

    def _read_pre(_m, inp):
        h = cur.get("h")
        u = inp[0].detach()
        if not torch.isfinite(u).all():
            raise ValueError(
                f"layer {layer!r} produced NaN or infinite values, so gate "
                "dominance is undefined; check the input and the weights."
            )
        if (
            h is None
            or h.reshape(len(h), -1).shape != u.shape
            or not torch.equal(h.reshape(len(h), -1), u)
        ):
            mismatch.append(True)

    handles = [
        act.register_forward_pre_hook(_act_pre),
        act.register_forward_hook(_act_post),
        readout.register_forward_pre_hook(_read_pre),
    ]
    try:
        for xb in _batches(net, X):
            cur.clear()
            out = net.module(xb)
            if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
                raise ValueError(
                    "The net's output contains NaN or infinity on X; gate "
                    "dominance needs finite logits."
                )
            if "h" not in cur:
                raise ValueError(f"layer {layer!r} was not called in the forward pass.")
            zs.append(cur["z"].reshape(len(xb), -1).to("cpu", torch.float64).numpy())
            hs.append(cur["h"].reshape(len(xb), -1).to("cpu", torch.float64).numpy())
    finally:
        for h in handles:
            h.remove()
    if mismatch:
        raise ValueError(
            f"gate dominance needs the readout Linear {readout_name!r} to read the "
            f"output of the last hidden layer {layer!r} directly (logits = W h + b); "
            "something else lies between them in this net."
        )
    return np.concatenate(zs), np.concatenate(hs)


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
    """
    net = _resolve(estimator, X, None, X_ref, "gate_dominance", need_y=False)
    ((layer, act),) = resolve_layers(net.module, "last").items()
    readout_name, readout = _readout(net.module, layer)
    with temporarily_eval(net.module), torch.no_grad():
        z, h = _capture_last(net, net.X, act, readout, layer, readout_name)
        if net.X_ref is None:
            z_ref, h_ref = z, h
        else:
            z_ref, h_ref = _capture_last(
                net, net.X_ref, act, readout, layer, readout_name
            )
    W = readout.weight.detach().to("cpu", torch.float64).numpy()
    b = (
        readout.bias.detach().to("cpu", torch.float64).numpy()
        if readout.bias is not None
        else np.zeros(W.shape[0])
    )
    n, d = h.shape
    C = W.shape[0]
    if W.shape[1] != d:
        raise ValueError(
            f"readout {readout_name!r} has {W.shape[1]} inputs but layer {layer!r} "
            f"has {d} units."
        )
    if C < 2:
        raise ValueError(
            f"gate dominance needs a classifier with >= 2 logits; the readout "
            f"{readout_name!r} has {C} output."
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
        readout=readout_name,
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
    """
    return _GateDominanceScorer(X_ref)
