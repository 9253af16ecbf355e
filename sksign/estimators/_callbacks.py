"""skorch callback that records the relaxation gap of step-like nets."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import torch
from skorch.callbacks import Callback

from sksign.nn.activations import StepActivation, force_step_mode

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

        handles = [a.register_forward_hook(count) for a in acts] if mode else []
        preds, targets = [], []
        was_training = module.training
        try:
            module.eval()
            with force_step_mode(module, mode or "hard"), torch.no_grad():
                for Xi, yi in net.get_iterator(dataset, training=False):
                    out = net.infer(Xi)
                    preds.append(out.detach().cpu().numpy())
                    targets.append(np.asarray(yi))
        finally:
            for h in handles:
                h.remove()
            module.train(was_training)
        preds, targets = np.concatenate(preds), np.concatenate(targets)
        rate = counts[0] / counts[1] if counts[1] else float("nan")
        return preds, targets, rate

    def on_epoch_end(self, net, dataset_train=None, dataset_valid=None, **kwargs):
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
        is_classifier = getattr(net, "_estimator_type", None) == "classifier" or (
            hasattr(net, "classes_inferred_")
        )
        if is_classifier:
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
