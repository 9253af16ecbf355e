"""How the HTAF nets train and infer: alpha0 annealing, the inference mode and
the BatchNorm statistics of the exact step."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from contextlib import nullcontext

from skorch.dataset import unpack_data
from skorch.utils import to_tensor

from sksign.estimators._callbacks import AlphaAnnealing
from sksign.nn import (
    StepActivation,
    batchnorm_layers,
    force_step_mode,
    recalibrate_batchnorm,
)

__all__ = ["BatchNormRecalibrationMixin", "StepTrainingMixin"]


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
        flags = [(m, m.training) for m in module.modules()]
        try:
            module.train()
            return [name for name, bn in norms.items() if bn.training]
        finally:
            for m, training in flags:
                m.training = training

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


class StepTrainingMixin(BatchNormRecalibrationMixin):
    """``alpha0_start``/``anneal_epochs``, ``inference`` and ``recalibrate_bn``.

    ``alpha0_start`` (not None) adds an :class:`AlphaAnnealing` callback
    named "alpha_annealing" that raises HTAF's ``alpha0`` from
    ``alpha0_start`` to ``alpha0`` over ``anneal_epochs``. ``inference``
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

    def initialize_callbacks(self):
        """skorch's callbacks, plus :class:`AlphaAnnealing` when asked for.

        Returns
        -------
        self
        """
        super().initialize_callbacks()
        if self.alpha0_start is not None:
            # first: every other callback sees the epoch's alpha0
            self._add_callback(
                "alpha_annealing",
                lambda: AlphaAnnealing(self.alpha0_start, self.anneal_epochs),
                0,
            )
        return self

    def _inference_mode(self):
        """Force the smooth function outside training when asked for."""
        if self.inference == "smooth" and hasattr(self, "module_"):
            return force_step_mode(self.module_, "smooth")
        return nullcontext()

    def evaluation_step(self, batch, training=False):
        """skorch's evaluation step, with the activations of ``inference``.

        Parameters
        ----------
        batch : tuple
            A batch of the data loader.
        training : bool, default=False
            Run in train mode (then ``inference`` does not apply).

        Returns
        -------
        torch.Tensor
            The net's output for the batch.
        """
        if training:
            return super().evaluation_step(batch, training=training)
        with self._inference_mode():
            return super().evaluation_step(batch, training=training)

    def validation_step(self, batch, **fit_params):
        """skorch's validation step, with the activations of ``inference``.

        Parameters
        ----------
        batch : tuple
            A batch of the data loader.
        **fit_params : dict
            Passed to skorch.

        Returns
        -------
        dict
            The loss and the predictions.
        """
        with self._inference_mode():
            return super().validation_step(batch, **fit_params)
