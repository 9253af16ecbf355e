"""How the HTAF nets train and infer: alpha0 annealing and the inference mode."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from contextlib import nullcontext

from sksign.estimators._callbacks import AlphaAnnealing
from sksign.nn import force_step_mode

__all__ = ["StepTrainingMixin"]


class StepTrainingMixin:
    """``alpha0_start``/``anneal_epochs`` and ``inference`` of the HTAF nets.

    ``alpha0_start`` (not None) adds an :class:`AlphaAnnealing` callback
    named "alpha_annealing" that raises HTAF's ``alpha0`` from
    ``alpha0_start`` to ``alpha0`` over ``anneal_epochs``. ``inference``
    chooses what the step-like activations compute outside training:
    "step", the exact ``1[x >= 0]`` (hidden units are bits), or "smooth",
    the training function (for HTAF, ``sigmoid(alpha1 * tanh(alpha0 * x))``).
    It applies to every forward pass made in evaluation: ``predict``,
    ``predict_proba``, ``forward`` and the validation loss.

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
