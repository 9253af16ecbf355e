"""The settings of ``python -m sksign demo`` and what its sections share.

:class:`DemoConfig` holds the sizes (``DEFAULT``, and ``QUICK`` for
``--quick`` and the tests); :class:`DemoContext` the data split, the settings
and the nets fitted once and reused by several sections; :func:`add_figure`
draws a figure of :mod:`sksign._report.plots` (matplotlib is optional).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sksign._report._common import SEED, load_split, optional, progress
from sksign.estimators import HTAFNetClassifier

__all__ = ["DEFAULT", "QUICK", "DemoConfig", "DemoContext", "add_figure"]


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the demo; ``QUICK`` is the test-sized version."""

    hidden: tuple = (256, 256)
    epochs: int = 40
    step_baselines: tuple = ("ste", "scaled_sigmoid")
    grid_alpha0: tuple = (0.5, 1.0, 2.0, 3.0)
    grid_hidden: tuple = (128,)
    grid_epochs: int = 20
    cv: int = 3
    sign_activations: tuple = ("relu", "silu", "gelu", "tanh", "htaf")
    #: the nets of the sign-code and intervention sections: the Sign Code
    #: paper's depth (its claims are about deep nets: flips compound with depth)
    sign_hidden: tuple = (512,) * 6
    sign_epochs: int = 20
    n_neighbors: int = 5
    purity_k: int = 10
    alphas: tuple = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
    intervention_activations: tuple = ("relu", "silu", "gelu", "tanh")
    n_repeats: int = 3
    widths: tuple = (16, 64, 256, 512)
    width_activations: tuple = ("relu", "silu", "tanh")
    width_depth: int = 2
    width_epochs: int = 20
    n_concepts: int = 32
    icbm_hidden: tuple = (256,)
    icbm_epochs: int = 40
    n_concept_rows: int = 10
    extra: dict = field(default_factory=dict)


DEFAULT = DemoConfig()
QUICK = replace(
    DEFAULT,
    hidden=(128, 128),
    epochs=15,
    grid_alpha0=(1.0, 2.0, 3.0),
    grid_hidden=(64,),
    grid_epochs=8,
    sign_activations=("relu", "silu", "tanh", "htaf"),
    sign_hidden=(256,) * 4,
    sign_epochs=10,
    alphas=(0.0, 0.1, 0.2, 0.5, 1.0),
    intervention_activations=("relu", "silu", "tanh"),
    n_repeats=1,
    widths=(16, 64, 256),
    width_activations=("relu", "silu", "tanh"),
    width_epochs=10,
    n_concepts=16,
    icbm_hidden=(128,),
    icbm_epochs=15,
    n_concept_rows=8,
)


class DemoContext:
    """Data, settings and fitted nets shared by the sections."""

    def __init__(self, cfg, dataset, device, show_progress):
        self.dataset = dataset
        self.X_train, self.X_test, self.y_train, self.y_test = load_split(dataset)
        self.cfg = cfg
        self.device = device
        self.show_progress = show_progress
        self.nets = {}

    def bar(self, iterable=None, *, total=None, desc=None):
        """A progress bar, shown unless ``--no-progress``."""
        return progress(iterable, total=total, desc=desc, enabled=self.show_progress)

    def make_net(self, hidden, activation, epochs, **kw):
        """An unfitted HTAFNetClassifier with the demo's seed and device."""
        return HTAFNetClassifier(
            hidden,
            activation=activation,
            max_epochs=epochs,
            random_state=SEED,
            device=self.device,
            **kw,
        )

    def fitted(self, hidden, activation, epochs, **kw):
        """``make_net(...)`` fitted on the training split, once per setting."""
        key = (hidden, activation, epochs, tuple(sorted(kw.items())))
        if key not in self.nets:
            net = self.make_net(hidden, activation, epochs, **kw)
            self.nets[key] = net.fit(self.X_train, self.y_train)
        return self.nets[key]

    def net(self, activation):
        """The main-size net with `activation`, fitted once and cached."""
        return self.fitted(self.cfg.hidden, activation, self.cfg.epochs)

    def sign_net(self, activation):
        """The deep net of the sign-code sections, fitted once and cached.

        HTAF trains at ``lr=3e-4``: a deep, wide HTAF MLP stays at chance at
        the default 1e-3 (the user guide's "Choosing a step activation and a
        recipe").
        """
        kw = {"lr": 3e-4} if activation == "htaf" else {}
        cfg = self.cfg
        return self.fitted(cfg.sign_hidden, activation, cfg.sign_epochs, **kw)


def add_figure(rep, plot, args, name, caption):
    """Add ``plots.<plot>(*args)`` to `rep` as ``<name>.png``.

    Without matplotlib (the ``report`` extra) the figure is skipped with a
    note and the rest of the report still runs.
    """
    got, why = optional("sksign._report.plots", plot)
    if got is None:
        rep.skip(f"figure {name}", why)
        return
    rep.figure(got[0](*args), name, caption)
