"""``all_finite``: the one-pass finiteness check of a packed predict's rows."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sksign.deploy._kernels import all_finite

_SPECIAL = [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0]


@settings(max_examples=200, deadline=None)
@given(
    dtype=st.sampled_from([np.float32, np.float64]),
    shape=st.tuples(st.integers(0, 70), st.integers(1, 67)),
    specials=st.lists(
        st.tuples(st.integers(0, 10**6), st.sampled_from(_SPECIAL)), max_size=3
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_all_finite_equals_numpy(dtype, shape, specials, seed):
    """Check the answer is numpy's ``isfinite(...).all()`` on arrays of any
    size with infinities, NaNs and signed zeros anywhere, and at the largest
    and the smallest (subnormal) floats."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    values = rng.choice(
        [info.max, -info.max, info.smallest_subnormal, 1.0, -3.5], size=shape
    ).astype(dtype)
    flat = values.reshape(-1)
    for at, value in specials:
        if flat.size:
            flat[at % flat.size] = value
    assert all_finite(values) == bool(np.isfinite(values).all())


def test_the_fast_path_of_a_packed_predict_takes_finite_rows_only():
    """Check the estimator's fast path keeps finite float32 rows as they are
    and hands rows with a NaN or an infinity (a float64 past float32's range
    included) to scikit-learn's check (None), which names the problem."""
    from sksign.deploy._estimators import _plain_rows

    rows = np.ones((3, 4), np.float32)
    assert _plain_rows(rows, 4) is rows
    for bad in (np.nan, np.inf, -np.inf):
        rows[1, 2] = bad
        assert _plain_rows(rows, 4) is None
    assert _plain_rows(np.array([[1e39, 0.0, 0.0, 0.0]]), 4) is None
