"""Interventions on the sign code as scikit-learn scorers.

:func:`intervention_score` is the Sign Code paper's causal test: the accuracy
of a classifier when the signs (or the magnitudes) of its hidden units are
corrupted; :func:`make_intervention_scorer` fixes its settings for
``GridSearchCV``, ``cross_validate`` and skorch's ``EpochScoring``. Every
scorer has the signature ``scorer(estimator, X, y)``, returns a float where
larger is better and never changes the model (hooks are removed and every
submodule's train/eval mode is restored, also after an exception). The
estimator is read through :mod:`sksign._adapter`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils import check_random_state

from sksign._adapter import as_torch_classifier
from sksign._compat import (
    Interval,
    StrOptions,
    validate_parameter_constraints,
    validate_params,
)
from sksign.nn import (
    magnitude_randomization,
    reference_magnitudes,
    resolve_layers,
    sign_flip,
    temporarily_eval,
)
from sksign.nn.hooks import split_calls
from sksign.nn.interventions import FLIPS, NOISES

__all__ = ["intervention_score", "make_intervention_scorer"]

KINDS = ("sign_flip", "magnitude")

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
        (as in :class:`~sksign.transformers.SignCodeTransformer`). A name with
        a call suffix, as a fitted ``SignCodeTransformer``'s ``layers_`` name
        the calls of a module called several times per forward pass
        (``"layer2.1.relu#1"``), corrupts that call only.
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
    >>> from sksign.metrics import intervention_score
    >>> X, y = load_digits(return_X_y=True)
    >>> net = HTAFNetClassifier((32,), activation="relu", max_epochs=2,
    ...                         random_state=0).fit(X / 16, y)
    >>> s = intervention_score(net, X / 16, y, kind="sign_flip", random_state=0)
    >>> 0.0 <= s <= 1.0
    True
    """
    net = as_torch_classifier(
        estimator, X, y, X_ref=X_ref, caller="intervention_score", need_y=True
    )
    # call keys ("act#1") choose calls; magnitudes are referenced per call
    plain, _ = split_calls(net.module, layers)
    named = resolve_layers(net.module, plain)
    seeds = check_random_state(random_state).randint(
        np.iinfo(np.int32).max, size=n_repeats
    )
    scores = []
    with temporarily_eval(net.module), torch.no_grad():
        mu = None
        if kind == "magnitude" and noise == "matched":
            ref = net.X if net.X_ref is None else net.X_ref
            mu, _ = reference_magnitudes(net.module, named, net.batches(ref))
        for seed in seeds:
            gen = torch.Generator(device=net.device).manual_seed(int(seed))
            if kind == "sign_flip":
                ctx = sign_flip(
                    net.module, layers, alpha=alpha, flip=flip, generator=gen
                )
            else:
                ctx = magnitude_randomization(
                    net.module, layers, alpha=alpha, noise=noise, mu=mu, generator=gen
                )
            with ctx:
                pred = net.logits(net.X).argmax(axis=1)
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
