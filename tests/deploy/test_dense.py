"""The ``dense`` op: float rows times float32 weights, by BLAS."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest

from sksign.deploy import PackedNet
from sksign.deploy._ops import dense


def _dense(n_in, n_out, float64=False, seed=0):
    """A net of one ``dense`` layer, its weights (out, in) and its bias."""
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
    return PackedNet(graph, {"w": w, "b": b}), w, b


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
