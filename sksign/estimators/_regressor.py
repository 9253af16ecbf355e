"""HTAFNetRegressor: the regression twin of HTAFNetClassifier.

Mean squared error on a target standardised inside the net by default, so
that raw targets train; 1-D and 2-D targets.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from sklearn.utils import check_consistent_length
from skorch import NeuralNetRegressor
from skorch.callbacks import EarlyStopping
from skorch.dataset import ValidSplit
from torch import nn

from sksign._compat import InvalidParameterError
from sksign._docstrings import Substitution
from sksign._validation import check_net_X
from sksign.estimators import _rng
from sksign.estimators._base import NetBase
from sksign.estimators._htaf_net import _ArchitectureMixin
from sksign.estimators._params import (
    HTAF_CONSTRAINTS,
    REGRESSOR_CONSTRAINTS,
    REGRESSOR_DOCS,
)
from sksign.estimators._training import StepTrainingMixin
from sksign.estimators._weights import SampleWeightMixin

__all__ = ["HTAFNetRegressor"]


@Substitution(**REGRESSOR_DOCS)
class HTAFNetRegressor(
    StepTrainingMixin,
    _ArchitectureMixin,
    SampleWeightMixin,
    NetBase,
    NeuralNetRegressor,
):
    """Neural-net regressor with HTAF (or any listed) hidden activations.

    The regression twin of :class:`HTAFNetClassifier` (mean squared error),
    for tabular data. ``y`` may be 1-D or 2-D; predictions have the same
    number of dimensions as the ``y`` seen in fit.

    The targets are standardised inside the estimator (``standardize_target``,
    on by default): the net trains on ``(y - target_mean_) / target_scale_``
    and ``predict`` maps its output back, so raw targets in any unit work
    with the defaults. The features are not scaled: put a
    :class:`~sklearn.preprocessing.StandardScaler` before the net in a
    :class:`~sklearn.pipeline.Pipeline`.

    Parameters
    ----------
    {architecture}
    criterion : torch loss class, default=torch.nn.MSELoss
        skorch's criterion; it receives the predictions and the standardised
        float targets.
    {training}
    {steps}
    {inference}
    {recalibrate_bn}
    {time_steps}
    standardize_target : bool, default=True
        Learn the mean and standard deviation of each target column in
        ``fit`` and train the net on the standardised targets; ``predict``
        returns the inverse. A constant column keeps scale 1. ``warm_start``
        and ``partial_fit`` keep the scaling of the first fit. False trains
        on the targets as given (the losses in ``history_`` are then in the
        targets' units). With ``sample_weight`` the mean and standard
        deviation are weighted.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training rows (a split seeded
        by ``random_state``), stop when the validation loss (computed with
        ``inference``, so the exact step by default) has not improved for
        ``n_iter_no_change`` epochs, and restore the weights of the best
        epoch (skorch's ``EarlyStopping(load_best=True)``). Off by default:
        on the benchmark's small tables (diabetes, 442 rows) the rows it
        holds out cost more than it saves (``benchmarks/README.md``). Raise
        ``max_epochs`` with it. Needs ``train_split=None``.
    validation_fraction : float, default=0.1
        Share of the rows held out when ``early_stopping=True``.
    n_iter_no_change : int, default=10
        Epochs without a better validation loss before stopping
        (``early_stopping=True``).
    {tail}

    Attributes
    ----------
    n_outputs_ : int
        Number of regression targets.
    target_mean_ : ndarray of shape (n_targets,)
        Mean of each target column, learned in the first fit (zeros with
        ``standardize_target=False``).
    target_scale_ : ndarray of shape (n_targets,)
        Standard deviation of each target column (1 for a constant column;
        ones with ``standardize_target=False``). Both are kept as buffers of
        ``module_``, so ``save_params``/``load_params`` carry them with the
        weights.
    {fitted}

    See Also
    --------
    HTAFNetClassifier : The same for classification.

    Notes
    -----
    The net's own output (``forward``, ``module_``, the losses and the
    :class:`~sksign.estimators.RelaxationGap` MSEs in ``history_``) is in
    standardised units; ``predict`` and ``score`` are in the targets' units.
    ``TransformedTargetRegressor`` is no longer needed for the target.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sksign.estimators import HTAFNetRegressor
    >>> X = np.random.RandomState(0).rand(20, 3)
    >>> reg = HTAFNetRegressor((8,), max_epochs=2, random_state=0)
    >>> model = make_pipeline(StandardScaler(), reg).fit(X, 100 * X.sum(1))
    >>> model.predict(X[:3]).shape
    (3,)
    >>> bool(reg.target_scale_[0] > 1)
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        **HTAF_CONSTRAINTS,
        **REGRESSOR_CONSTRAINTS,
    }

    #: Buffers of ``module_`` holding the target scaling, so that
    #: ``save_params`` and ``load_params`` carry it with the weights.
    _TARGET_BUFFERS = ("sksign_target_mean", "sksign_target_scale")

    def __init__(
        self,
        hidden_layer_sizes=(512, 512),
        *,
        activation="htaf",
        alpha0=2.0,
        alpha1=11.0,
        architecture="mlp",
        architecture_params=None,
        input_shape=None,
        conv_channels=(16, 32),
        module=None,
        criterion=nn.MSELoss,
        optimizer=torch.optim.Adam,
        lr=1e-3,
        lr_schedule="constant",
        max_epochs=20,
        batch_size=128,
        train_split=None,
        time_steps=4,
        alpha0_start=0.05,
        anneal_epochs=16,
        step_forward_from="auto",
        inference="step",
        recalibrate_bn=True,
        standardize_target=True,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=10,
        relaxation_gap="auto",
        random_state=None,
        augment=None,
        mixed_precision=False,
        channels_last=False,
        checkpoint_dir=None,
        device="cpu",
        dtype="float32",
        verbose=0,
        iterator_train__shuffle=True,
        **kwargs,
    ):
        super().__init__(
            module,
            criterion=criterion,
            optimizer=optimizer,
            lr=lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            train_split=train_split,
            device=device,
            verbose=verbose,
            iterator_train__shuffle=iterator_train__shuffle,
            **kwargs,
        )
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.alpha0 = alpha0
        self.alpha1 = alpha1
        self.architecture = architecture
        self.architecture_params = architecture_params
        self.input_shape = input_shape
        self.conv_channels = conv_channels
        self.time_steps = time_steps
        self.lr_schedule = lr_schedule
        self.alpha0_start = alpha0_start
        self.anneal_epochs = anneal_epochs
        self.step_forward_from = step_forward_from
        self.inference = inference
        self.recalibrate_bn = recalibrate_bn
        self.standardize_target = standardize_target
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.relaxation_gap = relaxation_gap
        self.random_state = random_state
        self.augment = augment
        self.mixed_precision = mixed_precision
        self.channels_last = channels_last
        self.checkpoint_dir = checkpoint_dir
        self.dtype = dtype

    def _n_outputs(self):
        return self.n_outputs_

    def _check_param_instances(self):
        super()._check_param_instances()
        if self.early_stopping and self.train_split is not None:
            raise InvalidParameterError(
                f"early_stopping=True holds out its own validation split "
                f"(validation_fraction={self.validation_fraction!r}); "
                f"{type(self).__name__} got train_split={self.train_split!r} as "
                "well. Leave train_split=None, or add skorch's EarlyStopping "
                "callback to your own split."
            )

    def initialize_callbacks(self):
        """skorch's callbacks, plus ``EarlyStopping`` when ``early_stopping``.

        Returns
        -------
        self
        """
        super().initialize_callbacks()
        if self.early_stopping:
            self._add_callback(
                "early_stopping",
                lambda: EarlyStopping(
                    monitor="valid_loss",
                    patience=self.n_iter_no_change,
                    load_best=True,
                ),
            )
        return self

    def get_split_datasets(self, X, y=None, **fit_params):
        """skorch's split; with ``early_stopping``, a seeded hold-out.

        Parameters
        ----------
        X, y : array-like
            Training data and (standardised) targets.
        **fit_params : dict
            Passed to skorch.

        Returns
        -------
        dataset_train, dataset_valid : Dataset
            The training and validation data sets.
        """
        if not self.early_stopping:
            return super().get_split_datasets(X, y, **fit_params)
        seed = _rng.stream_seed(getattr(self, "_rng_seed", None), "validation_split")
        split = ValidSplit(self.validation_fraction, random_state=seed)
        return split(self.get_dataset(X, y), y, **fit_params)

    def _set_targets_for(self, classes=None, n_outputs=None):
        n_outputs = 1 if n_outputs is None else int(n_outputs)
        if n_outputs < 1:
            raise ValueError(f"n_outputs must be >= 1; got {n_outputs}.")
        self.n_outputs_ = n_outputs
        self._y_ndim = 1 if n_outputs == 1 else 2
        # no data to learn from: the identity, until load_params brings the
        # saved scaling with the weights (module_'s buffers)
        self._target_stats = (np.zeros(n_outputs), np.ones(n_outputs))

    def _learn_target_stats(self, y, sample_weight=None):
        """Mean and scale per target column (the identity when switched off)."""
        n_outputs = y.shape[1]
        if not self.standardize_target or len(y) == 0:
            return np.zeros(n_outputs), np.ones(n_outputs)
        mean = np.average(y, axis=0, weights=sample_weight)
        std = np.sqrt(np.average((y - mean) ** 2, axis=0, weights=sample_weight))
        # a constant column (up to rounding, as in StandardScaler) keeps
        # scale 1: its targets become 0, never a division by zero
        constant = std <= 10 * np.finfo(np.float64).eps * np.abs(mean)
        return mean, np.where(constant | (std == 0), 1.0, std)

    def initialize_module(self):
        """Build ``module_`` and attach the target scaling as its buffers.

        Returns
        -------
        self

        Examples
        --------
        >>> from sksign.estimators import HTAFNetRegressor
        >>> reg = HTAFNetRegressor((4,), random_state=0).initialize_for(3)
        >>> reg.target_mean_, reg.target_scale_
        (array([0.]), array([1.]))
        """
        super().initialize_module()
        stats = getattr(self, "_target_stats", None)
        if stats is None:  # initialize() before any data: the identity
            n = self._n_outputs()
            stats = (np.zeros(n), np.ones(n))
        device = next(
            (t.device for t in self.module_.parameters()), torch.device(self.device)
        )
        for name, value in zip(self._TARGET_BUFFERS, stats, strict=True):
            tensor = torch.as_tensor(np.asarray(value, dtype=np.float64), device=device)
            self.module_.register_buffer(name, tensor)
        return self

    def _target_buffer(self, name):
        module = vars(self).get("module_")
        if module is None or name not in dict(module.named_buffers(recurse=False)):
            raise AttributeError(
                f"This {type(self).__name__} is not fitted yet: it has no target "
                "scaling."
            )
        return module.get_buffer(name).detach().cpu().numpy().astype(np.float64)

    @property
    def target_mean_(self):
        """Mean of each target column learned in the first fit.

        Zeros with ``standardize_target=False``. Read from ``module_``'s
        buffers, so ``load_params`` restores it with the weights.
        """
        return self._target_buffer(self._TARGET_BUFFERS[0])

    @property
    def target_scale_(self):
        """Standard deviation of each target column learned in the first fit.

        1 for a constant column, and ones with ``standardize_target=False``.
        """
        return self._target_buffer(self._TARGET_BUFFERS[1])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def _prepare_targets(self, X, y, reset):
        """Checked, standardised float32 targets; the rows' weights as one
        more column when ``sample_weight`` was given."""
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                "is None."
            )
        y = np.asarray(y)
        if y.dtype.kind not in "biuf":
            try:
                y = y.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"{type(self).__name__} needs numeric targets; got y of dtype "
                    f"{y.dtype}."
                ) from exc
        if y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D; got shape {y.shape}.")
        if not np.all(np.isfinite(y)):
            raise ValueError("Input y contains NaN or infinity.")
        check_consistent_length(X, y)
        weight = self._fit_sample_weight(X)
        y2 = y.reshape(len(y), -1).astype(np.float64)
        if reset:
            self._y_ndim = y.ndim
            self.n_outputs_ = y2.shape[1]
            self._target_stats = self._learn_target_stats(y2, weight)
            mean, scale = self._target_stats
        elif y2.shape[1] != self.n_outputs_:
            raise ValueError(
                f"y has {y2.shape[1]} targets, but {type(self).__name__} was "
                f"fitted with {self.n_outputs_}."
            )
        else:  # warm_start / partial_fit: the scaling of the first fit
            mean, scale = self.target_mean_, self.target_scale_
        targets = (y2 - mean) / scale
        return self._attach_weights(targets, weight).astype(self.dtype)

    def _loss_targets(self, y_true, y_pred):
        return y_true.reshape(y_pred.shape)

    def _fit_data(self, X, y, *, warm):
        X = check_net_X(self, X, reset=not warm)
        return X, self._prepare_targets(X, y, reset=not warm)

    def _partial_fit_data(self, X, y, *, first, classes=None):
        X = check_net_X(self, X, reset=first)
        return X, self._prepare_targets(X, y, reset=first)

    def fit(self, X, y, sample_weight=None, **fit_params):
        """Initialise (unless ``warm_start``) and train the net.

        Parameters are checked first; a fit that fails leaves the estimator as
        it was.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row. The loss of a mini-batch is
            ``sum(w_i * l_i) / sum(w_i)``, where ``l_i`` is the criterion's
            loss of row ``i`` averaged over the targets (the criterion must
            have a ``reduction`` attribute, as torch's losses do); the target
            scaling is weighted too. None weighs every row 1.
        **fit_params : dict
            Passed to skorch's ``fit``.

        Returns
        -------
        self : HTAFNetRegressor
            The fitted net.

        Examples
        --------
        >>> import numpy as np
        >>> from sksign.estimators import HTAFNetRegressor
        >>> X = np.random.RandomState(0).rand(20, 3)
        >>> reg = HTAFNetRegressor((8,), max_epochs=2, random_state=0)
        >>> reg.fit(X, np.column_stack([X.sum(1), X[:, 0]])).n_outputs_
        2
        """
        return self._fit_weighted(self._fit_net, X, y, sample_weight, fit_params)

    def partial_fit(self, X, y, sample_weight=None, **fit_params):
        """Train for one more ``max_epochs`` round without re-initialising.

        Parameters and data are checked before anything changes (the number
        of features and targets is fixed by the first call); an error during
        the training itself keeps the updates made before it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row, as in :meth:`fit`.
        **fit_params : dict
            Passed to skorch's ``partial_fit``.

        Returns
        -------
        self : HTAFNetRegressor
            The net, trained one more round.

        Examples
        --------
        >>> import numpy as np
        >>> from sksign.estimators import HTAFNetRegressor
        >>> X = np.random.RandomState(0).rand(20, 3)
        >>> reg = HTAFNetRegressor((8,), max_epochs=2, random_state=0)
        >>> len(reg.partial_fit(X, X.sum(1)).partial_fit(X, X.sum(1)).history_)
        4
        """
        return self._fit_weighted(
            self._partial_fit_net, X, y, sample_weight, fit_params
        )

    def predict(self, X):
        """Predict targets (exact step inside for step-like activations).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            As many dimensions as the y seen in fit.

        Examples
        --------
        >>> import numpy as np
        >>> from sksign.estimators import HTAFNetRegressor
        >>> X = np.random.RandomState(0).rand(20, 3)
        >>> reg = HTAFNetRegressor((8,), max_epochs=2, random_state=0)
        >>> reg.fit(X, X.sum(1)).predict(X[:3]).shape
        (3,)
        """
        X = self._rows(X)
        out = self._forward_numpy(X).reshape(len(X), -1)
        out = out * self.target_scale_ + self.target_mean_
        return out.ravel() if self._y_ndim == 1 else out

    @property
    def predict_proba(self):
        """Not available: regressors have no class probabilities."""
        raise AttributeError(
            f"{type(self).__name__} has no predict_proba; it is a regressor."
        )
