"""scikit-learn transformers: sign codes out of any fitted net."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
from sksign.transformers._ffn import FFNLayer, find_ffn_activations
from sksign.transformers._ffn_distill import distill_ffn
from sksign.transformers._ffn_swap import swap_ffn_activations
from sksign.transformers._huggingface import (
    BERT_FFN_LAYERS,
    HFForwardKwargs,
    hf_forward_kwargs,
    hf_sign_code_transformer,
    tokenize_to_array,
)
from sksign.transformers._sign_codes import SignCodeTransformer

# The public names are declared in sksign/_public.py.
__all__ = public_names(__name__)
