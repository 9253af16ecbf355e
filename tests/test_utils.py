"""The private helpers of ``sksign._utils`` against what they stand in for."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from sklearn.utils import gen_batches

from sksign._utils import row_batches


@given(n=st.integers(1, 500), batch_size=st.integers(1, 600))
def test_row_batches_are_scikit_learns_batches(n, batch_size):
    """Check the slices of gen_batches, every row once, in order."""
    got = row_batches(n, batch_size)
    assert got == list(gen_batches(n, batch_size))
    assert [i for s in got for i in range(s.start, s.stop)] == list(range(n))


def test_row_batches_of_no_rows_or_no_size():
    """Check no slices for no rows, and one-row batches for a size below 1."""
    assert row_batches(0, 0) == []
    assert row_batches(3, 0) == [slice(0, 1), slice(1, 2), slice(2, 3)]
