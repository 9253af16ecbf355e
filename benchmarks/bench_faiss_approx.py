"""Approximate faiss search against the exact popcount kernel at a million codes.

``SignKNNClassifier(approximate=True)`` (faiss ``IndexBinaryHNSW``, M=32,
efSearch=128) against the exact built-in kernel (``algorithm="popcount"``) on
clustered 256-bit codes: build (fit) time, query throughput, recall@5 of the
approximate neighbours against the exact ones, and the memory each fitted model
holds. Prints one table; everything is measured in the same run.

Run: ``python benchmarks/bench_faiss_approx.py [--n-train 1000000] [--threads N]``
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import pickle
import time

import numpy as np

from sksign.estimators import SignKNNClassifier


def clustered_codes(n, n_bits, rng, n_centres=1000, flip=0.1):
    """Packed codes: random centres with each bit flipped with probability flip."""
    centres = rng.integers(0, 2, (n_centres, n_bits), dtype=np.uint8)
    labels = rng.integers(0, n_centres, n)
    out = np.empty((n, n_bits // 8), dtype=np.uint8)
    for start in range(0, n, 100_000):
        lab = labels[start : start + 100_000]
        bits = centres[lab] ^ (rng.random((len(lab), n_bits)) < flip)
        out[start : start + len(lab)] = np.packbits(bits, axis=1)
    return out, labels % 10


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=1_000_000)
    parser.add_argument("--n-bits", type=int, default=256)
    parser.add_argument("--n-queries", type=int, default=2000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import faiss

    faiss.omp_set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    X, y = clustered_codes(args.n_train + args.n_queries, args.n_bits, rng)
    X_train, y_train = X[: args.n_train], y[: args.n_train]
    X_query = X[args.n_train :]
    common = {"n_neighbors": args.k, "packed": True, "n_bits": args.n_bits}

    rows = []
    results = {}
    for name, params in (
        ("exact popcount kernel", {"algorithm": "popcount", "n_jobs": args.threads}),
        ("faiss IndexBinaryHNSW (approximate=True)", {"approximate": True}),
    ):
        knn = SignKNNClassifier(**common, **params)
        knn.fit(X_train[:1000], y_train[:1000]).kneighbors(X_query[:10])  # warm-up
        t0 = time.perf_counter()
        knn.fit(X_train, y_train)
        t_fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        _, ind = knn.kneighbors(X_query)
        t_query = time.perf_counter() - t0
        size = len(pickle.dumps(knn, protocol=pickle.HIGHEST_PROTOCOL))
        results[name] = ind
        rows.append([name, t_fit, args.n_queries / t_query, size / 2**20])

    exact, approx = results[rows[0][0]], results[rows[1][0]]
    recall = np.mean(
        [len(set(a) & set(e)) / args.k for a, e in zip(approx, exact, strict=True)]
    )
    print(
        f"{args.n_train:,} codes of {args.n_bits} bits (1000 clusters, 10% flips), "
        f"{args.n_queries} queries, k={args.k}, {args.threads} threads"
    )
    head = "| build (s) | queries/s | model size (MiB) | recall@"
    print(f"| {'method':<42} {head}{args.k} |")
    print(f"|{'-' * 44}|-----------|-----------|------------------|----------|")
    for i, (name, t_fit, qps, mib) in enumerate(rows):
        rec = "1 (ref)" if i == 0 else f"{recall:.4f}"
        print(f"| {name:<42} | {t_fit:9.2f} | {qps:9.0f} | {mib:16.1f} | {rec:>8} |")


if __name__ == "__main__":
    main()
