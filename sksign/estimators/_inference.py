"""``inference``: what a net's step-like activations compute outside training."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from contextlib import nullcontext

from sksign.nn import force_step_mode

__all__ = ["InferenceModeMixin"]


class InferenceModeMixin:
    """The ``inference`` parameter of the nets with step-like activations.

    "step" leaves the activations to their eval-mode function, the exact
    ``1[x >= 0]`` (hidden units are bits); "smooth" forces the training
    function (for HTAF, ``sigmoid(alpha1 * tanh(alpha0 * x))``) in every
    forward pass made in evaluation: ``predict``, ``predict_proba``,
    ``decision_function``, ``forward`` and the validation loss. Training is
    unchanged, and the value can be changed after fit with ``set_params``.

    Examples
    --------
    >>> from sksign.estimators import ICBMClassifier
    >>> from sksign.estimators._inference import InferenceModeMixin
    >>> isinstance(ICBMClassifier(inference="smooth"), InferenceModeMixin)
    True
    """

    def _inference_mode(self):
        """Force the smooth function outside training when asked for."""
        # getattr: a net pickled before it had the parameter infers with steps
        smooth = getattr(self, "inference", "step") == "smooth"
        if smooth and hasattr(self, "module_"):
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
