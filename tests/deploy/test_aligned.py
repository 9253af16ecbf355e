"""Weights and tables of packed nets on cache lines (``_buffers.ALIGN``)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sksign.deploy import load, pack, save
from sksign.deploy._buffers import ALIGN, aligned, aligned_arrays
from sksign.deploy._ops._common import LutSteps
from sksign.estimators import HTAFNetClassifier

DTYPES = [np.float32, np.float64, np.uint64, np.int32, np.int16, np.uint8]


def _on_a_line(array):
    return array.ctypes.data % ALIGN == 0


@given(
    dtype=st.sampled_from(DTYPES),
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    skip=st.integers(0, 15),
    transpose=st.booleans(),
)
def test_aligned_copies_any_array_onto_a_line(dtype, shape, skip, transpose):
    """Check that any array, off a line by any number of items or strided,
    comes back C-contiguous on a line with the same values, and is left as
    it was."""
    size = int(np.prod(shape))
    base = np.arange(size + skip).astype(dtype)
    array = base[skip:].reshape(shape)
    if transpose:
        array = array.T
    before = array.copy()
    out = aligned(array)
    assert _on_a_line(out)
    assert out.flags.c_contiguous
    assert out.dtype == array.dtype
    np.testing.assert_array_equal(out, before)
    np.testing.assert_array_equal(array, before)


def test_an_array_already_on_a_line_is_not_copied():
    array = aligned(np.arange(5, 40, dtype=np.float32))
    assert aligned(array) is array


def test_aligned_arrays_keeps_the_other_items():
    lut = object()
    parts = (np.arange(1, 9, dtype=np.int16)[1:], 3.0, None, lut)
    out = aligned_arrays(parts)
    assert type(out) is tuple
    assert _on_a_line(out[0])
    assert out[1:] == (3.0, None, lut)
    assert aligned_arrays(lut) is lut
    assert _on_a_line(aligned_arrays([np.ones(3)[1:]])[0])


def _arrays(value):
    """The arrays in a derived value (an array, a tuple, a LutSteps)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _arrays(v)]
    if isinstance(value, LutSteps):
        return _arrays(value.tables)
    return []


@pytest.mark.parametrize(
    ("arch", "params", "X_shape"),
    [
        ("wrn", {"depth": 10, "widen_factor": 1}, (40, 3, 16, 16)),
        ("mlp", {}, (40, 30)),
        ("bnn", {}, (40, 30)),
    ],
)
def test_a_packed_net_s_tensors_and_tables_lie_on_lines(
    tmp_path, arch, params, X_shape
):
    """Check every tensor of a packed net, read back from its file too, and
    every table and weight layout its ops derive."""
    X = np.random.default_rng(0).random(X_shape, dtype=np.float32)
    est = HTAFNetClassifier(
        (64, 64) if arch != "wrn" else (),
        architecture=arch,
        architecture_params=params,
        random_state=0,
    ).initialize_for(X[0].size, classes=[0, 1, 2], input_shape=X.shape[1:])
    packed = pack(est)
    save(packed, tmp_path / "net.sksign")
    for model in (packed, load(tmp_path / "net.sksign")):
        net = model.net_
        net.forward(X.reshape(len(X), -1))  # derives what a call of 40 rows needs
        assert all(_on_a_line(t) for t in net.tensors.values() if t.size)
        derived = [a for v in net._context.derived.values() for a in _arrays(v)]
        assert derived, "the ops derived no arrays"
        off = [a.shape for a in derived if a.size and not _on_a_line(a)]
        assert not off, f"derived arrays off a line: {off}"
