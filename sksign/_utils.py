"""Private helpers shared by the estimators."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["restore_state_on_error"]


@contextmanager
def restore_state_on_error(estimator) -> Iterator[None]:
    """Put ``estimator.__dict__`` back as it was if the block raises.

    Validation in ``fit`` sets ``n_features_in_`` and friends before it can
    fail; a failed call must leave a fitted estimator exactly as it was.
    """
    state = dict(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(state)
        raise
