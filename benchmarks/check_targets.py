"""The speed targets of packed inference and the Hamming k-NN, measured and judged.

Runs the parts of ``bench_packed.py`` and ``bench_knn.py`` the targets rest
on, prints their tables as those scripts do (the CPU's vector features and
measured popcount peak first), then one table of verdicts: each target,
where it was measured, the figure, the bound and whether it holds. The
targets, for the instruction set the machine has (the CPU line names it;
the same bounds on AVX2 and on AVX-512):

- image nets (Bi-Real ResNet-18, step ResNet-18, WRN-10-2, SEW-ResNet-18),
  the packed ``forward`` against the module's own no-grad forward, on one
  and on two threads: at least 2x at batch 1 (Bi-Real at least 4x) and
  1.5x at batch 64;
- the Heaviside MLP 64-256-256-10 trained on the digits: the packed
  ``predict`` at least as fast as the module's forward at batches 1 and 256,
  one and two threads;
- the sign x sign (XNOR + popcount) kernel alone: at least 80% of the
  measured popcount peak at widths 1024 and 4096, batches 64 and 1024, one
  thread;
- the Heaviside hidden layer (real weights on bits, then a step): at least
  1.5x torch at widths 1024 and 4096, batches 64 and 1024, one and two
  threads;
- the k-NN search (``SignKNNClassifier.predict``, 10k and 60k codes, 2000
  queries): at most 0.33x the best faiss time at d >= 1024 and 0.6x at
  d = 256, at 50% or more of the popcount peak, one and two threads
  (needs faiss: ``pip install sksign[benchmarks]``).

Usage::

    python benchmarks/check_targets.py            # all parts, about 5 min on 2 cores
    python benchmarks/check_targets.py --quick    # fewer timed runs
    python benchmarks/check_targets.py --parts images knn

The exit status is 1 where a target measured here is missed, else 0. Where
the machine is shared, time it again before reading a miss as the code's:
each figure is a best of several runs, but a busy neighbour moves it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_knn  # benchmarks/bench_knn.py, beside this script
import bench_packed  # benchmarks/bench_packed.py, beside this script
from _machine import cpu_features, instruction_set, print_machine

from sksign.kernels import popcount_instructions

#: Parts in the order they run: the kernel first, before torch or faiss has
#: run an operation (their OpenMP workers share the cores after one).
PARTS = ("kernel", "knn", "dense", "summary", "images")


class Verdict(NamedTuple):
    """One target at one point of the grid."""

    target: str
    where: str
    figure: str
    bound: str
    met: bool | None  # None: not measured (faiss missing)


def _speed(target, where, reference, ours, need):
    ratio = reference / ours
    return Verdict(target, where, f"{ratio:.2f}x", f">= {need}x", ratio >= need)


def _share(target, where, share, need):
    return Verdict(target, where, f"{share:.1%}", f">= {need:.0%}", share >= need)


def judge_images(rows):
    """The image nets: 2x at batch 1 (Bi-Real 4x), 1.5x at batch 64."""
    out = []
    for r in rows:
        if r["batch"] == 1:
            need = 4.0 if r["net"] == "bireal" else 2.0
        elif r["batch"] == 64:
            need = 1.5
        else:
            continue
        where = f"{r['net']}, batch {r['batch']}, {r['threads']} thread(s)"
        out.append(_speed("image net forward", where, r["torch"], r["packed"], need))
    return out


def judge_summary(rows):
    """The newcomer's Heaviside MLP: predict at least as fast as torch."""
    return [
        _speed(
            "Heaviside MLP 64-256-256-10 predict",
            f"batch {r['batch']}, {r['threads']} thread(s)",
            r["torch"],
            r["predict"],
            1.0,
        )
        for r in rows
        if r["net"] == "dhn" and r["width"] == 256 and r["batch"] in (1, 256)
    ]


def judge_kernel(rows):
    """The sign x sign kernel: 80% of the popcount peak at width >= 1024 and
    batch >= 64."""
    return [
        _share(
            "sign x sign kernel, of the popcount peak",
            f"width {r['width']}, batch {r['batch']}, 1 thread",
            r["of_peak"],
            0.8,
        )
        for r in rows
        if r["width"] >= 1024 and r["batch"] >= 64
    ]


def judge_dense(rows):
    """The Heaviside hidden layer: 1.5x torch at batch >= 64."""
    return [
        _speed(
            "Heaviside hidden layer",
            f"width {r['width']}, batch {r['batch']}, {r['threads']} thread(s)",
            r["torch"],
            r["packed"],
            1.5,
        )
        for r in rows
        if r["net"] == "dhn" and r["part"] == "hidden" and r["batch"] >= 64
    ]


def judge_knn(rows):
    """The k-NN search: 0.33x faiss at d >= 1024, 0.6x at d = 256, and 50%
    of the popcount peak."""
    out = []
    for r in rows:
        where = f"{r['n_train']} codes, d {r['d']}, {r['threads']} thread(s)"
        bound = 0.33 if r["d"] >= 1024 else 0.6 if r["d"] == 256 else None
        if bound is not None:
            if r["faiss"] is None:
                out.append(Verdict("k-NN time / faiss", where, "-", "", None))
            else:
                ratio = r["ours"] / r["faiss"]
                out.append(
                    Verdict(
                        "k-NN time / faiss",
                        where,
                        f"{ratio:.2f}x",
                        f"<= {bound}x",
                        ratio <= bound,
                    )
                )
        out.append(
            _share("k-NN search, of the popcount peak", where, r["of_peak"], 0.5)
        )
    return out


JUDGES = {
    "kernel": judge_kernel,
    "knn": judge_knn,
    "dense": judge_dense,
    "summary": judge_summary,
    "images": judge_images,
}


def judge(results):
    """The verdicts on `results` (part name -> the rows its table returned),
    in the order of :data:`PARTS`."""
    return [v for part in PARTS if part in results for v in JUDGES[part](results[part])]


def measure(part, quick):
    """Run one part's table (printed) and return its rows."""
    print(f"\n## {part}\n", flush=True)
    if part == "kernel":
        return bench_packed.kernel([1024, 4096], [64, 1024], 3 if quick else 7)
    if part == "knn":
        peaks = print_machine()
        rng = np.random.default_rng(0)
        sizes = [10_000] if quick else [10_000, 60_000]
        widths = [256, 1024, 4096]
        return bench_knn.search(rng, sizes, widths, 2000, 1 if quick else 3, peaks)
    if part == "dense":
        return bench_packed.dense(["dhn"], [1024, 4096], [64, 1024], [1, 2], 3)
    if part == "summary":
        return bench_packed.summary(
            [256], [1, 256], [1, 2], 10 if quick else 20, ["dhn"]
        )
    return bench_packed.images([1, 64], 3 if quick else 5, None, [1, 2])


def print_verdicts(verdicts):
    """The verdict table, then how many targets hold; returns the number missed."""
    _, flags = cpu_features()
    compiled = popcount_instructions()
    print(f"\n## Targets (CPU: {instruction_set(flags)}; kernels for: {compiled})\n")
    print("| target | where | measured | bound | verdict |")
    print("|---" * 5 + "|")
    names = {True: "met", False: "**missed**", None: "not measured"}
    for v in verdicts:
        print(f"| {v.target} | {v.where} | {v.figure} | {v.bound} | {names[v.met]} |")
    judged = [v for v in verdicts if v.met is not None]
    missed = sum(not v.met for v in judged)
    print(f"\n{len(judged) - missed} of {len(judged)} targets met", end="")
    unmeasured = len(verdicts) - len(judged)
    print(f" ({unmeasured} not measured)" if unmeasured else "")
    return missed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed runs")
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        help="which parts to run (default: all)",
    )
    args = parser.parse_args()
    results = {part: measure(part, args.quick) for part in PARTS if part in args.parts}
    return 1 if print_verdicts(judge(results)) else 0


if __name__ == "__main__":
    sys.exit(main())
