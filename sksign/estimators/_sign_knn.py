"""sign-kNN: k nearest neighbours on bit codes under the normalised Hamming distance."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import gen_batches
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from sksign._compat import Interval, StrOptions, _fit_context, _get_weights
from sksign._utils import (
    is_batch_iterator,
    reject_batch_iterator,
    restore_state_on_error,
    stream_batches,
)
from sksign.estimators._sign_knn_faiss import (
    build_faiss_index,
    deserialize_faiss_index,
    faiss_search,
    serialize_faiss_index,
)
from sksign.kernels import (
    as_bits,
    auto_batch_size,
    check_n_bits,
    effective_n_threads,
    packed_to_words,
    words_hamming_distances,
    words_kneighbors,
)

__all__ = ["SignKNNClassifier"]


# the methods that take an iterator of row batches
_STREAMING = "predict and predict_proba"


class SignKNNClassifier(ClassifierMixin, BaseEstimator):
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

    weights : {"uniform", "distance"}, default="uniform"
        "uniform": every neighbour counts once. "distance": neighbours count
        ``1 / distance``; when a query has neighbours at distance 0 they get all
        the weight, shared equally (as in scikit-learn).

    packed : bool, default=False
        If False, `X` holds one value per bit (0/1, +-1 or bool; the bit is
        ``x > 0``). If True, `X` holds packed codes of dtype uint8, 8 bits per
        byte, most significant bit first (see
        :func:`sksign.kernels.pack_bits`).

    n_bits : int, default=None
        With ``packed=True``, the number of bits per row (padding bits past it
        are ignored); None means ``8 * n_bytes``. With ``packed=False`` it must be
        None or the number of features.

    algorithm : {"auto", "popcount", "faiss"}, default="auto"
        Search backend. "popcount" is the built-in numba kernel, "faiss" a faiss
        binary index (``IndexBinaryFlat``, which gives the same neighbours in the
        same order). "auto" is "popcount", or "faiss" when `approximate` is True.

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

    n_features_in_ : int
        Number of columns of `X` seen in `fit` (bytes when ``packed=True``).

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during `fit`, when `X` has string column names.

    n_bits_ : int
        Number of bits per code.

    n_samples_fit_ : int
        Number of training codes.

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

    `predict` and `predict_proba` also accept an iterator of arrays (a generator
    of row batches, say) and then return a generator of per-batch results, so
    that memory stays that of one batch however many there are; a
    :class:`numpy.memmap` is read in row batches, without a float copy.

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

    _parameter_constraints: ClassVar[dict] = {
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "weights": [StrOptions({"uniform", "distance"})],
        "packed": ["boolean"],
        "n_bits": [Interval(Integral, 1, None, closed="left"), None],
        "algorithm": [StrOptions({"auto", "popcount", "faiss"})],
        "approximate": ["boolean"],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        n_neighbors=5,
        *,
        weights="uniform",
        packed=False,
        n_bits=None,
        algorithm="auto",
        approximate=False,
        batch_size=None,
        n_jobs=None,
    ):
        self.n_neighbors = n_neighbors
        self.weights = weights
        self.packed = packed
        self.n_bits = n_bits
        self.algorithm = algorithm
        self.approximate = approximate
        self.batch_size = batch_size
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Continuous features are reduced to one bit each (x > 0), which loses
        # most of the information of the common checks' Gaussian blobs.
        tags.classifier_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ helpers
    def _validate_X(self, X, reset):
        """Validated `X` (no float copy of integer or bool input)."""
        return validate_data(
            self,
            X,
            reset=reset,
            dtype=None if self.packed else "numeric",
        )

    def _encode(self, X, n_bits):
        """uint64 words of the rows of a validated `X` (a batch)."""
        if self.packed:
            if X.dtype != np.uint8:
                raise TypeError(
                    "With packed=True, X must hold bit-packed codes of dtype uint8 "
                    f"(see sksign.metrics.pairwise.pack_bits); got dtype {X.dtype}."
                )
            return packed_to_words(X, n_bits)
        return packed_to_words(np.packbits(as_bits(X, "X"), axis=1), n_bits)

    def _encode_all(self, X, n_bits):
        """Words of all rows of `X`, converted batch by batch."""
        words = np.empty((X.shape[0], (n_bits + 63) // 64), dtype=np.uint64)
        for rows in self._batches(X):
            words[rows] = self._encode(X[rows], n_bits)
        return words

    def _batches(self, X):
        row_bytes = X.shape[1] * X.dtype.itemsize
        return gen_batches(X.shape[0], auto_batch_size(self.batch_size, row_bytes))

    def _search(self, words, n_neighbors):
        """(counts, indices) of the nearest training codes of query words."""
        if self._faiss_index is None:
            return words_kneighbors(
                words, self._fit_words, n_neighbors, n_jobs=self.n_jobs
            )
        dist, ind = faiss_search(
            self._faiss_index, words, n_neighbors, effective_n_threads(self.n_jobs)
        )
        # HNSW pads a query's list with index -1 when its graph walk finds
        # fewer than k codes (k near n_samples_fit_, many duplicate codes);
        # such queries get the exact answer instead.
        short = np.flatnonzero((ind < 0).any(axis=1))
        if short.size:
            dist[short], ind[short] = words_kneighbors(
                words[short], self._fit_words, n_neighbors, n_jobs=self.n_jobs
            )
        return dist, ind

    def _check_n_neighbors(self, n_neighbors, n_samples, query_is_train):
        if n_neighbors is None:
            n_neighbors = self.n_neighbors
        elif isinstance(n_neighbors, bool) or not isinstance(n_neighbors, Integral):
            raise TypeError(
                f"n_neighbors must be an int; got {type(n_neighbors).__name__} "
                f"{n_neighbors!r}."
            )
        elif n_neighbors <= 0:
            raise ValueError(f"Expected n_neighbors > 0. Got {n_neighbors}")
        n_fit = self.n_samples_fit_
        if n_neighbors + query_is_train > n_fit:
            inequality = "<" if query_is_train else "<="
            raise ValueError(
                f"Expected n_neighbors {inequality} n_samples_fit, but "
                f"n_neighbors = {n_neighbors}, n_samples_fit = {n_fit}, "
                f"n_samples = {n_samples}"
            )
        return int(n_neighbors)

    # ---------------------------------------------------------------------- API
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Store the training codes, packed, and their labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Codes: 0/1, +-1 or bool values (bit = x > 0), or, with
            ``packed=True``, uint8 rows of packed bits.

        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : SignKNNClassifier
            The fitted estimator.
        """
        reject_batch_iterator(X, "SignKNNClassifier.fit", _STREAMING)
        # A failing fit leaves a fitted estimator exactly as it was.
        with restore_state_on_error(self):
            X, y = validate_data(self, X, y, dtype=None if self.packed else "numeric")
            check_classification_targets(y)
            if self.packed:
                n_bits = check_n_bits(self.n_bits, X.shape[1])
            else:
                if self.n_bits is not None and self.n_bits != X.shape[1]:
                    raise ValueError(
                        f"n_bits={self.n_bits} does not match X, which has "
                        f"{X.shape[1]} features (one per bit, packed=False); "
                        "leave n_bits=None or use packed=True."
                    )
                n_bits = X.shape[1]
            if self.approximate and self.algorithm == "popcount":
                raise ValueError(
                    "approximate=True needs algorithm='faiss' (or 'auto'); got "
                    "algorithm='popcount', which is exact."
                )
            use_faiss = self.algorithm == "faiss" or self.approximate
            words = self._encode_all(X, n_bits)
            faiss_index = (
                build_faiss_index(words, self.approximate) if use_faiss else None
            )
            classes, y_encoded = np.unique(y, return_inverse=True)
        self.classes_ = classes
        self.n_bits_ = n_bits
        self.n_samples_fit_ = words.shape[0]
        self._y = y_encoded.astype(np.intp)
        self._fit_words = words
        self._faiss_index = faiss_index
        return self

    def kneighbors(self, X=None, n_neighbors=None, return_distance=True):
        """Find the k nearest training codes of each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            Query codes, in the format of `fit`. None: the training codes, each
            without itself (as in scikit-learn).

        n_neighbors : int, default=None
            Number of neighbours; None means the `n_neighbors` parameter.

        return_distance : bool, default=True
            Whether to return the distances.

        Returns
        -------
        neigh_dist : ndarray of shape (n_queries, n_neighbors)
            Normalised Hamming distances, ascending; only when
            `return_distance` is True.

        neigh_ind : ndarray of shape (n_queries, n_neighbors)
            Indices of the neighbours in the training set; ties are ordered by
            index.
        """
        check_is_fitted(self)
        reject_batch_iterator(X, "SignKNNClassifier.kneighbors", _STREAMING)
        query_is_train = X is None
        if not query_is_train:
            X = self._validate_X(X, reset=False)
        n_queries = self.n_samples_fit_ if query_is_train else X.shape[0]
        n_neighbors = self._check_n_neighbors(n_neighbors, n_queries, query_is_train)
        if query_is_train:
            dist, ind = self._search_train(n_neighbors)
        else:
            dist = np.empty((n_queries, n_neighbors), dtype=np.int64)
            ind = np.empty((n_queries, n_neighbors), dtype=np.int64)
            for rows in self._batches(X):
                words = self._encode(X[rows], self.n_bits_)
                dist[rows], ind[rows] = self._search(words, n_neighbors)
        if return_distance:
            return dist / self.n_bits_, ind
        return ind

    def _search_train(self, n_neighbors):
        """Neighbours of every training code, each without itself."""
        n = self.n_samples_fit_
        step = auto_batch_size(self.batch_size, 8 * self._fit_words.shape[1])
        dist = np.empty((n, n_neighbors), dtype=np.int64)
        ind = np.empty((n, n_neighbors), dtype=np.int64)
        for rows in gen_batches(n, step):
            d, i = self._search(self._fit_words[rows], n_neighbors + 1)
            is_self = i == np.arange(rows.start, rows.stop)[:, None]
            # Drop the code itself, or, where duplicates with smaller indices
            # push it past the k + 1 found, the last one.
            is_self[~is_self.any(axis=1), -1] = True
            keep = ~is_self
            dist[rows] = d[keep].reshape(-1, n_neighbors)
            ind[rows] = i[keep].reshape(-1, n_neighbors)
        return dist, ind

    def radius_neighbors(
        self, X=None, radius=None, return_distance=True, sort_results=False
    ):
        """Find the training codes within a normalised Hamming distance.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            Query codes, in the format of `fit`. None: the training codes, each
            without itself.

        radius : float
            Largest normalised distance (in [0, 1]) returned; required, since
            the estimator has no default radius.

        return_distance : bool, default=True
            Whether to return the distances.

        sort_results : bool, default=False
            If True, sort each query's neighbours by ``(distance, index)``;
            otherwise they come in training order.

        Returns
        -------
        neigh_dist : ndarray of shape (n_queries,), dtype=object
            One array of distances per query; only when `return_distance` is
            True.

        neigh_ind : ndarray of shape (n_queries,), dtype=object
            One array of training indices per query.
        """
        check_is_fitted(self)
        reject_batch_iterator(X, "SignKNNClassifier.radius_neighbors", _STREAMING)
        if radius is None or isinstance(radius, bool) or not isinstance(radius, Real):
            raise ValueError(
                f"radius must be a real number (a normalised distance in [0, 1]); "
                f"got {radius!r}."
            )
        if not (np.isfinite(radius) and radius >= 0):
            raise ValueError(
                "radius must be a finite normalised distance >= 0 (in [0, 1]); "
                f"got {radius!r}."
            )
        query_is_train = X is None
        if not query_is_train:
            X = self._validate_X(X, reset=False)
        n_queries = self.n_samples_fit_ if query_is_train else X.shape[0]
        # Bounded memory: a batch holds at most 4M distances (~48 MiB).
        step = auto_batch_size(self.batch_size, 0)
        step = max(1, min(step, (1 << 22) // self.n_samples_fit_))
        all_dist = np.empty(n_queries, dtype=object)
        all_ind = np.empty(n_queries, dtype=object)
        for rows in gen_batches(n_queries, step):
            if query_is_train:
                words = self._fit_words[rows]
            else:
                words = self._encode(X[rows], self.n_bits_)
            counts = np.empty((words.shape[0], self.n_samples_fit_), dtype=np.int32)
            words_hamming_distances(
                words, self._fit_words, out=counts, n_jobs=self.n_jobs
            )
            dist = counts / self.n_bits_
            for r, q in enumerate(range(rows.start, rows.stop)):
                (ind,) = np.nonzero(dist[r] <= radius)
                if query_is_train:
                    ind = ind[ind != q]
                d = dist[r, ind]
                if sort_results:
                    order = np.argsort(d, kind="stable")
                    d, ind = d[order], ind[order]
                all_dist[q], all_ind[q] = d, ind
        if return_distance:
            return all_dist, all_ind
        return all_ind

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
        """
        check_is_fitted(self)
        if is_batch_iterator(X):
            return stream_batches(self._predict_proba_array, X)
        return self._predict_proba_array(X)

    def _predict_proba_array(self, X):
        X = self._validate_X(X, reset=False)
        self._check_n_neighbors(None, X.shape[0], False)
        proba = np.empty((X.shape[0], len(self.classes_)))
        for rows in self._batches(X):
            proba[rows] = self._proba_of_words(self._encode(X[rows], self.n_bits_))
        return proba

    def _proba_of_words(self, words):
        counts, ind = self._search(words, self.n_neighbors)
        weights = _get_weights(counts / self.n_bits_, self.weights)
        n_queries, n_classes = ind.shape[0], len(self.classes_)
        flat = (np.arange(n_queries)[:, None] * n_classes + self._y[ind]).ravel()
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
        """
        check_is_fitted(self)
        if is_batch_iterator(X):
            return stream_batches(self._predict_array, X)
        return self._predict_array(X)

    def _predict_array(self, X):
        X = self._validate_X(X, reset=False)
        self._check_n_neighbors(None, X.shape[0], False)
        out = np.empty(X.shape[0], dtype=self.classes_.dtype)
        for rows in self._batches(X):
            proba = self._proba_of_words(self._encode(X[rows], self.n_bits_))
            out[rows] = self.classes_[proba.argmax(axis=1)]
        return out

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
        """
        reject_batch_iterator(X, "SignKNNClassifier.score", _STREAMING)
        return super().score(X, y, sample_weight=sample_weight)

    def __getstate__(self):
        state = dict(super().__getstate__())
        index = state.get("_faiss_index")
        if index is not None:
            state["_faiss_index"] = serialize_faiss_index(index)
        return state

    def __setstate__(self, state):
        index = state.get("_faiss_index")
        if index is not None:
            state = {**state, "_faiss_index": deserialize_faiss_index(index)}
        super().__setstate__(state)
