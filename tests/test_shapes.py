"""The one sample-shape rule: rows = first axis, sample shape = the rest."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import subprocess
import sys

import numpy as np
import pytest

from sksign._shapes import (
    check_sample_shape,
    image_shape,
    same_sample_shape,
    split_sample_shape,
)


@pytest.mark.parametrize(
    ("shape", "rows", "sample"),
    [
        ((5, 1, 2, 3), (5, 6), (1, 2, 3)),
        ((5, 2, 3), (5, 6), (2, 3)),
        ((1, 2, 3), (1, 6), (2, 3)),  # one sample
        ((0, 2, 3), (0, 6), (2, 3)),  # no sample: still one row width
    ],
)
def test_samples_with_more_than_one_axis_become_rows(shape, rows, sample):
    """Check the first axis counts the samples and the rest is their shape."""
    X = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    flat, got = split_sample_shape(X)
    assert flat.shape == rows
    assert got == sample
    assert all(type(s) is int for s in got)
    assert np.shares_memory(flat, X) or X.size == 0  # a view, no copy
    np.testing.assert_array_equal(flat.reshape(shape), X)


def test_lists_of_samples_are_read_as_arrays():
    """Check nested lists and tuples follow the same rule."""
    X = np.arange(12.0).reshape(2, 1, 2, 3)
    flat, shape = split_sample_shape(X.tolist())
    assert shape == (1, 2, 3)
    np.testing.assert_array_equal(flat, X.reshape(2, 6))
    flat, shape = split_sample_shape(tuple(X[:, 0].tolist()))
    assert shape == (2, 3)


@pytest.mark.parametrize(
    "X",
    [
        np.zeros(5),  # 1-D
        np.zeros((4, 3)),  # rows
        [[0.0, 1.0], [1.0, 0.0]],
        [],
        [[1.0, 2.0], [3.0]],  # ragged: left to the caller's validation
        iter([np.zeros((2, 3, 3))]),  # a batch iterator is not an array
        "text",
        None,
    ],
    ids=["1d", "rows", "list_rows", "empty_list", "ragged", "iterator", "str", "none"],
)
def test_anything_but_samples_with_axes_comes_back_unchanged(X):
    """Check rows, 1-D arrays and non-arrays pass through, with no shape."""
    out, shape = split_sample_shape(X)
    assert out is X
    assert shape is None


def test_image_shape_gives_a_two_axis_shape_one_channel():
    assert image_shape((8, 8)) == (1, 8, 8)
    assert image_shape([3, 8, 8]) == (3, 8, 8)
    assert image_shape((7,)) == (7,)
    assert image_shape(None) is None


def test_same_sample_shape_reads_one_channel_only_when_asked():
    assert same_sample_shape((2, 3), [2, 3])
    assert not same_sample_shape((8, 8), (1, 8, 8))
    assert same_sample_shape((8, 8), (1, 8, 8), one_channel=True)
    assert not same_sample_shape((8, 8), (2, 8, 8), one_channel=True)
    assert not same_sample_shape((4, 16), (8, 8), one_channel=True)


def test_a_wrong_sample_shape_names_both_shapes():
    """Check the one message: what was given, what was seen at fit."""
    with pytest.raises(
        ValueError,
        match=r"^X has samples of shape \(1, 4, 16\), but Est was fitted on "
        r"samples of shape \(1, 8, 8\)\.$",
    ):
        check_sample_shape((1, 4, 16), (1, 8, 8), "Est")
    with pytest.raises(ValueError, match=r"images of shape \(4, 16\).*\(8, 8\)"):
        check_sample_shape((4, 16), [8, 8], "Est", what="images", one_channel=True)
    with pytest.raises(ValueError, match=r"shape \(8, 8\), but"):
        check_sample_shape((8, 8), (1, 8, 8), "Est")  # one_channel=False


@pytest.mark.parametrize(
    ("shape", "fitted", "one_channel"),
    [
        (None, (1, 8, 8), False),  # rows given
        ((1, 8, 8), None, False),  # fitted on rows
        ((2, 3), (2, 3), False),
        ((8, 8), (1, 8, 8), True),
        ((1, 8, 8), (8, 8), True),
    ],
)
def test_matching_or_unknown_shapes_pass(shape, fitted, one_channel):
    assert check_sample_shape(shape, fitted, "Est", one_channel=one_channel) is None


def test_the_helper_loads_neither_torch_nor_scikit_learn():
    """Check sksign._shapes needs numpy only (sksign.deploy loads no torch)."""
    code = (
        "import sys, sksign._shapes; "
        "bad = {'torch', 'sklearn', 'skorch', 'numba'} & set(sys.modules); "
        "assert not bad, bad"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
