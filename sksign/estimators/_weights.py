"""``sample_weight`` for the skorch nets: one weighted loss for every net."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import torch
from skorch.utils import to_tensor

from sksign._compat import _check_sample_weight

__all__ = ["SampleWeightMixin", "weighted_mean"]


def weighted_mean(values, weight=None):
    """Mean of `values` over rows, weighted by `weight` when given.

    NaN when the weights sum to 0 (a validation split of zero-weight rows).

    Examples
    --------
    >>> weighted_mean([1.0, 0.0], [3.0, 1.0]), weighted_mean([1.0, 0.0])
    (0.75, 0.5)
    """
    values = np.asarray(values, dtype=np.float64)
    if weight is None:
        return float(np.mean(values))
    weight = np.asarray(weight, dtype=np.float64)
    total = weight.sum()
    if total == 0:
        return float("nan")
    return float((weight * values).sum() / total)


class SampleWeightMixin:
    """Weigh each row's loss by its ``sample_weight`` (left of ``NetBase``).

    ``fit(X, y, sample_weight)`` keeps the weights while the data are checked
    (``_fit_sample_weight`` validates them, scikit-learn's way); the checked
    weights travel with the targets as their last column (``_attach_weights``),
    so skorch's data sets, splits and batches carry them with each row. The
    loss of a mini-batch is then ``sum(w_i * l_i) / sum(w_i)``, where ``l_i``
    is the criterion's loss of row ``i`` (``reduction="none"``) averaged over
    its targets: integer weights train as repeated rows do. A fit without
    weights takes skorch's loss unchanged.

    Subclasses split a batch's targets with ``_targets_and_weights`` (the
    regressor's targets are all but the last column; a classifier's labels
    are the first) and may shape them for the criterion with
    ``_loss_targets``.

    Examples
    --------
    >>> from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor
    >>> from sksign.estimators._weights import SampleWeightMixin
    >>> isinstance(HTAFNetRegressor(), SampleWeightMixin)
    True
    >>> isinstance(HTAFNetClassifier(), SampleWeightMixin)
    True
    """

    def _fit_weighted(self, fit, X, y, sample_weight, fit_params):
        """Run `fit` (the plain or partial fit) with the rows' weights."""
        self._sample_weight_in = sample_weight
        try:
            return fit(X, y, fit_params)
        finally:
            self._sample_weight_in = None
            self._weighted_training = False

    def _fit_sample_weight(self, X):
        """The checked float64 ``sample_weight`` of this fit (None: none given)."""
        weight = getattr(self, "_sample_weight_in", None)
        if weight is None:
            return None
        return _check_sample_weight(
            weight, X, dtype=np.float64, ensure_non_negative=True
        )

    def _attach_weights(self, targets, weight):
        """`targets` as the net's float rows, with `weight` as a last column.

        Without weights the targets are returned as they are.
        """
        self._weighted_training = weight is not None
        if weight is None:
            return targets
        targets = np.asarray(targets).reshape(len(targets), -1)
        return np.column_stack([targets, weight]).astype(self.dtype)

    def _targets_and_weights(self, y_true):
        """Split a batch's targets into (targets, weights or None)."""
        if getattr(self, "_weighted_training", False):
            return y_true[:, :-1], y_true[:, -1]
        return y_true, None

    def _loss_targets(self, y_true, y_pred):
        """The targets as the criterion takes them (per-row loss)."""
        return y_true

    def _before_training(self):
        super()._before_training()
        if getattr(self, "_weighted_training", False) and not hasattr(
            self.criterion_, "reduction"
        ):
            raise TypeError(
                f"sample_weight needs a criterion with a 'reduction' attribute "
                f"(torch's losses have one); {type(self.criterion_).__name__} "
                "has none."
            )

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """The criterion's loss; with weights, their weighted mean.

        Parameters
        ----------
        y_pred : torch.Tensor
            The net's output for a batch.
        y_true : torch.Tensor
            The batch's targets (and weights, last column, in a weighted fit).
        X : object, default=None
            The batch's input (unused).
        training : bool, default=False
            Whether the loss is for a training step.

        Returns
        -------
        torch.Tensor
            A scalar loss.

        Examples
        --------
        >>> import torch
        >>> from sksign.estimators import HTAFNetRegressor
        >>> reg = HTAFNetRegressor((4,), random_state=0).initialize_for(3)
        >>> float(reg.get_loss(torch.zeros(2, 1), torch.ones(2, 1)))
        1.0
        """
        y_true = to_tensor(y_true, device=self.device)
        y_true, weight = self._targets_and_weights(y_true)
        if weight is None:
            return super().get_loss(y_pred, y_true, X=X, training=training)
        criterion = self.criterion_
        reduction = criterion.reduction
        criterion.reduction = "none"
        try:
            per_row = super().get_loss(
                y_pred, self._loss_targets(y_true, y_pred), X=X, training=training
            )
        finally:
            criterion.reduction = reduction
        per_row = per_row.reshape(len(per_row), -1).mean(dim=1)
        total = weight.sum()
        tiny = torch.finfo(total.dtype).tiny
        return (weight * per_row).sum() / total.clamp_min(tiny)
