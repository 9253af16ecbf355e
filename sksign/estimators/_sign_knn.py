"""sign-kNN: k nearest neighbours on bit codes under the normalised Hamming distance."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from typing import ClassVar

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from sksign._compat import _fit_context, _get_weights
from sksign._docstrings import Substitution
from sksign._utils import is_batch_iterator, restore_state_on_error, stream_batches
from sksign.distributed import is_dask_array, sharded_predict
from sksign.estimators._sign_knn_base import SIGN_KNN_DOCS, SignKNNBase

__all__ = ["SignKNNClassifier"]


@Substitution(**SIGN_KNN_DOCS)
class SignKNNClassifier(ClassifierMixin, SignKNNBase):
    """k-nearest-neighbours vote on bit codes, by normalised Hamming distance.

    The sign-kNN of the Sign Code paper: every sample is a bit code (for instance
    the signs of a net's last hidden layer), the distance between two codes is
    the fraction of bits in which they differ (``metric="hamming"`` in
    scikit-learn), and a query takes the (weighted) majority label of its
    `n_neighbors` nearest training codes. The codes are packed 64 bits to a word
    and compared with XOR + popcount, so the fitted model holds about
    ``n_samples * n_bits / 8`` bytes and never a float per bit.

    Parameters
    ----------
    n_neighbors : int, default=5
        Number of neighbours that vote.

    weights : {{"uniform", "distance"}}, default="uniform"
        "uniform": every neighbour counts once. "distance": neighbours count
        ``1 / distance``; when a query has neighbours at distance 0 they get all
        the weight, shared equally (as in scikit-learn).

    {search_params}

    approximate : bool, default=False
        If True, search an approximate faiss ``IndexBinaryHNSW`` (for millions of
        codes); neighbours may then differ from the exact ones. A query for
        which the graph yields fewer than `n_neighbors` codes (`n_neighbors`
        near the number of codes, many duplicates) is answered exactly. Needs
        faiss.

    batch_size : int, default=None
        Query rows handled at a time by `kneighbors`, `predict` and
        `predict_proba` (training rows by `fit`), which bounds their memory;
        None picks a size of about 64 MiB of input. Results do not depend on it.

    n_jobs : int, default=None
        Number of threads for the search; None means 1 unless in a
        :func:`joblib.parallel_config` context, -1 means all processors.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.

    {fitted_attributes}

    See Also
    --------
    sklearn.neighbors.KNeighborsClassifier : The same vote with
        ``metric="hamming"``, on a float per bit.
    sksign.kernels.packed_kneighbors : The search on packed codes.

    Notes
    -----
    Hamming distances are integers over ``n_bits_``, so ties are common. They are
    broken by the training index: neighbours are ordered by ``(distance, index)``
    and, at the k-th place, the training code that comes first wins. The
    distances always equal scikit-learn's; the indices (and so a vote) can differ
    from scikit-learn's only where it breaks such a tie another way. A tie in the
    vote goes to the class that comes first in `classes_`.

    With ``algorithm="faiss"`` and ``approximate=False`` the results are the same
    as with the popcount kernel, including the tie order.

    {code_checks}

    `predict` and `predict_proba` also accept an iterator of arrays (a generator
    of row batches, say) and then return a generator of per-batch results, so
    that memory stays that of one batch however many there are; a
    :class:`numpy.memmap` is read in row batches, without a float copy.

    Fitted on a :class:`dask.array.Array` (chunked by rows), the packed codes
    stay on the Dask workers, one shard per chunk, and every query method gives
    exactly the answers of the estimator fitted on the same codes as one NumPy
    array; Dask queries give lazy Dask results (see :ref:`distributed`).

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.estimators import SignKNNClassifier
    >>> X = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 1, 1], [0, 1, 1, 1]])
    >>> y = np.array([0, 0, 1, 1])
    >>> clf = SignKNNClassifier(n_neighbors=1).fit(X, y)
    >>> clf.predict([[1, 0, 0, 0], [0, 0, 0, 1]])
    array([0, 1])
    >>> clf.kneighbors([[1, 0, 0, 0]], n_neighbors=2)
    (array([[0.25, 0.5 ]]), array([[0, 1]]))
    """

    # the methods that take an iterator of row batches
    _streaming: ClassVar[str] = "predict and predict_proba"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Continuous features are no codes (fit refuses them); read as one bit
        # each (x > 0), the common checks' Gaussian blobs lose most of their
        # information.
        tags.classifier_tags.poor_score = True
        return tags

    # ---------------------------------------------------------------------- API
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Store the training codes, packed, and their labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Codes: 0/1, -1/+1 or bool values (bit = x > 0; any other value
            raises a ValueError), or, with ``packed=True``, uint8 rows of
            ``ceil(n_bits / 8)`` bytes of packed bits with zero padding.

        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : SignKNNClassifier
            The fitted estimator.

        Examples
        --------
        >>> from sksign.estimators import SignKNNClassifier
        >>> clf = SignKNNClassifier(n_neighbors=1).fit([[0, 1], [1, 1]], ["a", "b"])
        >>> clf.classes_, clf.n_bits_
        (array(['a', 'b'], dtype='<U1'), 2)
        """
        self._reject_iterator(X, "fit")
        # A failing fit leaves a fitted estimator exactly as it was.
        with restore_state_on_error(self):
            if is_dask_array(X):
                y = self._validate_sharded_y(X, y)
                check_classification_targets(y)
                classes, y_encoded = np.unique(y, return_inverse=True)
                codes = self._fit_sharded(X, y_encoded.astype(np.intp, copy=False))
            else:
                X, y = validate_data(
                    self, X, y, dtype=None if self.packed else "numeric"
                )
                check_classification_targets(y)
                codes = self._fit_codes(X)
                classes, y_encoded = np.unique(y, return_inverse=True)
        self._store_codes(*codes)
        self.classes_ = classes
        self._y = y_encoded.astype(np.intp)
        return self

    def predict_proba(self, X):
        """Class probabilities: the (weighted) share of each class among neighbours.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), or iterator of arrays
            Query codes, in the format of `fit`. An iterator of row batches
            gives a generator of their probabilities, one array per batch,
            computed as it is consumed.

        Returns
        -------
        proba : ndarray of shape (n_queries, n_classes)
            Class probabilities, in the order of `classes_`; for an iterator,
            a generator of such arrays.

        Examples
        --------
        >>> from sksign.estimators import SignKNNClassifier
        >>> X, y = [[0, 0, 0], [0, 0, 1], [1, 1, 1]], [0, 0, 1]
        >>> SignKNNClassifier(n_neighbors=3).fit(X, y).predict_proba([[0, 1, 1]])
        array([[0.66666667, 0.33333333]])
        """
        check_is_fitted(self)
        if is_batch_iterator(X):
            return stream_batches(self._predict_proba_array, X)
        if self._on_dask(X):
            return sharded_predict(
                self,
                X,
                "_proba_of_neighbors",
                np.float64,
                (len(self.classes_),),
                public="predict_proba",
            )
        return self._predict_proba_array(X)

    def _predict_proba_array(self, X):
        n_queries, batches = self._query_words(X)
        proba = np.empty((n_queries, len(self.classes_)))
        for rows, words in batches:
            proba[rows] = self._proba_of_words(words)
        return proba

    def _proba_of_words(self, words):
        counts, ind = self._search(words, self.n_neighbors)
        return self._proba_of_neighbors(counts, self._y[ind])

    def _proba_of_neighbors(self, counts, y_neighbors):
        """Class shares of neighbours at `counts` differing bits, of classes
        `y_neighbors` (encoded), both of shape (n_queries, n_neighbors)."""
        weights = _get_weights(counts / self.n_bits_, self.weights)
        n_queries, n_classes = y_neighbors.shape[0], len(self.classes_)
        flat = (np.arange(n_queries)[:, None] * n_classes + y_neighbors).ravel()
        proba = np.bincount(
            flat,
            weights=None if weights is None else weights.ravel(),
            minlength=n_queries * n_classes,
        ).reshape(n_queries, n_classes)
        normalizer = proba.sum(axis=1, keepdims=True)
        normalizer[normalizer == 0.0] = 1.0
        return proba / normalizer

    def predict(self, X):
        """Predict the majority (or weighted majority) label of the neighbours.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), or iterator of arrays
            Query codes, in the format of `fit`. An iterator of row batches
            (the codes a :class:`~sksign.transformers.SignCodeTransformer`
            yields for an iterator, say) gives a generator of their labels, one
            array per batch, computed as it is consumed.

        Returns
        -------
        y : ndarray of shape (n_queries,)
            Predicted labels; a tie in the vote goes to the first class in
            `classes_`; for an iterator, a generator of such arrays.

        Examples
        --------
        >>> import numpy as np
        >>> from sksign.estimators import SignKNNClassifier
        >>> X, y = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 1]]), [0, 0, 1]
        >>> clf = SignKNNClassifier(n_neighbors=1).fit(X, y)
        >>> clf.predict([[1, 1, 0]])
        array([1])
        >>> [labels.tolist() for labels in clf.predict(iter([X[:2], X[2:]]))]
        [[0, 0], [1]]
        """
        check_is_fitted(self)
        if is_batch_iterator(X):
            return stream_batches(self._predict_array, X)
        if self._on_dask(X):
            return sharded_predict(
                self,
                X,
                "_labels_of_neighbors",
                self.classes_.dtype,
                (),
                public="predict",
            )
        return self._predict_array(X)

    def _predict_array(self, X):
        n_queries, batches = self._query_words(X)
        out = np.empty(n_queries, dtype=self.classes_.dtype)
        for rows, words in batches:
            proba = self._proba_of_words(words)
            out[rows] = self.classes_[proba.argmax(axis=1)]
        return out

    def _labels_of_neighbors(self, counts, y_neighbors):
        """Voted labels (see :meth:`_proba_of_neighbors`)."""
        proba = self._proba_of_neighbors(counts, y_neighbors)
        return self.classes_[proba.argmax(axis=1)]

    def score(self, X, y, sample_weight=None):
        """Mean accuracy on the given test codes and labels.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query codes, in the format of `fit` (all rows at once).

        y : array-like of shape (n_queries,)
            True labels.

        sample_weight : array-like of shape (n_queries,), default=None
            Sample weights.

        Returns
        -------
        score : float
            Mean accuracy of ``self.predict(X)`` with respect to `y`.

        Examples
        --------
        >>> from sksign.estimators import SignKNNClassifier
        >>> X, y = [[0, 0, 0], [0, 0, 1], [1, 1, 1]], [0, 0, 1]
        >>> SignKNNClassifier(n_neighbors=1).fit(X, y).score(X, y)
        1.0
        """
        self._reject_iterator(X, "score")
        return super().score(X, y, sample_weight=sample_weight)
