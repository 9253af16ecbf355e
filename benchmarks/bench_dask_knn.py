"""Benchmark: sharded SignKNNClassifier on a Dask cluster vs one process.

Codes are generated on the workers (never on the client): clustered packed
codes, one seeded generator per chunk, so the client only draws the labels
(the cluster of each row, from the same seeds). The sharded estimator is
fitted on the Dask array (codes packed into words and persisted on the
workers, one shard per chunk) and predicts a NumPy batch of queries. The
single-process estimator then predicts the same queries on the same codes,
gathered to the client, with ``n_jobs`` equal to the cluster's total
threads, so that both use the same cores; the two predicts alternate, best of
``--repeat`` each. Prints a table of times,
throughput, peak memory (client and each worker) and the ratio, and checks
that both give the same labels.

Usage::

    python benchmarks/bench_dask_knn.py   # 20M x 256 bits, 10,000 queries, k=10
    python benchmarks/bench_dask_knn.py --n-codes 1000000 --n-queries 1000 --repeat 2
    python benchmarks/bench_dask_knn.py --no-single   # the cluster side only

At the full size each of 2 workers peaks at about 0.9 GB and the client at
about 1.4 GB (the labels); the single-process comparison needs about 2 GB
more on the client (skipped with ``--no-single`` or when it does not fit in
the memory available).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import os
import resource
import time

import numpy as np
from _timing import best_of  # benchmarks/_timing.py, beside this script

from sksign.estimators import SignKNNClassifier

N_CLUSTERS = 1000
N_CLASSES = 10
# A bit is flipped when 4 random bits are all 1: probability 1/16.
FLIP_ROUNDS = 4


def _centres(n_bytes, seed):
    return np.random.default_rng(seed).integers(
        0, 256, size=(N_CLUSTERS, n_bytes), dtype=np.uint8
    )


def _clusters(n_rows, seed):
    """Cluster of each row of a chunk: the first draw of the chunk's stream."""
    return np.random.default_rng(seed).integers(0, N_CLUSTERS, size=n_rows)


def _chunk_codes(n_rows, n_bytes, centres, seed, batch=65_536):
    """Packed codes of one chunk: centres with about 1/16 of the bits flipped."""
    rng = np.random.default_rng(seed)
    cluster = rng.integers(0, N_CLUSTERS, size=n_rows)  # as _clusters
    out = np.empty((n_rows, n_bytes), dtype=np.uint8)
    for start in range(0, n_rows, batch):
        stop = min(start + batch, n_rows)
        flips = np.full((stop - start, n_bytes), 255, dtype=np.uint8)
        for _ in range(FLIP_ROUNDS):
            flips &= np.frombuffer(rng.bytes(flips.size), dtype=np.uint8).reshape(
                flips.shape
            )
        out[start:stop] = centres[cluster[start:stop]] ^ flips
    return out


def _generate_block(centres, n_bytes, seed, block_info=None):
    info = block_info[None]
    n_rows = info["chunk-shape"][0]
    return _chunk_codes(n_rows, n_bytes, centres, seed + info["chunk-location"][0])


def _peak_rss_mib():
    # ru_maxrss is in KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rows_per_worker(client, est):
    """Training rows held by each worker (shards are placed by the scheduler)."""
    from distributed import futures_of

    futures = futures_of(est._fit_shards.words)
    who_has = client.who_has(futures)
    rows = {}
    for future, n in zip(futures, est._fit_shards.words.chunks[0]):
        for worker in who_has[future.key]:
            rows[worker] = rows.get(worker, 0) + n
    return sorted(rows.values())


def _available_mib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return np.inf


def main():
    import dask.array as da
    from distributed import Client, LocalCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-codes", type=int, default=20_000_000)
    parser.add_argument("--n-bits", type=int, default=256)
    parser.add_argument("--n-queries", type=int, default=10_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--n-workers", type=int, default=2)
    parser.add_argument("--threads-per-worker", type=int, default=1)
    parser.add_argument(
        "--shards-per-worker", type=int, default=2, help="chunks of the codes"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="best of N predicts (interleaved)"
    )
    parser.add_argument("--no-single", action="store_true", help="skip one process")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    n_bytes = -(-args.n_bits // 8)
    n_threads = args.n_workers * args.threads_per_worker
    n_shards = args.n_workers * args.shards_per_worker
    rows = -(-args.n_codes // n_shards)
    chunks = tuple(min(rows, args.n_codes - s) for s in range(0, args.n_codes, rows))
    centres = _centres(n_bytes, args.seed)
    seed = args.seed + 1

    cluster = LocalCluster(
        n_workers=args.n_workers,
        threads_per_worker=args.threads_per_worker,
        processes=True,
        dashboard_address=None,
        env={"OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": str(args.threads_per_worker)},
    )
    client = Client(cluster)
    try:
        X = da.map_blocks(
            _generate_block,
            centres,
            n_bytes,
            seed,
            chunks=(chunks, (n_bytes,)),
            dtype=np.uint8,
            meta=np.empty((0, n_bytes), dtype=np.uint8),
        )
        # the labels: the cluster of each row, drawn from the chunks' seeds
        y = (
            np.concatenate([_clusters(n, seed + b) for b, n in enumerate(chunks)])
            % N_CLASSES
        )
        Q = _chunk_codes(args.n_queries, n_bytes, centres, seed=10_000 + args.seed)
        kw = {"n_neighbors": args.k, "packed": True, "n_bits": args.n_bits}

        start = time.perf_counter()
        sharded = SignKNNClassifier(**kw).fit(X, y)
        t_fit = time.perf_counter() - start
        labels_dask = sharded.predict(Q)  # also loads the kernels on the workers
        client_peak = _peak_rss_mib()
        shard_rows = _rows_per_worker(client, sharded)
        worker_peaks = sorted(client.run(_peak_rss_mib).values())

        runs = [lambda: sharded.predict(Q)]
        t_single = labels_single = None
        need_mib = 2.2 * args.n_codes * n_bytes / 2**20
        if not args.no_single and need_mib < 0.8 * _available_mib():
            codes = X.compute()
            single = SignKNNClassifier(**kw, n_jobs=n_threads).fit(codes, y)
            labels_single = single.predict(Q)
            runs.append(lambda: single.predict(Q))
        # interleaved, so that both see the same machine load
        times = [wall for wall, _ in best_of(runs, args.repeat)]
        t_dask = times[0]
        if labels_single is not None:
            t_single = times[1]
    finally:
        client.close()
        cluster.close()

    comparisons = args.n_queries * args.n_codes
    print(
        f"{args.n_codes:,} codes x {args.n_bits} bits, {args.n_queries:,} queries, "
        f"k={args.k}; {args.n_workers} workers x {args.threads_per_worker} "
        f"thread(s), {n_shards} shards; best of {args.repeat}"
    )
    print(f"sharded fit (generate + pack + persist on the workers): {t_fit:.2f} s")
    print()
    print("| estimator | predict (s) | queries/s | Gcodes/s | ratio |")
    print("|---|---|---|---|---|")
    rows_out = [("Dask, sharded", t_dask)]
    if t_single is not None:
        rows_out.insert(0, (f"one process, n_jobs={n_threads}", t_single))
    for name, t in rows_out:
        ratio = f"{t / t_single:.2f}" if t_single else "-"
        print(
            f"| {name} | {t:.3f} | {args.n_queries / t:,.0f} | "
            f"{comparisons / t / 1e9:.2f} | {ratio} |"
        )
    print()
    print(f"client peak RSS: {client_peak:,.0f} MiB (before any single-process run)")
    print("worker peak RSS: " + ", ".join(f"{w:,.0f} MiB" for w in worker_peaks))
    print("training rows per worker: " + ", ".join(f"{r:,}" for r in shard_rows))
    if labels_single is not None:
        same = np.array_equal(labels_dask, labels_single)
        print(f"same labels as one process: {same}")
        if not same:
            raise SystemExit("the sharded and single-process labels differ")
    if t_single is not None:
        print(f"overhead target: ratio <= 1.3 -> {t_dask / t_single <= 1.3}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
