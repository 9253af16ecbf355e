"""How the HTAF nets train and infer: alpha0 annealing, the inference mode and
the BatchNorm statistics of the exact step."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import inspect
import warnings

from skorch.callbacks import LRScheduler
from skorch.dataset import unpack_data
from skorch.utils import to_tensor

from sksign._compat import InvalidParameterError
from sksign.estimators._callbacks import AlphaAnnealing
from sksign.estimators._inference import InferenceModeMixin
from sksign.estimators._step_recipe import (
    AUTO_ALPHA0_START,
    CosineSchedule,
    StepForwardPhase,
    auto_recipe,
)
from sksign.nn import (
    StepActivation,
    batchnorm_layers,
    recalibrate_batchnorm,
    temporary_mode,
)

__all__ = ["BatchNormRecalibrationMixin", "StepTrainingMixin"]

_UNSET = object()


class BatchNormRecalibrationMixin:
    """``recalibrate_bn``: BatchNorm statistics of the exact step after fit.

    A step net's BatchNorm layers collect their running statistics in
    training, on the smooth activations, but in evaluation they see the
    bits of the exact step. With ``recalibrate_bn=True``, ``fit`` and
    ``partial_fit`` end with one pass over the training rows (without the
    rows a ``train_split`` holds out; batches of ``batch_size``, in order,
    no augmentation) that re-estimates them with the exact step
    (:func:`sksign.nn.recalibrate_batchnorm`). The BatchNorm layers that
    stay in eval mode while the net trains (a frozen backbone) keep theirs.
    The pass is skipped when the net has no BatchNorm layer or no step-like
    activation, or when ``inference="smooth"``.

    Examples
    --------
    >>> from sksign.estimators import ICBMClassifier
    >>> from sksign.estimators._training import BatchNormRecalibrationMixin
    >>> isinstance(ICBMClassifier(), BatchNormRecalibrationMixin)
    True
    """

    def _train(self, X, y, fit_params, resume=False):
        net = super()._train(X, y, fit_params, resume=resume)
        self._recalibrate_batchnorm(X, y)
        return net

    def _recalibrated_layers(self):
        """Names of the BatchNorm layers the pass re-estimates (maybe none)."""
        if not self.recalibrate_bn or getattr(self, "inference", "step") != "step":
            return []
        module = self.module_
        if not any(isinstance(m, StepActivation) for m in module.modules()):
            return []
        norms = batchnorm_layers(module)
        if not norms:
            return []
        # the layers that train with the net: a frozen part stays in eval()
        with temporary_mode(module, training=True):
            return [name for name, bn in norms.items() if bn.training]

    def _recalibrate_batchnorm(self, X, y):
        """Re-estimate the BatchNorm statistics with the exact step."""
        layers = self._recalibrated_layers()
        if not layers:
            return
        dataset, _ = self.get_split_datasets(X, y)
        batches = (
            to_tensor(unpack_data(batch)[0], device=self.device)
            for batch in self.get_iterator(dataset, training=False)
        )
        recalibrate_batchnorm(self.module_, batches, mode="hard", layers=layers)


class StepTrainingMixin(InferenceModeMixin, BatchNormRecalibrationMixin):
    """The step nets' recipe: ``lr``, ``lr_schedule``, ``alpha0_start``,
    ``anneal_epochs``, ``inference`` and ``recalibrate_bn``.

    The "auto" values of ``lr``, ``lr_schedule`` and ``alpha0_start`` take
    the :func:`~sksign.estimators._step_recipe.auto_recipe` of the net's
    ``architecture`` and ``activation``; the rate used is ``lr_``.
    ``lr_schedule`` adds a :class:`~sksign.estimators.CosineSchedule`
    callback named "lr_schedule" (not with "auto" when ``callbacks`` holds a
    skorch ``LRScheduler``). ``alpha0_start`` (not None) adds an
    :class:`AlphaAnnealing` callback named "alpha_annealing" that raises
    HTAF's ``alpha0`` from ``alpha0_start`` to ``alpha0`` over
    ``anneal_epochs`` ("auto": all ``max_epochs``). ``step_forward_from``
    (not None) adds a :class:`StepForwardPhase` callback named
    "step_forward": the last part of the fit trains on the exact step with
    the smooth gradient. ``inference``
    chooses what the step-like activations compute outside training:
    "step", the exact ``1[x >= 0]`` (hidden units are bits), or "smooth",
    the training function (for HTAF, ``sigmoid(alpha1 * tanh(alpha0 * x))``).
    It applies to every forward pass made in evaluation: ``predict``,
    ``predict_proba``, ``forward`` and the validation loss.
    ``recalibrate_bn`` comes from :class:`BatchNormRecalibrationMixin`.

    Examples
    --------
    >>> from sksign.estimators import HTAFNetRegressor
    >>> from sksign.estimators._training import StepTrainingMixin
    >>> isinstance(HTAFNetRegressor(), StepTrainingMixin)
    True
    """

    # -- the resolved recipe ----------------------------------------------------
    def _recipe(self):
        return auto_recipe(self.architecture, self.activation)

    def _alpha0_start(self):
        """``alpha0_start`` with "auto" resolved (None: no annealing)."""
        start = self.alpha0_start
        if start == "auto":
            anneal = (
                self._recipe().anneal
                and self.activation == "htaf"
                and float(self.alpha0) > AUTO_ALPHA0_START
            )
            return AUTO_ALPHA0_START if anneal else None
        return start

    def _lr_schedule(self):
        """``lr_schedule`` with "auto" resolved."""
        if self.lr_schedule != "auto":
            return self.lr_schedule
        return "constant" if self._user_lr_scheduler() else self._recipe().lr_schedule

    def _step_forward_from(self):
        """``step_forward_from`` with "auto" resolved (None: never)."""
        start = getattr(self, "step_forward_from", None)
        if start == "auto":
            return self._recipe().step_forward_from
        return start

    def _anneal_epochs(self):
        return self.max_epochs if self.anneal_epochs == "auto" else self.anneal_epochs

    def _user_lr_scheduler(self):
        """Whether ``callbacks`` holds a skorch ``LRScheduler``."""
        callbacks = self.callbacks if isinstance(self.callbacks, list | tuple) else ()
        return any(
            isinstance(cb[1] if isinstance(cb, tuple) else cb, LRScheduler)
            for cb in callbacks
        )

    def _check_param_instances(self):
        super()._check_param_instances()
        if self.lr_schedule == "cosine" and self._user_lr_scheduler():
            raise InvalidParameterError(
                f"{type(self).__name__} got lr_schedule='cosine' and an "
                "LRScheduler in callbacks: two schedules would set the rate. "
                "Pass lr_schedule='constant' to keep your LRScheduler, or drop it."
            )

    def _before_training(self):
        super()._before_training()
        self._warn_ignored_alphas()

    def _warn_ignored_alphas(self):
        """Warn when ``alpha0``/``alpha1``/``alpha0_start`` shape nothing.

        They shape "htaf" (and "scaled_sigmoid": ``k = alpha0 * alpha1``) in
        the nets built from ``architecture``; any other activation ignores
        them, and a grid over them would compare identical nets.
        """
        if self.module is not None or not isinstance(self.architecture, str):
            return  # a user's module: the parameters may reach it
        act = self.activation
        defaults = inspect.signature(type(self)).parameters
        changed = [
            name
            for name in ("alpha0", "alpha1")
            if act not in ("htaf", "scaled_sigmoid")
            and getattr(self, name) != defaults[name].default
        ]
        start = self.alpha0_start
        if act != "htaf" and start not in (None, defaults["alpha0_start"].default):
            changed.append("alpha0_start")
        if changed:
            warnings.warn(
                f"{', '.join(changed)} set on {type(self).__name__} with "
                f"activation={act!r}, which ignores "
                f"{'it' if len(changed) == 1 else 'them'}: they shape 'htaf' "
                "(alpha0_start: 'htaf' only; 'scaled_sigmoid' uses k = alpha0 "
                "* alpha1). Set activation='htaf' to grid them.",
                UserWarning,
                stacklevel=4,
            )

    def get_params_for_optimizer(self, prefix, named_parameters):
        """skorch's optimizer arguments, with ``lr="auto"`` resolved.

        Parameters
        ----------
        prefix : str
            The optimizer's name ("optimizer").
        named_parameters : iterable of (str, Parameter)
            The parameters it updates.

        Returns
        -------
        args, kwargs
            The optimizer's arguments.
        """
        args, kwargs = super().get_params_for_optimizer(prefix, named_parameters)
        if kwargs.get("lr") == "auto":
            kwargs["lr"] = self._recipe().lr
        if prefix == "optimizer":
            self.lr_ = kwargs["lr"]
        return args, kwargs

    def set_params(self, **params):
        """Set parameters; ``lr="auto"`` on a built net resolves at once.

        Parameters
        ----------
        **params : dict
            Estimator parameters.

        Returns
        -------
        self
        """
        lr = params.pop("lr", _UNSET)
        super().set_params(**params)
        if lr is _UNSET:
            return self
        auto = isinstance(lr, str) and lr == "auto"
        if auto and self.initialized_ and hasattr(self, "optimizer_"):
            # skorch's setter writes the value into the optimizer's groups
            super().set_params(lr=self._recipe().lr)
            self.lr_ = self.optimizer_.param_groups[0]["lr"]
            vars(self)["lr"] = "auto"
            return self
        return super().set_params(lr=lr)

    def initialize_callbacks(self):
        """skorch's callbacks, plus the schedule and the annealing of the recipe.

        Returns
        -------
        self
        """
        super().initialize_callbacks()
        start = self._alpha0_start()
        if start is not None:
            # first: every other callback sees the epoch's alpha0
            self._add_callback(
                "alpha_annealing",
                lambda: AlphaAnnealing(start, self._anneal_epochs()),
                0,
            )
        if self._lr_schedule() == "cosine":
            self._add_callback("lr_schedule", CosineSchedule, 0)
        step_from = self._step_forward_from()
        if step_from is not None:
            self._add_callback("step_forward", lambda: StepForwardPhase(step_from), 0)
        return self
