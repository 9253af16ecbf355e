"""pack_ffn: a binary feed-forward block on packed bits against torch's block."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from sksign.deploy import load, pack_ffn, save
from sksign.nn import force_step_mode, make_activation


def _block(d, h, seed, activation="htaf"):
    torch.manual_seed(seed)
    up, down = nn.Linear(d, h), nn.Linear(h, d)
    return up, make_activation(activation).eval(), down


def _torch_ffn(up, act, down, x):
    with torch.no_grad():
        z = up(torch.from_numpy(x))
        return z.numpy(), down(act(z)).numpy()


def _sure(z, margin=1e-4):
    """Rows whose pre-activations are all clear of 0 (the bit is the same
    under any float32 summation order)."""
    return (np.abs(z) > margin).all(axis=1)


@pytest.mark.parametrize("rows", [1, 3, 8, 65])
@pytest.mark.parametrize("activation", ["htaf", "ste", "scaled_sigmoid"])
def test_pack_ffn_equals_torch_block(rows, activation):
    # awkward widths: 13 inputs, 70 hidden units (two words, the second partial);
    # below 8 rows the down projection sums weight rows, from 8 on a BLAS product
    up, act, down = _block(13, 70, seed=rows, activation=activation)
    x = np.random.default_rng(rows).normal(size=(rows, 13)).astype(np.float32)
    z, expected = _torch_ffn(up, act, down, x)
    packed = pack_ffn(up, act, down)
    got = packed.net_.forward(x)
    assert got.dtype == np.float32
    assert got.shape == (rows, 13)
    sure = _sure(z)
    assert sure.any()
    np.testing.assert_allclose(got[sure], expected[sure], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(packed.predict(x), got.astype(np.float64))


def test_pack_ffn_hidden_bits_are_the_step():
    up, act, down = _block(16, 130, seed=1)
    x = np.random.default_rng(1).normal(size=(40, 16)).astype(np.float32)
    z, _ = _torch_ffn(up, act, down, x)
    packed = pack_ffn(up, act, down)
    kept = packed.net_.forward(x, keep=("step",))
    bits = packed.net_.unpack("step", kept["step"])
    clear = np.abs(z) > 1e-5
    np.testing.assert_array_equal(bits[clear], (z >= 0)[clear])
    # about half of a random net's units fire: the test sees both values
    assert 0.2 < bits.mean() < 0.8


@settings(max_examples=15, deadline=None)
@given(
    d=st.integers(1, 20),
    h=st.integers(1, 150),
    rows=st.integers(1, 20),
    seed=st.integers(0, 2**16),
)
def test_pack_ffn_property(d, h, rows, seed):
    up, act, down = _block(d, h, seed)
    x = np.random.default_rng(seed).normal(size=(rows, d)).astype(np.float32)
    z, expected = _torch_ffn(up, act, down, x)
    got = pack_ffn(up, act, down).net_.forward(x)
    sure = _sure(z)
    np.testing.assert_allclose(got[sure], expected[sure], rtol=1e-5, atol=1e-5)


def test_pack_ffn_gpt2_conv1d_after_swap():
    transformers = pytest.importorskip("transformers")
    from sksign.transformers import find_ffn_activations, swap_ffn_activations

    config = transformers.GPT2Config(
        n_layer=2, n_embd=16, n_head=2, vocab_size=50, n_positions=16
    )
    torch.manual_seed(0)
    model = swap_ffn_activations(transformers.GPT2Model(config).eval(), "htaf")
    ffn = find_ffn_activations(model)["h.1.mlp.act"]
    mlp = model.get_submodule("h.1.mlp")
    packed = pack_ffn(mlp.c_fc, mlp.act, mlp.c_proj)
    x = np.random.default_rng(0).normal(size=(12, 16)).astype(np.float32)
    with torch.no_grad():
        expected = mlp(torch.from_numpy(x)).numpy()
        z = mlp.c_fc(torch.from_numpy(x)).numpy()
    sure = _sure(z)
    assert sure.any()
    assert ffn.up == ("h.1.mlp.c_fc",)
    np.testing.assert_allclose(
        packed.net_.forward(x)[sure], expected[sure], rtol=1e-5, atol=1e-5
    )


def test_pack_ffn_saves_and_loads(tmp_path):
    up, act, down = _block(10, 100, seed=3)
    packed = pack_ffn(up, act, down)
    x = np.random.default_rng(3).normal(size=(9, 10)).astype(np.float32)
    save(packed, tmp_path / "ffn.sksign")
    loaded = load(tmp_path / "ffn.sksign")
    np.testing.assert_array_equal(loaded.predict(x), packed.predict(x))


def test_pack_ffn_refuses_what_is_not_a_binary_block():
    up, act, down = _block(8, 32, seed=0)
    with pytest.raises(ValueError, match="GELU, not a step activation"):
        pack_ffn(up, nn.GELU(), down)
    with pytest.raises(ValueError, match="smooth"):
        with force_step_mode(act, "smooth"):
            pack_ffn(up, act, down)
    with pytest.raises(ValueError, match="up has 32 outputs but down takes 31"):
        pack_ffn(up, act, nn.Linear(31, 8))
    with pytest.raises(TypeError, match=r"up must be an nn\.Linear or a Conv1D"):
        pack_ffn(nn.Conv2d(8, 32, 1), act, down)
    with pytest.raises(ValueError, match=r"float32 weights; down is torch\.float64"):
        pack_ffn(up, act, nn.Linear(32, 8).double())


def test_pack_ffn_leaves_the_modules_unchanged():
    up, act, down = _block(8, 32, seed=0)
    before = [p.detach().clone() for p in (*up.parameters(), *down.parameters())]
    packed = pack_ffn(up, act, down)
    packed.net_.tensors["down.weight_t"][:] = 0  # the packed copy is its own
    after = list(up.parameters()) + list(down.parameters())
    for a, b in zip(before, after, strict=True):
        assert torch.equal(a, b)
