"""scikit-learn estimators: HTAF nets and the sign-code k-NN.

The names load on first use: the k-NN estimators need numpy and numba only,
so a search service that imports them never loads torch or skorch (the HTAF
nets do).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import importlib

#: public name -> the module that defines it
_PUBLIC = {
    "AlphaAnnealing": "sksign.estimators._callbacks",
    "ConceptRecord": "sksign.estimators._icbm",
    "CosineSchedule": "sksign.estimators._step_recipe",
    "HTAFNetClassifier": "sksign.estimators._htaf_net",
    "HTAFNetRegressor": "sksign.estimators._htaf_net",
    "ICBMClassifier": "sksign.estimators._icbm",
    "RelaxationGap": "sksign.estimators._callbacks",
    "SignKNNClassifier": "sksign.estimators._sign_knn",
    "SignKNNRegressor": "sksign.estimators._sign_knn_regressor",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'sksign.estimators' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
