"""Benchmark: SignKNNClassifier against faiss and scikit-learn on clustered codes.

Prints one table of times and ratios measured side by side in one run:
``SignKNNClassifier.predict`` (search + vote) against faiss ``IndexBinaryFlat``
(default, and with ``faiss.cvar.hamming_batch_size`` tuned), ``faiss.knn_hamming``
and scikit-learn's ``KNeighborsClassifier(metric="hamming", algorithm="brute")``.
faiss times are the search alone (no vote), so they are a lower bound for faiss.
It prints the CPU's vector features first, and rates the search ("% of peak") against
the XOR + popcount rate of L1-resident words measured at the start of the same run
(``benchmarks/_machine.py``, shared with ``bench_packed.py``): the peak of the
instruction set the machine has, not an assumed one, per thread with as many threads
busy as the search runs on (two cores may not give twice one core's rate).
Every time is the best of ``--repeat`` runs, or of up to 20 for a call under
20 ms (about 0.2 s of timed runs), ours and faiss's alike.

The search stops comparing codes that can no longer enter a k-list: the
register-block search (AVX-512 VPOPCNTDQ) a block of codes, after grouping
near queries; the AVX2 search a code after half its bits (up to 1,024 bits,
after grouping near queries) or after a chunk of 31 words (longer codes).
The rate counts the comparisons of a full search, so it can pass the peak on
clustered codes.
``--codes uniform`` times uniform random codes instead, where every k-th
count is close to all the others and nothing is skipped: the search's worst
case.

A second table times the distance matrix (``packed_hamming_distances``)
against the generic popcount kernel, numpy's ``bitwise_count`` on the XOR of
packed rows (in chunks) and scipy's ``cdist(metric="hamming")`` on booleans, at
64, 256, 1024 and 4096 bits (``--quick``: 256 and 1024).

Usage::

    python benchmarks/bench_knn.py            # n_train {10k, 60k} x d {256, 1024, 4096}
    python benchmarks/bench_knn.py --quick    # n_train 10k, d {256, 1024}, 500 queries
    python benchmarks/bench_knn.py --distances  # the distance matrix table alone
    python benchmarks/bench_knn.py --codes uniform  # the search on random codes

faiss is optional (``pip install sksign[benchmarks]``); without it those columns
are left empty.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse

import numpy as np
from _machine import print_machine  # benchmarks/_machine.py, beside this script
from _timing import best_of  # benchmarks/_timing.py, beside this script
from scipy.spatial.distance import cdist
from sklearn.neighbors import KNeighborsClassifier

from sksign.estimators import SignKNNClassifier
from sksign.kernels import packed_to_words
from sksign.kernels._popcount import pairwise_counts
from sksign.kernels._words import hamming_kernels
from sksign.metrics import packed_hamming_distances

try:
    import faiss
except ImportError:
    faiss = None

K = 5
#: Seconds of untimed runs before each timed one: faiss's OpenMP workers (and
#: torch's, where loaded) keep spinning on the other core for 20-40 ms after
#: their last call, which a kernel timed inside that window would share.
SETTLE = 0.05


def clustered_codes(rng, n, n_bits, n_clusters=100, flip=0.1):
    """Packed codes around seeded cluster centres, with random bit flips."""
    centres = rng.integers(0, 2, size=(n_clusters, n_bits), dtype=np.uint8)
    cluster = rng.integers(0, n_clusters, size=n)
    bits = centres[cluster] ^ (rng.random((n, n_bits)) < flip).astype(np.uint8)
    return bits, cluster % 10


#: Timed runs of a call under 20 ms are added until they take about this
#: long (at most 20 runs in all): a best of 2 or 3 runs of a few
#: milliseconds moved by 30% between runs on a shared VM.
SHORT_RUNS_SECONDS = 0.2


def best_time(func, repeat, settle=SETTLE):
    """Best wall time of `repeat` runs, each after `settle` s of its own runs
    (more runs for a short call: :data:`SHORT_RUNS_SECONDS`)."""
    ((wall, _),) = best_of([func], repeat, settle=settle)
    if repeat > 1 and wall < 0.02:
        more = min(20, int(SHORT_RUNS_SECONDS / max(wall, 1e-6))) - repeat
        if more > 0:
            ((again, _),) = best_of([func], more, settle=settle)
            wall = min(wall, again)
    return wall


def faiss_flat(train, queries, threads, repeat):
    """IndexBinaryFlat: default settings, then the best hamming_batch_size."""
    faiss.omp_set_num_threads(threads)
    index = faiss.IndexBinaryFlat(8 * train.shape[1])
    index.add(train)
    default = faiss.cvar.hamming_batch_size
    t_default = best_time(lambda: index.search(queries, K), repeat)
    tuned = {}
    for size in (16, 128, 1024, 8192):
        faiss.cvar.hamming_batch_size = size
        tuned[size] = best_time(lambda: index.search(queries, K), repeat)
    faiss.cvar.hamming_batch_size = default
    size = min(tuned, key=tuned.get)
    t_knn = best_time(lambda: faiss.knn_hamming(queries, train, K), repeat)
    return t_default, tuned[size], size, t_knn


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--repeat", type=int, default=None, help="best of N runs")
    parser.add_argument(
        "--distances", action="store_true", help="the distance matrix table alone"
    )
    parser.add_argument(
        "--codes",
        choices=["clustered", "uniform"],
        default="clustered",
        help="the search's codes: around 100 centres (default), or uniform",
    )
    args = parser.parse_args()
    quick = args.quick
    if args.distances:
        distance_matrix(
            np.random.default_rng(0), print_machine(), args.repeat or 3, quick
        )
        return
    sizes = [10_000] if quick else [10_000, 60_000]
    widths = [256, 1024] if quick else [256, 1024, 4096]
    n_queries = 500 if quick else 2000
    repeat = args.repeat or (1 if quick else 3)
    rng = np.random.default_rng(0)
    # the rate of the kernels' own XOR + popcount on L1-resident words, here
    peaks = print_machine()
    search(rng, sizes, widths, n_queries, repeat, peaks, args.codes)
    distance_matrix(rng, peaks, repeat, quick)


def search(rng, sizes, widths, n_queries, repeat, peaks, codes="clustered"):
    """The search table: ``predict`` of `n_queries` `codes` ("clustered" or
    "uniform") against each training size and width, one and two threads,
    beside faiss and scikit-learn. Returns the rows (times in seconds;
    `faiss` the best faiss time, None without faiss; `of_peak` per thread,
    counting the comparisons of a full search)."""
    # scikit-learn is run on a subset of queries (and only for 10k codes: it
    # needs a float64 copy of the training set); its time is scaled up.
    n_sklearn_queries = 100
    print(f"# k-NN search kernel: {hamming_kernels()[0]}; {codes} codes")
    header = (
        "| n_train | d | threads | ours (s) | faiss Flat (s) | Flat tuned (s) "
        "| knn_hamming (s) | ours / best faiss | sklearn (s, scaled) "
        "| sklearn / ours | bit cmp/s/core | % of peak |"
    )
    print(header)
    print("|---" * 12 + "|")
    rows = []
    for n_train in sizes:
        for n_bits in widths:
            if codes == "uniform":
                bits = rng.integers(0, 2, (n_train + n_queries, n_bits), dtype=np.uint8)
                labels = rng.integers(0, 10, n_train + n_queries)
            else:
                bits, labels = clustered_codes(rng, n_train + n_queries, n_bits)
            X, y, Q = bits[:n_train], labels[:n_train], bits[n_train:]
            Xp, Qp = np.packbits(X, axis=1), np.packbits(Q, axis=1)
            t_sklearn = None
            if n_train <= 10_000:
                ref = KNeighborsClassifier(K, metric="hamming", algorithm="brute")
                ref.fit(X.astype(bool), y)
                sub = Q[:n_sklearn_queries].astype(bool)
                t_sub = best_time(lambda: ref.predict(sub), 1, 0)  # noqa: B023
                t_sklearn = t_sub * n_queries / n_sklearn_queries
            for threads in (1, 2):
                clf = SignKNNClassifier(K, packed=True, n_bits=n_bits, n_jobs=threads)
                clf.fit(Xp, y)
                clf.predict(Qp[:64])  # compile / warm up
                t_ours = best_time(lambda: clf.predict(Qp), repeat)  # noqa: B023
                if faiss is not None:
                    t_def, t_tuned, size, t_knn = faiss_flat(Xp, Qp, threads, repeat)
                    best = min(t_def, t_tuned, t_knn)
                    cells = [
                        f"{t_def:.3f}",
                        f"{t_tuned:.3f} (bs={size})",
                        f"{t_knn:.3f}",
                        f"**{t_ours / best:.2f}x**",
                    ]
                else:
                    cells = ["-", "-", "-", "-"]
                if t_sklearn is not None and threads == 1:
                    sk = [f"{t_sklearn:.1f}", f"{t_sklearn / t_ours:.0f}x"]
                else:
                    sk = ["-", "-"]
                rate = n_train * n_queries * n_bits / t_ours / threads
                print(
                    f"| {n_train} | {n_bits} | {threads} | {t_ours:.3f} | "
                    + " | ".join(cells + sk)
                    + f" | {rate:.2e} | {100 * rate / peaks[threads]:.0f}% |"
                )
                rows.append(
                    {
                        "n_train": n_train,
                        "d": n_bits,
                        "threads": threads,
                        "ours": t_ours,
                        "faiss": best if faiss is not None else None,
                        "of_peak": rate / peaks[threads],
                    }
                )
    return rows


def numpy_counts(Ap, Bp, chunk=64):
    """The distance matrix by numpy alone: bitwise_count of the XOR, in chunks."""
    out = np.empty((len(Ap), len(Bp)), np.int32)
    for a in range(0, len(Ap), chunk):
        x = Ap[a : a + chunk, None, :] ^ Bp[None, :, :]
        out[a : a + chunk] = np.bitwise_count(x).sum(axis=2, dtype=np.int32)
    return out


def distance_matrix(rng, peaks, repeat, quick):
    """Times of the distance matrix between packed codes, one table."""
    n_a, n_b = (500, 5_000) if quick else (2_000, 10_000)
    n_scipy = 50  # scipy on a subset of rows, its time scaled up
    print()
    print(f"# distance matrix, {n_a} x {n_b} codes")
    print(
        "| d | threads | ours (s) | generic kernel (s) | numpy bitwise_count (s) "
        "| scipy cdist (s, scaled) | numpy / ours | bit cmp/s/core | % of peak |"
    )
    print("|---" * 9 + "|")
    for n_bits in (256, 1024) if quick else (64, 256, 1024, 4096):
        bits = rng.integers(0, 2, size=(n_a + n_b, n_bits), dtype=np.uint8)
        A, B = bits[:n_a], bits[n_a:]
        Ap, Bp = np.packbits(A, axis=1), np.packbits(B, axis=1)
        Aw, Bw = packed_to_words(Ap, n_bits), packed_to_words(Bp, n_bits)

        def generic(Aw=Aw, Bw=Bw):  # into a new matrix, as every column's
            out = np.empty((len(Aw), len(Bw)), np.int32)
            pairwise_counts(Aw, Bw, out)
            return out

        generic(Aw[:2], Bw[:2])  # compile
        t_gen = best_time(generic, repeat)
        t_np = best_time(lambda: numpy_counts(Ap, Bp), repeat)  # noqa: B023
        sub = A[:n_scipy].astype(bool)
        t_sc = best_time(lambda: cdist(sub, B.astype(bool), "hamming"), 1, 0)  # noqa: B023
        t_sc *= n_a / n_scipy
        for threads in (1, 2):

            def ours(Ap=Ap, Bp=Bp, n_bits=n_bits, threads=threads):
                return packed_hamming_distances(Ap, Bp, n_bits=n_bits, n_jobs=threads)

            ours()
            t_ours = best_time(ours, repeat)
            rate = n_a * n_b * n_bits / t_ours / threads
            print(
                f"| {n_bits} | {threads} | {t_ours:.3f} | {t_gen:.3f} | {t_np:.3f} "
                f"| {t_sc:.1f} | {t_np / t_ours:.1f}x | {rate:.2e} "
                f"| {100 * rate / peaks[threads]:.0f}% |"
            )


if __name__ == "__main__":
    main()
