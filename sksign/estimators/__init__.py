"""scikit-learn estimators: HTAF nets and the sign-code k-NN."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign.estimators._callbacks import AlphaAnnealing, RelaxationGap
from sksign.estimators._htaf_net import HTAFNetClassifier, HTAFNetRegressor
from sksign.estimators._icbm import ConceptRecord, ICBMClassifier
from sksign.estimators._sign_knn import SignKNNClassifier
from sksign.estimators._sign_knn_regressor import SignKNNRegressor
from sksign.estimators._step_recipe import CosineSchedule

__all__ = [
    "AlphaAnnealing",
    "ConceptRecord",
    "CosineSchedule",
    "HTAFNetClassifier",
    "HTAFNetRegressor",
    "ICBMClassifier",
    "RelaxationGap",
    "SignKNNClassifier",
    "SignKNNRegressor",
]
