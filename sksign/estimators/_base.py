"""What the skorch nets share: parameters, data, seeding, state, callbacks."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from contextlib import contextmanager
from types import MappingProxyType

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted
from skorch.callbacks import EarlyStopping, PrintLog, ProgressBar
from skorch.history import History

from sksign._compat import InvalidParameterError, validate_parameter_constraints
from sksign._utils import restore_state_on_error
from sksign._validation import check_net_X
from sksign.estimators import _rng
from sksign.estimators._callbacks import RelaxationGap
from sksign.estimators._recipes import EpochCheckpoint, TrainingRecipeMixin

__all__ = ["NetBase"]

#: What skorch's NeuralNet.__init__ sets besides the parameters.
_SKORCH_INIT_STATE = ("history_", "initialized_", "virtual_params_")


class NetBase(TrainingRecipeMixin):
    """Mixin of the sksign skorch nets, placed before skorch's net class.

    It validates the parameters against ``_parameter_constraints``, checks
    and flattens the input (:func:`sksign._validation.check_net_X`), seeds
    the initialisation and the batch order from ``random_state`` without
    moving torch's global RNG, restores the fitted state when a fit fails,
    continues training with ``warm_start``/``partial_fit`` and adds the
    :class:`~sksign.estimators.RelaxationGap` callback.

    Subclasses call ``super().__init__`` with skorch's arguments and then set
    their own parameters; they define ``_parameter_constraints``,
    ``_n_outputs`` and ``_set_targets_for``.

    Examples
    --------
    >>> from sksign.estimators import HTAFNetClassifier
    >>> from sksign.estimators._base import NetBase
    >>> isinstance(HTAFNetClassifier(), NetBase)
    True
    """

    #: Parameters holding a module class or template: plain attributes, not
    #: skorch's registered torch components.
    _plain_params: tuple = ()

    # skorch's NeuralNet.__init__ sets these on the instance; the nets keep
    # them off it until initialize() (scikit-learn's "no attributes set in
    # __init__"), and skorch reads these class defaults meanwhile.
    history_ = None
    initialized_ = False
    virtual_params_ = MappingProxyType({})

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in _SKORCH_INIT_STATE:
            vars(self).pop(name, None)

    def __setattr__(self, name, attr):
        if name in self._plain_params:
            # A parameter (a name, a module class or a template copied at
            # each fit), not one of skorch's torch components: skip skorch's
            # registration, which refuses nn.Module values outside
            # initialize(), so that _check_params can explain.
            object.__setattr__(self, name, attr)
            return
        super().__setattr__(name, attr)

    def _get_param_names(self):
        # skorch takes every public-looking key of __dict__ as a param, which
        # includes its own ``_params_to_validate`` set and our private fitted
        # state; private names are never constructor parameters.
        return [k for k in super()._get_param_names() if not k.startswith("_")]

    # -- parameters -----------------------------------------------------------
    def _check_params(self):
        """Check every parameter before anything changes (fit, initialize)."""
        self._check_param_instances()
        self._check_augment()
        validate_parameter_constraints(
            self._parameter_constraints,
            self.get_params(deep=False),
            caller_name=type(self).__name__,
        )
        self._check_early_stopping()

    def _check_param_instances(self):
        """Checks the constraints cannot express (class vs instance, ...)."""

    def _check_early_stopping(self):
        if self.train_split is not None or getattr(self, "early_stopping", False):
            return
        # skorch's EarlyStopping watches valid_loss by default, which a net
        # without a validation split never records
        for cb in self.callbacks if isinstance(self.callbacks, list | tuple) else ():
            cb = cb[1] if isinstance(cb, tuple) else cb
            monitor = getattr(cb, "monitor", None)
            if isinstance(cb, EarlyStopping) and str(monitor).startswith("valid"):
                raise InvalidParameterError(
                    f"EarlyStopping(monitor={monitor!r}) needs validation "
                    f"data, but {type(self).__name__} has train_split=None (its "
                    "default: it trains on all of X). Pass "
                    "train_split=ValidSplit(5) (skorch.dataset) or "
                    "EarlyStopping(monitor='train_loss')."
                )

    # -- seeding (every stream comes from sksign/estimators/_rng.py) -----------
    def initialize(self):
        """Check the parameters and build the net (skorch's ``initialize``).

        Returns
        -------
        self
        """
        self._check_params()
        seed = _rng.base_seed(self.random_state)
        self._rng_seed = seed
        self._train_generator = (
            None if seed is None else _rng.generator(_rng.stream_seed(seed, "shuffle"))
        )
        # the weights are drawn on the CPU: its generator only
        with _rng.seeded(_rng.stream_seed(seed, "weights"), device="cpu"):
            return super().initialize()

    def get_iterator(self, dataset, training=False):
        # A DataLoader without a generator draws its base seed from torch's
        # global RNG when iterated; predict and transform must not move it.
        generator = (
            getattr(self, "_train_generator", None) if training else _rng.generator()
        )
        if generator is None:  # unseeded training: skorch's own iterator
            return super().get_iterator(dataset, training=training)
        prefix = "iterator_train" if training else "iterator_valid"
        kwargs = self.get_params_for(prefix)
        kwargs.setdefault("batch_size", self.batch_size)
        if kwargs["batch_size"] == -1:
            kwargs["batch_size"] = len(dataset)
        kwargs.setdefault("generator", generator)
        iterator = self.iterator_train if training else self.iterator_valid
        return iterator(dataset, **kwargs)

    @contextmanager
    def _training_rng(self):
        """Seed the training's own randomness (dropout, ...) from random_state,
        leaving torch's global RNG as it was; unseeded nets use the global RNG."""
        # one stream per call, so partial_fit rounds differ but repeat; only
        # the generators of the net's device, so no other RNG moves
        seed = getattr(self, "_rng_seed", None)
        call = _rng.stream_seed(seed, "call", len(self.history_))
        with _rng.seeded(call, device=self.device):
            yield

    # -- fitting --------------------------------------------------------------
    def _continues_training(self):
        """Whether ``fit`` goes on training the existing net (``warm_start``)."""
        return bool(
            self.warm_start and self.initialized_ and hasattr(self, "n_features_in_")
        )

    def _first_partial_fit(self):
        """Whether ``partial_fit`` starts a new net."""
        return not self.initialized_

    def _fit_net(self, X, y, fit_params):
        """Check, (re)initialise unless ``warm_start`` goes on, and train.

        A fit that fails (bad parameters, data, fit_params, or during the
        training) leaves the estimator as it was.
        """
        with restore_state_on_error(self):
            self._check_params()
            warm = self._continues_training()
            X, y = self._fit_data(X, y, warm=warm)
            if not warm:
                self.initialize()
            return self._train(X, y, fit_params, resume=not warm)

    def _partial_fit_net(self, X, y, fit_params, classes=None):
        """Train one more round; the first call initialises the net."""
        with restore_state_on_error(self):
            self._check_params()
            first = self._first_partial_fit()
            X, y = self._partial_fit_data(X, y, first=first, classes=classes)
            if first:
                self.initialize()
            return self._train(X, y, fit_params)

    def _before_training(self):
        """Last checks on the built net, before any epoch."""

    def _train(self, X, y, fit_params, resume=False):
        self._before_training()
        with self._training_rng():
            if not (resume and self.checkpoint_dir is not None):
                # skorch's partial_fit: the epochs, without re-initialising
                return super().partial_fit(X, y, **fit_params)
            # skorch's partial_fit for the epochs a checkpoint leaves to train
            epochs = self._resume()
            self.notify("on_train_begin", X=X, y=y)
            try:
                if epochs:
                    self.fit_loop(X, y, epochs=epochs, **fit_params)
            except KeyboardInterrupt:
                pass
            self.notify("on_train_end", X=X, y=y)
            return self

    def initialize_history(self):
        """Start a new history (skorch clears the old one in place).

        A new History rather than skorch's in-place clear: a fit that fails
        after initialize() then gives the previous history back intact.

        Returns
        -------
        self
        """
        self.history_ = History()
        return self

    def initialize_callbacks(self):
        """skorch's callbacks, plus :class:`RelaxationGap` when asked for.

        Returns
        -------
        self
        """
        super().initialize_callbacks()
        gap = self.relaxation_gap
        if bool(self.verbose) if isinstance(gap, str) else bool(gap):
            # before the progress table, so that it prints the gap's columns
            logs = [isinstance(cb, PrintLog) for _, cb in self.callbacks_]
            pos = logs.index(True) if True in logs else len(logs)
            self._add_callback("relaxation_gap", RelaxationGap, pos)
        if self.checkpoint_dir is not None:
            self._add_callback("epoch_checkpoint", EpochCheckpoint)
        if self.verbose and self.verbose >= 2:
            self._add_callback("progress_bar", ProgressBar)
        return self

    def _add_callback(self, name, make, position=None):
        """Insert ``make()`` as callback `name`, unless the user passed one."""
        if name in dict(self.callbacks_):
            return
        position = len(self.callbacks_) if position is None else position
        self.callbacks_.insert(position, (name, make().initialize()))

    def initialize_for(
        self, n_features_in, *, classes=None, n_outputs=None, input_shape=None
    ):
        """Build the untrained net for data of this shape (for ``load_params``).

        ``initialize()`` needs what ``fit`` learns from the data: the input
        width and the classes (classifiers) or number of targets (regressors).
        This sets them and initialises, so saved weights can be loaded.

        Parameters
        ----------
        n_features_in : int
            Number of input features (flattened image size for images).
        classes : array-like, default=None
            The class labels (classifiers; required there).
        n_outputs : int, default=None
            Number of regression targets (regressors; default 1, which makes
            ``predict`` return 1-D arrays).
        input_shape : tuple of int, default=None
            Image shape ``(C, H, W)`` when the net was fitted on 4-D X.

        Returns
        -------
        self

        Examples
        --------
        >>> import os, tempfile
        >>> from sksign.estimators import HTAFNetClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1] * 4
        >>> net = HTAFNetClassifier((4,), max_epochs=2, random_state=0).fit(X, y)
        >>> path = os.path.join(tempfile.mkdtemp(), "net.safetensors")
        >>> net.save_params(f_params=path, use_safetensors=True)
        >>> new = HTAFNetClassifier(**net.get_params()).initialize_for(
        ...     net.n_features_in_, classes=net.classes_
        ... )
        >>> new.load_params(f_params=path, use_safetensors=True)
        >>> bool((new.predict_proba(X) == net.predict_proba(X)).all())
        True
        """
        self.n_features_in_ = int(n_features_in)
        self._image_shape = None if input_shape is None else tuple(input_shape)
        self._set_targets_for(classes=classes, n_outputs=n_outputs)
        return self.initialize()

    def _place_module(self, module):
        """`module` on the net's ``device``, its floats of the net's ``dtype``."""
        dtype = getattr(torch, getattr(self, "dtype", "float32"))
        return module.to(device=self.device, dtype=dtype)

    # -- inference ------------------------------------------------------------
    def _rows(self, X):
        """Checked float32 rows of a fitted net's input."""
        self._check_fitted()
        return check_net_X(self, X, reset=False)

    def _forward_numpy(self, X):
        """Raw net outputs for validated float32 rows, in eval mode."""
        out = [o.detach().cpu().numpy() for o in self.forward_iter(X, training=False)]
        return np.concatenate(out).astype(np.float64, copy=False)

    def _check_fitted(self):
        check_is_fitted(self, "module_")
        if not self.initialized_:  # pragma: no cover
            check_is_fitted(self, "initialized_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags
