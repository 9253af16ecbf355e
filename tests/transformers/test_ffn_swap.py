"""Step activations in the FFN blocks of Hugging Face models (found by structure)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import copy
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from sksign.nn import HTAF, ScaledSigmoid, STEHeaviside
from sksign.transformers import (
    FFNLayer,
    find_ffn_activations,
    swap_ffn_activations,
)

transformers = pytest.importorskip("transformers")

_SMALL = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 100,
}
_BERT = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "vocab_size": 100,
    "max_position_embeddings": 64,
}

#: family -> (model class, config class, config kwargs, FFN path of block i, gated)
FAMILIES = {
    "gpt2": (
        "GPT2LMHeadModel",
        "GPT2Config",
        {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 100},
        "transformer.h.{i}.mlp.act",
        False,
    ),
    "bert": (
        "BertModel",
        "BertConfig",
        _BERT,
        "encoder.layer.{i}.intermediate.intermediate_act_fn",
        False,
    ),
    "llama": (
        "LlamaForCausalLM",
        "LlamaConfig",
        _SMALL,
        "model.layers.{i}.mlp.act_fn",
        True,
    ),
    "qwen2": (
        "Qwen2ForCausalLM",
        "Qwen2Config",
        _SMALL,
        "model.layers.{i}.mlp.act_fn",
        True,
    ),
    "mistral": (
        "MistralForCausalLM",
        "MistralConfig",
        _SMALL,
        "model.layers.{i}.mlp.act_fn",
        True,
    ),
    "gemma3": (
        "Gemma3ForCausalLM",
        "Gemma3TextConfig",
        _SMALL,
        "model.layers.{i}.mlp.act_fn",
        True,
    ),
    "gemma": (
        "GemmaForCausalLM",
        "GemmaConfig",
        _SMALL,
        "model.layers.{i}.mlp.act_fn",
        True,
    ),
    "phi3": (
        "Phi3ForCausalLM",
        "Phi3Config",
        {**_SMALL, "pad_token_id": 0},
        "model.layers.{i}.mlp.activation_fn",
        True,
    ),
    "gpt_neox": (
        "GPTNeoXForCausalLM",
        "GPTNeoXConfig",
        {k: v for k, v in _BERT.items() if k != "max_position_embeddings"},
        "gpt_neox.layers.{i}.mlp.act",
        False,
    ),
    "opt": (
        "OPTForCausalLM",
        "OPTConfig",
        {
            "hidden_size": 32,
            "word_embed_proj_dim": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "ffn_dim": 64,
            "vocab_size": 100,
            "max_position_embeddings": 64,
        },
        "model.decoder.layers.{i}.activation_fn",
        False,
    ),
    "distilbert": (
        "DistilBertModel",
        "DistilBertConfig",
        {
            "dim": 32,
            "n_layers": 2,
            "n_heads": 2,
            "hidden_dim": 64,
            "vocab_size": 100,
            "max_position_embeddings": 64,
        },
        "transformer.layer.{i}.ffn.activation",
        False,
    ),
}


def _tiny(family, **overrides):
    """A tiny randomly initialised model of `family` (skip if not installed)."""
    model_cls, config_cls, kwargs, _, _ = FAMILIES[family]
    if not hasattr(transformers, model_cls) or not hasattr(transformers, config_cls):
        pytest.skip(f"transformers {transformers.__version__} has no {model_cls}")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = getattr(transformers, config_cls)(**{**kwargs, **overrides})
        return getattr(transformers, model_cls)(config)


def _gpt2(n_layer=2):
    return _tiny("gpt2", n_layer=n_layer)


def _ids(vocab=100, shape=(2, 7)):
    return torch.randint(1, vocab, shape, generator=torch.Generator().manual_seed(1))


def _run(model, ids):
    with torch.no_grad():
        return model(input_ids=ids)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_find_ffn_activations_by_structure(family):
    """Check the found FFN activations against each family's known paths."""
    model = _tiny(family)
    _, _, _, path, gated = FAMILIES[family]
    ffns = find_ffn_activations(model)
    assert list(ffns) == [path.format(i=i) for i in range(2)]
    modules = dict(model.named_modules())
    for index, (name, ffn) in enumerate(ffns.items()):
        assert isinstance(ffn, FFNLayer)
        assert ffn.name == name
        assert ffn.index == index
        assert ffn.module is modules[name]
        assert ffn.gated is gated
        assert name.startswith(f"{ffn.block}.")
        assert ffn.down in modules
        assert all(u in modules for u in ffn.up)
        # gate + up, or one fused gate_up (Phi-3)
        assert len(ffn.up) == (1 if not gated or family == "phi3" else 2)


def _check_step_outputs(model, ffns, ids):
    """Eval: the FFN hidden units are exact bits (times `up` when gated)."""
    modules = dict(model.named_modules())
    seen = {}

    def keep(key):
        def hook(module, args, out=None):
            seen[key] = (args[0] if out is None else out).detach().clone()

        return hook

    handles = []
    try:
        for ffn in ffns.values():
            handles.append(modules[ffn.name].register_forward_hook(keep(ffn.name)))
            handles.append(modules[ffn.down].register_forward_pre_hook(keep(ffn.down)))
            handles.append(modules[ffn.up[-1]].register_forward_hook(keep(ffn.up[-1])))
        _run(model, ids)
    finally:
        for handle in handles:
            handle.remove()
    for ffn in ffns.values():
        bits = seen[ffn.name]
        assert set(bits.unique().tolist()) <= {0.0, 1.0}
        assert 0.0 < bits.mean() < 1.0
        hidden = seen[ffn.down]
        if not ffn.gated:
            torch.testing.assert_close(hidden, bits, rtol=0, atol=0)
            continue
        up = seen[ffn.up[-1]]
        if up.shape[-1] == 2 * bits.shape[-1]:  # fused gate_up: up is the 2nd half
            up = up.chunk(2, dim=-1)[1]
        torch.testing.assert_close(hidden, bits * up, rtol=0, atol=0)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_swapped_ffn_is_exact_step_in_eval_and_smooth_in_train(family):
    """Check HTAF FFNs: exact 0/1 bits in eval(), values in (0, 1) in train()."""
    model = _tiny(family).eval()
    swapped = swap_ffn_activations(model, "htaf")
    ffns = find_ffn_activations(swapped)
    assert all(type(f.module) is HTAF for f in ffns.values())
    # put in the mode of the module it replaces
    assert not any(f.module.training for f in ffns.values())
    assert all(f.module.is_hard for f in ffns.values())
    ids = _ids()
    _check_step_outputs(swapped, ffns, ids)

    swapped.train()
    assert not any(f.module.is_hard for f in ffns.values())
    outs = []
    handles = [
        f.module.register_forward_hook(lambda m, a, o: outs.append(o.detach()))
        for f in ffns.values()
    ]
    try:
        _run(swapped, ids)
    finally:
        for handle in handles:
            handle.remove()
    assert len(outs) == 2
    for out in outs:
        assert ((out > 0) & (out < 1)).all()
    swapped.eval()
    assert all(f.module.is_hard for f in ffns.values())


def test_swap_on_a_training_model_starts_in_train_mode():
    """Check that a swapped activation takes the train mode it replaces."""
    model = _gpt2().train()
    swapped = swap_ffn_activations(model, "scaled_sigmoid", alpha0=1.0, alpha1=8.0)
    acts = [f.module for f in find_ffn_activations(swapped).values()]
    assert all(isinstance(a, ScaledSigmoid) and a.training for a in acts)
    assert all(a.k == 8.0 for a in acts)


def test_encoder_decoder_stacks_of_equal_length_are_both_read():
    """Check T5: the encoder and the decoder stack tie, both are read; gated T5."""
    if not hasattr(transformers, "T5Model"):
        pytest.skip("no T5Model")
    config = transformers.T5Config(
        d_model=32,
        d_ff=64,
        num_layers=2,
        num_heads=2,
        d_kv=16,
        vocab_size=100,
        feed_forward_proj="gated-gelu",
    )
    ffns = find_ffn_activations(transformers.T5Model(config))
    assert list(ffns) == [
        f"{part}.block.{i}.layer.{j}.DenseReluDense.act"
        for part, j in (("encoder", 1), ("decoder", 2))
        for i in range(2)
    ]
    assert all(f.gated for f in ffns.values())
    assert [f.index for f in ffns.values()] == [0, 1, 2, 3]


# -- refusals ---------------------------------------------------------------


class _FunctionalMLP(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.up, self.down = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


class _DeepMLP(nn.Module):
    """Two hidden layers: two activations between the up and down projections."""

    def __init__(self, d=8):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, 2 * d), nn.ReLU()
        )
        self.down = nn.Linear(2 * d, d)

    def forward(self, x):
        return self.down(self.net(x))


class _Stack(nn.Module):
    def __init__(self, block, n=3):
        super().__init__()
        self.blocks = nn.ModuleList([block() for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return x


def test_refuses_a_model_without_a_block_stack():
    """Check the message for a model with no stack of repeated blocks."""
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    with pytest.raises(ValueError, match=r"Sequential has no stack of repeated"):
        find_ffn_activations(model)
    lists = nn.Module()
    lists.norms = nn.ModuleList([nn.LayerNorm(4), nn.LayerNorm(4)])
    with pytest.raises(ValueError, match=r"norms \(2 x LayerNorm\)"):
        swap_ffn_activations(lists)
    with pytest.raises(TypeError, match=r"expects a torch nn\.Module"):
        find_ffn_activations("gpt2")


def test_refuses_a_block_with_no_activation_module():
    """Check the message for an FFN with a functional activation."""
    with pytest.raises(ValueError, match="no activation module between") as info:
        find_ffn_activations(_Stack(_FunctionalMLP))
    msg = str(info.value)
    assert "'blocks.0' (_FunctionalMLP) of _Stack" in msg
    assert "functional activation" in msg
    assert "up 8->16, down 16->8" in msg


def test_refuses_a_block_with_several_candidates():
    """Check the message for a block with two activations between up and down."""
    with pytest.raises(ValueError, match="2 candidate FFN activations") as info:
        find_ffn_activations(_Stack(_DeepMLP))
    assert "blocks.0.net.1, blocks.0.net.3" in str(info.value)
    assert "_DeepMLP" in str(info.value)


# -- layer selection ----------------------------------------------------------

N_LAYER = 4
GPT2_ACT = "transformer.h.{}.mlp.act"


@pytest.fixture(scope="module")
def gpt2_4():
    return _gpt2(N_LAYER).eval()


def _swapped_blocks(model):
    """The blocks whose FFN activation is no longer GPT-2's own."""
    return [
        i
        for i in range(N_LAYER)
        if "GELU" not in type(model.get_submodule(GPT2_ACT.format(i))).__name__
    ]


@pytest.mark.parametrize(
    ("layers", "expected"),
    [
        ("all", [0, 1, 2, 3]),
        ("last", [3]),
        (1, [3]),
        (3, [1, 2, 3]),
        (4, [0, 1, 2, 3]),
        ([0], [0]),
        ([-1], [3]),
        ([-4, 2], [0, 2]),
        ((3, 0, -1), [0, 3]),
        ("transformer.h.1.mlp.act", [1]),
        (["transformer.h.2", "transformer.h.0.mlp"], [0, 2]),
        ("transformer.h.*.mlp", [0, 1, 2, 3]),
        ("transformer.h.[13].*", [1, 3]),
        ("*.h.2.mlp.a?t", [2]),
        ([0, "transformer.h.3"], [0, 3]),
    ],
)
def test_layers_selection(gpt2_4, layers, expected):
    """Check last k, negative indices, names and wildcards on a tiny GPT-2."""
    swapped = swap_ffn_activations(gpt2_4, "htaf", layers)
    assert _swapped_blocks(swapped) == expected
    assert _swapped_blocks(gpt2_4) == []


def test_layers_selection_by_activation_type(gpt2_4):
    """Check that a module type selects the FFN activations of that type."""
    act_type = type(gpt2_4.transformer.h[0].mlp.act)
    swapped = swap_ffn_activations(gpt2_4, "ste", [act_type])
    assert _swapped_blocks(swapped) == [0, 1, 2, 3]
    assert isinstance(swapped.transformer.h[0].mlp.act, STEHeaviside)


@settings(max_examples=25, deadline=None)
@given(
    indices=st.lists(
        st.integers(-N_LAYER, N_LAYER - 1), min_size=1, max_size=2 * N_LAYER
    ),
    k=st.integers(1, N_LAYER),
)
def test_layers_selection_property(gpt2_4, indices, k):
    """Check any list of indices and any last k against the modular block set."""
    swapped = swap_ffn_activations(gpt2_4, "relu", indices)
    assert _swapped_blocks(swapped) == sorted({i % N_LAYER for i in indices})
    assert all(
        isinstance(swapped.get_submodule(GPT2_ACT.format(i % N_LAYER)), nn.ReLU)
        for i in indices
    )
    swapped = swap_ffn_activations(gpt2_4, "htaf", k)
    assert _swapped_blocks(swapped) == list(range(N_LAYER - k, N_LAYER))
    names = [GPT2_ACT.format(i) for i in range(N_LAYER - k, N_LAYER)]
    assert _swapped_blocks(swap_ffn_activations(gpt2_4, "htaf", names)) == list(
        range(N_LAYER - k, N_LAYER)
    )


@pytest.mark.parametrize(
    ("layers", "error", "match"),
    [
        (0, ValueError, r"last 0 FFN blocks, but GPT2LMHeadModel has 4.*1 to 4"),
        (5, ValueError, r"pass an int from 1 to 4"),
        ([4], ValueError, r"block index 4 is out of range.*indices -4 to 3"),
        ([-5], ValueError, r"block index -5 is out of range"),
        (["transformer.h.9.mlp.act"], ValueError, r"'transformer.h.9.mlp.act'"),
        ("transformer.x.*", ValueError, r"'transformer.x.\*' matched no module"),
        ("transformer.wte", ValueError, r"not an FFN activation"),
        ("transformer.h.*.attn.*", ValueError, r"not an FFN activation"),
        ([], ValueError, "must not be an empty list"),
        (True, TypeError, "must be 'all', an int"),
        ([True], TypeError, "a block index must be an int"),
        (1.5, TypeError, "must be 'all', 'last', an int"),
        ([1.5], TypeError, "each entry of layers"),
    ],
)
def test_layers_selection_errors(gpt2_4, layers, error, match):
    """Check the errors name the bad entry and list the FFN activations."""
    with pytest.raises(error, match=match) as info:
        swap_ffn_activations(gpt2_4, "htaf", layers)
    if error is ValueError and layers != []:
        assert GPT2_ACT.format(3) in str(info.value)  # lists what exists


def test_activation_choices(gpt2_4):
    """Check the activations by name, a module, the alphas and their checks."""
    swapped = swap_ffn_activations(gpt2_4, "htaf", alpha0=1.5, alpha1=14.0)
    act = swapped.transformer.h[0].mlp.act
    assert (act.alpha0, act.alpha1) == (1.5, 14.0)
    assert swapped.transformer.h[1].mlp.act is not act
    proto = HTAF(3.0, 7.3, mode="hard")
    swapped = swap_ffn_activations(gpt2_4, proto, layers=[0, 1])
    acts = [swapped.transformer.h[i].mlp.act for i in range(2)]
    assert all(a is not proto and a.mode == "hard" and a.alpha0 == 3.0 for a in acts)
    with pytest.raises(ValueError, match="must be one of"):
        swap_ffn_activations(gpt2_4, "bogus")
    with pytest.raises(ValueError, match=r"activation='relu' does not use them"):
        swap_ffn_activations(gpt2_4, "relu", alpha0=2.0)
    with pytest.raises(ValueError, match="set them on the module"):
        swap_ffn_activations(gpt2_4, proto, alpha1=2.0)
    with pytest.raises(ValueError, match="alpha0"):
        swap_ffn_activations(gpt2_4, "htaf", alpha0=-1.0)
    with pytest.raises(TypeError, match="'activation' parameter"):
        swap_ffn_activations(gpt2_4, 3)
    with pytest.raises(TypeError, match="copy must be True or False"):
        swap_ffn_activations(gpt2_4, copy="yes")
    assert _swapped_blocks(gpt2_4) == []


def test_copy_false_changes_the_model_in_place(gpt2_4):
    """Check copy=False: the same object, other modules untouched."""
    model = copy.deepcopy(gpt2_4)
    before = dict(model.named_modules())
    out = swap_ffn_activations(model, "htaf", layers=[1], copy=False)
    assert out is model
    assert _swapped_blocks(model) == [1]
    after = dict(model.named_modules())
    assert set(after) == set(before)
    for name, module in before.items():
        if name == GPT2_ACT.format(1):
            assert after[name] is not module
        elif name and not name.startswith(f"{GPT2_ACT.format(1)}."):
            assert after[name] is module, name


def test_a_swapped_model_can_be_swapped_again(gpt2_4):
    """Check that HTAF FFNs are found again (and replaced)."""
    once = swap_ffn_activations(gpt2_4, "htaf", 2)
    assert list(find_ffn_activations(once)) == [GPT2_ACT.format(i) for i in range(4)]
    twice = swap_ffn_activations(once, "relu", [-1])
    assert isinstance(twice.transformer.h[3].mlp.act, nn.ReLU)
    assert isinstance(twice.transformer.h[2].mlp.act, HTAF)


# -- MiniLM (pretrained, offline) ---------------------------------------------

SENTENCES = [
    "Return the square root of x.",
    "Split the pathname path into a pair.",
    "Hi.",
]
MINILM_ACT = "encoder.layer.{}.intermediate.intermediate_act_fn"


def test_minilm_last_two_ffns_give_bits_read_by_sign_code_transformer(minilm):
    """Check MiniLM with HTAF in its last 2 FFNs: runs, changes, bits = codes."""
    from sksign.transformers import (
        hf_forward_kwargs,
        hf_sign_code_transformer,
        tokenize_to_array,
    )

    model, tok = minilm
    ids = tokenize_to_array(tok, SENTENCES, max_length=16)
    kwargs = hf_forward_kwargs(tok)(torch.from_numpy(ids))
    with torch.no_grad():
        reference = model(**kwargs).last_hidden_state.clone()
    state = {k: v.clone() for k, v in model.state_dict().items()}

    names = [MINILM_ACT.format(i) for i in range(6)]
    assert list(find_ffn_activations(model)) == names
    swapped = swap_ffn_activations(model, "htaf", layers=2)
    assert swapped is not model
    assert not swapped.training
    with torch.no_grad():
        out = swapped(**kwargs).last_hidden_state
    assert out.shape == reference.shape
    assert torch.isfinite(out).all()
    assert not torch.allclose(out, reference, atol=1e-3)
    kinds = [type(swapped.get_submodule(n)).__name__ for n in names]
    assert kinds == ["GELUActivation"] * 4 + ["HTAF"] * 2

    # the original is unchanged (modules, weights, outputs)
    assert [type(model.get_submodule(n)).__name__ for n in names] == [
        "GELUActivation"
    ] * 6
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key
    with torch.no_grad():
        torch.testing.assert_close(
            model(**kwargs).last_hidden_state, reference, rtol=0, atol=0
        )

    # copy=False on a copy: every untouched module is the same object
    replica = copy.deepcopy(model)
    before = dict(replica.named_modules())
    assert swap_ffn_activations(replica, "htaf", 2, copy=False) is replica
    for name, module in replica.named_modules():
        assert (module is before[name]) is (name not in names[4:]), name

    # SignCodeTransformer reads the swapped units: code = the step's 0/1 output
    outputs = {}
    handles = [
        swapped.get_submodule(n).register_forward_hook(
            lambda m, a, o, n=n: outputs.__setitem__(n, o.detach().clone())
        )
        for n in names[4:]
    ]
    try:
        with torch.no_grad():
            swapped(**kwargs)
    finally:
        for handle in handles:
            handle.remove()
    sct = hf_sign_code_transformer(swapped, tok, layers=names[4:], token_pool=None)
    codes, index = sct.fit(ids).transform_tokens(ids)
    assert sct.layers_ == names[4:]
    expected = torch.cat(
        [outputs[n][index[:, 0], index[:, 1]] for n in names[4:]], dim=1
    )
    assert set(expected.unique().tolist()) == {0.0, 1.0}
    np.testing.assert_array_equal(codes, expected.numpy().astype(np.uint8))
    assert len(index) == int(kwargs["attention_mask"].sum())
    assert not swapped.training
