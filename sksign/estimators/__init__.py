"""scikit-learn estimators: HTAF nets and the sign-code k-NN.

The names load on first use: the k-NN estimators need numpy and numba only,
so a search service that imports them never loads torch or skorch (the HTAF
nets do).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import importlib

from sksign._public import PUBLIC, public_names

#: public name -> the module that defines it (declared in sksign/_public.py)
_PUBLIC = PUBLIC["sksign.estimators"]

__all__ = public_names("sksign.estimators")


def __getattr__(name):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'sksign.estimators' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
