"""Sign codes and sign scorers of a small ViT on digits (token activations)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
import pytest
import torch
from torch import nn

from sksign.estimators import SignKNNClassifier
from sksign.metrics import (
    gate_dominance,
    gate_dominance_report,
    intervention_score,
)
from sksign.transformers import SignCodeTransformer

PATCH = 4  # 8x8 digits -> 4 patches + [CLS] = 5 tokens
HIDDEN = 48  # MLP width of each block
PRE_LOGITS = 32
BLOCK_ACTS = ["blocks.0.act", "blocks.1.act"]


class Block(nn.Module):
    """Pre-norm transformer block: multi-head attention, then a GELU MLP."""

    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class TinyViT(nn.Module):
    """ViT for 8x8 images given as rows of 64 pixels; logits out.

    Patches by a strided Conv2d, a [CLS] token, learned positions, `depth`
    blocks, a final LayerNorm, then the [CLS] token goes to the head: a
    Linear (``pre_logits=0``) or Linear -> GELU -> Linear (the ViT
    "pre-logits" layer, here with GELU).
    """

    def __init__(self, dim=32, depth=2, heads=2, pre_logits=PRE_LOGITS):
        super().__init__()
        self.patch_embed = nn.Conv2d(1, dim, kernel_size=PATCH, stride=PATCH)
        n_tokens = (8 // PATCH) ** 2 + 1
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, n_tokens, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads, HIDDEN) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        if pre_logits:
            self.pre_logits = nn.Sequential(nn.Linear(dim, pre_logits), nn.GELU())
        else:
            self.pre_logits = nn.Identity()
        self.head = nn.Linear(pre_logits or dim, 10)

    def tokens(self, x):
        t = self.patch_embed(x.reshape(-1, 1, 8, 8)).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(len(t), -1, -1)
        return torch.cat([cls, t], dim=1) + self.pos_embed

    def forward(self, x):
        t = self.norm(self.blocks(self.tokens(x)))
        return self.head(self.pre_logits(t[:, 0]))


def _train(model, X, y, epochs=12):
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(X), generator=gen).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(Xt[idx]), yt[idx]).backward()
            opt.step()
    return model.eval()


@pytest.fixture(scope="module")
def vit():
    """An untrained TinyViT (random weights; codes need no training)."""
    torch.manual_seed(0)
    return TinyViT().eval()


@pytest.fixture(scope="module")
def trained_vit(digits):
    X_train, _, y_train, _ = digits
    torch.manual_seed(0)
    return _train(TinyViT(), X_train, y_train.astype(np.int64))


def _reference(model, X):
    """fc1 outputs (pre-activations of each block's GELU) and pre-logits z.

    Read with forward hooks on the Linear layers: a different hook point from
    the transformer's pre-hook on the GELU modules.
    """
    zs = []
    mods = [b.fc1 for b in model.blocks] + [model.pre_logits[0]]
    handles = [m.register_forward_hook(lambda m, a, out: zs.append(out)) for m in mods]
    try:
        with torch.no_grad():
            model(torch.from_numpy(X))
    finally:
        for h in handles:
            h.remove()
    return [z.numpy() for z in zs]


def _assert_clean(model):
    for m in model.modules():
        assert not m._forward_pre_hooks
        assert not m._forward_hooks


@pytest.mark.parametrize("pool", ["first", "majority"])
def test_vit_token_codes_follow_the_rule(vit, digits, pool):
    """Check ViT codes: CLS token / majority over tokens of each block's GELU."""
    X = digits[1][:50]
    tr = SignCodeTransformer(vit, layers="blocks.*.act", token_pool=pool).fit(X)
    codes = tr.transform(X)
    assert tr.layers_ == BLOCK_ACTS
    assert tr.n_bits_ == 2 * HIDDEN
    assert codes.shape == (len(X), 2 * HIDDEN)
    assert list(tr.get_feature_names_out()[[0, -1]]) == [
        "blocks.0.act_0",
        f"blocks.1.act_{HIDDEN - 1}",
    ]
    z0, z1, _ = _reference(vit, X)
    assert z0.shape == (len(X), 5, HIDDEN)
    if pool == "first":
        expected = np.hstack([z0[:, 0] > 0, z1[:, 0] > 0])
    else:  # 5 tokens: no ties
        expected = np.hstack([(z > 0).sum(1) >= 3 for z in (z0, z1)])
    np.testing.assert_array_equal(codes, expected)
    assert 0 < codes.mean() < 1
    # the same bits from a list of names, in batches of 7
    sub = SignCodeTransformer(vit, layers=BLOCK_ACTS, token_pool=pool, batch_size=7)
    np.testing.assert_array_equal(sub.fit_transform(X), codes)
    _assert_clean(vit)


def test_vit_mixed_token_and_flat_layers(vit, digits):
    """Check the 2-D pre-logits code, mixed with pooled token layers, and errors."""
    X = digits[1][:20]
    z0, z1, z_pre = _reference(vit, X)
    flat = SignCodeTransformer(vit, layers="last").fit(X)
    assert flat.layers_ == ["pre_logits.1"]
    np.testing.assert_array_equal(flat.transform(X), z_pre > 0)
    # token_pool pools the blocks' (N, T, U) GELUs; the (N, U) pre-logits GELU
    # keeps its units
    mixed = SignCodeTransformer(vit, layers=nn.GELU, token_pool="majority").fit(X)
    assert mixed.layers_ == [*BLOCK_ACTS, "pre_logits.1"]
    assert mixed.n_bits_ == 2 * HIDDEN + PRE_LOGITS
    expected = np.hstack([(z0 > 0).sum(1) >= 3, (z1 > 0).sum(1) >= 3, z_pre > 0])
    np.testing.assert_array_equal(mixed.transform(X), expected)
    # ... but a token_pool with no token layer at all is a mistake
    with pytest.raises(ValueError, match=r"token_pool='majority' was given.*2-D"):
        SignCodeTransformer(vit, layers="last", token_pool="majority").fit(X)
    # ... and token-level codes (token_pool=None) need token layers only
    with pytest.raises(ValueError, match=r"layer 'pre_logits.1' gives a 2-D"):
        SignCodeTransformer(vit, layers="all").fit(X)
    tokens = SignCodeTransformer(vit, layers=BLOCK_ACTS).fit(X)
    codes, index = tokens.transform_tokens(X)
    assert tokens.per_token_
    assert index.tolist() == [[i, t] for i in range(len(X)) for t in range(5)]
    np.testing.assert_array_equal(
        codes, np.concatenate([z0 > 0, z1 > 0], axis=2).reshape(len(X) * 5, -1)
    )
    # the patch embedding is a conv map (N, 32, 2, 2): 4 bits per channel
    conv = SignCodeTransformer(vit, layers="patch_embed").fit(X)
    assert conv.transform(X).shape == (len(X), 4 * 32)
    _assert_clean(vit)


def test_vit_scorers_run_on_token_activations(vit, digits):
    """Check the scorers on token-shaped GELUs; a linear head has no gate test."""
    _, X, _, y = digits
    X, y = X[:100], y[:100].astype(np.int64)
    with torch.no_grad():
        clean = float((vit(torch.from_numpy(X)).argmax(1).numpy() == y).mean())
    for kind in ("sign_flip", "magnitude"):
        assert intervention_score(vit, X, y, kind=kind, alpha=0.0) == clean
        score = intervention_score(vit, X, y, kind=kind, alpha=0.5, random_state=0)
        assert 0.0 <= score <= 1.0
    assert np.isfinite(gate_dominance(vit, X))
    linear_head = TinyViT(pre_logits=0).eval()
    with pytest.raises(ValueError, match="read the output of the last hidden layer"):
        gate_dominance(linear_head, X)
    _assert_clean(vit)
    _assert_clean(linear_head)


@pytest.mark.slow  # trains the ViT (seconds)
def test_trained_vit_sign_codes_and_scorers(trained_vit, digits):
    """Check a trained ViT: sign-kNN on its codes, interventions, gate dominance."""
    X_train, X_test, y_train, y_test = digits
    y_test = y_test.astype(np.int64)
    model = trained_vit
    with torch.no_grad():
        acc = float(
            (model(torch.from_numpy(X_test)).argmax(1).numpy() == y_test).mean()
        )
    assert acc > 0.8
    tr = SignCodeTransformer(model, layers="blocks.1.act", token_pool="first")
    knn = SignKNNClassifier(n_neighbors=5).fit(tr.fit_transform(X_train), y_train)
    assert knn.score(tr.transform(X_test), y_test) > acc - 0.2
    flip = intervention_score(model, X_test, y_test, alpha=0.2, random_state=0)
    gate = intervention_score(
        model, X_test, y_test, alpha=0.2, flip="gate", random_state=0
    )
    assert flip < acc
    assert gate < acc
    only_blocks = intervention_score(
        model, X_test, y_test, alpha=1.0, layers="blocks.*.act", kind="magnitude",
        noise="matched", X_ref=X_train, random_state=0,
    )  # fmt: skip
    assert 0.0 <= only_blocks <= 1.0
    report = gate_dominance_report(model, X_test, X_ref=X_train)
    assert report.layer == "pre_logits.1"
    assert report.readout == "head"
    assert report.d == PRE_LOGITS
    assert report.C == 10
    assert report.median_Z1 > 0
    assert report.agreement > 0.5
    assert report.eps_1 <= report.union_bound
