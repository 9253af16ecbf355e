"""The classifier part of the sksign nets: labels, fit, predict."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from functools import partial

import numpy as np
import torch
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_consistent_length
from sklearn.utils.class_weight import compute_class_weight, compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d
from skorch.callbacks import EpochScoring

from sksign._validation import check_net_X
from sksign.estimators._weights import SampleWeightMixin, weighted_mean

__all__ = ["ClassifierNetMixin"]


def _check_known_labels(y, classes, which):
    """Refuse labels of `y` outside `classes` ("given", "of the first call")."""
    unseen = np.setdiff1d(np.unique(y), classes)
    if len(unseen):
        raise ValueError(
            f"y contains labels {unseen.tolist()!r} that are not among the classes "
            f"{which} ({np.asarray(classes).tolist()!r})."
        )


def _encoded_accuracy(net, X, y):
    """Accuracy on skorch's internal split, whose y holds encoded labels (and
    the rows' weights in a weighted fit)."""
    labels, weight = net._targets_and_weights(np.asarray(y))
    hits = net.predict_proba(X).argmax(axis=1) == labels
    return weighted_mean(hits, weight)


class ClassifierNetMixin(SampleWeightMixin):
    """Labels of any type for a skorch classifier net (left of ``NetBase``).

    ``fit`` encodes the labels (``classes_`` keeps the original ones, strings
    included), ``predict`` decodes them; ``partial_fit`` fixes the classes at
    its first call. ``sample_weight`` and ``class_weight`` weigh each row's
    loss (:class:`~sksign.estimators._weights.SampleWeightMixin`): the
    weights travel as a second column beside the encoded labels. Shared by
    :class:`~sksign.estimators.HTAFNetClassifier` and
    :class:`~sksign.estimators.ICBMClassifier`.

    Examples
    --------
    >>> from sksign.estimators import ICBMClassifier
    >>> from sksign.estimators._classifier import ClassifierNetMixin
    >>> isinstance(ICBMClassifier(), ClassifierNetMixin)
    True
    """

    @property
    def classes_(self):
        """The class labels seen in fit (sorted)."""
        check_is_fitted(self, "label_encoder_")
        return self.label_encoder_.classes_

    def _n_outputs(self):
        return len(self.label_encoder_.classes_)

    def _set_targets_for(self, classes=None, n_outputs=None):
        if classes is None:
            raise ValueError(
                f"{type(self).__name__}.initialize_for needs classes=..., the "
                "class labels the saved net was fitted on."
            )
        self.label_encoder_ = LabelEncoder().fit(np.asarray(classes))

    @property
    def _default_callbacks(self):
        # skorch's valid_acc compares predict() with the split's y; predict
        # returns original labels here, so score the encoded ones instead.
        return [
            (
                name,
                EpochScoring(
                    _encoded_accuracy,
                    name="valid_acc",
                    lower_is_better=False,
                    on_train=False,
                ),
            )
            if name == "valid_acc"
            else (name, cb)
            for name, cb in super()._default_callbacks
        ]

    def _encode_fit_targets(self, X, y, classes=None, reset=True):
        X = check_net_X(self, X, reset=reset)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                "is None."
            )
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        check_consistent_length(X, y)
        if classes is None:
            classes = self.classes  # skorch's parameter
        labels = np.unique(y) if classes is None else np.unique(np.asarray(classes))
        if classes is not None:
            _check_known_labels(y, labels, "given")
        if len(labels) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes in the "
                f"data, but the data contain only one class: {labels[0]!r}."
            )
        return X, y, LabelEncoder().fit(labels)

    # -- weights --------------------------------------------------------------
    def _class_weight_of_rows(self, y, encoded, classes, *, partial):
        """Each row's ``class_weight`` (None: not set)."""
        class_weight = self.class_weight
        if class_weight is None:
            return None
        if isinstance(class_weight, str):  # "balanced", as the constraints allow
            if partial:
                raise ValueError(
                    "class_weight='balanced' is not supported by partial_fit: one "
                    "batch does not give the class frequencies. Pass the weights "
                    "of the whole training set instead, class_weight=dict(zip("
                    "classes, compute_class_weight('balanced', classes=classes, "
                    "y=y_all))) (sklearn.utils.class_weight)."
                )
            return compute_sample_weight("balanced", y)
        per_class = compute_class_weight(class_weight, classes=classes, y=y)
        per_class = np.asarray(per_class, dtype=np.float64)
        if not np.all(np.isfinite(per_class) & (per_class >= 0)):
            raise ValueError(
                "class_weight must give each class a finite, non-negative weight; "
                f"got {class_weight!r}."
            )
        return per_class[encoded]

    def _row_weights(self, X, y, encoded, classes, *, partial, check_classes):
        """The rows' weights: ``sample_weight`` times ``class_weight`` (None
        when neither is given). `check_classes`: the classes come from y, so
        two of them need a non-zero weight."""
        weight = self._fit_sample_weight(X)
        per_class = self._class_weight_of_rows(y, encoded, classes, partial=partial)
        if per_class is not None:
            weight = per_class if weight is None else weight * per_class
        if weight is not None and check_classes:
            kept = np.unique(encoded[weight > 0])
            if len(kept) < 2:
                raise ValueError(
                    f"{type(self).__name__} needs samples of at least 2 classes "
                    "with a non-zero weight (sample_weight times class_weight), "
                    f"but only the classes {classes[kept].tolist()!r} of "
                    f"{classes.tolist()!r} have one."
                )
        return weight

    def _targets_and_weights(self, y_true):
        """Split a batch's targets into (encoded labels, weights or None)."""
        labels, weight = super()._targets_and_weights(y_true)
        if weight is None:
            return labels, None
        labels = labels[:, 0]
        if isinstance(labels, torch.Tensor):
            return labels.long(), weight
        return np.asarray(labels).astype(np.int64), weight

    def get_split_datasets(self, X, y=None, **fit_params):
        """skorch's split; in a weighted fit the split sees the labels alone.

        So that a stratified ``train_split`` stratifies by class, not by the
        (labels, weights) rows the data sets carry.

        Parameters
        ----------
        X, y : array-like
            Training data and encoded labels (with the weights, second
            column, in a weighted fit).
        **fit_params : dict
            Passed to skorch.

        Returns
        -------
        dataset_train, dataset_valid : Dataset
            The training and validation data sets.
        """
        weighted = getattr(self, "_weighted_training", False)
        if not (weighted and self.train_split and y is not None):
            return super().get_split_datasets(X, y, **fit_params)
        labels, _ = self._targets_and_weights(np.asarray(y))
        return self.train_split(self.get_dataset(X, y), labels, **fit_params)

    # -- data -----------------------------------------------------------------
    def _fit_data(self, X, y, *, warm):
        X, y, encoder = self._encode_fit_targets(X, y, reset=not warm)
        if warm and not np.array_equal(encoder.classes_, self.label_encoder_.classes_):
            raise ValueError(
                "warm_start=True needs the same classes as the first fit; got "
                f"{encoder.classes_!r}, expected {self.label_encoder_.classes_!r}."
            )
        encoded = encoder.transform(y).astype(np.int64)
        weight = self._row_weights(
            X,
            y,
            encoded,
            encoder.classes_,
            partial=False,
            check_classes=self.classes is None,
        )
        self.label_encoder_ = encoder
        return X, self._attach_weights(encoded, weight)

    def _first_partial_fit(self):
        return not self.initialized_ or not hasattr(self, "label_encoder_")

    def _partial_fit_data(self, X, y, *, first, classes):
        if first:
            X, y, encoder = self._encode_fit_targets(X, y, classes=classes)
        else:
            if classes is not None and not np.array_equal(
                np.unique(np.asarray(classes)), self.classes_
            ):
                raise ValueError(
                    f"classes={list(classes)!r} is not the same as on the first "
                    f"call to partial_fit: {self.classes_.tolist()!r}."
                )
            X = check_net_X(self, X, reset=False)
            y = column_or_1d(y)
            _check_known_labels(y, self.classes_, "of the first call")
            encoder = self.label_encoder_
        encoded = encoder.transform(y).astype(np.int64)
        weight = self._row_weights(
            X, y, encoded, encoder.classes_, partial=True, check_classes=False
        )
        self.label_encoder_ = encoder
        return X, self._attach_weights(encoded, weight)

    def fit(self, X, y, sample_weight=None, **fit_params):
        """Initialise (unless ``warm_start``) and train the net.

        Parameters are checked first; a fit that fails (bad parameters, data,
        fit_params, or during training) leaves the estimator as it was.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Training data; DataFrames keep their column names.
        y : array-like of shape (n_samples,)
            Class labels of any type (strings included).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row, checked as scikit-learn does
            (length, NaN, negative values, all zero). A row's weight is its
            ``sample_weight`` times its class's ``class_weight``, and the loss
            of a mini-batch is ``sum(w_i * l_i) / sum(w_i)``, where ``l_i`` is
            the criterion's loss of row ``i`` (the criterion must have a
            ``reduction`` attribute, as torch's losses do): integer weights
            train as repeated rows. None (and ``class_weight=None``) weighs
            every row 1.
        **fit_params : dict
            Passed to skorch's ``fit``.

        Returns
        -------
        self : object
            The fitted net.

        Examples
        --------
        >>> from sksign.estimators import HTAFNetClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, ["a", "b"] * 4
        >>> net = HTAFNetClassifier((4,), max_epochs=2, random_state=0).fit(X, y)
        >>> net.classes_.tolist(), len(net.history_)
        (['a', 'b'], 2)

        Rows weighted by hand, and the classes balanced:

        >>> net = HTAFNetClassifier((4,), max_epochs=2, class_weight="balanced",
        ...                         random_state=0)
        >>> net.fit(X, y, sample_weight=[1, 2] * 4).classes_.tolist()
        ['a', 'b']
        """
        return self._fit_weighted(self._fit_net, X, y, sample_weight, fit_params)

    def partial_fit(self, X, y, classes=None, sample_weight=None, **fit_params):
        """Train for one more ``max_epochs`` round without re-initialising.

        Parameters and data are checked before anything changes (the classes
        are fixed by the first call); an error during the training itself
        keeps the updates made before it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Class labels.
        classes : array-like, default=None
            All classes; needed on the first call if y lacks some. Later calls
            may repeat it, but not change it.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row, as in :meth:`fit` (a dict
            ``class_weight`` applies too; "balanced" is refused here).
        **fit_params : dict
            Passed to skorch's ``partial_fit``.

        Returns
        -------
        self : object
            The net, trained one more round.

        Examples
        --------
        >>> from sksign.estimators import HTAFNetClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1] * 4
        >>> net = HTAFNetClassifier((4,), max_epochs=2, random_state=0)
        >>> net = net.partial_fit(X, y, classes=[0, 1, 2]).partial_fit(X, y)
        >>> len(net.history_), net.classes_.tolist()
        (4, [0, 1, 2])
        """
        fit = partial(self._partial_fit_net, classes=classes)
        return self._fit_weighted(fit, X, y, sample_weight, fit_params)

    def predict_proba(self, X):
        """Class probabilities (softmax of the logits, exact step inside).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            One column per class of ``classes_``.

        Examples
        --------
        >>> from sksign.estimators import HTAFNetClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1] * 4
        >>> net = HTAFNetClassifier((4,), max_epochs=2, random_state=0).fit(X, y)
        >>> net.predict_proba(X[:2]).shape
        (2, 2)
        """
        X = self._rows(X)
        return super().predict_proba(X)

    def predict(self, X):
        """Predict class labels (the original labels, strings included).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels of ``classes_``.

        Examples
        --------
        >>> from sksign.estimators import HTAFNetClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, ["a", "b"] * 4
        >>> net = HTAFNetClassifier((4,), max_epochs=2, random_state=0).fit(X, y)
        >>> net.predict(X[:2]).shape
        (2,)
        """
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]

    def decision_function(self, X):
        """Logits of the net (exact step inside for step-like activations).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        logits : ndarray of shape (n_samples, n_classes) or (n_samples,)
            For two classes, the logit difference of class 1 over class 0,
            as scikit-learn's binary classifiers return it.

        Examples
        --------
        >>> from sksign.estimators import HTAFNetClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1, 2, 2] * 2
        >>> net = HTAFNetClassifier((4,), max_epochs=2, random_state=0).fit(X, y)
        >>> net.decision_function(X[:2]).shape
        (2, 3)
        """
        logits = self._forward_numpy(self._rows(X))
        if logits.shape[1] == 2:
            return logits[:, 1] - logits[:, 0]
        return logits
