"""Sign recording over any nn.Module: activation kinds, layers, pooling, hooks.

One module per job, all re-exported here:

- activation kinds (:func:`activation_kind`, :func:`find_activations`): which
  modules are activations and which keep the sign of their input;
- layer resolution (:func:`resolve_layers`): a layer specification such as
  "last", "all", names, wildcards or types, turned into ``{name: module}``;
- pooling (:func:`pool_signs`, :func:`quadrant_bounds`): sign maps of conv
  and token layers turned into bit codes;
- recording (:func:`record_signs`, :class:`SignRecorder`): the sign codes of
  selected layers during forward passes;
- capture (:func:`forward_hooks`, :func:`capture_activations`,
  :func:`temporarily_eval`): the one place where sksign attaches forward
  hooks, which everything else (recording, interventions, summaries, the
  estimators' callbacks and the scorers) goes through.

This package is torch only (no scikit-learn).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
from sksign.nn.hooks._capture import (
    ActivationCapture,
    call_key,
    capture_activations,
    forward_hooks,
    temporarily_eval,
    temporary_mode,
)
from sksign.nn.hooks._kinds import activation_kind, find_activations
from sksign.nn.hooks._layers import resolve_layers, split_calls
from sksign.nn.hooks._pooling import (
    CONV_POOLS,
    TOKEN_POOLS,
    CodeLayout,
    pool_signs,
    quadrant_bounds,
)
from sksign.nn.hooks._recording import RESIDUAL_MODES, SignRecorder, record_signs

# The public names are declared in sksign/_public.py. The others imported
# here (call_key, CodeLayout and the option tuples CONV_POOLS, TOKEN_POOLS,
# RESIDUAL_MODES) are internal: importable for sksign's own modules, not
# public.
__all__ = public_names(__name__)
