"""sksign: binary structure in deep nets, the scikit-learn way.

HTAF nets whose hidden units are exact Heaviside steps at inference, sign codes
read out of any fitted net, a popcount Hamming k-NN on those codes, and the
Sign Code paper's interventions and gate-dominance diagnostics as scorers.

The public names are importable from here (``from sksign import
HTAFNetClassifier``) and from their subpackages (``sksign.estimators``,
``sksign.transformers``, ``sksign.metrics``, ``sksign.nn``,
``sksign.datasets``). They load on first use, so ``import sksign`` stays light.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import importlib

from sksign._public import SUBPACKAGES as _SUBPACKAGES
from sksign._public import TOP_LEVEL as _PUBLIC
from sksign._version import __version__

# The public names and their homes are declared in sksign/_public.py.
__all__ = ["__version__", *_PUBLIC, *_SUBPACKAGES]


def __getattr__(name):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"sksign.{name}")
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'sksign' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
