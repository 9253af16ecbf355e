"""PackedClassifier.predict without the softmax where a row's class is clear:
the same columns as the first argmax of the float32 softmax, on every row."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sksign.deploy._estimators import predicted_columns, softmax32
from sksign.deploy._kernels import clear_winners
from sksign.deploy._kernels._winners import MARGIN


def _reference(logits):
    return softmax32(logits).astype(np.float64).argmax(axis=1)


def _near_ties(rng, n, k, scale):
    """Rows whose largest logits differ by 0, a few float32 steps, about the
    margin, or plenty, at magnitude `scale`."""
    logits = (rng.standard_normal((n, k)) * scale).astype(np.float32)
    gaps = np.array([0.0, 2.0**-24, 2.0**-12, MARGIN / 2, MARGIN, 2 * MARGIN, 0.5])
    for i in range(n):
        a, b = rng.choice(k, 2, replace=k < 2)
        top = np.float32(logits[i].max() + rng.random())
        logits[i, a] = top
        logits[i, b] = np.float32(top - np.float32(gaps[i % len(gaps)] * max(1, scale)))
    return logits


@pytest.mark.parametrize("k", [1, 2, 3, 10, 1000])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0, 1e4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_columns_equal_the_softmax_argmax_at_near_ties(k, scale, dtype):
    rng = np.random.default_rng(k)
    logits = _near_ties(rng, 300, k, scale).astype(dtype)
    np.testing.assert_array_equal(predicted_columns(logits), _reference(logits))


@settings(max_examples=200, deadline=None)
@given(
    arrays(
        np.float32,
        st.tuples(st.integers(1, 7), st.integers(1, 6)),
        elements=st.floats(-4, 4, width=32) | st.sampled_from([0.0, 2.0**-10, 1.0]),
    )
)
def test_columns_equal_the_softmax_argmax(logits):
    np.testing.assert_array_equal(predicted_columns(logits), _reference(logits))


def test_rows_without_a_clear_winner_are_left_to_the_softmax():
    logits = np.array(
        [
            [1.0, 3.0, 2.0],  # clear
            [3.0, 1.0, 3.0],  # a tie
            [3.0, 3.0 - 2.0**-11, 0.0],  # inside the margin
            [3.0, 3.0 - 2.0**-10, 0.0],  # exactly the margin: clear
            [np.nan, 1.0, 0.0],
            [np.inf, 1.0, 0.0],
            [-np.inf, 1.0, 0.0],  # finite maximum, -inf elsewhere: clear
        ],
        np.float32,
    )
    out = np.empty(len(logits), np.int64)
    assert clear_winners(logits, out) == 4
    np.testing.assert_array_equal(out, [1, -1, -1, 0, -1, -1, 1])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(predicted_columns(logits), _reference(logits))


def test_one_class_and_no_rows():
    out = np.empty(3, np.int64)
    assert clear_winners(np.zeros((3, 1), np.float32), out) == 0
    np.testing.assert_array_equal(out, 0)
    assert predicted_columns(np.zeros((0, 4), np.float32)).shape == (0,)
