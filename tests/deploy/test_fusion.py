"""Epilogue fusion: which layers run in one pass, and that it changes no bit."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sksign.deploy import pack
from sksign.deploy._fusion import chain_layer, chains, internal_values
from sksign.deploy._kernels import (
    affine_rows,
    float_conv,
    float_conv_step,
    pack_affine_ge,
    pack_ge,
    padded_width,
    sum_conv,
    sum_conv_to_step,
)
from sksign.deploy._maps import (
    map_geometry,
    nibble_tables,
    pack_pixels,
    unpack_pixels,
)
from sksign.deploy._ops._common import MAP_CONV_EPILOGUES, row_runner
from sksign.estimators import HTAFNetClassifier

SPECS = {
    "conv": SimpleNamespace(epilogues=MAP_CONV_EPILOGUES),
    "channel_affine": SimpleNamespace(epilogues=(("pixel_step",),)),
    "add": SimpleNamespace(epilogues=()),
    "pixel_step": SimpleNamespace(epilogues=()),
}


def _layer(name, op, *inputs):
    return {"name": name, "op": op, "inputs": list(inputs), "output": name}


def _names(groups):
    return [[layer["name"] for layer in chain] for chain in groups]


def test_a_conv_takes_over_its_batch_norm_and_the_residual_add():
    """Check conv -> affine -> add is one chain, run where the add stood."""
    layers = [
        _layer("stem", "conv", "input"),
        _layer("conv", "conv", "stem"),
        _layer("bn", "channel_affine", "conv"),
        _layer("short", "conv", "stem"),
        _layer("sum", "add", "short", "bn"),
        _layer("bn2", "channel_affine", "sum"),
        _layer("act", "pixel_step", "bn2"),
    ]
    groups = chains(layers, SPECS, "act")
    # "stem" feeds two layers; the add goes with "conv", the first layer to
    # reach it, and its chain runs after "short", the residual
    assert _names(groups) == [
        ["stem"],
        ["short"],
        ["conv", "bn", "sum"],
        ["bn2", "act"],
    ]
    fused = chain_layer(groups[2])
    assert fused["inputs"] == ["stem", "short"]  # the conv's, then the residual
    assert fused["output"] == "sum"
    assert fused["op"] == "conv+channel_affine+add"
    assert internal_values(groups) == {"conv", "bn", "bn2"}


def test_an_add_of_two_convs_goes_with_the_first():
    layers = [
        _layer("a", "conv", "input"),
        _layer("b", "conv", "input"),
        _layer("sum", "add", "a", "b"),
    ]
    assert _names(chains(layers, SPECS, "sum")) == [["b"], ["a", "sum"]]


CONV, BN = _layer("conv", "conv", "input"), _layer("bn", "channel_affine", "conv")


@pytest.mark.parametrize(
    ("layers", "output", "expected"),
    [
        # the conv's output is read twice
        (
            [CONV, BN, _layer("sum", "add", "conv", "bn")],
            "sum",
            [["conv"], ["bn"], ["sum"]],
        ),
        # the conv's output is the net's output (and read by a layer)
        ([CONV, BN], "conv", [["conv"], ["bn"]]),
        # ... but the last layer of a chain may write the net's output
        ([CONV, BN], "bn", [["conv", "bn"]]),
        # an add, then an affine map: the add only (not an epilogue's order)
        (
            [
                CONV,
                _layer("sum", "add", "conv", "input"),
                _layer("bn", "channel_affine", "sum"),
            ],
            "bn",
            [["conv", "sum"], ["bn"]],
        ),
    ],
)
def test_only_a_value_read_once_and_not_the_output_is_fused(layers, output, expected):
    assert _names(chains(layers, SPECS, output)) == expected


NETS = {
    "resnet18": {"width": 5},
    "wrn": {"depth": 10, "widen_factor": 1},
    # a last block of 128 channels: its sum goes to the step by look-up sums
    # where the CPU has table look-ups (sksign.deploy._kernels._lut_chain)
    "wrn_wide": {"depth": 10, "widen_factor": 2},
    "sew_resnet": {"width": 4},
    "bireal": {"width": 5},
}


@pytest.fixture(scope="module")
def packed_nets():
    X = np.random.default_rng(0).random((3, 3, 16, 16), dtype=np.float32)
    nets = {}
    for arch, params in NETS.items():
        est = HTAFNetClassifier(
            architecture=arch.removesuffix("_wide"),
            architecture_params=params,
            random_state=0,
        ).initialize_for(X[0].size, classes=list(range(4)), input_shape=X.shape[1:])
        nets[arch] = pack(est).net_
    return nets, X.reshape(len(X), -1)


@pytest.mark.parametrize("arch", sorted(NETS))
def test_fused_nets_give_the_outputs_of_their_layers_one_by_one(packed_nets, arch):
    """Check every value a fused net writes against the layers run alone."""
    nets, X = packed_nets
    net = nets[arch]
    fused = [step[0]["op"] for step in net._fused_steps if "+" in step[0]["op"]]
    assert fused, "no layers of the net run fused"
    alone = net.forward(X, keep=[layer["output"] for layer in net.layers], fused=False)
    out = net.forward(X)
    np.testing.assert_array_equal(out, alone["output"])
    np.testing.assert_array_equal(net.forward(X, fused=False), out)
    for step in net._fused_steps:  # each chain's output, bit for bit
        env = {"input": X, **alone}
        got = net._run_step(step, env, len(X), 1)
        np.testing.assert_array_equal(got, alone[step[0]["output"]])
    # a value inside a chain can still be kept
    inner = sorted(net._internal)[0]
    kept = net.forward(X, keep=[inner])
    np.testing.assert_array_equal(kept[inner], alone[inner])
    np.testing.assert_array_equal(kept["output"], out)


def _epilogues(rng, rows, oc):
    scale = rng.uniform(-2, 2, oc).astype(np.float32)
    shift = rng.standard_normal(oc).astype(np.float32)
    residual = rng.standard_normal((rows, oc)).astype(np.float32)
    return scale, shift, residual


def _separately(out, scale, shift, residual, affine, add):
    """The channel_affine, then the add, as their ops compute them."""
    if affine:
        mapped = np.empty_like(out)
        affine_rows(out, scale, shift, mapped, 0, len(out))
        out = mapped
    return out + residual if add else out


@pytest.mark.parametrize(
    ("affine", "add"), [(True, False), (False, True), (True, True)]
)
@pytest.mark.parametrize("float_maps", [False, True])
def test_conv_epilogues_equal_the_ops_they_take_over(affine, add, float_maps):
    """Check sum_conv and float_conv with an epilogue, bit for bit."""
    rng = np.random.default_rng(7)
    n, c, size, oc, k = 2, 11, 5, 13, 3
    attrs = {"shape": [c, size, size], "kernel": k, "stride": 1, "padding": 1}
    g = map_geometry(attrs)
    rows = n * int(g[6] * g[7])
    wt = rng.standard_normal((k * k * c, oc)).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32)
    weights = np.zeros((len(wt), padded_width(oc)), np.float32)
    weights[:, :oc] = wt
    if float_maps:
        x = rng.standard_normal(n * size * size * c).astype(np.float32)
        g[2] = c

        def conv(*epilogue, out):
            float_conv(x, weights, False, g, bias, *epilogue, out, 0, rows)

    else:
        bits = (rng.random((n, size * size * c)) < 0.5).astype(np.float32)
        words = pack_pixels(bits - 0.5, c, lambda kern, r, *a: kern(*a, 0, r))
        tables = nibble_tables(wt, c, k, padded_width(oc))

        def conv(*epilogue, out):
            args = (words.reshape(-1), *tables, weights, True, g, bias)
            sum_conv(*args, *epilogue, out, 0, rows)

    empty = (np.zeros(0, np.float32),) * 2 + (np.zeros((0, 0), np.float32),)
    plain = np.empty((rows, oc), np.float32)
    conv(*empty, out=plain)
    scale, shift, residual = _epilogues(rng, rows, oc)
    got = np.empty_like(plain)
    conv(
        *((scale, shift) if affine else empty[:2]),
        residual if add else empty[2],
        out=got,
    )
    ref = _separately(plain, scale, shift, residual, affine, add)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("oc", [3, 16, 64, 70])
@pytest.mark.parametrize("sparse", [False, True])
def test_float_conv_step_is_the_step_of_the_affine_conv(oc, sparse):
    """Check float_conv_step against float_conv with its affine map, then the
    step of a pixel_step, bit for bit: in one call and in two row ranges (as
    two threads take them), ties at 0 firing."""
    rng = np.random.default_rng(oc)
    n, c, size, k = 2, 3, 9, 3
    attrs = {"shape": [c, size, size], "kernel": k, "stride": 2, "padding": 1}
    g = map_geometry(attrs)
    g[2] = c
    rows = n * int(g[6] * g[7])
    wt = rng.standard_normal((k * k * c, oc)).astype(np.float32)
    weights = np.zeros((len(wt), padded_width(oc)), np.float32)
    weights[:, :oc] = wt
    x = rng.standard_normal(n * size * size * c).astype(np.float32)
    x[rng.random(x.shape) < 0.7] = 0.0
    bias = rng.standard_normal(oc).astype(np.float32)
    scale, shift, _ = _epilogues(rng, rows, oc)
    scale[0], shift[0] = 0.0, 0.0  # every sum maps to 0: fires
    none = np.zeros((0, 0), np.float32)
    mapped = np.empty((rows, oc), np.float32)
    float_conv(x, weights, sparse, g, bias, scale, shift, none, mapped, 0, rows)
    ref = pack_pixels(mapped, oc, row_runner(1))
    ref = ref.reshape(rows, -1)
    got = np.full_like(ref, 7)
    float_conv_step(x, weights, sparse, g, bias, scale, shift, got, 0, rows)
    np.testing.assert_array_equal(got, ref)
    units = unpack_pixels(got, oc, row_runner(1))
    assert units.reshape(rows, oc)[:, 0].all()  # unit 0 maps every sum to 0
    half = np.full_like(ref, 7)
    for r0, r1 in ((0, rows // 2), (rows // 2, rows)):
        float_conv_step(x, weights, sparse, g, bias, scale, shift, half, r0, r1)
    np.testing.assert_array_equal(half, ref)


@pytest.mark.parametrize("oc", [13, 64, 70])
@pytest.mark.parametrize("by", ["nibbles", "bytes", "weight rows"])
def test_sum_conv_to_step_rounds_as_the_layers_one_by_one(oc, by):
    """Check the chain's bits against sum_conv with its add, then
    pack_affine_ge, bit for bit, where the order of the roundings decides:
    a bias of 2**20 that the residual takes back, and per output a row whose
    affine map lands on 0 exactly (a tie that fires)."""
    rng = np.random.default_rng(oc)
    n, c, size, k = 3, 24, 7, 3
    attrs = {"shape": [c, size, size], "kernel": k, "stride": 1, "padding": 1}
    g = map_geometry(attrs)
    rows = n * int(g[6] * g[7])
    wt = rng.standard_normal((k * k * c, oc)).astype(np.float32)
    weights = np.zeros((len(wt), padded_width(oc)), np.float32)
    weights[:, :oc] = wt
    bits = (rng.random((n, size * size * c)) < 0.5).astype(np.float32)
    words = pack_pixels(bits - 0.5, c, lambda kern, r, *a: kern(*a, 0, r)).reshape(-1)
    if by == "weight rows":
        tables = (np.zeros((0, 0, 16, weights.shape[1]), np.float32),)
        tables += (np.zeros(0, np.int64), np.zeros(0, np.uint64))
    else:
        bits_a_group = 4 if by == "nibbles" else 8
        tables = nibble_tables(wt, c, k, padded_width(oc), bits=bits_a_group)
    args = (words, *tables, weights, by != "weight rows", g)
    bias = np.full(oc, 2.0**20, np.float32)
    residual = (rng.random((rows, oc)) - 2.0**20).astype(np.float32)
    scale = np.ones(oc, np.float32)
    scale[::3] = -1.5
    none = np.zeros(0, np.float32)
    summed = np.empty((rows, oc), np.float32)  # the conv with its add
    sum_conv(*args, bias, none, none, residual, summed, 0, rows)
    tie = rng.integers(0, rows, oc)
    shift = -(summed[tie, np.arange(oc)] * scale)  # exact: scale is 1 or -1.5
    ref = np.empty((rows, -(-oc // 64)), np.uint64)
    pack_affine_ge(summed, scale, shift, ref, 0, rows)
    got = np.full_like(ref, 7)
    half = rows // 2  # two calls, as two threads take the rows
    chain = (bias, residual, scale, shift)
    sum_conv_to_step(words, args[1:-1], g, chain, got, 0, half)
    sum_conv_to_step(words, args[1:-1], g, chain, got, half, rows)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("channels", [1, 7, 16, 32, 63, 64, 65, 130])
def test_pack_affine_ge_is_the_step_of_the_affine_map(channels):
    """Check the fused affine map and step against affine_rows, then pack_ge."""
    rng = np.random.default_rng(channels)
    z = rng.standard_normal((9, channels)).astype(np.float32)
    z[0, 0] = np.nan  # never fires
    z[1, -1] = -0.0  # 0 * scale + 0: fires
    scale = rng.uniform(-2, 2, channels).astype(np.float32)
    scale[-1] = 0.0  # the shift alone decides: ties at 0 fire
    shift = rng.standard_normal(channels).astype(np.float32)
    shift[-1] = 0.0
    mapped = np.empty_like(z)
    affine_rows(z, scale, shift, mapped, 0, len(z))
    ref = np.empty((len(z), -(-channels // 64)), np.uint64)
    pack_ge(mapped, np.zeros(channels, np.float32), ref, 0, len(z))
    got = np.full_like(ref, 7)
    pack_affine_ge(z, scale, shift, got, 0, len(z))
    np.testing.assert_array_equal(got, ref)
