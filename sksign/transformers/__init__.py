"""scikit-learn transformers: sign codes out of any fitted net."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign.transformers._huggingface import (
    BERT_FFN_LAYERS,
    HFForwardKwargs,
    hf_forward_kwargs,
    hf_sign_code_transformer,
    tokenize_to_array,
)
from sksign.transformers._sign_codes import SignCodeTransformer

__all__ = [
    "BERT_FFN_LAYERS",
    "HFForwardKwargs",
    "SignCodeTransformer",
    "hf_forward_kwargs",
    "hf_sign_code_transformer",
    "tokenize_to_array",
]
