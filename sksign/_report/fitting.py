"""The nets of ``reproduce`` and the run-time estimate printed before a run.

:func:`make_classifier` builds the HTAFNetClassifier of one table cell from a
:class:`~sksign._report.papers.SignCodeConfig` or
:class:`~sksign._report.papers.HTAFConfig` (and a
:class:`~sksign._report.papers.NetSpec` for an image net), with the training
recipe of its architecture as scikit-learn/skorch parameters
(:func:`recipe_params`); :func:`estimate_run_time` times a few short fits and
extrapolates to the whole run.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import dataclasses
import functools
import time

import torch
from skorch.callbacks import LRScheduler
from torch.optim.lr_scheduler import CosineAnnealingLR

from sksign._report.papers import RECIPE_OF, RECIPES, Recipe
from sksign._report.tables import human_duration
from sksign.estimators import HTAFNetClassifier
from sksign.nn import IMAGE_ARCHITECTURES
from sksign.nn.layers.augment import random_crop_flip

__all__ = [
    "estimate_run_time",
    "inputs_for",
    "make_classifier",
    "recipe_of",
    "recipe_params",
]

_OPTIMIZERS = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
}
#: Data sets whose labels survive a left-right flip (crops suit every one).
_FLIP_SAFE = ("cifar10", "cifar100")
#: Data sets trained without augmentation (digits: a few epochs suffice).
_NO_AUGMENT = ("digits", "digits16", "mnist5k", "mnist")


def recipe_of(cfg, architecture):
    """The :class:`Recipe` a net of `architecture` trains with under `cfg`.

    The architecture's paper-scale recipe when ``cfg.recipes``, else Adam at
    ``cfg.lr``; its augmentation as it applies to ``cfg.dataset``: crops and
    flips where a flip keeps the label (CIFAR), crops alone on SVHN, none on
    the digit data sets (they train for a few epochs).
    """
    if not cfg.recipes:
        return Recipe(lr=cfg.lr)
    recipe = RECIPES[RECIPE_OF.get(architecture, "adam")]
    if recipe.augment and cfg.dataset not in _FLIP_SAFE:
        augment = None if cfg.dataset in _NO_AUGMENT else "crop"
        recipe = dataclasses.replace(recipe, augment=augment)
    return recipe


def recipes_text(cfg, nets):
    """The training recipes of `nets` (``(label, architecture)`` pairs) as text.

    One recipe shared by every net is named once; otherwise each net's,
    ``"label: recipe"``, in sorted order.
    """
    described = [(label, recipe_of(cfg, arch).describe()) for label, arch in nets]
    recipes = {text for _, text in described}
    if len(recipes) == 1:
        return recipes.pop()
    return "; ".join(sorted({f"{label}: {text}" for label, text in described}))


def recipe_params(recipe, epochs, device):
    """`recipe` as HTAFNetClassifier/ICBMClassifier parameters.

    The optimiser and its momentum and weight decay, a cosine schedule as a
    skorch ``LRScheduler`` callback stepped once per epoch, label smoothing
    through the criterion, the augmentation ("crop_flip", or random crops
    alone for "crop") and, on CUDA, bfloat16 mixed precision and the
    ``channels_last`` layout.
    """
    params = {"optimizer": _OPTIMIZERS[recipe.optimizer], "lr": recipe.lr}
    if recipe.optimizer == "sgd":
        params["optimizer__momentum"] = recipe.momentum
    if recipe.weight_decay:
        params["optimizer__weight_decay"] = recipe.weight_decay
    if recipe.cosine:
        params["callbacks"] = [("cosine", LRScheduler(CosineAnnealingLR, T_max=epochs))]
    if recipe.label_smoothing:
        params["criterion__label_smoothing"] = recipe.label_smoothing
    if recipe.augment == "crop_flip":
        params["augment"] = "crop_flip"
    elif recipe.augment == "crop":
        params["augment"] = functools.partial(random_crop_flip, flip=False)
    if str(device).startswith("cuda"):
        params["mixed_precision"] = True
        params["channels_last"] = True
    return params


def inputs_for(architecture, X):
    """`X` as `architecture` takes it: images stay images for the image nets,
    the MLP family gets flat rows."""
    if architecture in IMAGE_ARCHITECTURES:
        return X
    return X.reshape(len(X), -1)


def make_classifier(
    cfg, hidden, activation, seed, device, epochs=None, spec=None, **kw
):
    """An unfitted HTAFNetClassifier for one cell of `cfg`'s tables.

    The batch size of `cfg`; the number of epochs `epochs`, else the
    `spec`'s, else `cfg`'s; the recipe of the architecture
    (:func:`recipe_of`), or the :class:`~sksign._report.papers.Recipe`
    given as `recipe`. `spec`, a
    :class:`~sksign._report.papers.NetSpec`, picks an image net and its
    arguments (`hidden` then does not apply).
    """
    architecture = kw.pop("architecture", "mlp")
    recipe = kw.pop("recipe", None)
    if spec is not None:
        architecture = spec.architecture
        kw["architecture_params"] = dict(spec.params)
    n_epochs = epochs or (spec.epochs if spec is not None else None) or cfg.epochs
    recipe = recipe or recipe_of(cfg, architecture)
    params = recipe_params(recipe, n_epochs, device)
    return HTAFNetClassifier(
        hidden,
        activation=activation,
        architecture=architecture,
        max_epochs=n_epochs,
        batch_size=cfg.batch_size,
        random_state=seed,
        device=device,
        **params,
        **kw,
    )


def estimate_run_time(fits, n_train, batch_size, stream):
    """Time short fits and extrapolate to the whole run; print the estimate.

    `fits` is a list of ``(fit_one, count, epochs)`` or ``(fit_one, count,
    epochs, share)``: ``fit_one(n, n_epochs)`` fits one net on n samples,
    and the run fits `count` such nets for `epochs` epochs each, on `share`
    of the `n_train` samples on average (default 1; e.g. tuning fits on a
    training part). A fit of one epoch and one of three split the time into
    a fixed cost and a cost per sample and epoch. Returns the estimate in
    seconds (training only).
    """
    n = 3 * batch_size
    total, n_fits, n_epochs_all = 0.0, 0, set()
    for fit_one, count, epochs, *share in fits:
        share = share[0] if share else 1.0
        times = []
        for n_epochs in (1, 1, 3):
            t0 = time.perf_counter()
            fit_one(n, n_epochs)
            times.append(time.perf_counter() - t0)
        one = min(times[:2])  # the first fit may pay for warming up
        per_epoch = max((times[2] - one) / 2, 0.0)
        fixed = max(one - per_epoch, 0.0)
        total += count * (fixed + per_epoch * epochs * share * n_train / n) * 1.15
        n_fits += count
        n_epochs_all.add(epochs)
    epochs = "-".join(str(e) for e in sorted({min(n_epochs_all), max(n_epochs_all)}))
    print(
        f"Expected training time: about {human_duration(total)} ({n_fits:g} nets "
        f"x {epochs} epochs x {n_train} samples; estimated from timed short "
        "fits).",
        file=stream,
        flush=True,
    )
    return total
