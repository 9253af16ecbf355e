"""The papers' published numbers and the settings of ``reproduce``.

The numbers the two papers report (CIFAR-10/100 unless stated), shown next to
ours in the reproduced tables; the display names of activations and
architectures; and the quick and full settings of ``reproduce signcode``
(:class:`SignCodeConfig`) and ``reproduce htaf`` (:class:`HTAFConfig`).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ACTIVATION_NAMES",
    "HTAF_FULL",
    "HTAF_QUICK",
    "OURS_ARCH",
    "PAPER_ARCH",
    "PAPER_GATE",
    "PAPER_GRAD",
    "PAPER_HTAF",
    "PAPER_ICBM",
    "PAPER_MAGNITUDE",
    "PAPER_SIGNCODE",
    "SIGNCODE_FULL",
    "SIGNCODE_QUICK",
    "HTAFConfig",
    "SignCodeConfig",
]

# -- the papers' numbers --------------------------------------------------
#: Sign Code paper, FFNN w=1024 d=6 on CIFAR-10: (full net, sign-kNN) accuracy %.
PAPER_SIGNCODE = {
    "relu": (57.30, 55.82),
    "silu": (58.42, 57.18),
    "gelu": (58.15, 56.90),
    "tanh": (56.70, 55.45),
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
}


# -- settings -------------------------------------------------------------
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


@dataclass(frozen=True)
class HTAFConfig:
    """Settings of ``reproduce htaf``.

    `models` holds ``(row label, architecture, number of hidden layers)``;
    every hidden layer has `width` units.
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
    grad_depth: int = 8
    grad_steps: int = 20
    icbm_hidden: tuple = (256,)
    n_concepts: int = 64
    icbm_backbones: tuple = ("mlp", "cnn")


SIGNCODE_QUICK = SignCodeConfig(seeds=1)
SIGNCODE_FULL = SignCodeConfig(
    dataset="mnist5k", widths=(64, 256, 1024), depth=6, epochs=100
)
HTAF_QUICK = HTAFConfig()
HTAF_FULL = HTAFConfig(
    dataset="mnist5k",
    width=1024,
    models=(("SNN", "snn", 4), ("BNN", "bnn", 6), ("DHN", "mlp", 4), ("DHN", "mlp", 8)),
    epochs=100,
    icbm_hidden=(1024, 1024),
    n_concepts=256,
)
