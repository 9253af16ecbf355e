"""scikit-learn transformers: sign codes out of any fitted net."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign.transformers._sign_codes import SignCodeTransformer

__all__ = ["SignCodeTransformer"]
