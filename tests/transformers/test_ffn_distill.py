"""Distillation of swapped FFN blocks (distill_ffn) on tiny stand-in models."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import copy
import socket

import numpy as np
import pytest
import torch
from torch import nn

from sksign.estimators import AlphaAnnealing
from sksign.transformers import distill_ffn, swap_ffn_activations

VOCAB, D = 50, 16


class MLP(nn.Module):
    def __init__(self, d=D):
        super().__init__()
        self.c_fc, self.act, self.c_proj = (
            nn.Linear(d, 4 * d),
            nn.GELU(),
            nn.Linear(4 * d, d),
        )

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class Block(nn.Module):
    """A GPT-2-like block: causal mixing (a running mean) and an FFN."""

    def __init__(self, d=D):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(d), nn.Linear(d, d)
        self.ln_2, self.mlp = nn.LayerNorm(d), MLP(d)

    def forward(self, x, mask):
        h = self.ln_1(x) * mask
        mixed = h.cumsum(1) / mask.cumsum(1).clamp(min=1)
        x = x + self.attn(mixed)
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    def __init__(self, n_layer=2, d=D):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, d)
        self.h = nn.ModuleList([Block(d) for _ in range(n_layer)])
        self.ln_f, self.lm_head = nn.LayerNorm(d), nn.Linear(d, VOCAB)

    def forward(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        mask = attention_mask[..., None].float()
        x = self.wte(input_ids)
        for block in self.h:
            x = block(x, mask)
        return self.lm_head(self.ln_f(x))


def _teacher(n_layer=2, d=D, seed=0):
    torch.manual_seed(seed)
    return TinyGPT(n_layer, d).eval()


def _data(n=24, length=8, seed=0):
    rng = np.random.default_rng(seed)
    ids = torch.from_numpy(rng.integers(1, VOCAB, (n, length)))
    lengths = rng.integers(3, length + 1, n)
    mask = torch.from_numpy((np.arange(length) < lengths[:, None]).astype(np.int64))
    return {"input_ids": ids * mask, "attention_mask": mask}


def _state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _distill(teacher, data, activation="htaf", layers=1, **kwargs):
    kwargs = {"max_steps": 12, "batch_size": 6, "lr": 1e-2, "random_state": 0} | kwargs
    student = swap_ffn_activations(teacher, activation, layers=layers)
    return distill_ffn(student, teacher, data, **kwargs)


FFN1 = ("h.1.mlp.c_fc.", "h.1.mlp.c_proj.")


def test_distill_trains_the_swapped_ffn_only_and_leaves_the_teacher():
    """Check the loss falls, only the swapped FFN changes, the teacher does not."""
    teacher, data = _teacher(), _data()
    before = _state(teacher)
    student, history = _distill(teacher, data, max_steps=40)
    assert [r["step"] for r in history] == list(range(1, 41))
    losses = [r["loss"] for r in history]
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    for key, value in teacher.state_dict().items():
        assert torch.equal(value, before[key]), key
    changed = {
        k for k, v in student.state_dict().items() if not torch.equal(v, before[k])
    }
    assert changed == {p + s for p in FFN1 for s in ("weight", "bias")}
    # modes and requires_grad flags are back as they were
    assert not student.training
    assert not student.h[1].mlp.act.training
    assert all(p.requires_grad for p in student.parameters())
    assert not teacher.training


def test_ffn_plus_norms_also_trains_the_norms_of_swapped_blocks():
    """Check trainable='ffn+norms' trains the swapped block's norms, no other."""
    teacher, data = _teacher(), _data()
    frozen = copy.deepcopy(teacher).requires_grad_(False)  # a frozen model works
    student = swap_ffn_activations(frozen, "htaf", layers=1)
    distill_ffn(student, teacher, data, max_steps=5, lr=1e-2, trainable="ffn+norms")
    before = teacher.state_dict()
    changed = {
        k.rsplit(".", 1)[0]
        for k, v in student.state_dict().items()
        if not torch.equal(v, before[k])
    }
    assert changed == {"h.1.ln_1", "h.1.ln_2", "h.1.mlp.c_fc", "h.1.mlp.c_proj"}
    assert not any(p.requires_grad for p in student.parameters())


def test_alpha0_follows_the_annealing_schedule():
    """Check alpha0 per step is AlphaAnnealing's, used in the forward, then reset."""
    teacher, data = _teacher(), _data()
    student = swap_ffn_activations(teacher, "htaf", layers=2, alpha0=2.0, alpha1=11.0)
    seen = []
    act = student.h[0].mlp.act
    hook = act.register_forward_hook(lambda m, i, o: seen.append(m.alpha0))
    _, history = distill_ffn(
        student, teacher, data, max_steps=8, alpha0_start=0.25, anneal_steps=5
    )
    hook.remove()
    schedule = AlphaAnnealing(0.25, epochs=5)
    expected = [schedule.alpha0_at(s, 2.0, max_epochs=8) for s in range(8)]
    assert expected[0] == 0.25
    assert expected[4:] == [2.0] * 4
    np.testing.assert_allclose([r["alpha0"] for r in history], expected)
    np.testing.assert_allclose(seen, expected)
    assert act.alpha0 == 2.0
    assert student.h[1].mlp.act.alpha0 == 2.0
    assert all(r["alpha0"] is None for r in _distill(teacher, data, max_steps=2)[1])


def test_same_seed_same_weights_other_seed_differs():
    """Check random_state fixes the result; another seed gives other weights."""
    teacher, data = _teacher(), _data()
    a = _distill(teacher, data, random_state=3)[0].state_dict()
    b = _distill(teacher, data, random_state=3)[0].state_dict()
    c = _distill(teacher, data, random_state=4)[0].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["h.1.mlp.c_fc.weight"], c["h.1.mlp.c_fc.weight"])


def test_resume_from_checkpoint_equals_an_uninterrupted_run(tmp_path):
    """Check a run killed at step 5 and rerun ends as an uninterrupted run."""
    teacher, data = _teacher(), _data()
    kw = {"max_steps": 7, "alpha0_start": 0.5, "task_weight": 0.5}
    full, full_history = _distill(teacher, data, **kw)

    path = tmp_path / "run.pt"
    student = swap_ffn_activations(teacher, "htaf", layers=1)
    calls = []

    def crash(module, args, out):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt

    hook = student.h[1].mlp.act.register_forward_hook(crash)
    with pytest.raises(KeyboardInterrupt):
        distill_ffn(
            student,
            teacher,
            data,
            random_state=0,
            batch_size=6,
            lr=1e-2,
            checkpoint=path,
            checkpoint_every=2,
            **kw,
        )
    hook.remove()
    assert torch.load(path, weights_only=True)["step"] == 4
    assert student.h[1].mlp.act.alpha0 == 2.0  # reset after the interruption

    resumed, history = _distill(
        teacher, data, checkpoint=str(path), checkpoint_every=2, **kw
    )
    for key, value in full.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[key]), key
    assert [(r["step"], r["loss"], r["alpha0"]) for r in history] == [
        (r["step"], r["loss"], r["alpha0"]) for r in full_history
    ]
    # a finished run reloads its result; other settings are refused
    again = _distill(teacher, data, checkpoint=path, checkpoint_every=2, **kw)[0]
    assert torch.equal(again.h[1].mlp.c_fc.weight, full.h[1].mlp.c_fc.weight)
    with pytest.raises(ValueError, match=r"different run \(lr: 0.01 -> 0.1\)"):
        _distill(teacher, data, checkpoint=path, lr=0.1, **kw)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _distributed_worker(rank, world, port, path):
    torch.set_num_threads(1)
    torch.distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        teacher, data = _teacher(), _data()
        # rank 1 starts from other weights: distill_ffn takes rank 0's
        student = swap_ffn_activations(_teacher(seed=rank), "htaf", layers=1)
        student.load_state_dict(
            {
                **_state(teacher),
                **({} if rank == 0 else {"h.1.mlp.c_fc.bias": torch.ones(4 * D)}),
            }
        )
        _, history = distill_ffn(
            student,
            teacher,
            data,
            max_steps=6,
            batch_size=7,
            lr=1e-2,
            random_state=0,
            alpha0_start=0.5,
            task_weight=0.3,
        )
        if rank == 0:
            torch.save({"state": student.state_dict(), "history": history}, path)
        # neither rank tears gloo down while the other may still talk to it
        # (a rank 1 that left first once aborted: "terminate called without
        # an active exception")
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()


def test_two_gloo_processes_give_the_weights_of_one(tmp_path):
    """Check 2 processes (uneven shards of 7) match 1 to float32 rounding."""
    path = tmp_path / "rank0.pt"
    torch.multiprocessing.spawn(
        _distributed_worker, args=(2, _free_port(), str(path)), nprocs=2, join=True
    )
    two = torch.load(path, weights_only=False)
    teacher, data = _teacher(), _data()
    one, history = distill_ffn(
        swap_ffn_activations(teacher, "htaf", layers=1),
        teacher,
        data,
        max_steps=6,
        batch_size=7,
        lr=1e-2,
        random_state=0,
        alpha0_start=0.5,
        task_weight=0.3,
    )
    for key, value in one.state_dict().items():
        torch.testing.assert_close(two["state"][key], value, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        [r["loss"] for r in two["history"]], [r["loss"] for r in history], rtol=1e-5
    )
    assert not torch.equal(one.h[1].mlp.c_fc.weight, teacher.h[1].mlp.c_fc.weight)


def _options_error(option, value):
    return {
        "trainable": "one of",
        "loss": "one of",
        "max_steps": "an int >= 1",
        "batch_size": "an int >= 1",
        "lr": "a real number > 0",
        "temperature": "a real number > 0",
        "task_weight": "a real number >= 0",
        "alpha0_start": "a real number > 0",
        "checkpoint": "a file path",
        "verbose": "an int >= 0",
    }[option]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("trainable", "all"),
        ("loss", "kld"),
        ("max_steps", 0),
        ("batch_size", 1.5),
        ("lr", -1.0),
        ("temperature", 0),
        ("task_weight", -1),
        ("alpha0_start", 0.0),
        ("checkpoint", 3),
        ("verbose", True),
    ],
)
def test_bad_options_name_the_parameter(option, value):
    """Check a bad option raises naming the parameter and what it takes."""
    teacher = _teacher()
    student = swap_ffn_activations(teacher, "htaf", layers=1)
    match = f"'{option}' parameter of distill_ffn must be {_options_error(option, 0)}"
    with pytest.raises(ValueError, match=match):
        distill_ffn(student, teacher, _data(), **{option: value})


def test_bad_models_and_data_raise_clear_errors():
    """Check unusable models and data are refused with what was found."""
    teacher, data = _teacher(), _data()
    student = swap_ffn_activations(teacher, "htaf", layers=1)
    with pytest.raises(ValueError, match=r"no swapped FFN activation.*GELU"):
        distill_ffn(copy.deepcopy(teacher), teacher, data)
    with pytest.raises(ValueError, match="student is teacher"):
        distill_ffn(teacher, teacher, data)
    with pytest.raises(ValueError, match=r"different FFN layouts.*only in the teac"):
        distill_ffn(student, _teacher(n_layer=3), data)
    with pytest.raises(ValueError, match=r"weight shapes.*\(64, 16\) vs \(32, 8\)"):
        distill_ffn(student, _teacher(d=8), data)
    with pytest.raises(ValueError, match=r"alpha0_start anneals HTAF.*ReLU"):
        distill_ffn(
            swap_ffn_activations(teacher, "relu"), teacher, data, alpha0_start=0.5
        )
    with pytest.raises(TypeError, match="dict of tensors with 'input_ids'"):
        distill_ffn(student, teacher, data["input_ids"])
    with pytest.raises(ValueError, match="2-D integer tensor"):
        distill_ffn(student, teacher, {"input_ids": data["input_ids"].float()})
    with pytest.raises(ValueError, match="attention_mask'\\] must have the shape"):
        distill_ffn(student, teacher, {**data, "attention_mask": torch.ones(24, 3)})
    quantized = copy.deepcopy(student)
    int8 = torch.zeros(4 * D, D, dtype=torch.int8)
    quantized.h[1].mlp.c_fc.weight = nn.Parameter(int8, requires_grad=False)
    with pytest.raises(ValueError, match=r"'h\.1\.mlp\.c_fc\.weight'.*torch\.int8"):
        distill_ffn(quantized, teacher, data)
    with pytest.raises(ValueError, match="loss='kl' needs logits"):
        _encoder_kl_error()


class Encoder(TinyGPT):
    """The same stack returning its last hidden state, as an encoder does."""

    def forward(self, input_ids, attention_mask=None):
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        x = self.wte(input_ids)
        for block in self.h:
            x = block(x, mask[..., None].float())
        return (x,)


def _encoder_kl_error():
    torch.manual_seed(0)
    teacher = Encoder().eval()
    student = swap_ffn_activations(teacher, "htaf", layers=1)
    distill_ffn(student, teacher, _data(), loss="kl", max_steps=1)


def test_encoder_distils_the_hidden_state_by_cosine_and_mse():
    """Check an encoder (hidden-state output) trains with cosine and MSE."""
    torch.manual_seed(0)
    teacher, data = Encoder().eval(), _data()
    for loss in ("auto", "mse"):
        student = swap_ffn_activations(teacher, "htaf", layers=1)
        _, history = distill_ffn(
            student, teacher, data, loss=loss, max_steps=30, lr=1e-2, random_state=0
        )
        losses = [r["loss"] for r in history]
        assert np.mean(losses[-5:]) < np.mean(losses[:5])
    with pytest.raises(ValueError, match="task_weight > 0 needs next-token logits"):
        distill_ffn(student, teacher, data, task_weight=1.0, max_steps=1)


# -- transformers models built from a config (nothing downloaded) ------------


def _hf_gpt2():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=50)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


def test_hf_gpt2_distils_and_sign_code_transformer_reads_the_bits(capsys):
    """Check a GPT-2 model distils (KL) and its FFN bits are the step outputs."""
    from sksign.transformers import hf_sign_code_transformer

    teacher, data = _hf_gpt2(), _data()
    before = _state(teacher)
    student = swap_ffn_activations(teacher, "htaf", layers=2)
    student, history = distill_ffn(
        student,
        teacher,
        data,
        max_steps=20,
        lr=3e-3,
        batch_size=8,
        alpha0_start=0.5,
        random_state=0,
        verbose=1,
    )
    assert "distill_ffn step 20/20" in capsys.readouterr().out
    losses = [r["loss"] for r in history]
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    assert all(torch.equal(v, before[k]) for k, v in teacher.state_dict().items())

    names = [f"transformer.h.{i}.mlp.act" for i in range(2)]
    seen = {}
    hooks = [
        student.get_submodule(n).register_forward_hook(
            lambda m, i, o, n=n: seen.__setitem__(n, (i[0].detach(), o.detach()))
        )
        for n in names
    ]
    ids = data["input_ids"].numpy()
    with torch.no_grad():
        student(**data)
    for hook in hooks:
        hook.remove()
    sct = hf_sign_code_transformer(
        student, pad_token_id=0, layers=names, token_pool=None
    )
    codes, index = sct.fit(ids).transform_tokens(ids)
    z = torch.cat([seen[n][0][index[:, 0], index[:, 1]] for n in names], 1)
    step = torch.cat([seen[n][1][index[:, 0], index[:, 1]] for n in names], 1)
    assert set(step.unique().tolist()) == {0.0, 1.0}  # eval: the exact step
    nonzero = (z != 0).numpy()
    assert nonzero.mean() > 0.99
    np.testing.assert_array_equal(
        codes[nonzero], step.numpy().astype(np.uint8)[nonzero]
    )


def test_hf_bert_encoder_distils_the_last_hidden_state():
    """Check a BERT model (no LM head) distils its last hidden state."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=50,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    teacher, data = transformers.BertModel(config).eval(), _data()
    student = swap_ffn_activations(teacher, "htaf", layers=1)
    before = _state(teacher)
    _, history = distill_ffn(
        student, teacher, data, max_steps=25, lr=1e-2, random_state=0
    )
    losses = [r["loss"] for r in history]
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    assert all(torch.equal(v, before[k]) for k, v in teacher.state_dict().items())
    changed = {
        k for k, v in student.state_dict().items() if not torch.equal(v, before[k])
    }
    assert changed == {
        f"encoder.layer.1.{m}.dense.{p}"
        for m in ("intermediate", "output")
        for p in ("weight", "bias")
    }
