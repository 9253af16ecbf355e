"""The default training recipe of the step nets: ``lr="auto"``,
``lr_schedule="auto"`` and ``alpha0_start="auto"``, resolved per fit.

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

from sksign.nn import STEP_ACTIVATIONS

__all__ = [
    "AUTO_ALPHA0_START",
    "STEP_RECIPES",
    "CosineSchedule",
    "Recipe",
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


#: The recipe of the named deep image architectures with a step-like
#: activation ("htaf", "ste", "scaled_sigmoid"), by architecture or by
#: (architecture, activation); every other net (the MLP family, "cnn" with
#: STE or SS, plain activations, a user's module) gets ``Recipe()``: Adam
#: 1e-3 at a constant rate, no annealing, which trained those best.
STEP_RECIPES = {
    "resnet18": Recipe(1e-3, "cosine", True),
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
