"""skorch callback that records the relaxation gap of step-like nets."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import is_classifier
from skorch.callbacks import Callback

from sksign.nn import StepActivation, force_step_mode, forward_hooks

__all__ = ["RelaxationGap"]


class RelaxationGap(Callback):
    """Record the exact-step vs smooth-net gap and the binarization rate.

    At the end of each epoch the net is evaluated twice on the validation
    data (on the training data when the net has no ``train_split``): once
    with every step-like activation (HTAF, STE, scaled sigmoid) forced to the
    smooth training function, once with the exact step used at inference.
    The following keys are written into ``net.history_`` (``<split>`` is
    ``valid`` or ``train``):

    - ``<split>_acc_smooth`` / ``<split>_acc_step`` (classifiers) or
      ``<split>_mse_smooth`` / ``<split>_mse_step`` (regressors);
    - ``relaxation_gap``: smooth minus step accuracy (classifiers) or step
      minus smooth MSE (regressors), so larger is worse in both cases;
    - ``binarization_rate``: share of smooth step-activation outputs within
      ``tol`` of 0 or 1.

    Nets without step-like activations are left alone. Added to
    :class:`~sksign.estimators.HTAFNetClassifier` and
    :class:`~sksign.estimators.HTAFNetRegressor` by default when
    ``verbose > 0`` (``relaxation_gap="auto"``).

    Parameters
    ----------
    tol : float, default=0.1
        Distance to 0 or 1 under which an output counts as binary.

    Examples
    --------
    >>> from sksign.estimators import HTAFNetClassifier, RelaxationGap
    >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1] * 4
    >>> net = HTAFNetClassifier((4,), max_epochs=2, random_state=0,
    ...                         callbacks=[("gap", RelaxationGap(tol=0.2))])
    >>> row = net.fit(X, y).history_[-1]
    >>> 0.0 <= row["binarization_rate"] <= 1.0, "train_acc_step" in row
    (True, True)
    """

    def __init__(self, tol: float = 0.1) -> None:
        self.tol = tol

    def _evaluate(self, net, dataset, mode):
        module = net.module_
        acts = [m for m in module.modules() if isinstance(m, StepActivation)]
        counts = [0, 0]

        def count(_m, _inp, out):
            o = out.detach()
            counts[0] += int(((o <= self.tol) | (o >= 1.0 - self.tol)).sum())
            counts[1] += o.numel()

        hooks = [(a, count) for a in acts] if mode else []
        preds, targets = [], []
        with (
            forward_hooks(post=hooks, eval_mode=module),
            force_step_mode(module, mode or "hard"),
            torch.no_grad(),
        ):
            for Xi, yi in net.get_iterator(dataset, training=False):
                out = net.infer(Xi)
                preds.append(out.detach().cpu().numpy())
                targets.append(np.asarray(yi))
        preds, targets = np.concatenate(preds), np.concatenate(targets)
        rate = counts[0] / counts[1] if counts[1] else float("nan")
        return preds, targets, rate

    def on_epoch_end(self, net, dataset_train=None, dataset_valid=None, **kwargs):
        """Evaluate smooth and exact step, and record the gap into the history.

        Parameters
        ----------
        net : skorch.NeuralNet
            The net being trained.
        dataset_train, dataset_valid : Dataset or None
            skorch's data sets of the epoch; the validation one is used when
            there is one.
        **kwargs : dict
            Ignored.

        Examples
        --------
        >>> import numpy as np
        >>> from sksign.estimators import HTAFNetRegressor, RelaxationGap
        >>> X = np.array([[0.0, 1.0], [1.0, 0.0]] * 4, dtype=np.float32)
        >>> y = np.array([[0.0], [1.0]] * 4, dtype=np.float32)
        >>> net = HTAFNetRegressor((4,), max_epochs=2, random_state=0).fit(X, y)
        >>> RelaxationGap().on_epoch_end(net, dataset_train=net.get_dataset(X, y))
        >>> "train_mse_step" in net.history_[-1]
        True
        """
        module = net.module_
        if not any(isinstance(m, StepActivation) for m in module.modules()):
            return
        split, dataset = "valid", dataset_valid
        if dataset is None:
            split, dataset = "train", dataset_train
        if dataset is None or len(dataset) == 0:
            return
        smooth, y, rate = self._evaluate(net, dataset, "smooth")
        step, _, _ = self._evaluate(net, dataset, None)
        if is_classifier(net):
            acc_smooth = float(np.mean(smooth.argmax(1) == y))
            acc_step = float(np.mean(step.argmax(1) == y))
            net.history.record(f"{split}_acc_smooth", acc_smooth)
            net.history.record(f"{split}_acc_step", acc_step)
            net.history.record("relaxation_gap", acc_smooth - acc_step)
        else:
            y = y.reshape(smooth.shape)
            mse_smooth = float(np.mean((smooth - y) ** 2))
            mse_step = float(np.mean((step - y) ** 2))
            net.history.record(f"{split}_mse_smooth", mse_smooth)
            net.history.record(f"{split}_mse_step", mse_step)
            net.history.record("relaxation_gap", mse_step - mse_smooth)
        net.history.record("binarization_rate", rate)
