"""PackedClassifier and PackedRegressor: scikit-learn estimators over a PackedNet."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from sksign._shapes import check_sample_shape, split_sample_shape
from sksign._utils import restore_state_on_error
from sksign.deploy._kernels import all_finite, clear_winners
from sksign.deploy._runtime import PackedNet
from sksign.kernels import effective_n_threads

__all__ = ["PackedClassifier", "PackedRegressor"]


def softmax32(logits):
    """The float32 softmax of each row of float32 `logits` (as torch's)."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True, dtype=np.float32)


def predicted_columns(logits):
    """``softmax32(logits).argmax(axis=1)``, the softmax taken only for the rows
    whose largest logit does not win by a clear margin (see
    :mod:`sksign.deploy._kernels._winners`): the same columns, 4 us instead of
    30 at 256 rows of 10 classes."""
    columns = np.empty(len(logits), np.int64)
    if clear_winners(logits, columns):
        unsure = np.flatnonzero(columns < 0)
        columns[unsure] = softmax32(logits[unsure]).argmax(axis=1)
    return columns


def _plain_rows(X, n_features):
    """`X` as C-contiguous float32 rows, when that is all it needs, else None.

    A finite 2-D float array of `n_features` columns passes scikit-learn's
    ``validate_data`` unchanged; checking that here costs a few microseconds
    where ``validate_data`` costs 100, more than a small packed net's whole
    forward. Anything else (other types, dtypes, widths, NaN or infinity,
    no rows) returns None, and ``validate_data`` checks it with its messages.
    """
    if (
        type(X) is not np.ndarray
        or X.ndim != 2
        or X.dtype not in (np.float32, np.float64)
        or X.shape[0] == 0
        or X.shape[1] != n_features
    ):
        return None
    with np.errstate(over="ignore"):  # float64 beyond float32: inf, refused below
        rows = np.ascontiguousarray(X, dtype=np.float32)
    if not all_finite(rows):
        return None
    return rows


def _labels(graph):
    classes = graph.get("classes")
    dtype = graph.get("classes_dtype")
    ok = (
        isinstance(classes, list)
        and classes
        and all(isinstance(c, (str, int, float, bool)) for c in classes)
        and (dtype is None or isinstance(dtype, str))
    )
    if not ok:
        raise ValueError(
            "Not a valid packed model: 'classes' must be a non-empty list of labels."
        )
    try:
        labels = np.asarray(classes, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(
            f"Not a valid packed model: bad 'classes' or 'classes_dtype' {dtype!r}."
        ) from exc
    if labels.ndim != 1 or labels.dtype.kind not in "biufU":
        raise ValueError("Not a valid packed model: 'classes' must be 1-D labels.")
    return labels


def _input_shape(graph, n_features):
    """The sample shape recorded by pack (None for nets fitted on rows)."""
    shape = graph.get("input_shape")
    if shape is None:
        return None
    ok = (
        isinstance(shape, list)
        and shape
        and all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)
        and math.prod(shape) == n_features
    )
    if not ok:
        raise ValueError(
            "Not a valid packed model: 'input_shape' must list positive sizes "
            f"whose product is the {n_features} features; got {shape!r}."
        )
    return tuple(shape)


class _PackedBase(BaseEstimator):
    """What both packed estimators share: reading the net, checking X, running."""

    _estimator_kind = ""

    def __init__(self, net=None, *, n_jobs=None):
        self.net = net
        self.n_jobs = n_jobs

    def fit(self, X=None, y=None):
        """Read the packed net (it is trained already; `X` and `y` are ignored).

        Parameters
        ----------
        X : None
            Ignored: a packed model is made by :func:`sksign.deploy.pack`
            from a trained net.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        return self._read(self.net)

    def _read(self, net):
        """Check the packed net `net` and set the fitted attributes from it.

        A net that fails a check leaves the estimator as it was.
        """
        if not isinstance(net, PackedNet):
            raise TypeError(
                f"{type(self).__name__} needs a PackedNet (see sksign.deploy.pack "
                f"and sksign.deploy.load); got net={net!r}."
            )
        graph = net.graph
        kind = graph["estimator"]
        if kind != self._estimator_kind:
            raise ValueError(
                f"The packed net is a {kind}; use Packed{kind.title()} for it."
            )
        n_features = int(graph["n_features_in"])
        names = graph.get("feature_names_in")
        if names is not None and (
            not isinstance(names, list)
            or len(names) != n_features
            or not all(isinstance(n, str) for n in names)
        ):
            raise ValueError(
                "Not a valid packed model: 'feature_names_in' must list one name "
                "per feature."
            )
        shape = _input_shape(graph, n_features)
        with restore_state_on_error(self):
            self._fit_metadata(net)
        self.net_ = net
        self.n_features_in_ = n_features
        self.input_shape_ = shape
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return self

    def _rows(self, X):
        """Checked float32 rows (images are flattened, as the nets take them).

        Samples with more than one axis must have the shape of those the net
        was fitted on (``input_shape_``), as the torch net requires.
        """
        if "net_" not in vars(self):  # scikit-learn's check costs 5 us
            check_is_fitted(self, "net_")
        X, shape = split_sample_shape(X)
        rows = None
        if not hasattr(self, "feature_names_in_"):  # else names are compared
            rows = _plain_rows(X, self.n_features_in_)
        if rows is None:
            rows = validate_data(self, X, reset=False, dtype=np.float32)
        check_sample_shape(
            shape,
            # None for a model pickled before input_shape_ was recorded
            getattr(self, "input_shape_", None),
            type(self).__name__,
            what="images",
            one_channel=True,
        )
        return np.ascontiguousarray(rows, dtype=np.float32)

    def _outputs(self, X):
        """Raw float32 outputs of the net for `X`, on `n_jobs` threads."""
        X = self._rows(X)  # checks the estimator is fitted first
        return self.net_.forward(X, effective_n_threads(self.n_jobs))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


class PackedClassifier(ClassifierMixin, _PackedBase):
    """A trained step classifier that runs on packed bits (numpy + numba).

    Made by :func:`sksign.deploy.pack` from a fitted
    :class:`~sksign.estimators.HTAFNetClassifier` or
    :class:`~sksign.estimators.ICBMClassifier`, or read by
    :func:`sksign.deploy.load`. Predictions equal the torch net's in eval
    mode (see :ref:`deploy` for what is exact and what agrees to float
    rounding).

    Parameters
    ----------
    net : PackedNet, default=None
        The packed layer graph.
    n_jobs : int, default=None
        Threads of the kernels and of the float layers' BLAS products; None
        means 1 unless in a :func:`joblib.parallel_config` context, -1 means
        all processors. The BLAS library's own threads are held at one during
        a call (its count restored after), and the products split over these
        threads in blocks set by the shape, so the outputs are the same on
        any number of threads.

    Attributes
    ----------
    net_ : PackedNet
        The validated net.
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    n_features_in_ : int
        Number of features the net takes.
    input_shape_ : tuple of int or None
        Shape of one sample when the net was fitted on images (samples of
        another shape are refused, as by the net); None for rows.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when the net was fitted on a DataFrame.

    See Also
    --------
    sksign.deploy.pack : Make one from a fitted net.
    PackedRegressor : The regression counterpart.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sksign.estimators import HTAFNetClassifier
    >>> from sksign.deploy import pack
    >>> X, y = load_digits(return_X_y=True)
    >>> net = HTAFNetClassifier((32,), max_epochs=2, random_state=0).fit(X / 16, y)
    >>> packed = pack(net)
    >>> bool((packed.predict(X / 16) == net.predict(X / 16)).all())
    True
    """

    _estimator_kind = "classifier"

    def _fit_metadata(self, net):
        classes = _labels(net.graph)
        if len(classes) != net.n_outputs_:
            raise ValueError(
                f"Not a valid packed model: {len(classes)} classes for "
                f"{net.n_outputs_} outputs."
            )
        self.classes_ = classes

    def decision_function(self, X):
        """Logits of the net (for two classes, class 1's logit minus class 0's).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples (images are flattened).

        Returns
        -------
        logits : ndarray of shape (n_samples, n_classes) or (n_samples,)
            float64 logits.
        """
        logits = self._outputs(X).astype(np.float64)
        if logits.shape[1] == 2:
            return logits[:, 1] - logits[:, 0]
        return logits

    def predict_proba(self, X):
        """Class probabilities: the float32 softmax of the logits.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            float64 probabilities, one column per class of ``classes_``.
        """
        return softmax32(self._outputs(X)).astype(np.float64)

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels of ``classes_``: the first argmax of :meth:`predict_proba`
            (found from the logits where a row's largest one wins clearly).
        """
        columns = predicted_columns(self._outputs(X))  # checks it is fitted
        return self.classes_[columns]


class PackedRegressor(RegressorMixin, _PackedBase):
    """A trained step regressor that runs on packed bits (numpy + numba).

    Made by :func:`sksign.deploy.pack` from a fitted
    :class:`~sksign.estimators.HTAFNetRegressor` (its target scaling
    included) or read by :func:`sksign.deploy.load`.

    Parameters
    ----------
    net : PackedNet, default=None
        The packed layer graph.
    n_jobs : int, default=None
        Threads of the kernels and of the float layers' BLAS products; None
        means 1 unless in a :func:`joblib.parallel_config` context, -1 means
        all processors. The BLAS library's own threads are held at one during
        a call (its count restored after), and the products split over these
        threads in blocks set by the shape, so the outputs are the same on
        any number of threads.

    Attributes
    ----------
    net_ : PackedNet
        The validated net.
    n_outputs_ : int
        Number of targets.
    target_mean_, target_scale_ : ndarray of shape (n_outputs_,)
        The target scaling learned by the net (outputs are
        ``net * scale + mean``).
    n_features_in_ : int
        Number of features the net takes.
    input_shape_ : tuple of int or None
        Shape of one sample when the net was fitted on images (samples of
        another shape are refused, as by the net); None for rows.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when the net was fitted on a DataFrame.

    See Also
    --------
    sksign.deploy.pack : Make one from a fitted net.
    PackedClassifier : The classification counterpart.

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.estimators import HTAFNetRegressor
    >>> from sksign.deploy import pack
    >>> X = np.random.RandomState(0).rand(40, 3)
    >>> reg = HTAFNetRegressor((16,), max_epochs=2, random_state=0).fit(X, X.sum(1))
    >>> np.allclose(pack(reg).predict(X), reg.predict(X))
    True
    """

    _estimator_kind = "regressor"

    def _fit_metadata(self, net):
        n = net.n_outputs_
        mean = net.tensors.get("target_mean", np.zeros(n))
        scale = net.tensors.get("target_scale", np.ones(n))
        if mean.shape != (n,) or scale.shape != (n,):
            raise ValueError(
                "Not a valid packed model: the target scaling does not match "
                f"the {n} outputs."
            )
        self.n_outputs_ = n
        self.target_mean_ = np.asarray(mean, dtype=np.float64)
        self.target_scale_ = np.asarray(scale, dtype=np.float64)
        y_ndim = net.graph.get("y_ndim", 1)
        if y_ndim not in (1, 2) or isinstance(y_ndim, bool):
            raise ValueError("Not a valid packed model: 'y_ndim' must be 1 or 2.")
        self._y_ndim = int(y_ndim)

    def predict(self, X):
        """Predicted targets, in the units of the y the net was fitted on.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_outputs_)
            As many dimensions as the y of the fit.
        """
        out = self._outputs(X).astype(np.float64)
        out = out * self.target_scale_ + self.target_mean_
        return out.ravel() if self._y_ndim == 1 else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # a net fitted on a 2-D y predicts several targets
        tags.target_tags.multi_output = True
        return tags
