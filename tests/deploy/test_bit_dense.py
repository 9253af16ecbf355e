"""The ``bit_dense`` op: real weights on rows of bits, by its three paths."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest

from sksign.deploy._ops import bit_dense
from sksign.deploy._ops._common import (
    BLAS_MIN_ROWS,
    SPARSE_DENSITY,
    Context,
    pack_rows,
)
from sksign.deploy._ops._tables import SumConv, sum_bound


def _layer(n_in, n_out, seed, float64=False, ctx_out=None):
    """A ``bit_dense`` layer's run, its weights and its bias (its context
    appended to the list `ctx_out`, if given)."""
    rng = np.random.default_rng(seed)
    wt = rng.standard_normal((n_in, n_out)).astype(np.float32)
    bias = rng.standard_normal(n_out).astype(np.float32)
    ctx = Context({"w": wt, "b": bias}, {"h": n_in})
    layer = {
        "name": "fc",
        "op": "bit_dense",
        "inputs": ["h"],
        "output": "o",
        "attrs": {"out": n_out, "float64": float64},
        "tensors": {"weight_t": "w", "bias": "b"},
    }
    if ctx_out is not None:
        ctx_out.append(ctx)
    return bit_dense.prepare(layer, ctx), wt, bias


def _counted(monkeypatch, name):
    """The calls the op makes of its kernel `name`, recorded (their last
    arguments) as they run."""
    calls = []
    kernel = getattr(bit_dense, name)

    def counted(*args):
        calls.append(args[-2:])
        kernel(*args)

    monkeypatch.setattr(bit_dense, name, counted)
    return calls


def _dense_call(run, n_in, n_out, n_rows):
    """``(bits, words, out)`` of a call of `run` on rows half set (row 0 with
    every bit set, row 1 with none), on one thread."""
    rng = np.random.default_rng(n_rows)
    bits = (rng.random((n_rows, n_in)) < 0.5).astype(np.uint8)
    bits[0] = 1
    bits[1] = 0
    x = pack_rows(bits)
    out = run([x], n_rows, 1)
    assert out.dtype == np.float32
    assert out.shape == (n_rows, n_out)
    return bits, x, out


@pytest.fixture
def table_calls(monkeypatch):
    """The calls of the table kernel (``sum_conv``) the op makes."""
    return _counted(monkeypatch, "sum_conv")


@pytest.fixture
def garbage_out(monkeypatch):
    """The op's output arrays handed out full of garbage (bytes 0xFF: NaN
    as floats, all ones as words)."""

    def garbage(shape, dtype):
        out = np.empty(shape, dtype)
        out.view(np.uint8)[...] = 0xFF
        return out

    monkeypatch.setattr(bit_dense, "empty", garbage)


@pytest.mark.parametrize("n_in", [1, 7, 63, 64, 65, 200])
@pytest.mark.parametrize("n_out", [1, 10, 17, 33])
@pytest.mark.parametrize("n_rows", [BLAS_MIN_ROWS, 37])
def test_dense_rows_sum_by_tables_within_the_float32_bound(
    n_in, n_out, n_rows, table_calls, garbage_out
):
    """Check that many dense rows go through the nibble tables, within the
    bound of a float32 sum of the exact sum, whatever the thread count."""
    run, wt, bias = _layer(n_in, n_out, seed=n_in * 100 + n_out)
    bits, x, out = _dense_call(run, n_in, n_out, n_rows)
    assert table_calls, "the tables were not used"
    ref = bits.astype(np.float64) @ wt.astype(np.float64) + bias
    # one table term a nibble, then the bias: each within 2**-24 relative
    n_terms = -(-n_in // 4) + 1
    bound = sum_bound(wt, n_terms) + 2.0**-23 * (np.abs(ref) + np.abs(bias))
    assert np.all(np.abs(out - ref) <= bound)
    np.testing.assert_array_equal(out[1], bias)
    for n_threads in (2, 3):
        np.testing.assert_array_equal(run([x], n_rows, n_threads), out)


def test_the_other_paths_take_what_the_tables_do_not(table_calls, monkeypatch):
    """Check that few rows, sparse rows, two inputs, a float64 readout and
    tables past ``DENSE_TABLE_MAX_BYTES`` do not use the tables, and that
    every path gives the same sums."""
    n_in, n_out, n_rows = 130, 12, 40
    run, wt, bias = _layer(n_in, n_out, seed=1)
    rng = np.random.default_rng(2)
    dense = (rng.random((n_rows, n_in)) < 0.5).astype(np.uint8)
    sparse = (rng.random((n_rows, n_in)) < 0.05).astype(np.uint8)
    tables = run([pack_rows(dense)], n_rows, 1)
    assert len(table_calls) == 1
    # between the two limits of sparse rows: still by tables here
    some = (rng.random((n_rows, n_in)) < 0.15).astype(np.uint8)
    assert bit_dense.TABLE_SPARSE_DENSITY < some.mean() < SPARSE_DENSITY
    run([pack_rows(some)], n_rows, 1)
    assert len(table_calls) == 2
    few = run([pack_rows(dense[: BLAS_MIN_ROWS - 1])], BLAS_MIN_ROWS - 1, 1)
    run([pack_rows(sparse)], n_rows, 1)
    twice = run([pack_rows(dense), pack_rows(dense)], n_rows, 1)
    readout, *_ = _layer(n_in, n_out, seed=1, float64=True)
    wide = readout([pack_rows(dense)], n_rows, 1)
    monkeypatch.setattr(bit_dense, "DENSE_TABLE_MAX_BYTES", 0)
    blas, *_ = _layer(n_in, n_out, seed=1)
    by_blas = blas([pack_rows(dense)], n_rows, 1)
    assert len(table_calls) == 2, "a call that should not have used the tables did"
    ref = dense.astype(np.float64) @ wt.astype(np.float64) + bias
    for out in (tables, wide, by_blas):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(few, ref[: BLAS_MIN_ROWS - 1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(twice, 2 * ref - bias, rtol=1e-5, atol=1e-5)


def test_only_small_tables_are_made(monkeypatch):
    """Check that a layer whose nibble tables would pass the limit makes none
    (they would take memory at load for nothing)."""
    made = []

    class Counted(SumConv):
        def __init__(self, *args):
            made.append(args)
            super().__init__(*args)

    monkeypatch.setattr(bit_dense, "SumConv", Counted)
    limit = bit_dense.DENSE_TABLE_MAX_BYTES
    _layer(256, 10, seed=0)
    assert len(made) == 1
    wide = 256 * 10 * limit // SumConv.nibble_bytes(256, 1, 10)
    assert SumConv.nibble_bytes(wide, 1, 10) > limit
    _layer(wide, 10, seed=0)
    _layer(256, 10, seed=0, float64=True)
    assert len(made) == 1


def test_a_readout_sums_active_weight_rows_only_when_sparse(monkeypatch):
    """Check a float64 readout sums the weight rows of the active bits below
    ``READOUT_SPARSE_DENSITY`` and its tables above it (where the tables are
    the faster), with the same sums either way."""
    accumulated = _counted(monkeypatch, "bit_accumulate")
    n_in, n_out, n_rows = 256, 10, 64
    run, wt, bias = _layer(n_in, n_out, seed=3, float64=True)
    rng = np.random.default_rng(4)
    for share, sparse in ((0.02, True), (0.15, False)):
        bits = (rng.random((n_rows, n_in)) < share).astype(np.uint8)
        assert bool(bits.mean() < bit_dense.READOUT_SPARSE_DENSITY) is sparse
        before = len(accumulated)
        out = run([pack_rows(bits)], n_rows, 1)
        assert (len(accumulated) > before) is sparse
        ref = bits.astype(np.float64) @ wt.astype(np.float64) + bias
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n_in", [1, 7, 63, 64, 65, 200])
@pytest.mark.parametrize("n_out", [1, 10, 17, 64])
@pytest.mark.parametrize("n_rows", [BLAS_MIN_ROWS, 37])
def test_a_float64_readout_sums_by_its_float64_tables(
    n_in, n_out, n_rows, monkeypatch, garbage_out
):
    """Check that a float64 readout of many dense rows sums by its float64
    tables into output arrays full of garbage, and gives the float64 sums
    rounded once to float32, whatever the thread count."""
    calls = _counted(monkeypatch, "row_table_sums")
    run, wt, bias = _layer(n_in, n_out, seed=n_in * 100 + n_out, float64=True)
    bits, x, out = _dense_call(run, n_in, n_out, n_rows)
    assert calls, "the float64 tables were not used"
    # float64 sums of at most 51 table entries and the bias: within 1e-14 of
    # the exact sum, so rounded to float32 as the exact sum is (these seeds
    # hold no sum that close to a float32 tie)
    ref = bits.astype(np.float64) @ wt.astype(np.float64) + bias
    np.testing.assert_array_equal(out, ref.astype(np.float32))
    np.testing.assert_array_equal(out[1], bias)
    for n_threads in (2, 3):
        np.testing.assert_array_equal(run([x], n_rows, n_threads), out)


@pytest.mark.parametrize(
    ("n_in", "n_out", "made"), [(256, 10, True), (256, 65, False), (8192, 64, False)]
)
def test_a_readout_makes_float64_tables_only_when_they_serve(
    n_in, n_out, made, monkeypatch
):
    """Check that a float64 readout makes float64 tables only for up to 64
    outputs and ``READOUT_TABLE_MAX_BYTES``, and sums by the product
    otherwise, with the same sums."""
    calls = _counted(monkeypatch, "row_table_sums")
    contexts = []
    run, wt, bias = _layer(n_in, n_out, seed=5, float64=True, ctx_out=contexts)
    assert (("tables64", "w") in contexts[0].derived) is made
    rng = np.random.default_rng(6)
    bits = (rng.random((16, n_in)) < 0.5).astype(np.uint8)
    out = run([pack_rows(bits)], 16, 1)
    assert bool(calls) is made
    ref = bits.astype(np.float64) @ wt.astype(np.float64) + bias
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-5)
