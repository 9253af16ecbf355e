"""scikit-learn's MLPClassifier and MLPRegressor as a float64 torch module.

The one reader of ``coefs_`` and ``intercepts_``: SignCodeTransformer records
the signs of its hidden layers, the scorers intervene on them and read its
readout. Both see the same module, ``fc0, hidden0, ..., fc{L-1}, hidden{L-1},
out``, so a layer is called ``hidden{i}`` wherever a scikit-learn MLP is read.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.utils.validation import check_is_fitted
from torch import nn

__all__ = [
    "MLP_TYPES",
    "SIGN_PRESERVING_ACTIVATIONS",
    "IdentityActivation",
    "hidden_layer_names",
    "mlp_module",
]

MLP_TYPES = (MLPClassifier, MLPRegressor)

#: scikit-learn's hidden activations whose output has the sign of their input
#: (``sgn phi(z) = sgn z``), so that a hidden layer has a sign code: the one
#: allow-list of SignCodeTransformer and the scorers. "logistic" is not one
#: (its outputs are always positive).
SIGN_PRESERVING_ACTIVATIONS = ("identity", "relu", "tanh")


class IdentityActivation(nn.Identity):
    """scikit-learn's ``activation="identity"`` as an activation module.

    An ``nn.Identity`` that :func:`sksign.nn.activation_kind` takes for a
    sign-preserving activation (by its class name), so that the hidden layers
    of an identity MLP are found by ``layers="all"``/``"last"`` like those of
    a ReLU or tanh MLP.

    Examples
    --------
    >>> from sksign.nn import activation_kind
    >>> activation_kind(IdentityActivation())
    'sign'
    """


# scikit-learn's hidden activations, as torch modules
_ACTIVATIONS = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "identity": IdentityActivation,
    "logistic": nn.Sigmoid,
}


def hidden_layer_names(mlp) -> list[str]:
    """Names of the hidden layers of a fitted MLP: ``hidden0, hidden1, ...``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neural_network import MLPClassifier
    >>> X, y = np.random.RandomState(0).randn(20, 3), np.arange(20) % 2
    >>> mlp = MLPClassifier((4, 3), max_iter=300, random_state=0).fit(X, y)
    >>> hidden_layer_names(mlp)
    ['hidden0', 'hidden1']
    """
    check_is_fitted(mlp, "coefs_")
    return [f"hidden{i}" for i in range(len(mlp.coefs_) - 1)]


def _linear(W, b) -> nn.Linear:
    W = np.asarray(W, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    lin = nn.Linear(W.shape[0], W.shape[1], dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(W.T)))
        lin.bias.copy_(torch.from_numpy(b))
    return lin.requires_grad_(False)


def mlp_module(mlp, *, n_hidden: int | None = None, readout: bool = True):
    """The forward pass of a fitted scikit-learn MLP as a float64 ``nn.Sequential``.

    Parameters
    ----------
    mlp : MLPClassifier or MLPRegressor
        A fitted MLP.
    n_hidden : int, default=None
        Keep only the first `n_hidden` hidden layers (all of them by default).
    readout : bool, default=True
        Append the output layer as ``out`` (only with every hidden layer). It
        gives the values before scikit-learn's output activation: the logits
        of a classifier. A binary MLPClassifier has one output unit z; its
        ``out`` has two rows (0 and z), so that the logits are ``(0, z)`` and
        their argmax is the class the MLP predicts.

    Returns
    -------
    module : nn.Sequential
        ``fc{i}`` (``nn.Linear``) and ``hidden{i}`` (the activation module, whose
        input is the pre-activation ``z``) per hidden layer, then ``out``; in
        float64, with ``requires_grad=False``, on the CPU.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from sklearn.neural_network import MLPClassifier
    >>> X, y = np.random.RandomState(0).randn(20, 3), np.arange(20) % 3
    >>> mlp = MLPClassifier((4,), max_iter=300, random_state=0).fit(X, y)
    >>> module = mlp_module(mlp)
    >>> [name for name, _ in module.named_children()]
    ['fc0', 'hidden0', 'out']
    >>> logits = module(torch.from_numpy(X)).numpy()
    >>> bool((mlp.classes_[logits.argmax(1)] == mlp.predict(X)).all())
    True
    """
    check_is_fitted(mlp, "coefs_")
    total = len(mlp.coefs_) - 1
    n_hidden = total if n_hidden is None else n_hidden
    if not 0 <= n_hidden <= total:
        raise ValueError(f"n_hidden must be in [0, {total}]; got {n_hidden}.")
    if readout and n_hidden != total:
        raise ValueError("readout=True needs every hidden layer (n_hidden=None).")
    act = _ACTIVATIONS[mlp.activation]
    layers: list[tuple[str, nn.Module]] = []
    for i in range(n_hidden):
        layers.append((f"fc{i}", _linear(mlp.coefs_[i], mlp.intercepts_[i])))
        layers.append((f"hidden{i}", act()))
    if readout:
        W, b = mlp.coefs_[-1], mlp.intercepts_[-1]
        if isinstance(mlp, MLPClassifier) and W.shape[1] == 1:
            W = np.concatenate([np.zeros_like(W), W], axis=1)
            b = np.concatenate([np.zeros_like(b), b])
        layers.append(("out", _linear(W, b)))
    return nn.Sequential(OrderedDict(layers))
