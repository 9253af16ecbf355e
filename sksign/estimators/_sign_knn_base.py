"""The machinery the sign-kNN estimators share: codes, search and neighbours.

:class:`~sksign.estimators.SignKNNClassifier` and
:class:`~sksign.estimators.SignKNNRegressor` differ only in what they make of
the neighbours found (a vote, a mean). Everything before that lives here: the
parameters, the validation and packing of the codes, the search (the popcount
kernels of :mod:`sksign.kernels`, or a faiss index), `kneighbors`,
`radius_neighbors` and the pickling of a faiss index.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from sksign._compat import Interval, StrOptions
from sksign._utils import reject_batch_iterator, row_batches
from sksign.distributed import (
    check_fit_rows,
    fit_shards,
    is_dask_array,
    sharded_kneighbors,
    sharded_radius_neighbors,
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
    check_packed_array,
    effective_n_threads,
    packed_to_words,
    search_words,
    words_hamming_distances,
    words_kneighbors,
)

__all__ = ["SIGN_KNN_DOCS", "SignKNNBase"]


#: Docstring pieces the two sign-code k-NN estimators share (see
#: :class:`sksign._docstrings.Substitution`).
SIGN_KNN_DOCS = {
    "search_params": """\
packed : bool, default=False
    If False, `X` holds one value per bit: bool, 0/1 or -1/+1, of any numeric
    dtype (floats exactly 0.0/1.0 or -1.0/1.0 included); the bit is
    ``x > 0``, so 0 and -1 both give 0. Any other value (2, 0.5, NaN, the
    bytes of packed codes), or values mixing 0 and -1, raise a ValueError
    that names them. If True, `X` holds packed codes of dtype uint8, 8 bits
    per byte, most significant bit first (see
    :func:`sksign.kernels.pack_bits` and
    ``SignCodeTransformer(output="packed")``); give their length as `n_bits`.

n_bits : int, default=None
    With ``packed=True``, the number of bits per row: rows must have
    ``ceil(n_bits / 8)`` bytes and the padding bits past `n_bits` in the last
    byte must be zero (as :func:`sksign.kernels.pack_bits` leaves them),
    else a ValueError. None means ``8 * n_bytes``. With ``packed=False`` it
    must be None or the number of features.

algorithm : {"auto", "popcount", "faiss"}, default="auto"
    Search backend. "popcount" is the built-in numba kernel, "faiss" a faiss
    binary index (``IndexBinaryFlat``, which gives the same neighbours in the
    same order). "auto" is "popcount", or "faiss" when `approximate` is True.
""",
    "code_checks": """\
Every method that takes `X` checks its codes as it reads them, batch by
batch (on the Dask workers for a Dask array). With ``packed=False`` only
0/1, -1/+1 or bool values are read, so that packed bytes are never taken for
bits ``x > 0``: another value raises a ValueError naming a few of the values
found and, for a uint8 array with values above 1, saying that it looks like
packed codes, which need ``packed=True, n_bits=...``. The four encodings of
the same bits give identical results. With ``packed=True`` the byte width
of the rows and their zero padding bits are checked against `n_bits`. A
refused call leaves a fitted estimator as it was.
""",
    "fitted_attributes": """\
n_features_in_ : int
    Number of columns of `X` seen in `fit` (bytes when ``packed=True``).

feature_names_in_ : ndarray of shape (n_features_in_,)
    Names of features seen during `fit`, when `X` has string column names.

n_bits_ : int
    Number of bits per code.

n_samples_fit_ : int
    Number of training codes.
""",
}


class SignKNNBase(BaseEstimator):
    """Base of the k-NN estimators on bit codes (not for direct use).

    Subclasses add a ``fit`` that validates `y`, calls :meth:`_fit_codes` on
    the validated `X` and stores what it returns with :meth:`_store_codes`, and
    a ``predict`` built on :meth:`_query_words` and :meth:`_search`.
    `_streaming` names the methods of the subclass that take an iterator of
    row batches (for the error raised by the others).
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

    #: the methods that take an iterator of row batches
    _streaming: ClassVar[str] = "predict"

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

    # ------------------------------------------------------------------ helpers
    def _reject_iterator(self, X, method):
        reject_batch_iterator(X, f"{type(self).__name__}.{method}", self._streaming)

    def _validate_X(self, X, reset):
        """Validated `X` (no float copy of integer or bool input).

        Its values are checked batch by batch by :meth:`_encode`.
        """
        if self.packed and not reset:
            self._check_packed_width(X)
        if not reset and self._plain_query(X):
            return X
        return validate_data(
            self,
            X,
            reset=reset,
            dtype=None if self.packed else "numeric",
        )

    def _plain_query(self, X):
        """Whether query rows `X` pass scikit-learn's ``validate_data`` unchanged.

        A 2-D ndarray of the fitted width with rows, of uint8 (``packed=True``)
        or of an integer or bool dtype (no NaN or infinity to find), for an
        estimator fitted without feature names: checking that here takes a
        microsecond where ``validate_data`` takes 60-80, as long as the search
        of a few queries. Its values are checked by :meth:`_encode` either way.
        """
        return (
            type(X) is np.ndarray
            and X.ndim == 2
            and X.shape[0] > 0
            and X.shape[1] == self.n_features_in_
            and (X.dtype == np.uint8 if self.packed else X.dtype.kind in "biu")
            and not hasattr(self, "feature_names_in_")
        )

    def _check_packed_width(self, X):
        """With packed=True, refuse query rows not of the fitted byte width.

        The message of scikit-learn's feature count check, with the bytes the
        fitted `n_bits_` take; array-likes without a shape are left to it.
        """
        shape = getattr(X, "shape", None)
        if shape is None or len(shape) != 2 or shape[1] == self.n_features_in_:
            return
        raise ValueError(
            f"X has {shape[1]} features, but {type(self).__name__} is expecting "
            f"{self.n_features_in_} features as input: with packed=True, codes of "
            f"n_bits_={self.n_bits_} bits are packed in ceil({self.n_bits_} / 8) = "
            f"{self.n_features_in_} bytes per row."
        )

    def _encode(self, X, n_bits):
        """uint64 words of the rows of a validated `X` (a batch).

        Every path that reads codes (fit, each query method, the Dask blocks)
        comes here, so this is where their values are checked: with
        ``packed=False`` one bit per value (0/1, -1/+1 or bool, see
        :func:`~sksign.kernels.as_bits` with ``strict=True``), with
        ``packed=True`` uint8 rows of ``ceil(n_bits / 8)`` bytes with zero
        padding bits (:func:`~sksign.kernels.check_packed`).
        """
        if self.packed:
            if X.dtype != np.uint8:
                raise TypeError(
                    "With packed=True, X must hold bit-packed codes of dtype uint8 "
                    f"(see sksign.metrics.pairwise.pack_bits); got dtype {X.dtype}."
                )
            check_packed_array(X, "X", n_bits)
            return packed_to_words(X, n_bits)
        bits = as_bits(X, "X", strict=True)
        return packed_to_words(np.packbits(bits, axis=1), n_bits)

    def _encode_all(self, X, n_bits):
        """Words of all rows of `X`, converted batch by batch."""
        words = np.empty((X.shape[0], (n_bits + 63) // 64), dtype=np.uint64)
        for rows in self._batches(X):
            words[rows] = self._encode(X[rows], n_bits)
        return words

    def _batches(self, X):
        row_bytes = X.shape[1] * X.dtype.itemsize
        return row_batches(X.shape[0], auto_batch_size(self.batch_size, row_bytes))

    def _fit_n_bits(self, n_features):
        """Bits per code of training rows with `n_features` columns."""
        if self.packed:
            return check_n_bits(self.n_bits, n_features)
        if self.n_bits is not None and self.n_bits != n_features:
            raise ValueError(
                f"n_bits={self.n_bits} does not match X, which has "
                f"{n_features} features (one per bit, packed=False); "
                "leave n_bits=None or use packed=True."
            )
        return n_features

    def _fit_codes(self, X):
        """``(n_bits, words, faiss_index)`` of a validated training `X`.

        Sets nothing on the estimator: the caller stores the result with
        :meth:`_store_codes` once every check of its `fit` has passed.
        """
        n_bits = self._fit_n_bits(X.shape[1])
        if self.approximate and self.algorithm == "popcount":
            raise ValueError(
                "approximate=True needs algorithm='faiss' (or 'auto'); got "
                "algorithm='popcount', which is exact."
            )
        use_faiss = self.algorithm == "faiss" or self.approximate
        words = self._encode_all(X, n_bits)
        faiss_index = build_faiss_index(words, self.approximate) if use_faiss else None
        return n_bits, words, faiss_index

    def _validate_sharded_y(self, X, y, **check_params):
        """Validated `y` of a fit on a Dask array `X` (checked, not computed).

        `X` is left to :func:`sksign.distributed._knn.check_fit_rows`; only
        its number of columns is recorded here.
        """
        y = validate_data(self, "no_validation", y, **check_params)
        self.n_features_in_ = X.shape[1]
        return y

    def _fit_sharded(self, X, y):
        """``(n_bits, shards, None)`` of a Dask array of training codes.

        The codes are packed on the workers, one shard per row chunk, and
        persisted there with the targets `y` (a NumPy array as the estimator
        stores them, one row per code); see :mod:`sksign.distributed`.
        """
        X = check_fit_rows(self, X)
        n_bits = self._fit_n_bits(X.shape[1])
        return n_bits, fit_shards(self, X, y, n_bits), None

    def _store_codes(self, n_bits, words, faiss_index):
        self.n_bits_ = n_bits
        self.n_samples_fit_ = words.shape[0]
        sharded = not isinstance(words, np.ndarray)
        self._fit_words = None if sharded else words
        self._fit_shards = words if sharded else None
        self._faiss_index = faiss_index

    def _on_dask(self, X):
        """Whether the codes are sharded on a Dask cluster or `X` is a Dask array."""
        return getattr(self, "_fit_shards", None) is not None or is_dask_array(X)

    def _query_words(self, X):
        """Number of rows of `X` and a generator of its ``(rows, words)``.

        `X` is validated, and the fitted codes checked to hold `n_neighbors`,
        before this returns; the words are encoded batch by batch as the
        generator is consumed.
        """
        X = self._validate_X(X, reset=False)
        self._check_n_neighbors(None, X.shape[0], False)
        batches = (
            (rows, self._encode(X[rows], self.n_bits_)) for rows in self._batches(X)
        )
        return X.shape[0], batches

    def _search(self, words, n_neighbors):
        """(counts, indices) of the nearest training codes of query words."""
        if self._faiss_index is None:
            return search_words(
                words, self._fit_words, n_neighbors, effective_n_threads(self.n_jobs)
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

    def _search_train(self, n_neighbors):
        """Neighbours of every training code, each without itself."""
        n = self.n_samples_fit_
        step = auto_batch_size(self.batch_size, 8 * self._fit_words.shape[1])
        dist = np.empty((n, n_neighbors), dtype=np.int64)
        ind = np.empty((n, n_neighbors), dtype=np.int64)
        for rows in row_batches(n, step):
            d, i = self._search(self._fit_words[rows], n_neighbors + 1)
            dist[rows], ind[rows] = self._drop_self(d, i, rows.start, n_neighbors)
        return dist, ind

    @staticmethod
    def _drop_self(d, i, first, n_neighbors):
        """The k of k + 1 neighbours of training rows ``first, first + 1, ...``."""
        is_self = i == np.arange(first, first + i.shape[0])[:, None]
        # Drop the code itself, or, where duplicates with smaller indices
        # push it past the k + 1 found, the last one.
        is_self[~is_self.any(axis=1), -1] = True
        keep = ~is_self
        return d[keep].reshape(-1, n_neighbors), i[keep].reshape(-1, n_neighbors)

    # ---------------------------------------------------------------------- API
    def kneighbors(self, X=None, n_neighbors=None, return_distance=True):
        """Find the k nearest training codes of each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            Query codes, in the format of `fit`. None: the training codes, each
            without itself (as in scikit-learn). A Dask array (or None after a
            fit on a Dask array) gives lazy Dask arrays.

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

        Examples
        --------
        >>> from sksign.estimators import SignKNNRegressor
        >>> X = [[1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 1, 1], [1, 0, 0, 0]]
        >>> reg = SignKNNRegressor(n_neighbors=2).fit(X, [0.0, 1.0, 2.0, 3.0])
        >>> reg.kneighbors([[1, 1, 0, 1]])
        (array([[0.25, 0.5 ]]), array([[0, 1]]))
        >>> reg.kneighbors(n_neighbors=1, return_distance=False)
        array([[1],
               [0],
               [1],
               [0]])
        """
        check_is_fitted(self)
        self._reject_iterator(X, "kneighbors")
        if self._on_dask(X):
            return sharded_kneighbors(self, X, n_neighbors, return_distance)
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

    def radius_neighbors(
        self, X=None, radius=None, return_distance=True, sort_results=False
    ):
        """Find the training codes within a normalised Hamming distance.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            Query codes, in the format of `fit`. None: the training codes, each
            without itself. A Dask array (or None after a fit on a Dask array)
            gives lazy Dask arrays.

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

        Examples
        --------
        >>> from sksign.estimators import SignKNNClassifier
        >>> X = [[1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 1, 1], [1, 0, 0, 0]]
        >>> clf = SignKNNClassifier(n_neighbors=1).fit(X, [0, 0, 1, 1])
        >>> dist, ind = clf.radius_neighbors([[1, 1, 0, 1]], radius=0.5)
        >>> ind[0], dist[0]
        (array([0, 1, 3]), array([0.25, 0.5 , 0.5 ]))
        """
        check_is_fitted(self)
        self._reject_iterator(X, "radius_neighbors")
        self._check_radius(radius)
        if self._on_dask(X):
            return sharded_radius_neighbors(
                self, X, radius, return_distance, sort_results
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
        for rows in row_batches(n_queries, step):
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

    @staticmethod
    def _check_radius(radius):
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

    # -------------------------------------------------------------- persistence
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
