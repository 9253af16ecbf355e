"""Intra-class sign repulsion as a training mixin of the skorch nets."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import torch
from torch import nn

from sksign.nn import capture_activations, resolve_layers
from sksign.nn.layers.losses import repulsion_lambda, sign_repulsion_loss

__all__ = ["SignRepulsionMixin"]


class SignRepulsionMixin:
    """Add the Sign Code paper's intra-class sign repulsion to the loss.

    With ``sign_repulsion > 0`` every training step captures the inputs
    (pre-activations) of the ``repulsion_layers`` activation modules and adds
    ``lambda * sign_repulsion_loss`` to the loss, lambda following the
    warm-up and ramp schedule of :func:`sksign.nn.layers.losses.repulsion_lambda`.
    The net needs the parameters ``sign_repulsion``, ``repulsion_tau``,
    ``repulsion_warmup``, ``repulsion_ramp`` and ``repulsion_layers``, and
    ``_targets_and_weights`` (``ClassifierNetMixin``) to read the labels
    of a batch; the rows' weights do not weigh the repulsion term.

    Examples
    --------
    >>> from sksign.estimators import HTAFNetClassifier
    >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1] * 4
    >>> net = HTAFNetClassifier((4,), activation="tanh", sign_repulsion=1.0,
    ...                         repulsion_warmup=0, repulsion_ramp=1,
    ...                         max_epochs=2, random_state=0).fit(X, y)
    >>> "repulsion_loss" in net.history_[-1, "batches", 0]
    True
    """

    _repulsion = None

    def _before_training(self):
        """Resolve `repulsion_layers` on the built net before any training."""
        super()._before_training()
        if self.sign_repulsion:
            self._repulsion_layers()

    def _repulsion_layers(self):
        """``{name: module}`` of the repelled activation modules."""
        return resolve_layers(self.module_, self.repulsion_layers)

    def train_step_single(self, batch, **fit_params):
        """One training step; with repulsion, capture the pre-activations.

        Parameters
        ----------
        batch : tuple
            skorch's batch ``(X, y)``.
        **fit_params : dict
            Passed to the module's forward.

        Returns
        -------
        step : dict
            skorch's ``{"loss": ..., "y_pred": ...}``.

        Examples
        --------
        >>> import torch
        >>> from sksign.estimators import HTAFNetClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1] * 4
        >>> net = HTAFNetClassifier((4,), max_epochs=2, random_state=0).fit(X, y)
        >>> batch = (torch.tensor(X), torch.tensor(y))
        >>> net.train_step_single(batch)["y_pred"].shape
        torch.Size([8, 2])
        """
        lam = 0.0
        if self.sign_repulsion:
            epoch = len(self.history)
            lam = repulsion_lambda(
                epoch, self.sign_repulsion, self.repulsion_warmup, self.repulsion_ramp
            )
            self.history.record("repulsion_lambda", lam)
        if not lam:
            return super().train_step_single(batch, **fit_params)
        layers = self._repulsion_layers()
        gates = {
            name: "tanh" if isinstance(m, nn.Tanh) else "sigmoid"
            for name, m in layers.items()
        }
        with capture_activations(layers, inputs=True, detach=False) as captured:
            self._repulsion = (lam, captured, gates)
            try:
                return super().train_step_single(batch, **fit_params)
            finally:
                self._repulsion = None

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """skorch's loss, plus the weighted repulsion term while training.

        Parameters
        ----------
        y_pred : torch.Tensor
            The net's output.
        y_true : torch.Tensor
            The encoded targets.
        X : object, default=None
            The batch input.
        training : bool, default=False
            Whether the loss is for a training step.

        Returns
        -------
        loss : torch.Tensor
            A scalar.

        Examples
        --------
        >>> import torch
        >>> from sksign.estimators import HTAFNetClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1] * 4
        >>> net = HTAFNetClassifier((4,), max_epochs=2, random_state=0).fit(X, y)
        >>> net.get_loss(torch.zeros(2, 2), torch.tensor([0, 1])).shape
        torch.Size([])
        """
        loss = super().get_loss(y_pred, y_true, X=X, training=training)
        rep = self._repulsion
        if training and rep is not None:
            lam, captured, gates = rep
            # the labels alone: a weighted fit's targets carry the weights too
            y, _ = self._targets_and_weights(
                torch.as_tensor(y_true, device=y_pred.device)
            )
            penalty = sum(
                sign_repulsion_loss(z, y, tau=self.repulsion_tau, gate=gates[name])
                for name, calls in captured.inputs.items()
                for z in calls
            )
            self.history.record_batch("repulsion_loss", float(penalty.detach()))
            loss = loss + lam * penalty
        return loss
