"""The papers' published numbers and the settings of ``reproduce``.

The numbers the two papers report (CIFAR-10/100 unless stated), shown next to
ours in the reproduced tables; the display names of activations and
architectures; the training recipes (:class:`Recipe`) and the settings of
``reproduce signcode`` (:class:`SignCodeConfig`) and ``reproduce htaf``
(:class:`HTAFConfig`) at each scale (:data:`SCALES`):

- "quick": FFNNs on digits for signcode (minutes on a CPU); for htaf the
  image families (SEW-ResNet, Bi-Real, WideResNet, ResNet-18, 8 channels
  wide) on the digits padded to 3x16x16 ("digits16"), 20 epochs;
- "full": the papers' FFNN widths and depths on MNIST-5k (hours on a CPU);
- "small": the papers' architectures (ResNet-18, ViT, SEW-ResNet, Bi-Real,
  WideResNet) at reduced width on MNIST padded to 32x32, with a few epochs:
  the Sign Code nets with the paper-scale recipes on the full MNIST (under an
  hour on a 2-core CPU), the HTAF nets with Adam on a 6,000-image subset of
  its training set (3 epochs, a smaller tuning grid: under 2 hours);
- "paper": the papers' architectures at full width on CIFAR-10 read from
  ``--data-dir``, with the paper-scale recipes and epochs (for a GPU).

``reproduce htaf`` compares HTAF, STE and SS under one protocol at every
scale (:class:`HTAFConfig`): per row and method, the learning rate (and, for
HTAF, the alpha pair and its annealing) is chosen on a validation split of
the training set, then the winner is refitted with several seeds and scored
on the test set; every method trains with the same cosine schedule, epochs,
batch size and augmentation.

The papers do not state their optimisers and schedules; the paper-scale
recipes are the standard CIFAR ones for each architecture (SGD with momentum
0.9, weight decay 5e-4 and a cosine schedule for the ResNets; AdamW with a
cosine schedule for the ViT; Adam for the MLPs and Bi-Real Net, as Bi-Real
Net's authors trained it), with random crops and flips on CIFAR.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ACTIVATION_NAMES",
    "ARCH_NAMES",
    "HTAF_FULL",
    "HTAF_PAPER",
    "HTAF_QUICK",
    "HTAF_SMALL",
    "OURS_ARCH",
    "PAPER_ARCH",
    "PAPER_GATE",
    "PAPER_GRAD",
    "PAPER_HTAF",
    "PAPER_ICBM",
    "PAPER_MAGNITUDE",
    "PAPER_SIGNCODE",
    "PAPER_SIGNCODE_NETS",
    "RECIPES",
    "SCALES",
    "SIGNCODE_FULL",
    "SIGNCODE_PAPER",
    "SIGNCODE_QUICK",
    "SIGNCODE_SMALL",
    "HTAFConfig",
    "NetSpec",
    "Recipe",
    "SignCodeConfig",
    "configs",
]

# -- the papers' numbers --------------------------------------------------
#: Sign Code paper, FFNN w=1024 d=6 on CIFAR-10: (full net, sign-kNN) accuracy %.
PAPER_SIGNCODE = {
    "relu": (57.30, 55.82),
    "silu": (58.42, 57.18),
    "gelu": (58.15, 56.90),
    "tanh": (56.70, 55.45),
}
#: Sign Code paper, the other nets on CIFAR-10: {architecture: {activation:
#: (full net, sign-kNN)}} accuracy % (ResNet-18; ViT w=256, d=6, h=8).
PAPER_SIGNCODE_NETS = {
    "resnet18": {"silu": (95.12, 94.38), "relu": (94.65, 93.85)},
    "vit": {"gelu": (79.10, 77.92)},
}
#: Sign Code paper, FFNN: accuracy % clean -> magnitude randomisation alpha=1.
PAPER_MAGNITUDE = {
    "relu": (80.5, 44.3),
    "silu": (82.6, 50.4),
    "gelu": (81.9, 48.2),
    "tanh": (80.2, 78.2),
}
#: Sign Code paper, gate dominance of FFNNs on CIFAR-10.
PAPER_GATE = {
    "silu": "Z1 ~ 4..10, δ̄ 0.4..0.94",
    "tanh": "Z1 ~ 0.4..0.6, δ̄ ~ 0",
}
#: HTAF paper, CIFAR-10 / CIFAR-100, mean of 5 runs: (HTAF, STE, SS) accuracy %.
PAPER_HTAF = {
    "SNN": {"C10": (91.0, 91.2, 90.6), "C100": (66.9, 63.9, 66.2)},
    "BNN": {"C10": (75.8, 75.3, 60.6), "C100": (46.1, 45.2, 31.3)},
    "DHN": {"C10": (88.6, 83.3, 74.5), "C100": (57.6, 56.7, 45.6)},
    # not in the paper: a plain ResNet-18 with every ReLU a step
    "Step ResNet-18": {"C10": (None, None, None), "C100": (None, None, None)},
}
#: HTAF paper, ICBM: (backbone, data, before, after) accuracy %.
PAPER_ICBM = (
    ("ResNet-18", "CIFAR-10", 94.6, 94.6),
    ("ResNet-18", "CIFAR-100", 80.0, 80.8),
    ("ResNet-18", "CUB", 74.5, 74.8),
    ("ViT-B", "CUB", 87.1, 88.5),
)
#: HTAF paper: first-layer gradient norm of a scaled-sigmoid DHN.
PAPER_GRAD = {"scaled_sigmoid": "< 1e-5"}
#: HTAF paper: the net behind each row of its table.
PAPER_ARCH = {
    "SNN": "SEW-ResNet",
    "BNN": "Bi-Real Net",
    "DHN": "WideResNet",
    "Step ResNet-18": "-",
}

# -- display names --------------------------------------------------------
#: Activation names as the tables show them.
ACTIVATION_NAMES = {
    "relu": "ReLU",
    "silu": "SiLU",
    "gelu": "GELU",
    "tanh": "tanh",
    "htaf": "HTAF",
    "ste": "STE",
    "scaled_sigmoid": "SS",
}
#: Our net behind each ``architecture`` of HTAFNetClassifier.
OURS_ARCH = {
    "snn": "spiking MLP (IF neurons)",
    "bnn": "Bi-Real binary MLP",
    "mlp": "Heaviside MLP",
    "sew_resnet": "SEW-ResNet-18 (IF neurons)",
    "bireal": "Bi-Real ResNet-18",
    "wrn": "Heaviside WideResNet",
    "resnet18": "ResNet-18",
    "vit": "ViT",
}
#: Row labels of the Sign Code tables, per architecture.
ARCH_NAMES = {"mlp": "FFNN", "resnet18": "ResNet-18", "vit": "ViT"}


# -- settings -------------------------------------------------------------
@dataclass(frozen=True)
class Recipe:
    """How one net trains: optimiser, schedule, regularisers, augmentation.

    `optimizer` is "adam", "adamw" or "sgd" (with `momentum`, Nesterov off);
    `cosine` anneals the learning rate to 0 over the epochs (one step per
    epoch); `augment` is None, "crop" (random crops of the image padded by 4
    pixels) or "crop_flip" (crops and left-right flips).
    """

    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9
    weight_decay: float = 0.0
    cosine: bool = False
    label_smoothing: float = 0.0
    augment: str | None = None

    def describe(self) -> str:
        """The recipe in a few words, for the captions."""
        name = {"adam": "Adam", "adamw": "AdamW", "sgd": "SGD"}[self.optimizer]
        parts = [f"{name} lr={self.lr:g}"]
        if self.optimizer == "sgd":
            parts.append(f"momentum {self.momentum:g}")
        if self.weight_decay:
            parts.append(f"wd {self.weight_decay:g}")
        if self.cosine:
            parts.append("cosine")
        if self.label_smoothing:
            parts.append(f"label smoothing {self.label_smoothing:g}")
        if self.augment:
            parts.append(
                {"crop": "random crops", "crop_flip": "crops+flips"}[self.augment]
            )
        return ", ".join(parts)


#: The paper-scale recipe of each architecture (see the module docstring).
RECIPES = {
    "adam": Recipe(),
    "resnet": Recipe("sgd", 0.1, weight_decay=5e-4, cosine=True, augment="crop_flip"),
    "vit": Recipe(
        "adamw",
        1e-3,
        weight_decay=0.05,
        cosine=True,
        label_smoothing=0.1,
        augment="crop_flip",
    ),
    "bireal": Recipe("adam", 1e-3, cosine=True, augment="crop_flip"),
}
#: The recipe each architecture trains with at the "small" and "paper" scales.
RECIPE_OF = {
    "mlp": "adam",
    "resnet18": "resnet",
    "wrn": "resnet",
    "sew_resnet": "resnet",
    "vit": "vit",
    "bireal": "bireal",
}


@dataclass(frozen=True)
class NetSpec:
    """One image net of a table: architecture, its arguments and epochs.

    `params` holds the ``architecture_params`` as ``(name, value)`` pairs (a
    frozen config keys the resume folder by its repr); `width` is what the
    tables' "Width" column shows; `epochs` None takes the config's.
    """

    architecture: str
    params: tuple = ()
    width: int = 0
    epochs: int | None = None

    def describe(self) -> str:
        """The net in a few words, for the tables."""
        args = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{OURS_ARCH.get(self.architecture, self.architecture)} ({args})"


@dataclass(frozen=True)
class SignCodeConfig:
    """Settings of ``reproduce signcode``.

    One FFNN per activation, width and seed; the paper's headline setting is
    the largest width. Several widths give the purity-accuracy correlation a
    spread of models.
    """

    dataset: str = "digits"
    widths: tuple = (32, 128, 512)
    depth: int = 3
    epochs: int = 40
    batch_size: int = 128
    lr: float = 1e-3
    seeds: int = 3
    n_neighbors: int = 5
    purity_k: int = 10
    activations: tuple = ("relu", "silu", "gelu", "tanh")
    flip_alpha: float = 0.2
    magnitude_alpha: float = 1.0
    n_repeats: int = 3
    #: image nets after the FFNNs (their rows carry the paper's numbers)
    nets: tuple = ()
    #: train with the per-architecture recipes (RECIPES) instead of Adam at lr
    recipes: bool = False
    #: use at most this many training / test samples (None: all)
    max_train: int | None = None
    max_test: int | None = None
    #: training samples (a stratified subset) on which mu_j(s) is estimated for
    #: the matched noise and gate dominance, and the training accuracy is
    #: scored (None: all)
    n_ref: int | None = None
    #: test samples (a stratified subset) on which the interventions and gate
    #: dominance are scored (None: all)
    n_eval: int | None = None


@dataclass(frozen=True)
class HTAFConfig:
    """Settings of ``reproduce htaf``.

    `models` holds ``(row label, architecture, number of hidden layers)``
    for the MLP-family nets, every hidden layer of `width` units, or
    ``(row label, NetSpec)`` for an image net.

    The first table's protocol (:mod:`sksign._report.htaf_protocol`): per
    row and activation, every candidate of the grid (`lr_grid`, and for HTAF
    each `alpha_grid` entry at each lr, lr-major) trains with seed
    `tune_seed` on a stratified ``1 - validation_fraction`` part of the
    training set (the split seeded by `tune_seed`) and is scored with the
    exact step on the rest; the best validation accuracy wins (ties: the
    first candidate), and the winner is refitted on the whole training set
    for each of `seeds` seeds and scored on the test set. `alpha_grid`
    holds ``(alpha0, alpha1, alpha0_start)``, ``alpha0_start`` None for no
    annealing (else annealed over the fit's epochs); STE and SS keep
    (`alpha0`, `alpha1`) (SS: k = alpha0 * alpha1). Every net trains with
    the learning-rate schedule `lr_schedule`. With `lr_relative`, the lr
    grid multiplies the recipe's rate (the paper-scale recipes differ per
    architecture) instead of replacing it.
    """

    dataset: str = "digits"
    width: int = 128
    models: tuple = (
        ("SNN", "snn", 2),
        ("BNN", "bnn", 4),
        ("DHN", "mlp", 4),
        ("DHN", "mlp", 8),
    )
    epochs: int = 20
    batch_size: int = 128
    lr: float = 1e-3
    seeds: int = 3
    time_steps: int = 4
    alpha0: float = 2.0
    alpha1: float = 11.0
    activations: tuple = ("htaf", "ste", "scaled_sigmoid")
    #: the tuning grid of every method
    lr_grid: tuple = (3e-4, 1e-3, 3e-3)
    #: HTAF's further candidates: (alpha0, alpha1, alpha0_start or None)
    alpha_grid: tuple = (
        (1.0, 22.0, 0.1),
        (2.0, 11.0, 0.1),
        (3.0, 7.3, 0.1),
        (2.0, 11.0, None),
    )
    lr_relative: bool = False
    validation_fraction: float = 0.2
    tune_seed: int = 0
    lr_schedule: str = "cosine"
    grad_depth: int = 8
    grad_steps: int = 20
    icbm_hidden: tuple = (256,)
    n_concepts: int = 64
    icbm_backbones: tuple = ("mlp", "cnn")
    #: NetSpec of an image backbone of the ICBM (its name in icbm_backbones)
    icbm_nets: tuple = ()
    recipes: bool = False
    max_train: int | None = None
    max_test: int | None = None


SIGNCODE_QUICK = SignCodeConfig(seeds=1)
SIGNCODE_FULL = SignCodeConfig(
    dataset="mnist5k", widths=(64, 256, 1024), depth=6, epochs=100
)
HTAF_QUICK = HTAFConfig(
    dataset="digits16",
    models=(
        ("SNN", NetSpec("sew_resnet", (("width", 8),), 8)),
        ("BNN", NetSpec("bireal", (("width", 8),), 8)),
        ("DHN", NetSpec("wrn", (("depth", 10), ("widen_factor", 1)), 16)),
        ("Step ResNet-18", NetSpec("resnet18", (("width", 8),), 8)),
    ),
    epochs=20,
    batch_size=128,
    seeds=3,
    # the lrs and alpha pairs that won on these nets in
    # benchmarks/bench_step_recipes.py (3e-4 never did): 10 tuning fits a row
    lr_grid=(1e-3, 3e-3),
    alpha_grid=((2.0, 11.0, 0.1), (1.0, 22.0, 0.1), (2.0, 11.0, None)),
)
HTAF_FULL = HTAFConfig(
    dataset="mnist5k",
    width=1024,
    models=(("SNN", "snn", 4), ("BNN", "bnn", 6), ("DHN", "mlp", 4), ("DHN", "mlp", 8)),
    epochs=100,
    icbm_hidden=(1024, 1024),
    n_concepts=256,
)

# -- the papers' architectures: reduced width on MNIST, full width on CIFAR --
_RESNET_SMALL = NetSpec("resnet18", (("width", 8),), 8, epochs=2)
_VIT_SMALL = NetSpec(
    "vit", (("dim", 64), ("depth", 3), ("heads", 4), ("mlp_dim", 128)), 64, epochs=2
)
SIGNCODE_SMALL = SignCodeConfig(
    dataset="mnist",
    widths=(256,),
    depth=6,
    epochs=4,
    batch_size=256,
    seeds=1,
    nets=(_RESNET_SMALL, _VIT_SMALL),
    recipes=True,
    n_ref=10000,
    n_eval=2000,
)
SIGNCODE_PAPER = SignCodeConfig(
    dataset="cifar10",
    widths=(1024,),
    depth=6,
    epochs=100,
    seeds=3,
    nets=(
        NetSpec("resnet18", (("width", 64),), 64, epochs=200),
        NetSpec(
            "vit",
            (("dim", 256), ("depth", 6), ("heads", 8), ("mlp_dim", 512)),
            256,
            epochs=200,
        ),
    ),
    recipes=True,
)
HTAF_SMALL = HTAFConfig(
    dataset="mnist",
    width=256,
    # the two deep nets the comparison needs most (the quick scale has all
    # four families): SEW-ResNet (T = 4) and the WideResNet would triple the
    # run on 2 cores
    models=(
        ("BNN", NetSpec("bireal", (("width", 8),), 8)),
        ("Step ResNet-18", NetSpec("resnet18", (("width", 8),), 8)),
    ),
    # a stratified 3,000 of the 60,000 training images (the test set stays
    # the full 10,000), 6 epochs of batches of 128: 141 optimiser steps, the
    # step nets' annealing needs more than the 72 of 3 epochs on 6,000 at 256
    # for the same compute; a grid of 2 lrs (HTAF: x 2 annealing choices)
    # keeps the run, 40 nets with the tuning fits, within 2 hours on 2 cores
    epochs=6,
    batch_size=128,
    seeds=3,
    lr_grid=(1e-3, 3e-3),
    alpha_grid=((2.0, 11.0, 0.1), (2.0, 11.0, None)),
    max_train=3000,
    icbm_backbones=("resnet18",),
    icbm_nets=(NetSpec("resnet18", (("width", 8),), 8),),
    icbm_hidden=(),
    n_concepts=64,
)
HTAF_PAPER = HTAFConfig(
    dataset="cifar10",
    width=1024,
    models=(
        ("SNN", NetSpec("sew_resnet", (("width", 64),), 64, epochs=200)),
        ("BNN", NetSpec("bireal", (("width", 64),), 64, epochs=200)),
        (
            "DHN",
            NetSpec("wrn", (("depth", 28), ("widen_factor", 10)), 160, epochs=200),
        ),
    ),
    epochs=200,
    seeds=5,
    # the recipes' rates differ per architecture (SGD 0.1, Adam 1e-3)
    lr_grid=(0.3, 1.0, 3.0),
    lr_relative=True,
    icbm_backbones=("resnet18",),
    icbm_nets=(NetSpec("resnet18", (("width", 64),), 64, epochs=200),),
    icbm_hidden=(),
    n_concepts=256,
    recipes=True,
)

#: The scales of ``reproduce``, in order of size.
SCALES = ("quick", "full", "small", "paper")


def configs(table: str, scale: str):
    """The settings of `table` ("signcode" or "htaf") at `scale`.

    Examples
    --------
    >>> configs("signcode", "small").dataset
    'mnist'
    """
    by_scale = {
        "signcode": dict(
            zip(SCALES, (SIGNCODE_QUICK, SIGNCODE_FULL, SIGNCODE_SMALL, SIGNCODE_PAPER))
        ),
        "htaf": dict(zip(SCALES, (HTAF_QUICK, HTAF_FULL, HTAF_SMALL, HTAF_PAPER))),
    }
    return by_scale[table][scale]
