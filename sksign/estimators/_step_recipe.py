"""The default training recipe of the step nets: ``lr="auto"``,
``lr_schedule="auto"``, ``alpha0_start="auto"`` and
``step_forward_from="auto"``, resolved per fit.

The values come from ``benchmarks/bench_step_recipes.py`` (every named
architecture x {"htaf", "ste", "scaled_sigmoid"} on the padded digits, the
defaults against the best recipe found); the user guide's page "Choosing a
step activation and a recipe" has the tables.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from typing import NamedTuple

from skorch.callbacks import Callback

from sksign.nn import STEP_ACTIVATIONS, StepActivation

__all__ = [
    "AUTO_ALPHA0_START",
    "STEP_RECIPES",
    "CosineSchedule",
    "Recipe",
    "StepForwardPhase",
    "auto_recipe",
]

#: ``alpha0`` of the first epoch when annealing is on (HTAF only).
AUTO_ALPHA0_START = 0.1


class Recipe(NamedTuple):
    """What the "auto" values of a net resolve to."""

    lr: float = 1e-3
    lr_schedule: str = "constant"
    #: anneal HTAF's alpha0 from AUTO_ALPHA0_START over all epochs
    anneal: bool = False
    #: share of the epochs after which the step activations train on the
    #: exact step (straight through their smooth gradient); None: never
    step_forward_from: float | None = None


#: The recipe of the named deep image architectures with a step-like
#: activation ("htaf", "ste", "scaled_sigmoid"), by architecture or by
#: (architecture, activation); every other net (the MLP family, "cnn" with
#: STE or SS, plain activations, a user's module) gets ``Recipe()``: Adam
#: 1e-3 at a constant rate, no annealing, which trained those best.
STEP_RECIPES = {
    "resnet18": Recipe(1e-3, "cosine", True),
    # HTAF's smooth net stays 4-6 points above its exact step; training the
    # second half on the step itself (HTAF's gradient) closes it: 3 seeds
    # 0.945 +- 0.006 held-out against 0.872 +- 0.023 (first half only:
    # 0.938, last quarter: 0.889; bench_step_recipes.py)
    ("resnet18", "htaf"): Recipe(1e-3, "cosine", True, 0.5),
    ("resnet18", "ste"): Recipe(3e-3, "cosine"),
    # the WideResNet trains best at 3e-3 with every activation, HTAF without
    # annealing (3 seeds: 0.930 +- 0.010, annealed 0.905, at 1e-3 annealed 0.857)
    "wrn": Recipe(3e-3, "cosine"),
    "sew_resnet": Recipe(3e-3, "cosine", True),
    "bireal": Recipe(3e-3, "cosine", True),
    # the ViT: 3e-3 beat 1e-3 by 3-4 points with every activation (3 seeds)
    "vit": Recipe(3e-3, "cosine", True),
    # the small CNN: HTAF 0.72 -> 0.87 with it, STE 0.90 -> 0.87 and SS
    # 0.74 -> 0.60 (bench_step_recipes.py)
    ("cnn", "htaf"): Recipe(1e-3, "cosine", True),
}
#: Where the rates come from: ``bench_step_recipes.py`` (held-out accuracy,
#: one seed; three for the WideResNet with HTAF and the ViT) and the
#: validation scores of ``reproduce htaf --scale quick`` (the tuning fits on
#: 80% of the training set): every method on SEW-ResNet, Bi-Real, the
#: WideResNet and the ViT trained best at 3e-3 (by 3-31 points); HTAF on
#: ResNet-18 at 1e-3 with (2, 11) annealed.


def auto_recipe(architecture, activation) -> Recipe:
    """The :class:`Recipe` that "auto" means for a net.

    Parameters
    ----------
    architecture : str or type
        The net's ``architecture`` (a module class gets the default).
    activation : str
        Its ``activation``.

    Returns
    -------
    Recipe

    Examples
    --------
    >>> auto_recipe("bireal", "htaf").lr, auto_recipe("mlp", "htaf").lr_schedule
    (0.003, 'constant')
    >>> auto_recipe("cnn", "htaf").anneal, auto_recipe("cnn", "ste").anneal
    (True, False)
    """
    if activation not in STEP_ACTIVATIONS or not isinstance(architecture, str):
        return Recipe()
    return STEP_RECIPES.get(
        (architecture, activation), STEP_RECIPES.get(architecture, Recipe())
    )


class CosineSchedule(Callback):
    """Cosine learning-rate decay over the fit's epochs, stepped per epoch.

    At the start of 0-based epoch ``e`` every parameter group of the
    optimizer gets ``lr * (1 + cos(pi * e / max_epochs)) / 2``, ``lr`` being
    the group's rate when the fit began: torch's
    :class:`~torch.optim.lr_scheduler.CosineAnnealingLR` with
    ``T_max=max_epochs``, stepped once per epoch. The rate depends on the
    epoch index alone, so a fit resumed from a checkpoint continues the
    schedule where it stopped; ``partial_fit`` rounds after ``max_epochs``
    epochs train at the last epoch's rate.

    Added by the nets as callback "lr_schedule" (``lr_schedule="cosine"``,
    or "auto" for the deep step nets, :data:`STEP_RECIPES`).

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.estimators import HTAFNetClassifier
    >>> X, y = np.random.RandomState(0).rand(20, 3), [0, 1] * 10
    >>> net = HTAFNetClassifier((4,), max_epochs=4, lr=0.01, lr_schedule="cosine",
    ...                         random_state=0).fit(X, y)
    >>> [round(v, 5) for v in net.history_[:, "lr"]]
    [0.01, 0.00854, 0.005, 0.00146]
    """

    def factor(self, epoch: int, max_epochs: int) -> float:
        """The multiplier of the rate in 0-based `epoch` (epochs past the
        schedule keep its last epoch's).

        Examples
        --------
        >>> CosineSchedule().factor(0, 10), CosineSchedule().factor(5, 10)
        (1.0, 0.5)
        >>> CosineSchedule().factor(12, 10) == CosineSchedule().factor(9, 10)
        True
        """
        n = max(int(max_epochs), 1)
        t = min(int(epoch), n - 1) / n
        return float(0.5 * (1.0 + math.cos(math.pi * t)))

    def on_epoch_begin(self, net, **kwargs):
        """Set the rate of every parameter group for the epoch that starts.

        Parameters
        ----------
        net : skorch.NeuralNet
            The net being trained.
        **kwargs : dict
            Ignored.
        """
        factor = self.factor(len(net.history) - 1, net.max_epochs)
        for group in net.optimizer_.param_groups:
            if group.get("sksign_set_lr") != group["lr"]:
                # a new optimizer, or a rate set by the user since (set_params)
                group["sksign_base_lr"] = group["lr"]
            group["lr"] = group["sksign_set_lr"] = group["sksign_base_lr"] * factor
        net.history.record("lr", net.optimizer_.param_groups[0]["lr"])


class StepForwardPhase(Callback):
    """Train the last part of a fit on the exact step, with the smooth gradient.

    From 0-based epoch ``ceil(start * max_epochs)`` on, every step activation
    of the net (:class:`~sksign.nn.activations.StepActivation`: HTAF, STE,
    the scaled sigmoid) computes the exact step ``1[x >= 0]`` in its
    training forward pass, while its gradient stays the smooth function's
    (``straight_through``): the net then trains on the function it computes
    at inference, which a smooth HTAF net, 4-6 points above its own exact
    step on a ResNet-18, does not. Before that epoch, and after the fit,
    the activations compute their smooth function in training.

    Added by the nets as callback "step_forward" (``step_forward_from``).

    Parameters
    ----------
    start : float in [0, 1]
        Share of ``max_epochs`` trained on the smooth function first.

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.estimators import HTAFNetClassifier, StepForwardPhase
    >>> StepForwardPhase(0.5).first_epoch(20), StepForwardPhase(0.0).first_epoch(20)
    (10, 0)
    >>> X, y = np.random.RandomState(0).rand(20, 3), [0, 1] * 10
    >>> net = HTAFNetClassifier((4,), max_epochs=4, step_forward_from=0.5,
    ...                         random_state=0).fit(X, y)
    >>> net.history_[:, "step_forward"]
    [False, False, True, True]
    """

    def __init__(self, start: float = 0.5) -> None:
        self.start = start

    def first_epoch(self, max_epochs: int) -> int:
        """The 0-based epoch from which the forward pass is the exact step."""
        return math.ceil(round(float(self.start) * int(max_epochs), 9))

    def _set(self, net, on: bool) -> None:
        for module in net.module_.modules():
            if isinstance(module, StepActivation):
                module.straight_through = on

    def on_epoch_begin(self, net, **kwargs):
        """Switch the step activations for the epoch that starts.

        Parameters
        ----------
        net : skorch.NeuralNet
            The net being trained.
        **kwargs : dict
            Ignored.
        """
        if not 0.0 <= float(self.start) <= 1.0:
            raise ValueError(
                f"StepForwardPhase needs 0 <= start <= 1; got {self.start!r}."
            )
        on = len(net.history) - 1 >= self.first_epoch(net.max_epochs)
        self._set(net, on)
        net.history.record("step_forward", on)

    def on_train_end(self, net, **kwargs):
        """Give the step activations their smooth training function back.

        Parameters
        ----------
        net : skorch.NeuralNet
            The trained net.
        **kwargs : dict
            Ignored.
        """
        self._set(net, False)
