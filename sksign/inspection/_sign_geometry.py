"""Sign geometry: the sign-kNN gap and leave-one-out purity in Hamming space.

The Sign Code paper: the sign gap ``Delta_sgn`` (test error of a k-NN that sees
only a layer's sign bits, minus the test error of the full net) and the
leave-one-out purity ``pi_k(x_i) = (1/k) sum_{j in N_k(x_i) minus i}
1[y_j = y_i]`` of the codes.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral

import numpy as np
import torch
from sklearn.utils import Bunch, check_consistent_length
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, column_or_1d

from sksign._adapter import as_torch_classifier, final_step_input
from sksign._compat import Interval, validate_params
from sksign.estimators import SignKNNClassifier
from sksign.kernels import check_n_bits, check_packed, pack_bits, packed_kneighbors
from sksign.nn import temporarily_eval
from sksign.transformers import SignCodeTransformer

__all__ = ["loo_purity", "sign_gap"]


@validate_params(
    {
        "codes": ["array-like"],
        "y": ["array-like"],
        "k": [Interval(Integral, 1, None, closed="left")],
        "packed": ["boolean"],
        "n_bits": [Interval(Integral, 1, None, closed="left"), None],
        "per_sample": ["boolean"],
    },
    prefer_skip_nested_validation=True,
)
def loo_purity(codes, y, k=10, *, packed=False, n_bits=None, per_sample=False):
    """Leave-one-out k-NN purity of bit codes in Hamming space.

    ``pi_k(x_i) = (1/k) * sum_{j in N_k(x_i)} 1[y_j = y_i]`` where ``N_k(x_i)``
    are the k nearest codes to ``x_i`` by Hamming distance among all samples
    except ``i`` itself (the Sign Code paper). Computed with one
    ``k + 1``-neighbour search (:func:`~sksign.metrics.pairwise.packed_kneighbors`),
    so no ``n x n`` matrix is built.

    Parameters
    ----------
    codes : array-like of shape (n_samples, n_bits) or (n_samples, n_bytes)
        Bit codes: 0/1, +-1 or bool (bit = value > 0), or packed uint8 rows
        when ``packed=True``.
    y : array-like of shape (n_samples,)
        Class labels.
    k : int, default=10
        Neighbours per sample; at most ``n_samples - 1``.
    packed : bool, default=False
        Whether `codes` are bit-packed (see
        :func:`~sksign.metrics.pairwise.pack_bits`).
    n_bits : int, default=None
        Bits per row of packed codes; None means ``8 * n_bytes``. Ignored
        when ``packed=False``.
    per_sample : bool, default=False
        Return the purity of every sample instead of the mean.

    Returns
    -------
    purity : float or ndarray of shape (n_samples,)
        Mean purity in [0, 1] (larger: more class-coherent sign
        neighbourhoods), or per-sample purities.

    Notes
    -----
    Only the sample's own index is left out: exact duplicates of a sample at
    other indices are legitimate neighbours (at distance 0). Ties in distance
    are broken by the smaller index, as a stable sort would.

    Examples
    --------
    >>> from sksign.inspection import loo_purity
    >>> loo_purity([[1, 1, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], [0, 0, 1, 1], k=1)
    1.0
    """
    y = column_or_1d(y, warn=True)
    check_classification_targets(y)
    if packed:
        P = check_packed(codes, "codes")
        n_bits = check_n_bits(n_bits, P.shape[1])
    else:
        codes = check_array(
            codes, dtype=None, input_name="codes", ensure_all_finite=False
        )
        P = pack_bits(codes, axis=1)
        n_bits = codes.shape[1]
    check_consistent_length(P, y)
    n = P.shape[0]
    if k > n - 1:
        raise ValueError(
            f"Expected k <= n_samples - 1, but k = {k}, n_samples = {n}: a "
            "leave-one-out purity needs k other samples."
        )
    _, ind = packed_kneighbors(P, P, k + 1, n_bits=n_bits)
    is_self = ind == np.arange(n)[:, None]
    # Move the sample itself (when found) to the end, keeping the (distance,
    # index) order of the others; rows without it drop their (k+1)-th entry.
    order = np.argsort(is_self, axis=1, kind="stable")
    neighbours = np.take_along_axis(ind, order, axis=1)[:, :k]
    purity = (y[neighbours] == y[:, None]).mean(axis=1)
    return purity if per_sample else float(purity.mean())


def sign_gap(
    estimator, X_train, y_train, X_test, y_test, *, n_neighbors=5, layers="last"
):
    """Sign gap: test error of sign-kNN on the codes minus that of the net.

    ``Delta_sgn = err(sign-kNN) - err(net)`` (the Sign Code paper). The codes are
    the sign bits (``1[z > 0]``) of `layers` of the fitted net, read with
    :class:`~sksign.transformers.SignCodeTransformer` (``prefit=True``); a
    :class:`~sksign.estimators.SignKNNClassifier` (normalised Hamming
    distance, majority vote, ties by training index) is fitted on the
    training codes and scored on the test codes.

    Parameters
    ----------
    estimator : estimator or nn.Module
        A fitted sksign/skorch classifier net, a bare ``nn.Module`` (logits
        out; labels are class indices), a fitted ``MLPClassifier`` or a
        ``Pipeline`` ending in one of these.
    X_train, y_train : array-like
        Reference set of the sign-kNN (usually the net's training data).
    X_test, y_test : array-like
        Evaluation data.
    n_neighbors : int, default=5
        Neighbours of the sign-kNN.
    layers : "last", "all" or list, default="last"
        Layers whose bits form the code (the paper uses the last hidden one).

    Returns
    -------
    result : Bunch
        ``gap`` (float, knn_error - net_error; small means the signs carry the
        net's decision), ``knn_error``, ``net_error``, ``knn_accuracy``,
        ``net_accuracy``, ``n_bits``, ``n_neighbors``, ``layers`` and
        ``definition`` ("sign_gap: err(sign-kNN on <layers> bits, k=...) -
        err(net)").

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.neural_network import MLPClassifier
    >>> from sksign.inspection import sign_gap
    >>> X, y = load_iris(return_X_y=True)
    >>> mlp = MLPClassifier((32,), max_iter=500, random_state=0).fit(X, y)
    >>> res = sign_gap(mlp, X, y, X, y, n_neighbors=3)
    >>> res.n_bits, res.layers
    (32, ['hidden0'])
    >>> bool(-1.0 <= res.gap <= 1.0)
    True
    """
    net = as_torch_classifier(estimator, X_test, y_test, caller="sign_gap", need_y=True)
    with temporarily_eval(net.module), torch.no_grad():
        pred = net.logits(net.X).argmax(axis=1)
    net_acc = float(np.mean(pred == net.y))

    final, Xtr = final_step_input(estimator, X_train)
    _, Xte = final_step_input(estimator, X_test)
    sct = SignCodeTransformer(final, layers=layers, prefit=True).fit(Xtr)
    codes_tr, codes_te = sct.transform(Xtr), sct.transform(Xte)
    knn = SignKNNClassifier(n_neighbors=n_neighbors).fit(codes_tr, np.asarray(y_train))
    knn_acc = float(knn.score(codes_te, np.asarray(y_test)))
    layer_txt = layers if isinstance(layers, str) else ",".join(map(str, layers))
    return Bunch(
        gap=(1.0 - knn_acc) - (1.0 - net_acc),
        knn_error=1.0 - knn_acc,
        net_error=1.0 - net_acc,
        knn_accuracy=knn_acc,
        net_accuracy=net_acc,
        n_bits=int(sct.n_bits_),
        n_neighbors=int(n_neighbors),
        layers=list(sct.layers_),
        definition=(
            f"sign_gap: err(sign-kNN on {layer_txt} bits, k={n_neighbors}) - err(net)"
        ),
    )
