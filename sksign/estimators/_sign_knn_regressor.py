"""sign-kNN regression: the mean target of the nearest bit codes."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from typing import ClassVar

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from sksign._compat import StrOptions, _fit_context, _get_weights
from sksign._docstrings import Substitution
from sksign._utils import is_batch_iterator, restore_state_on_error, stream_batches
from sksign.distributed import is_dask_array, sharded_predict
from sksign.estimators._sign_knn_base import SIGN_KNN_DOCS, SignKNNBase

__all__ = ["SignKNNRegressor"]


@Substitution(**SIGN_KNN_DOCS)
class SignKNNRegressor(RegressorMixin, SignKNNBase):
    """k-nearest-neighbours regression on bit codes, by normalised Hamming distance.

    The regression counterpart of
    :class:`~sksign.estimators.SignKNNClassifier`: every sample is a bit code
    (for instance the signs of a net's last hidden layer), the distance between
    two codes is the fraction of bits in which they differ
    (``metric="hamming"`` in scikit-learn), and a query takes the (weighted)
    mean target of its `n_neighbors` nearest training codes, as
    :class:`sklearn.neighbors.KNeighborsRegressor` does. The codes are packed
    64 bits to a word and compared with XOR + popcount by the same kernels as
    the classifier.

    Parameters
    ----------
    n_neighbors : int, default=5
        Number of neighbours averaged.

    weights : {{"uniform", "distance"}} or callable, default="uniform"
        "uniform": every neighbour counts once. "distance": neighbours count
        ``1 / distance``; when a query has neighbours at distance 0 it takes the
        mean target of those exact matches (as in scikit-learn). A callable
        gets an array of normalised distances of shape
        ``(n_queries, n_neighbors)`` and returns weights of the same shape.

    {search_params}

    approximate : bool, default=False
        If True, search an approximate faiss ``IndexBinaryHNSW`` (for millions of
        codes); neighbours may then differ from the exact ones. A query for
        which the graph yields fewer than `n_neighbors` codes is answered
        exactly. Needs faiss.

    batch_size : int, default=None
        Query rows handled at a time by `kneighbors` and `predict` (training
        rows by `fit`), which bounds their memory; None picks a size of about
        64 MiB of input. Results do not depend on it.

    n_jobs : int, default=None
        Number of threads for the search; None means 1 unless in a
        :func:`joblib.parallel_config` context, -1 means all processors.

    Attributes
    ----------
    {fitted_attributes}

    See Also
    --------
    sklearn.neighbors.KNeighborsRegressor : The same mean with
        ``metric="hamming"``, on a float per bit.
    SignKNNClassifier : The vote of the same neighbours.

    Notes
    -----
    Hamming distances are integers over ``n_bits_``, so ties are common. They are
    broken by the training index, exactly as in
    :class:`~sksign.estimators.SignKNNClassifier`: neighbours are ordered by
    ``(distance, index)`` and, at the k-th place, the training code that comes
    first wins.

    Targets are stored, and predictions returned, as float64; a 1-D `y` gives
    1-D predictions and a 2-D `y` (several outputs, or one column) 2-D ones.

    {code_checks}

    `predict` also accepts an iterator of arrays (a generator of row batches,
    say) and then returns a generator of per-batch predictions, so that memory
    stays that of one batch however many there are.

    Fitted on a :class:`dask.array.Array` (chunked by rows), the packed codes
    stay on the Dask workers, one shard per chunk, and `predict` gives exactly
    the single-machine means; Dask queries give lazy Dask results (see
    :ref:`distributed`).

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.estimators import SignKNNRegressor
    >>> X = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 1, 1], [0, 1, 1, 1]])
    >>> y = np.array([1.0, 2.0, 10.0, 20.0])
    >>> reg = SignKNNRegressor(n_neighbors=2).fit(X, y)
    >>> reg.predict([[1, 1, 0, 1], [0, 0, 1, 1]])
    array([ 1.5, 15. ])
    >>> SignKNNRegressor(2, weights="distance").fit(X, y).predict([[0, 0, 1, 1]])
    array([10.])
    """

    _parameter_constraints: ClassVar[dict] = {
        **SignKNNBase._parameter_constraints,
        "weights": [StrOptions({"uniform", "distance"}), callable],
    }

    # the methods that take an iterator of row batches
    _streaming: ClassVar[str] = "predict"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        # Continuous features are no codes (fit refuses them); read as one bit
        # each (x > 0), the common checks' data lose most of their information.
        tags.regressor_tags.poor_score = True
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Store the training codes, packed, and their targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Codes: 0/1, -1/+1 or bool values (bit = x > 0; any other value
            raises a ValueError), or, with ``packed=True``, uint8 rows of
            ``ceil(n_bits / 8)`` bytes of packed bits with zero padding.

        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Numeric targets, finite.

        Returns
        -------
        self : SignKNNRegressor
            The fitted estimator.

        Examples
        --------
        >>> from sksign.estimators import SignKNNRegressor
        >>> reg = SignKNNRegressor(n_neighbors=1).fit([[0, 1], [1, 1]], [0.5, 2.0])
        >>> reg.n_bits_, reg.n_samples_fit_
        (2, 2)
        """
        self._reject_iterator(X, "fit")
        # A failing fit leaves a fitted estimator exactly as it was.
        with restore_state_on_error(self):
            if is_dask_array(X):
                y = _check_targets(self._validate_sharded_y(X, y, multi_output=True))
                codes = self._fit_sharded(X, y.reshape(y.shape[0], -1))
            else:
                X, y = validate_data(
                    self,
                    X,
                    y,
                    dtype=None if self.packed else "numeric",
                    multi_output=True,
                )
                y = _check_targets(y)
                codes = self._fit_codes(X)
        self._store_codes(*codes)
        self._y = y
        return self

    def predict(self, X):
        """Predict the (weighted) mean target of the neighbours.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), or iterator of arrays
            Query codes, in the format of `fit`. An iterator of row batches
            (the codes a :class:`~sksign.transformers.SignCodeTransformer`
            yields for an iterator, say) gives a generator of their
            predictions, one array per batch, computed as it is consumed.

        Returns
        -------
        y : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            Predicted targets, float64, in the shape of the `y` of `fit`; for an
            iterator, a generator of such arrays.

        Examples
        --------
        >>> import numpy as np
        >>> from sksign.estimators import SignKNNRegressor
        >>> X = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1]])
        >>> y = np.array([[1.0, 0.0], [3.0, 0.0], [5.0, 1.0]])
        >>> reg = SignKNNRegressor(n_neighbors=2).fit(X, y)
        >>> reg.predict([[1, 0, 1]])
        array([[4. , 0.5]])
        >>> batches = iter([X[:2], X[2:]])
        >>> [p.shape for p in reg.predict(batches)]
        [(2, 2), (1, 2)]
        """
        check_is_fitted(self)
        if is_batch_iterator(X):
            return stream_batches(self._predict_array, X)
        if self._on_dask(X):
            return sharded_predict(
                self,
                X,
                "_predict_of_neighbors",
                np.float64,
                () if self._y.ndim == 1 else (self._y.shape[1],),
                public="predict",
                ravel=self._y.ndim == 1,
            )
        return self._predict_array(X)

    def _predict_array(self, X):
        n_queries, batches = self._query_words(X)
        n_outputs = 1 if self._y.ndim == 1 else self._y.shape[1]
        out = np.empty((n_queries, n_outputs), dtype=np.float64)
        y = self._y.reshape(self._y.shape[0], n_outputs)
        for rows, words in batches:
            counts, ind = self._search(words, self.n_neighbors)
            out[rows] = self._predict_of_neighbors(counts, y[ind])
        return out.ravel() if self._y.ndim == 1 else out

    def _predict_of_neighbors(self, counts, y_neighbors):
        """(n_queries, n_outputs) means of the targets `y_neighbors`, of shape
        (n_queries, n_neighbors, n_outputs), at `counts` differing bits."""
        weights = _get_weights(counts / self.n_bits_, self.weights)
        if weights is None:
            return y_neighbors.mean(axis=1)
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != counts.shape:
            raise ValueError(
                "The weights callable must return an array of the shape "
                f"of its distances, {counts.shape}; got {weights.shape}."
            )
        num = (y_neighbors * weights[:, :, None]).sum(axis=1)
        return num / weights.sum(axis=1)[:, None]

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination (R2) of the predictions.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query codes, in the format of `fit` (all rows at once).

        y : array-like of shape (n_queries,) or (n_queries, n_outputs)
            True targets.

        sample_weight : array-like of shape (n_queries,), default=None
            Sample weights.

        Returns
        -------
        score : float
            :func:`~sklearn.metrics.r2_score` of ``self.predict(X)`` with
            respect to `y` (uniform average over the outputs).

        Examples
        --------
        >>> from sksign.estimators import SignKNNRegressor
        >>> X, y = [[0, 0], [0, 1], [1, 1]], [0.0, 1.0, 2.0]
        >>> SignKNNRegressor(n_neighbors=1).fit(X, y).score(X, y)
        1.0
        """
        self._reject_iterator(X, "score")
        return super().score(X, y, sample_weight=sample_weight)


def _check_targets(y):
    """The validated targets as float64, with a clear error for non-numbers."""
    error = ValueError(
        "SignKNNRegressor needs numeric targets y (it is a regressor); got "
        f"dtype {y.dtype}. For class labels use SignKNNClassifier."
    )
    if y.dtype.kind not in "biufO":
        raise error
    try:
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise error from exc
    if not np.isfinite(y).all():
        raise ValueError("Input y contains NaN or infinity.")
    return y
