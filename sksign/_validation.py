"""Input checks shared by the library's layers.

:func:`check_net_X` is how every part of sksign turns user input into the rows
a fitted sksign net takes: the nets themselves, the scorers and the
transformers call it, so they agree on dtype, shape and error messages.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

__all__ = ["check_net_X"]


def check_net_X(net, X, *, reset: bool = False):
    """Validate `X` for the sksign net `net` and return float32 rows.

    Images (N, C, H, W) are flattened to rows; torch Datasets pass through.
    With ``reset=True`` (fit) the feature count and image shape are recorded.
    """
    return net._as_rows(X, reset=reset)
