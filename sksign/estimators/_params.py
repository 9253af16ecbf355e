"""Parameter constraints and shared parameter docs of the skorch nets."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
from numbers import Integral, Real

import numpy as np
import torch
from torch import nn

from sksign._compat import Interval, Options, StrOptions
from sksign.nn import ACTIVATIONS, ARCHITECTURES, BACKBONES

__all__ = [
    "CLASSIFIER_CONSTRAINTS",
    "DOCS",
    "HTAF_CONSTRAINTS",
    "ICBM_CONSTRAINTS",
    "ICBM_DOCS",
    "REGRESSOR_CONSTRAINTS",
    "REGRESSOR_DOCS",
    "REPULSION_CONSTRAINTS",
    "SKORCH_CONSTRAINTS",
    "NumberInterval",
]


class NumberInterval(Interval):
    """An :class:`Interval` that refuses bools and names half-lines in words.

    ``True`` is not a batch size, and "a positive real number" reads better
    than "a float in the range (0.0, inf)" in scikit-learn's message
    ``The 'lr' parameter of HTAFNetClassifier must be ... Got ... instead.``

    Examples
    --------
    >>> from numbers import Integral, Real
    >>> at_least_one = NumberInterval(Integral, 1, None, closed="left")
    >>> at_least_one.is_satisfied_by(3), at_least_one.is_satisfied_by(True)
    (True, False)
    >>> str(at_least_one), str(NumberInterval(Real, 0, None, closed="neither"))
    ('an integer >= 1', 'a positive real number')
    """

    def is_satisfied_by(self, val):
        if isinstance(val, bool | np.bool_):
            return False
        return super().is_satisfied_by(val)

    def __str__(self):
        if self.right is not None or self.left is None:
            return super().__str__()
        closed = self.closed in ("left", "both")
        if self.type is Integral:
            return f"an integer {'>=' if closed else '>'} {self.left}"
        if self.left == 0:
            return f"a {'non-negative' if closed else 'positive'} real number"
        return f"a real number {'>=' if closed else '>'} {self.left}"


_POSITIVE = NumberInterval(Real, 0, None, closed="neither")
_NON_NEGATIVE = NumberInterval(Real, 0, None, closed="left")
_AT_LEAST_ONE = NumberInterval(Integral, 1, None, closed="left")
_NON_NEGATIVE_INT = NumberInterval(Integral, 0, None, closed="left")

#: skorch's own parameters, as scikit-learn constraints. "no_validation" where
#: skorch checks the value itself or takes more than a constraint can say.
SKORCH_CONSTRAINTS: dict = {
    "module": [None, callable],
    "criterion": [callable],
    "optimizer": [callable],
    "lr": [_POSITIVE],
    "max_epochs": [_AT_LEAST_ONE],
    # skorch's convention: -1 is the whole data set in one batch
    "batch_size": [_AT_LEAST_ONE, Options(Integral, {-1})],
    "iterator_train": [callable],
    "iterator_valid": [callable],
    # a Dataset class, a partial or an initialised Dataset (skorch's get_dataset)
    "dataset": "no_validation",
    "train_split": [None, callable],
    "callbacks": [None, StrOptions({"disable"}), list, tuple],
    "predict_nonlinearity": [None, StrOptions({"auto"}), callable],
    "warm_start": ["boolean"],
    "verbose": ["verbose"],
    "device": [None, str, torch.device],
    "compile": ["boolean"],
    # skorch's _validate_params names the valid values
    "use_caching": "no_validation",
    "torch_load_kwargs": [None, dict],
    "iterator_train__shuffle": ["boolean"],
}

#: What every sksign net adds to skorch's parameters.
_NET_CONSTRAINTS: dict = {
    "hidden_layer_sizes": [Integral, "array-like"],
    "alpha0": [_POSITIVE],
    "alpha1": [_POSITIVE],
    "input_shape": [None, "array-like"],
    "conv_channels": [Integral, "array-like"],
    "relaxation_gap": ["boolean", StrOptions({"auto"})],
    "random_state": ["random_state"],
    # "crop_flip" or a callable, checked by the net (TrainingRecipeMixin)
    "augment": "no_validation",
    "mixed_precision": ["boolean"],
    "channels_last": ["boolean"],
    "checkpoint_dir": [None, str, os.PathLike],
    "recalibrate_bn": ["boolean"],
    "inference": [StrOptions({"step", "smooth"})],
    "dtype": [StrOptions({"float32", "float64"})],
}

CLASSIFIER_CONSTRAINTS: dict = {
    "classes": [None, "array-like"],
    "class_weight": [None, StrOptions({"balanced"}), dict],
}

HTAF_CONSTRAINTS: dict = {
    **SKORCH_CONSTRAINTS,
    **_NET_CONSTRAINTS,
    "activation": [StrOptions(set(ACTIVATIONS))],
    # a module class, checked to be an nn.Module subclass by the net
    "architecture": [StrOptions(set(ARCHITECTURES)), type],
    "architecture_params": [None, dict],
    "time_steps": [_AT_LEAST_ONE],
    "lr": [_POSITIVE, StrOptions({"auto"})],
    "lr_schedule": [StrOptions({"auto", "constant", "cosine"})],
    "alpha0_start": [None, _POSITIVE, StrOptions({"auto"})],
    "anneal_epochs": [_AT_LEAST_ONE, StrOptions({"auto"})],
    "step_forward_from": [
        None,
        NumberInterval(Real, 0, 1, closed="both"),
        StrOptions({"auto"}),
    ],
}

REGRESSOR_CONSTRAINTS: dict = {
    "standardize_target": ["boolean"],
    "early_stopping": ["boolean"],
    "validation_fraction": [NumberInterval(Real, 0, 1, closed="neither")],
    "n_iter_no_change": [_AT_LEAST_ONE],
}

REPULSION_CONSTRAINTS: dict = {
    "sign_repulsion": [_NON_NEGATIVE],
    "repulsion_tau": [_POSITIVE],
    "repulsion_warmup": [_NON_NEGATIVE_INT],
    "repulsion_ramp": [_NON_NEGATIVE_INT],
    # resolved on the built net, naming the valid layers (resolve_layers)
    "repulsion_layers": "no_validation",
}

ICBM_CONSTRAINTS: dict = {
    **SKORCH_CONSTRAINTS,
    **_NET_CONSTRAINTS,
    **CLASSIFIER_CONSTRAINTS,
    # the net is built from backbone: skorch's module stays None
    "module": [None],
    "backbone": [StrOptions(set(BACKBONES)), nn.Module],
    "backbone_params": [None, dict],
    "n_concepts": [_AT_LEAST_ONE],
    "backbone_activation": [StrOptions(set(ACTIVATIONS))],
    "concept_activation": [StrOptions(set(ACTIVATIONS))],
    "freeze_backbone": ["boolean"],
}

#: Parameter and attribute text the nets share, for sksign._docstrings.Substitution.
DOCS: dict = {
    "training": """
        optimizer : torch optimizer class, default=torch.optim.Adam
            skorch's optimizer (Adam trains well where skorch's SGD default
            does not).
        lr : float or "auto", default="auto"
            Learning rate. "auto" picks it by architecture and activation when
            the optimizer is built (stored as ``lr_``): 3e-3 for the step nets
            "sew_resnet", "bireal", "wrn" and "vit" and for "resnet18" with
            "ste"; 1e-3 for every other net (the rates that trained best on
            the padded digits). Deep MLPs with "htaf" or "scaled_sigmoid"
            (six hidden layers of 512) can stay at chance at 1e-3: pass
            ``lr=3e-4`` there.
        lr_schedule : {"auto", "constant", "cosine"}, default="auto"
            "cosine" decays the rate from ``lr`` towards 0 over ``max_epochs``
            (stepped per epoch; :class:`~sksign.estimators.CosineSchedule`,
            callback "lr_schedule"); "constant" keeps it. "auto" is "cosine"
            for the deep image step nets ("resnet18", "wrn", "sew_resnet",
            "bireal", "vit" with "htaf", "ste" or "scaled_sigmoid", and
            "cnn" with "htaf") and "constant" for every other net (the MLP
            family, plain activations, a module class of your own), and
            leaves the rate to ``callbacks`` when they hold a skorch
            ``LRScheduler``. The table is
            ``sksign.estimators._step_recipe.STEP_RECIPES``, measured with
            ``benchmarks/bench_step_recipes.py``: a ResNet-18 with HTAF
            trained at a constant rate ends 26 points lower with the exact
            step; the MLP family does best at a constant rate (the user
            guide's "Choosing a step activation and a recipe").
        max_epochs : int, default=20
            Number of epochs.
        batch_size : int, default=128
            Mini-batch size (-1: the whole data set in one batch); batches are
            shuffled every epoch (`iterator_train__shuffle`).
        train_split : callable or None, default=None
            skorch's validation split, e.g. ``skorch.dataset.ValidSplit(5)``.
            None trains on all of X, like scikit-learn's estimators.""",
    "tail": """
        relaxation_gap : bool or "auto", default="auto"
            Add the :class:`~sksign.estimators.RelaxationGap` callback, which
            records the exact-step vs smooth accuracy and the binarization rate
            into ``history_`` every epoch. "auto" adds it when ``verbose > 0``.
        random_state : int, RandomState instance or None, default=None
            Seeds the weight initialisation and the shuffling of batches; the
            same value gives the same model.
        device : str or torch.device, default="cpu"
            Where the net trains ("cuda" where available).
        verbose : int, default=0
            skorch's progress output: a table per epoch when > 0, and a
            progress bar over each epoch's batches when >= 2.
        augment : None, "crop_flip" or callable, default=None
            Augment each training batch of images (X given as (N, C, H, W),
            or ``input_shape``): "crop_flip" pads by 4, crops back at a
            random offset and mirrors left-right at random
            (:func:`sksign.nn.layers.augment.random_crop_flip`); a callable takes and
            returns a ``(N, C, H, W)`` tensor. Seeded by ``random_state``.
        mixed_precision : bool, default=False
            Run the training forward and loss under ``torch.autocast`` in
            bfloat16 on the net's device (weights and optimizer stay float32).
        channels_last : bool, default=False
            On a CUDA device, keep the convolution weights in the
            ``channels_last`` memory format, so the convolutions (and the
            maps between them) run in NHWC, the faster layout for tensor
            cores under mixed precision. Numbers equal the default layout's
            up to float rounding. No effect on the CPU (where torch's
            channels_last convolution backward is not reliable) or on nets
            without convolutions.
        checkpoint_dir : str or path-like, default=None
            Save the weights, optimizer state and history after every epoch
            into this folder, and let ``fit`` resume from it: when the folder
            holds a checkpoint, ``fit`` loads it and trains only the epochs
            left to ``max_epochs``. With ``random_state`` set, a resumed fit
            ends with the weights of an uninterrupted one (a skorch
            ``LRScheduler`` takes its position from the history; the state of
            other callbacks is not saved).
        iterator_train__shuffle : bool, default=True
            Shuffle the training batches every epoch (skorch's parameter).
        **kwargs
            Any other skorch parameter (``callbacks``, ``iterator_train__*``,
            ``module__*``, ``optimizer__*``, ...).""",
    "fitted": """
        module_ : nn.Module
            The fitted network.
        history_ : skorch.History
            Per-epoch losses, timings and, with ``relaxation_gap``, the
            exact-step gap and binarization rate.
        n_features_in_ : int
            Number of features seen during fit (the flattened image size for
            4-D input).
        feature_names_in_ : ndarray of shape (n_features_in_,)
            Column names, when X was a DataFrame with string column names.
        input_shape_ : tuple of int or None
            Image shape used by the net (``architecture="cnn"``, or a backbone
            that takes images).""",
    "architecture": """
        hidden_layer_sizes : int or tuple of int, default=(256, 256)
            Width of each hidden (dense) layer.
        activation : {"htaf", "ste", "scaled_sigmoid", "relu", "silu", "gelu", \
"tanh"}, default="htaf"
            Hidden activation. The first three are step-like: smooth (or
            straight-through) in training and the exact step ``1[x >= 0]`` at
            inference, so hidden units are bits. "scaled_sigmoid" uses
            ``k = alpha0 * alpha1``.
        alpha0 : float, default=2.0
            HTAF inner scale (tail decay rate). A top-level parameter, so
            ``GridSearchCV(net, {"alpha0": ..., "alpha1": ...})`` works directly.
        alpha1 : float, default=11.0
            HTAF outer scale. Keep ``alpha0 * alpha1 ~ 22`` (see
            :func:`sksign.nn.activations.htaf_grid`).
        architecture : {"mlp", "cnn", "bnn", "snn"} or nn.Module subclass, \
default="mlp"
            Built-in net: "mlp" (with a step-like activation, a deep Heaviside
            net), "cnn", "bnn" (binary weights and activations with real-valued
            shortcuts, Bi-Real style) or "snn" (integrate-and-fire neurons over
            ``time_steps``); or a module class instantiated as
            ``architecture(n_features=..., n_outputs=..., **module_params)``
            with the ``module__*`` parameters.
        architecture_params : dict, default=None
            Keyword arguments of the architecture's constructor (see
            :func:`sksign.nn.build_network`), as one parameter that a grid
            can vary as a whole, e.g. ``{{"width": 16}}``; a routed
            ``module__name`` parameter overrides the same key.
        input_shape : tuple of int, default=None
            ``(channels, height, width)`` of one image for ``architecture="cnn"``
            when X holds flat rows; None infers it from 4-D X or, for flat rows,
            a square one-channel image.
        conv_channels : tuple of int, default=(16, 32)
            Channels of the conv blocks (``architecture="cnn"`` only).
        module : nn.Module class or instance, default=None
            skorch's ``module``; when given, it replaces ``architecture``.""",
    "steps": """
        alpha0_start : float, "auto" or None, default="auto"
            Anneal HTAF's ``alpha0`` during training: the first epoch trains
            with ``alpha0_start`` (a smoother activation whose gradient reaches
            more units), then ``alpha0`` rises geometrically to ``alpha0`` over
            ``anneal_epochs`` epochs (:class:`~sksign.estimators.AlphaAnnealing`).
            "auto" starts at 0.1 for the nets whose ``lr_schedule="auto"``
            is "cosine" (when ``alpha0`` is larger), except "wrn" (it trained
            best at 3e-3 without), and does not anneal the others; None
            trains at ``alpha0`` throughout. Only "htaf" activations are
            annealed. Why: HTAF(2, 11) passes gradient only
            where ``|x| < 0.25`` or so, 13-20% of the BatchNorm-ed
            pre-activations of a deep net at the start, against 62-87% inside
            STE's ``|x| <= 1``.
        anneal_epochs : int or "auto", default="auto"
            Length of the ``alpha0`` schedule in epochs ("auto": all of
            ``max_epochs``; shortened to ``max_epochs`` when that is smaller,
            so the fit always ends at ``alpha0``).
        step_forward_from : float in [0, 1], "auto" or None, default="auto"
            Share of ``max_epochs`` after which the step-like activations
            train on the exact step ``1[x >= 0]`` in their forward pass while
            their gradient stays the smooth function's
            (:class:`~sksign.estimators.StepForwardPhase`): the net then
            learns the function it computes at inference. None trains on the
            smooth function throughout. "auto" is 0.5 for "resnet18" with
            "htaf" and None for every other net. Why: a smooth HTAF
            ResNet-18 stays 4-6 points above its own exact step; with the
            second half on the step it reached 0.945 +- 0.006 held-out on the
            padded digits over 3 seeds, against 0.872 +- 0.023.""",
    "inference": """
        inference : {"step", "smooth"}, default="step"
            What the step-like activations compute outside training
            (``predict``, ``predict_proba``, ``forward``, the validation loss):
            "step" is the exact ``1[x >= 0]``, so hidden units are bits and,
            for a regressor, the prediction is piecewise constant; "smooth" is
            the training function (HTAF's ``sigmoid(alpha1 * tanh(alpha0 * x))``,
            the scaled sigmoid; STE's forward is the step in both). Can be
            changed after fit with ``set_params``.
        dtype : {"float32", "float64"}, default="float32"
            Float type of the weights, the input rows and the targets in
            training and inference. float64 trains about two to four times
            slower on the CPU; use it where float32 rounding matters (for
            example, to compare fits whose results agree only up to rounding).""",
    "class_weight": """
        class_weight : dict, "balanced" or None, default=None
            Weights of the classes in the loss, with scikit-learn's meaning: a
            dict ``{label: weight}`` (classes it leaves out weigh 1), "balanced"
            (``n_samples / (n_classes * np.bincount(y))``, from the y of each
            ``fit``: :func:`~sklearn.utils.class_weight.compute_sample_weight`)
            or None (every class weighs 1). A row weighs its class's weight
            times its ``sample_weight``, as in scikit-learn's forests (so
            "balanced" counts rows, not their weights). ``partial_fit`` refuses
            "balanced", which one batch cannot estimate: pass the dict of
            :func:`~sklearn.utils.class_weight.compute_class_weight` over the
            whole training set instead.""",
    "recalibrate_bn": """
        recalibrate_bn : bool, default=True
            End ``fit`` and ``partial_fit`` with one pass over the training
            rows that re-estimates the running statistics of every BatchNorm
            layer with the exact step (:func:`sksign.nn.recalibrate_batchnorm`):
            in training they are collected on the smooth activations, but the
            exact step feeds the BatchNorm layers bits, so without it the
            accuracy can drop from training to ``predict`` (a Heaviside
            WRN-10-1 on the padded digits: 17% exact-step training accuracy
            without the pass, 56% with it, 57% in training). The rows a
            ``train_split`` holds out are left out. A no-op for nets
            without BatchNorm or without a step-like activation, and with
            ``inference="smooth"``; BatchNorm layers that stay in eval mode
            while the net trains (a frozen backbone) keep their statistics.
            The pass costs about one forward pass over the training rows.""",
    "time_steps": """
        time_steps : int, default=4
            Simulation steps of the integrate-and-fire neurons
            (``architecture="snn"`` only).""",
}

#: The regressor's pieces: its defaults differ where the benchmark
#: (benchmarks/bench_regression_defaults.py) measured a gain.
REGRESSOR_DOCS: dict = {
    **DOCS,
    "architecture": DOCS["architecture"].replace(
        "hidden_layer_sizes : int or tuple of int, default=(256, 256)",
        "hidden_layer_sizes : int or tuple of int, default=(512, 512)",
    ),
    "steps": DOCS["steps"]
    .replace(
        'alpha0_start : float, "auto" or None, default="auto"',
        'alpha0_start : float, "auto" or None, default=0.05',
    )
    .replace(
        'anneal_epochs : int or "auto", default="auto"',
        'anneal_epochs : int or "auto", default=16',
    ),
    "training": DOCS["training"]
    .replace(
        'lr : float or "auto", default="auto"',
        'lr : float or "auto", default=1e-3',
    )
    .replace(
        'lr_schedule : {"auto", "constant", "cosine"}, default="auto"',
        'lr_schedule : {"auto", "constant", "cosine"}, default="constant"',
    ),
}


def _without_recipe(training: str) -> str:
    """The training docs with a plain ``lr`` and no ``lr_schedule`` (the ICBM)."""
    start = training.index("        lr : ")
    end = training.index("        max_epochs : ")
    plain = (
        "        lr : float, default=1e-3\n"
        "            Learning rate of ``optimizer``, constant over the fit (pass a\n"
        "            skorch ``LRScheduler`` in ``callbacks`` for a schedule).\n"
    )
    return training[:start] + plain + training[end:]


#: The ICBM's pieces: a fixed learning rate, no "auto" recipe.
ICBM_DOCS: dict = {**DOCS, "training": _without_recipe(DOCS["training"])}
