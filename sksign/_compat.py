"""The private scikit-learn names sksign relies on, imported in one place.

scikit-learn does not promise these names across releases; when one moves,
this module is the only one to change.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sklearn.base import _fit_context
from sklearn.neighbors._base import _get_weights
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    Options,
    StrOptions,
    validate_parameter_constraints,
    validate_params,
)
from sklearn.utils._set_output import _get_output_config
from sklearn.utils.validation import _check_feature_names_in, _check_sample_weight

__all__ = [
    "HasMethods",
    "Interval",
    "InvalidParameterError",
    "Options",
    "StrOptions",
    "_check_feature_names_in",
    "_check_sample_weight",
    "_fit_context",
    "_get_output_config",
    "_get_weights",
    "validate_parameter_constraints",
    "validate_params",
]
