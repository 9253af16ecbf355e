"""A float map convolution's chain to its step by look-up sums, bit for bit.

``bit_conv2d`` + ``add`` + ``channel_affine`` + ``pixel_step`` decided from the
look-up sums of the 14-bit weights (:mod:`sksign.deploy._kernels._lut_chain`)
against the layers one after the other (``sum_conv`` with the add in its
epilogue, then ``pack_affine_ge``), on outputs placed exactly at their step
and one float32 step either side of it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest

from sksign.deploy._kernels import pack_affine_ge, padded_width, sum_conv
from sksign.deploy._kernels._lut import lut_available, lut_weights
from sksign.deploy._kernels._lut_chain import chain_by_lut
from sksign.deploy._kernels._madd import patch_words
from sksign.deploy._maps import map_geometry, nibble_tables, pack_pixels
from sksign.deploy._ops._common import (
    LutSteps,
    lut_tile_buffers,
    split,
)
from sksign.deploy._ops._tables import sum_bound
from sksign.estimators import HTAFNetClassifier

pytestmark = pytest.mark.skipif(
    not lut_available(), reason="the look-up sums need AVX-512 VBMI and VNNI, or AVX2"
)

NONE = np.zeros(0, np.float32)

# (batch, channels, size, out channels, kernel, stride, padding): channels in
# whole bytes (the look-up patches), outputs not multiples of 64 or of the
# tiles' 3, border rows (padding 1), stride 2, 1 x 1, one tile and several
GEOMETRIES = [
    (2, 8, 6, 130, 3, 1, 1),
    (1, 64, 8, 128, 3, 2, 1),
    (3, 16, 5, 67, 1, 1, 0),
    (1, 136, 6, 70, 3, 1, 1),
    (4, 24, 7, 5, 3, 1, 1),
]


def _case(rng, n, c, size, oc, k, s, p, bits):
    """Maps, weights and the arrays of both ways, for one geometry."""
    on = (rng.random((n, size * size * c)) < 0.5).astype(np.float32)
    words = pack_pixels(on - 0.5, c, lambda kern, r, *a: kern(*a, 0, r)).reshape(-1)
    wt = rng.standard_normal((k * k * c, oc)).astype(np.float32)
    wt[:, 1::5] = 0  # channels of a BatchNorm of zero scale, folded
    table, nib_word, nib_shift = nibble_tables(wt, c, k, padded_width(oc), bits=bits)
    weights = np.zeros((len(wt), table.shape[3]), np.float32)
    weights[:, :oc] = wt
    g = map_geometry({"shape": [c, size, size], "kernel": k, "stride": s, "padding": p})
    rows = n * int(g[6] * g[7])
    sums = (words, table, nib_word, nib_shift, weights, True, g)
    return wt, g, rows, sums


def _layers(sums, bias, residual, scale, shift, rows):
    """The float maps of the conv and its add, and the bits of the affine
    map and step after them, as the ops compute them one after the other."""
    maps = np.empty(residual.shape, np.float32)
    sum_conv(*sums, bias, NONE, NONE, residual, maps, 0, rows)
    bits = np.empty((rows, -(-maps.shape[1] // 64)), np.uint64)
    pack_affine_ge(maps, scale, shift, bits, 0, rows)
    return maps, bits


def _chained(sums, wt, c, rows, chain, parts=1):
    """The bits by :func:`chain_by_lut`, its tiles split in `parts`."""
    words, table, nib_word, nib_shift, _, _, g = sums
    width = len(wt)
    patches = np.zeros((rows, -(-width // 64)), np.uint64)
    patch_words(words, g, c, patches, 0, rows)
    lut = LutSteps(wt)
    tiles, idx, x32, lut_sums = lut_tile_buffers(lut, patches, width)
    out = np.zeros((rows, -(-wt.shape[1] // 64)), np.uint64)
    n_terms = table.shape[0] * table.shape[1]
    floats = (
        words,
        g,
        table.reshape(-1, table.shape[3]),
        nib_word,
        nib_shift,
        sum_bound(wt, n_terms),
        lut.steps,
    )
    args = (patches, width, lut.tables, floats, chain, idx, x32, lut_sums, out)
    for a, b in split(tiles, parts):
        chain_by_lut(*args, a, b)
    return out


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize(("n", "c", "size", "oc", "k", "s", "p"), GEOMETRIES)
def test_the_chain_gives_the_bits_of_its_layers(n, c, size, oc, k, s, p, bits):
    """Check the bits against the layers one after the other, where a third
    of the outputs sit exactly at their step or one float32 step off it."""
    rng = np.random.default_rng(c * 7 + oc)
    wt, g, rows, sums = _case(rng, n, c, size, oc, k, s, p, bits)
    bias = rng.standard_normal(oc).astype(np.float32)
    # the float32 sums plus the bias, as the layers round them
    at_zero, _ = _layers(sums, bias, np.zeros((rows, oc), np.float32), NONE, NONE, rows)
    scale = rng.uniform(-2, 2, oc).astype(np.float32)
    scale[::7] = 0  # channels whose bits do not depend on the sums
    shift = rng.standard_normal(oc).astype(np.float32)
    residual = rng.standard_normal((rows, oc)).astype(np.float32)
    tie = rng.random((rows, oc)) < 1 / 3
    # residuals that bring the sum to exactly 0, or one step of it either side
    nudge = rng.choice(np.array([-1, 0, 1]), size=(rows, oc))
    off = np.spacing(np.abs(at_zero)) * nudge
    residual[tie] = (-at_zero + off.astype(np.float32))[tie]
    shift[rng.random(oc) < 0.5] = 0  # the step at the sum's zero
    residual[0, :2] = [np.inf, np.nan]  # rows of the layers' own NaN and inf
    chain = (bias, residual, scale, shift)

    _, expected = _layers(sums, bias, residual, scale, shift, rows)
    for parts in (1, 2):
        np.testing.assert_array_equal(
            _chained(sums, wt, c, rows, chain, parts), expected
        )

    # the outputs placed at their step decide the test: the same sums added
    # in another order (the weight rows') give other bits there
    words, table, nib_word, nib_shift, weights, _, g = sums
    rows_sums = (words, table, nib_word, nib_shift, weights, False, g)
    _, other = _layers(rows_sums, bias, residual, scale, shift, rows)
    assert np.any(other != expected)


def test_a_wide_wrn_runs_its_block_sums_by_look_up(monkeypatch):
    """Check a WRN-10-2's last block sum goes to the step through
    chain_by_lut, with the bits of its layers one by one."""
    from sksign.deploy import pack
    from sksign.deploy._ops import bit_conv2d

    X = np.random.default_rng(0).random((4, 3, 16, 16), dtype=np.float32)
    est = HTAFNetClassifier(
        architecture="wrn",
        architecture_params={"depth": 10, "widen_factor": 2},
        random_state=0,
    ).initialize_for(X[0].size, classes=list(range(4)), input_shape=X.shape[1:])
    calls = []

    def counted(*args):
        calls.append(args[-2:])
        return chain_by_lut(*args)

    monkeypatch.setattr(bit_conv2d, "chain_by_lut", counted)
    net = pack(est).net_
    X = X.reshape(len(X), -1)
    chains = [s[0]["op"] for s in net._fused_steps]
    assert "bit_conv2d+add+channel_affine+pixel_step" in chains
    out = net.forward(X)
    assert calls, "no block sum ran by look-up"
    np.testing.assert_array_equal(out, net.forward(X, fused=False))
    calls.clear()
    np.testing.assert_array_equal(net.forward(X, 2), out)
    assert calls


def test_the_look_up_step_of_an_all_zero_output_is_zero():
    """Check LutSteps.steps: the tables' scale, and 0 for an output whose
    weights are all 0 (its look-up sums are exact, so its interval is the
    float32 sums' bound alone, not a step per active bit)."""
    rng = np.random.default_rng(3)
    wt = rng.standard_normal((300, 7)).astype(np.float32)
    wt[:, [2, 5]] = 0
    steps = LutSteps(wt)
    expected = lut_weights(wt)[1].copy()
    expected[[2, 5]] = 0
    np.testing.assert_array_equal(steps.steps, expected)
    assert np.all(steps.steps[[0, 1, 3, 4, 6]] > 0)
