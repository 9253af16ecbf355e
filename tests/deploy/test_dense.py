"""The ``dense`` op: float rows times float32 weights, by BLAS."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest

from sksign.deploy import PackedNet
from sksign.deploy._ops import dense
from sksign.deploy._ops._common import unpack_rows


def _dense(n_in, n_out, float64=False, seed=0, step=False):
    """A net of one ``dense`` layer, its weights (out, in) and its bias; with
    `step`, a ``step`` after it (the bias 0 and -0 at its first two units)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n_out, n_in)).astype(np.float32)
    b = rng.standard_normal(n_out).astype(np.float32)
    graph = {
        "format": "sksign-packed",
        "version": 1,
        "estimator": "regressor",
        "n_features_in": n_in,
        "output": "h",
        "layers": [
            {
                "name": "fc",
                "op": "dense",
                "inputs": ["input"],
                "output": "h",
                "attrs": {"out": n_out, "float64": float64},
                "tensors": {"weight": "w", "bias": "b"},
            }
        ],
    }
    tensors = {"w": w, "b": b}
    if step:  # its bits "s", read by a float readout (a net's output is float)
        b[:2] = [0.0, -0.0][: len(b)]  # ties for a zero row of inputs
        graph["layers"] += [
            {
                "name": "act",
                "op": "step",
                "inputs": ["h"],
                "output": "s",
                "attrs": {},
                "tensors": {},
            },
            {
                "name": "out",
                "op": "bit_dense",
                "inputs": ["s"],
                "output": "y",
                "attrs": {"out": 1, "float64": False},
                "tensors": {"weight_t": "w_out", "bias": "b_out"},
            },
        ]
        graph["output"] = "y"
        tensors["w_out"] = np.ones((n_out, 1), np.float32)
        tensors["b_out"] = np.zeros(1, np.float32)
    return PackedNet(graph, tensors), w, b


def _transposed(net):
    """The transposed copies of weights the net made at load."""
    return [a for (kind, _), a in net._context.derived.items() if kind == "transposed"]


@pytest.mark.parametrize(("n_in", "n_out"), [(1, 1), (64, 256), (63, 17)])
@pytest.mark.parametrize("rows", [1, 7, 256])
@pytest.mark.parametrize("float64", [False, True])
def test_dense_is_the_product_plus_the_bias(n_in, n_out, rows, float64):
    """Check the outputs against float64 numpy, on one and two threads."""
    net, w, b = _dense(n_in, n_out, float64)
    x = np.random.default_rng(rows).standard_normal((rows, n_in)).astype(np.float32)
    out = net.forward(x, 1)
    assert out.dtype == np.float32
    assert out.shape == (rows, n_out)
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + b
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(net.forward(x, 2), out)


def test_only_small_weights_are_kept_transposed(monkeypatch):
    """Check a float32 layer keeps a C-contiguous (in, out) copy of its weights
    up to ``TRANSPOSED_MAX_BYTES`` and none past it, with the same outputs."""
    x = np.random.default_rng(1).standard_normal((33, 64)).astype(np.float32)
    net, w, _ = _dense(64, 256)
    (copy,) = _transposed(net)
    assert copy.flags.c_contiguous
    np.testing.assert_array_equal(copy, w.T)
    small = net.forward(x, 1)
    monkeypatch.setattr(dense, "TRANSPOSED_MAX_BYTES", w.nbytes - 1)
    net, _, _ = _dense(64, 256)
    assert not _transposed(net)
    np.testing.assert_allclose(net.forward(x, 1), small, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("n_in", "n_out"), [(1, 1), (64, 256), (63, 70)])
@pytest.mark.parametrize("rows", [1, 7, 256])
@pytest.mark.parametrize("float64", [False, True])
def test_a_step_after_a_dense_layer_runs_in_its_pass(n_in, n_out, rows, float64):
    """Check the dense layer and its step in one pass against the two layers
    one by one, bit for bit, on one and two threads: ties at 0 (a zero row
    and a zero or negative-zero bias) fire, NaN never does."""
    net, w, b = _dense(n_in, n_out, float64, seed=rows, step=True)
    assert [step[0]["op"] for step in net._fused_steps] == ["dense+step", "bit_dense"]
    x = np.random.default_rng(rows).standard_normal((rows, n_in)).astype(np.float32)
    x[0] = 0.0  # sums of exactly the bias
    if rows > 1:
        x[1, 0] = np.nan
    alone = net.forward(x, 1, keep=["s"], fused=False)["s"]
    assert alone.dtype == np.uint64
    assert alone.shape == (rows, -(-n_out // 64))
    bits = unpack_rows(alone, n_out)
    for n_threads in (1, 2):
        got = net.forward(x, n_threads, keep=["s"])
        np.testing.assert_array_equal(got["s"], alone)
        # the readout's weights are ones: it counts the bits set
        np.testing.assert_array_equal(got["output"][:, 0], bits.sum(axis=1))
    assert bits[0, 0] == 1
    assert n_out < 2 or bits[0, 1] == 1
    if rows > 1:
        assert not bits[1].any()
    z = x.astype(np.float64) @ w.T.astype(np.float64) + b
    clear = np.abs(z) > 1e-4  # the float32 sums decide these alike
    np.testing.assert_array_equal(bits[clear], (z >= 0)[clear])
