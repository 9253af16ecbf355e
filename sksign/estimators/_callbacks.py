"""skorch callbacks of the HTAF nets: the relaxation gap and alpha0 annealing."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import is_classifier
from skorch.callbacks import Callback

from sksign.estimators._weights import weighted_mean
from sksign.nn import HTAF, IFNeuron, StepActivation, force_step_mode, forward_hooks

__all__ = ["AlphaAnnealing", "RelaxationGap"]


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
        # a weighted fit's targets carry the rows' weights (sample_weight)
        separate = getattr(net, "_targets_and_weights", lambda t: (t, None))
        y, weight = separate(y)
        if is_classifier(net):
            acc_smooth = weighted_mean(smooth.argmax(1) == y, weight)
            acc_step = weighted_mean(step.argmax(1) == y, weight)
            net.history.record(f"{split}_acc_smooth", acc_smooth)
            net.history.record(f"{split}_acc_step", acc_step)
            net.history.record("relaxation_gap", acc_smooth - acc_step)
        else:
            y = y.reshape(smooth.shape)
            mse_smooth = _mean_squared_error(smooth, y, weight)
            mse_step = _mean_squared_error(step, y, weight)
            net.history.record(f"{split}_mse_smooth", mse_smooth)
            net.history.record(f"{split}_mse_step", mse_step)
            net.history.record("relaxation_gap", mse_step - mse_smooth)
        net.history.record("binarization_rate", rate)


def _mean_squared_error(pred, y, weight):
    """Mean squared error over targets, rows weighted when weights are given."""
    per_row = ((pred - y) ** 2).reshape(len(y), -1).mean(axis=1)
    return weighted_mean(per_row, weight)


class AlphaAnnealing(Callback):
    """Raise HTAF's ``alpha0`` geometrically from a start value during training.

    At the start of epoch ``e`` (0-based) every :class:`~sksign.nn.HTAF`
    module of the net gets

    ``alpha0_e = start * (alpha0 / start) ** min(1, e / (n - 1))``,
    ``n = min(epochs, max_epochs)``,

    so training begins with a smooth activation (a small ``alpha0``: gradients
    reach most units) and ends at the net's own ``alpha0``, the function that
    the exact step is measured against (PAPERS.md: the epsilon bound depends
    on ``alpha0`` and ``alpha1``). The schedule always ends at ``alpha0``
    within the fit's epochs; ``partial_fit`` and ``warm_start`` rounds after
    it train at ``alpha0``. ``alpha1`` is left alone.

    Added by :class:`~sksign.estimators.HTAFNetRegressor` and
    :class:`~sksign.estimators.HTAFNetClassifier` when their ``alpha0_start``
    is set (the regressor's default).

    Parameters
    ----------
    start : float
        ``alpha0`` of the first epoch (> 0).
    epochs : int, default=16
        Epochs over which ``alpha0`` rises (the last of them trains at the
        net's ``alpha0``).

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.estimators import AlphaAnnealing, HTAFNetRegressor
    >>> X = np.random.RandomState(0).rand(30, 3)
    >>> reg = HTAFNetRegressor((8,), max_epochs=3, alpha0_start=None, random_state=0,
    ...                        callbacks=[("anneal", AlphaAnnealing(0.5, epochs=3))])
    >>> reg.fit(X, X.sum(1)).module_.act0.alpha0
    2.0
    """

    def __init__(self, start: float, epochs: int = 16) -> None:
        self.start = start
        self.epochs = epochs

    def alpha0_at(self, epoch: int, alpha0: float, max_epochs: int) -> float:
        """``alpha0`` of 0-based `epoch` for a net ending at `alpha0`.

        Parameters
        ----------
        epoch : int
            Index of the epoch, 0 for the first.
        alpha0 : float
            The net's final ``alpha0``.
        max_epochs : int
            The fit's number of epochs (the schedule fits inside it).

        Returns
        -------
        float

        Examples
        --------
        >>> AlphaAnnealing(0.05, epochs=3).alpha0_at(1, 2.0, max_epochs=20)
        0.316...
        """
        n = min(int(self.epochs), int(max_epochs))
        t = 1.0 if n <= 1 else min(1.0, epoch / (n - 1))
        return float(self.start * (alpha0 / self.start) ** t)

    def on_epoch_begin(self, net, **kwargs):
        """Set ``alpha0`` of every HTAF module for the epoch that starts.

        Parameters
        ----------
        net : skorch.NeuralNet
            The net being trained (its ``alpha0`` is the final value).
        **kwargs : dict
            Ignored.

        Examples
        --------
        >>> import numpy as np
        >>> from sksign.estimators import AlphaAnnealing, HTAFNetRegressor
        >>> X = np.random.RandomState(0).rand(30, 3)
        >>> reg = HTAFNetRegressor((8,), max_epochs=1, random_state=0).fit(X, X[:, 0])
        >>> anneal = AlphaAnnealing(0.5, epochs=4)
        >>> anneal.on_epoch_begin(reg.set_params(max_epochs=8))  # epoch index 0
        >>> reg.module_.act0.alpha0
        0.5
        """
        if self.start <= 0:
            raise ValueError(f"AlphaAnnealing needs start > 0; got {self.start!r}.")
        epoch = len(net.history) - 1
        alpha0 = self.alpha0_at(epoch, float(net.alpha0), net.max_epochs)
        for module in net.module_.modules():
            # an IF neuron's spike function sits outside the module tree
            spiking = isinstance(module, IFNeuron) and module.activation == "htaf"
            if isinstance(module, HTAF) or spiking:
                module.alpha0 = alpha0
