"""The comparison protocol of ``reproduce htaf``: tune on validation, refit.

HTAF, STE and the scaled sigmoid (SS) need not train best at the same
learning rate, so each gets its own, chosen the same way (GridSearchCV
style): per row (model) and method, every candidate of the grid
(:func:`candidates`) trains with seed ``cfg.tune_seed`` on a stratified
part of the TRAINING set and is scored with the exact step (``net.score``)
on the rest of it (:func:`validation_split`); the best validation accuracy
wins, ties going to the first candidate in grid order (:func:`first_best`).
The test set is not looked at until the winner is refitted on the whole
training set for each of ``cfg.seeds`` seeds and scored on it
(:func:`fit_row`). Every net trains with the same schedule
(``lr_schedule=cfg.lr_schedule``, cosine), epochs, batch size and
augmentation; ``lr``, ``alpha0_start`` and ``step_forward_from`` are always
passed explicitly, so the table does not depend on the estimators'
defaults. :func:`clear_winner` names a method only where its mean beats the
runner-up's by more than the larger of the two stds.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
from sklearn.model_selection import train_test_split

from sksign._report.fitting import inputs_for, make_classifier, recipe_of
from sksign._report.papers import ACTIVATION_NAMES

__all__ = [
    "Candidate",
    "RowResult",
    "candidates",
    "clear_winner",
    "evaluate",
    "first_best",
    "fit_row",
    "lr_text",
    "n_fits",
    "protocol_net",
    "protocol_text",
    "recipes_words",
    "tune",
    "validation_split",
    "winner_text",
]

#: What :func:`clear_winner` says when no method is ahead by more than a std.
NO_CLEAR_WINNER = "no clear winner (within std)"


def lr_text(lr) -> str:
    """A learning rate in short scientific notation.

    Examples
    --------
    >>> lr_text(1e-3), lr_text(3e-4), lr_text(0.1), lr_text(2.5e-3)
    ('1e-3', '3e-4', '1e-1', '2.5e-3')
    """
    mantissa, exponent = f"{lr:.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


class Candidate(NamedTuple):
    """One point of a tuning grid: the learning rate (or, with
    ``cfg.lr_relative``, its factor on the recipe's rate), the alpha pair and
    the alpha0 annealing start (None: no annealing)."""

    lr: float
    alpha0: float
    alpha1: float
    alpha0_start: float | None = None

    def key(self, activation) -> str:
        """A file-name-safe id, unique within `activation`'s grid."""
        if activation != "htaf":
            return f"lr{self.lr:g}"
        start = "fixed" if self.alpha0_start is None else f"s{self.alpha0_start:g}"
        return f"lr{self.lr:g}-a{self.alpha0:g}-{self.alpha1:g}-{start}"

    def describe(self, activation, cfg=None) -> str:
        """The candidate in words, e.g. "lr 1e-3, (2, 11) annealed from 0.1"."""
        lr = f"lr x{self.lr:g}" if cfg is not None and cfg.lr_relative else None
        text = lr or f"lr {lr_text(self.lr)}"
        if activation != "htaf":
            return text
        pair = f"({self.alpha0:g}, {self.alpha1:g})"
        if self.alpha0_start is None:
            return f"{text}, {pair} not annealed"
        return f"{text}, {pair} annealed from {self.alpha0_start:g}"


def candidates(cfg, activation) -> list:
    """The tuning grid of `activation`, in grid order (lr-major).

    Every method: each lr of ``cfg.lr_grid``; HTAF: each lr with each
    ``(alpha0, alpha1, alpha0_start)`` of ``cfg.alpha_grid``. STE and SS keep
    ``(cfg.alpha0, cfg.alpha1)`` without annealing (SS: k = alpha0 * alpha1).

    Examples
    --------
    >>> from sksign._report.papers import HTAF_QUICK
    >>> len(candidates(HTAF_QUICK, "htaf")), len(candidates(HTAF_QUICK, "ste"))
    (6, 2)
    """
    if activation != "htaf":
        return [Candidate(lr, cfg.alpha0, cfg.alpha1) for lr in cfg.lr_grid]
    return [Candidate(lr, *alphas) for lr in cfg.lr_grid for alphas in cfg.alpha_grid]


def protocol_net(cfg, model, activation, candidate, seed, device, **kw):
    """An unfitted HTAFNetClassifier of `model`'s row with `candidate`.

    The row's recipe (optimiser, weight decay, augmentation: the same for
    every method) at the candidate's rate, without its own cosine callback:
    the schedule is ``lr_schedule=cfg.lr_schedule``. ``lr``, ``alpha0``,
    ``alpha1``, ``alpha0_start``, ``anneal_epochs`` (the fit's epochs),
    ``step_forward_from=None`` and ``inference="step"`` (the exact step in
    ``score``) are passed explicitly. `kw`: ``epochs`` (default: the row's) and
    ``checkpoint_dir``.
    """
    epochs = kw.pop("epochs", None) or model.epochs(cfg)
    recipe = recipe_of(cfg, model.architecture)
    lr = candidate.lr * recipe.lr if cfg.lr_relative else candidate.lr
    recipe = dataclasses.replace(recipe, lr=lr, cosine=False)
    return make_classifier(
        cfg,
        (cfg.width,) * (model.depth or 1),
        activation,
        seed,
        device,
        epochs=epochs,
        spec=model.spec,
        architecture=model.architecture,
        recipe=recipe,
        lr_schedule=cfg.lr_schedule,
        alpha0=candidate.alpha0,
        alpha1=candidate.alpha1,
        alpha0_start=candidate.alpha0_start,
        anneal_epochs=epochs,
        # the smooth function throughout, for every method: the tables were
        # measured so (the exact-step phase is ResNet-18 + HTAF's default since)
        step_forward_from=None,
        inference="step",
        time_steps=cfg.time_steps,
        **kw,
    )


def validation_split(cfg, y_train):
    """Indices ``(fit, validation)`` into the TRAINING set: a stratified
    split, ``cfg.validation_fraction`` held out, seeded by ``cfg.tune_seed``."""
    return train_test_split(
        np.arange(len(y_train)),
        test_size=cfg.validation_fraction,
        random_state=cfg.tune_seed,
        stratify=y_train,
    )


def evaluate(net, X, y) -> float:
    """Accuracy of a fitted net with the exact step (``net.score``)."""
    return float(net.score(X, y))


def first_best(scores) -> int:
    """Index of the best score; ties go to the first.

    Examples
    --------
    >>> first_best([0.5, 0.9, 0.9, 0.1])
    1
    """
    return int(np.argmax(np.asarray(scores, dtype=float)))


class RowResult(NamedTuple):
    """One (row, method) of the first table: the grid, the validation score
    of each candidate, the winner's index and its test accuracy per seed."""

    grid: list
    val_scores: list
    best: int
    test_scores: list

    @property
    def chosen(self):
        return self.grid[self.best]


def _scored_fit(cfg, model, activation, cand, seed, device, fit, held, run, cell):
    """One cell: `cand` fitted with `seed` on ``fit = (X, y)`` and scored on
    ``held = (X, y)``; a resumable cell of `run` (with its checkpoints) when
    given."""

    def score():
        checkpoint = run.checkpoint_dir(cell) if run is not None else None
        net = protocol_net(
            cfg, model, activation, cand, seed, device, checkpoint_dir=checkpoint
        )
        return evaluate(net.fit(*fit), *held)

    return run.cell(cell, score) if run is not None else score()


def tune(cfg, model, activation, X_train, y_train, device, run=None, bar=None):
    """Fit every candidate on the fit part of the training set and score it
    on the validation part; return ``(grid, validation scores, best)``.

    Only the training set is given: the test set cannot play a part. Each
    fit is a cell of `run` (resumable), keyed by row, method and candidate.
    """
    fit_idx, val_idx = validation_split(cfg, y_train)
    X = inputs_for(model.architecture, X_train)
    grid = candidates(cfg, activation)
    fit, held = (X[fit_idx], y_train[fit_idx]), (X[val_idx], y_train[val_idx])
    scores = []
    for cand in grid:
        cell = f"{model.key}-{activation}-tune-{cand.key(activation)}"
        scores.append(
            _scored_fit(cfg, model, activation, cand, cfg.tune_seed, device, fit, held,
                        run, cell)
        )  # fmt: skip
        if bar is not None:
            bar.update(1)
    return grid, scores, first_best(scores)


def fit_row(cfg, data, model, activation, device, run=None, bar=None):
    """Tune `activation` on `model`'s row, then refit the winner on the
    whole training set for each seed and score it on the test set.

    Returns
    -------
    RowResult
    """
    X_train, X_test, y_train, y_test = data
    grid, val_scores, best = tune(
        cfg, model, activation, X_train, y_train, device, run, bar
    )
    chosen = grid[best]
    X_fit = inputs_for(model.architecture, X_train)
    X_eval = inputs_for(model.architecture, X_test)
    fit, held = (X_fit, y_train), (X_eval, y_test)
    test_scores = []
    for seed in range(cfg.seeds):
        cell = f"{model.key}-{activation}-{chosen.key(activation)}-s{seed}"
        test_scores.append(
            _scored_fit(cfg, model, activation, chosen, seed, device, fit, held,
                        run, cell)
        )  # fmt: skip
        if bar is not None:
            bar.update(1)
    return RowResult(grid, val_scores, best, test_scores)


def n_fits(cfg):
    """``(tuning fits, refits)`` of one row of the first table."""
    tune_fits = sum(len(candidates(cfg, a)) for a in cfg.activations)
    return tune_fits, len(cfg.activations) * cfg.seeds


def clear_winner(names, values):
    """The name whose mean beats the runner-up's by more than the larger of
    their two stds (ddof=1), else None (also with fewer than 2 values each).

    Examples
    --------
    >>> clear_winner(["a", "b"], [[0.90, 0.92], [0.80, 0.81]])
    'a'
    >>> clear_winner(["a", "b"], [[0.90, 0.94], [0.89, 0.90]]) is None
    True
    """
    if len(names) == 1:
        return names[0]
    if min(len(v) for v in values) < 2:
        return None
    stats = sorted(
        (
            (float(np.mean(v)), float(np.std(v, ddof=1)), n)
            for n, v in zip(names, values)
        ),
        key=lambda s: -s[0],
    )
    (m1, s1, name), (m2, s2, _) = stats[:2]
    return name if m1 - m2 > max(s1, s2) else None


def winner_text(names, values) -> str:
    """The "Best (ours)" cell: the clear winner's display name, or
    :data:`NO_CLEAR_WINNER` (with one seed: no std to compare with)."""
    name = clear_winner(names, values)
    if name is not None:
        return ACTIVATION_NAMES.get(name, name)
    if len(names) > 1 and min(len(v) for v in values) < 2:
        return "no clear winner (one seed)"
    return NO_CLEAR_WINNER


def _grid_text(cfg) -> str:
    """The grids in words, for the caption."""
    if cfg.lr_relative:
        lrs = "lr x {" + ", ".join(f"{f:g}" for f in cfg.lr_grid) + "} the recipe's"
    else:
        lrs = "lr in {" + ", ".join(lr_text(lr) for lr in cfg.lr_grid) + "}"
    pairs = []
    for a0, a1, start in cfg.alpha_grid:
        how = "not annealed" if start is None else f"annealed from {start:g}"
        pairs.append(f"({a0:g}, {a1:g}) {how}")
    sizes = ", ".join(
        f"{ACTIVATION_NAMES.get(a, a)} {len(candidates(cfg, a))}"
        for a in cfg.activations
    )
    return (
        f"{lrs} for every method; HTAF also (alpha0, alpha1) in "
        f"{{{'; '.join(pairs)}}} (annealing over the fit's epochs), lr-major "
        f"({sizes} candidates); SS: k = alpha0 * alpha1 = "
        f"{cfg.alpha0 * cfg.alpha1:g}, not tuned; STE: clipped identity"
    )


def _data_text(cfg, data) -> str:
    X_train, X_test, _, _ = data
    how = {
        "digits": "a 70/30 stratified split",
        "mnist5k": "a 70/30 stratified split",
        "digits16": "the digits padded to 3x16x16, a fixed split",
    }.get(cfg.dataset, "its own test set")
    if cfg.max_train is not None and cfg.dataset not in ("digits", "mnist5k"):
        how += f", a stratified {cfg.max_train}-image subset of its training set"
    return f"{cfg.dataset} ({how}; {len(X_train)} train / {len(X_test)} test)"


def _recipe_words(recipe) -> str:
    """A row's recipe without its rate and schedule (the protocol sets them)."""
    name, _, rest = dataclasses.replace(recipe, cosine=False).describe().partition(", ")
    parts = [name.split(" lr=")[0], rest, "" if recipe.augment else "no augmentation"]
    return ", ".join(p for p in parts if p)


def recipes_words(cfg, models) -> str:
    """The rows' optimiser and augmentation: once when shared, else per row."""
    described = [
        (m.name, _recipe_words(recipe_of(cfg, m.architecture))) for m in models
    ]
    if len({text for _, text in described}) <= 1:
        return described[0][1] if described else ""
    return "; ".join(sorted({f"{label}: {text}" for label, text in described}))


def protocol_text(cfg, data, models) -> str:
    """The protocol in words: the first table's caption."""
    recipes = recipes_words(cfg, models)
    epochs = sorted({m.epochs(cfg) for m in models}) or [cfg.epochs]
    epochs = "-".join(map(str, sorted({epochs[0], epochs[-1]})))
    val = round(100 * cfg.validation_fraction)
    seeds = f"seeds 0-{cfg.seeds - 1}" if cfg.seeds > 1 else "seed 0"
    return (
        f"Protocol, the same for every method and row: per row and method, "
        f"each candidate trains (seed {cfg.tune_seed}) on {100 - val}% of the "
        f"training set and is scored on the other {val}% (a stratified "
        f"validation split of the training set, seed {cfg.tune_seed}; the test "
        "set is never used for the choice); the best validation accuracy wins "
        "(ties: the first in grid order). Grids: "
        f"{_grid_text(cfg)}. The winner is refitted on the whole training set "
        f"with {seeds} and scored on the test set: mean ± std over {cfg.seeds} "
        "seed(s), exact step H at inference, after the last epoch. Every net: "
        f"{recipes}, {cfg.lr_schedule} learning-rate schedule over its "
        f"{epochs} epochs, batch {cfg.batch_size}, hidden width {cfg.width} "
        f"(MLP family); {_data_text(cfg, data)}."
    )
