"""The float products of the packed layers: BLAS on blocks set by the shape,
run on the net's own threads."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import threading

import numpy as np
import pytest

from sksign.deploy._ops import _common
from sksign.deploy._ops._common import (
    BLAS_BLOCK_COLS,
    BLAS_BLOCK_ROWS,
    BLAS_BLOCK_WORK,
    blas_product,
)
from sksign.deploy._runtime import blas_on_one_thread

# one row; fewer rows than a block (one call, or column blocks); row blocks
# that do not divide the rows; column counts not a multiple of a block
SHAPES = [
    (1, 7, 3),
    (1, 33, 2 * BLAS_BLOCK_COLS + 5),
    (5, 64, 10),
    (BLAS_BLOCK_ROWS, 50, 2 * BLAS_BLOCK_COLS),
    (2 * BLAS_BLOCK_ROWS + 3, 65, 17),
    (5 * BLAS_BLOCK_ROWS - 1, 31, 3 * BLAS_BLOCK_COLS + 1),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transposed", [False, True])
def test_blas_product_is_the_matrix_product(shape, dtype, transposed, monkeypatch):
    """Check ``x @ w`` against float64 numpy, for C and transposed weights,
    and that 1, 2 and 3 threads give the same bits."""
    monkeypatch.setattr(_common, "BLAS_BLOCK_WORK", 0)  # blocks at these sizes
    rows, inner, cols = shape
    rng = np.random.default_rng(rows * cols)
    x = rng.standard_normal((rows, inner)).astype(dtype)
    w = rng.standard_normal((cols, inner)).astype(dtype)
    w = w.T if transposed else np.ascontiguousarray(w.T)
    with blas_on_one_thread():
        outs = [blas_product(x, w, n) for n in (1, 2, 3)]
    expected = x.astype(np.float64) @ w.astype(np.float64)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    for out in outs:
        assert out.dtype == dtype
        assert out.flags.c_contiguous
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
        np.testing.assert_array_equal(out, outs[0])


@pytest.mark.parametrize(
    ("shape", "n_blocks"),
    [
        ((2 * BLAS_BLOCK_ROWS, 8, 4), 2),
        ((2 * BLAS_BLOCK_ROWS - 1, 8, 4), 1),
        ((7, 8, 2 * BLAS_BLOCK_COLS), 2),
        ((3 * BLAS_BLOCK_ROWS, 8, 4 * BLAS_BLOCK_COLS), 3),
    ],
)
def test_blas_product_blocks_follow_the_shape_and_run_on_our_threads(
    shape, n_blocks, monkeypatch
):
    """Check the BLAS calls are the same blocks on any thread count, and that
    two threads run them on two threads."""
    monkeypatch.setattr(_common, "BLAS_BLOCK_WORK", 0)
    rows, inner, cols = shape
    x = np.ones((rows, inner), np.float32)
    w = np.ones((inner, cols), np.float32)
    seen = {}
    matmul = np.matmul

    def spy(a, b, out=None):
        calls = seen.setdefault(n_threads, [])
        calls.append((a.shape, b.shape, threading.get_ident()))
        if len(calls) <= barrier.parties:
            barrier.wait()  # the first blocks meet: on two threads, or a timeout
        return matmul(a, b, out=out)

    monkeypatch.setattr(_common.np, "matmul", spy)
    for n_threads in (1, 2):
        parties = 1 if n_threads == 1 else min(2, n_blocks)
        barrier = threading.Barrier(parties, timeout=10)
        out = blas_product(x, w, n_threads)
        np.testing.assert_array_equal(out, np.full((rows, cols), inner, np.float32))
    assert sorted(c[:2] for c in seen[1]) == sorted(c[:2] for c in seen[2])
    assert len(seen[1]) == n_blocks
    assert len({c[2] for c in seen[2]}) == min(2, n_blocks)


def test_blas_product_blocks_have_the_work_to_pay_a_thread(monkeypatch):
    """Check a product splits into blocks of at least BLAS_BLOCK_WORK
    multiply-adds: below twice that, one call, whatever the rows."""
    calls = []
    matmul = np.matmul

    def spy(a, b, out=None):
        calls.append(a.shape[0] * a.shape[1] * b.shape[1])
        return matmul(a, b, out=out)

    monkeypatch.setattr(_common.np, "matmul", spy)
    inner, cols = 16, 32
    for rows in (4 * BLAS_BLOCK_ROWS, 2 * BLAS_BLOCK_WORK // (inner * cols)):
        calls.clear()
        x = np.ones((rows, inner), np.float32)
        out = blas_product(x, np.ones((inner, cols), np.float32), 2)
        np.testing.assert_array_equal(out, np.full((rows, cols), inner, np.float32))
        assert len(calls) == max(1, rows * inner * cols // BLAS_BLOCK_WORK)
        assert min(calls) >= min(BLAS_BLOCK_WORK, rows * inner * cols)
